"""Is a prompt about this codebase's code? The prompt hook's classifier.

Two signals, in a fixed order (docs/user-guide.md, "Claude Code prompt hook", says the
same). First the shape of the prompt: strong evidence of code (a fence, error text), then
what makes it process, a pleasantry or chat (a version-control or tool request, thanks,
a question about the conversation, a general-knowledge question, a piece of writing), then
the shapes of code talk (a source path, a code-form symbol, a question that locates code,
a request that refers to this repository). A prompt none of those decide is asked of the
repository: it is a code question when its plain words are this codebase's words
(``vocabulary.py``), strongly enough, or when it asks for work on something whose words
are (``by_vocabulary``).

Every rule is a general shape of talk or a count over the repository's words; none names a
phrase of any labelled prompt (tests/bench/hook_prompts.jsonl holds them, part held out).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from slm_rerank.hook.vocabulary import NAME, Vocabulary
from slm_rerank.lexical.terms import STOP_WORDS

#: the longest prompt read for words (the hook searches as much)
QUERY_CHARS = 4000
#: the head and the tail of a prompt its shapes are looked for in: a 2 MB paste took 8 s
#: here, before the hook's deadline applies; a paste's error text is near one end
SHAPE_HEAD_CHARS = 24_000
SHAPE_TAIL_CHARS = 8_000

# --- shapes of code talk ---------------------------------------------------------------------
# Each rule names a kind of evidence that the prompt is about this codebase's code. They are
# general shapes of code talk, not phrases of any particular prompt.

_FENCE = re.compile(r"```|~~~")
_ERROR = re.compile(
    r"Traceback \(most recent call last\)"
    r"|\b[A-Z]\w*(?:Error|Exception|Warning)\b"            # TypeError, NullPointerException
    # [ \t], not \s, after ^: \s crosses newlines, so each of a run of blank lines started a
    # rescan of the rest (16,000 newlines took 19 s, before the hook's deadline applies)
    r"|^[ \t]*(?:error|panic|fatal|FAILED)(?:\[\w+\])?[:!]|^[ \t]*npm ERR!"  # compilers
    r"|\bsegmentation fault\b|\bstack trace\b|\bcore dumped\b"
    r"|^[ \t]+at [\w.$<>]+\(|^[ \t]+File \"[^\"]+\", line \d+",  # JS/Java, Python frames
    re.MULTILINE | re.IGNORECASE,
)
_SOURCE_EXT = (
    "py|pyi|js|jsx|ts|tsx|mjs|cjs|go|rs|java|kt|kts|scala|c|h|cc|cpp|cxx|hpp|hh|cs|rb|php|"
    "swift|m|mm|lua|pl|sh|bash|zsh|sql|vue|svelte|ex|exs|erl|hs|ml|clj|dart|r|jl|zig|nim|"
    "toml|ya?ml|json|ini|cfg|proto|graphql|gradle|cmake|mk"
)
_PATH = re.compile(
    rf"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:{_SOURCE_EXT})(?::\d+)?(?![\w/])"
    r"|(?<![\w/])(?:src|lib|app|pkg|cmd|tests?|internal)/[\w./-]+",
    re.IGNORECASE,
)
_SNAKE = re.compile(r"\b_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_SCREAMING = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_CAMEL = re.compile(r"\b(?:[A-Z][a-z0-9]+){2,}\w*\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?")
_CALL = re.compile(r"\b[A-Za-z_]\w*\((?:[^()\s]*|[^()]{0,40})\)")
_BACKTICKS = re.compile(r"`[^`\n]+`")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
#: questions that ask where code is or how it behaves
_LOCATE = re.compile(
    r"\b(?:where(?:'s| is| are| do| does| did)?\b"
    r"|which (?:file|files|module|function|class|method|package|component|plugin|part)"
    r"|how (?:(?:does|do|is|are) (?:the |a |an |our |this |we )?|(?:the|our|this) )"
    r"[\w -]{2,40}"
    r"(?:work|works|handled?|computed?|built|parsed?|decides?|decided|implemented|picked?"
    r"|chosen|registered?|configured|loaded|called|turned|stored|read|written|handle|"
    r"register|pick)"
    r"|what (?:calls|uses|handles|sets|reads|writes|parses|happens (?:in|when|if))"
    r"|who calls|is there (?:a|an|any) (?:\w+ )?(?:test|function|helper|class|code|logic)"
    r"|(?:defined|implemented|declared|initiali[sz]ed|instantiated|registered) (?:in|at|by)?)",
    re.IGNORECASE,
)
#: verbs that ask for work on code: with a named thing they make the prompt about code
_CODE_WORK = re.compile(
    r"^\s*(?:(?:now|then|so|next|also|please|can you|could you),? )*"
    r"(?:fix|refactor|rename|implement|add|remove|delete|"
    r"move|extract|inline|write|explain|debug|optimi[sz]e|rewrite|change|make|find|look at|"
    r"check)\b", re.IGNORECASE)
#: the prompt is about process, the session or a tool, not this codebase's code
_PROCESS = re.compile(
    r"^\s*(?:please |ok(?:ay)?,? |now |then |can you |could you |let'?s )?"
    r"(?:commit|push|pull|merge|rebase|squash|amend|stash|cherry-pick|tag|bump|release|"
    r"deploy|publish|install|re-?run|run|build|open|revert|undo|continue|proceed|go ahead|"
    r"stop|stage|unstage|git|check ?out|clone|fetch|summari[sz]e|draft|"
    r"write (?:a|the) (?:commit|changelog|email|message|pr|release)"
    # a formatter or linter over the tree, and dependency chores
    r"|(?:(?:re)?format|lint|type-?check)(?=(?:[ \t]+(?:all|the|every|my|our|this|these|"
    r"changed|whole|entire))*[ \t]+(?:files?|code|code ?base|project|repo|repository|"
    r"changes|sources?|everything|tree)\b)"
    r"|(?:update|upgrade|bump|pin|refresh|regenerate)(?=[ \t]+(?:the |all |our |my )?(?:"
    r"deps|dependencies|requirements|lock ?files?|lockfiles?|packages|versions)\b)"
    # make the build tool (make, make test), not "make the parser accept tabs"
    r"|make(?=(?:[ \t]+[\w.-]+)?[ \t]*[.!]?[ \t]*$))\b"
    # version control things as the object: a branch of the repository, a pull request
    r"|\b(?:new|local|remote|feature|release|current|my|this) branch(?:es)?\b"
    r"|\bpull requests?\b|\bPRs?\b|\bupstream\b|\bmerge conflicts?\b"
    r"|^\s*/\w+"                                           # a slash command
    r"|\b(?:status|ci|pipeline|build|job|pr|pull request) (?:pass|passed|green|red|fail)"
    r"|\bhow does (?:docker|npm|pip|make|bash|ssh|k8s|kubectl) \w+|\bgit\b",
    re.IGNORECASE,
)
#: words that name parts of a program: with a code-work verb, or with words that describe
#: behaviour, they make a prompt about the code even without an identifier in it
_CODE_NOUN = re.compile(
    r"\b(?:functions?|methods?|class(?:es)?|modules?|constants?|variables?|tests?|api|"
    r"endpoints?|parsers?|formatters?|scorers?|cache|handlers?|schema|types?|structs?|"
    r"interfaces?|fields?|arguments?|parameters?|flags?|regex|callbacks?|plugins?|"
    r"tokenizer|lookup|loop|query|queries|config|settings|enum|decorators?|imports?|"
    r"exceptions?|codebase|code)\b", re.IGNORECASE)
#: words that describe what code does wrong or how it behaves
_BEHAVIOUR = re.compile(
    r"\b(?:wrong(?:ly)?|broken|breaks|fails?|failing|crash(?:es)?|doesn'?t|isn'?t|never|"
    r"always|instead of|is called|gets called|returns?|throws?|raises?|leaks?|hangs?|"
    r"ignores?|escapes?|drops?|skips?|flakes?|flaking|intermittent(?:ly)?|"
    r"sporadic(?:ally)?|randomly|times? out|timing out"
    # said of the thing ("the tests are flaky"), not a kind of test ("run the slow tests")
    r"|(?:flaky|slow|slower)(?![ \t]+(?:tests?|suites?|specs?|jobs?|checks?|ones?|builds?|"
    r"runs?|markers?)\b))\b", re.IGNORECASE)
#: a reference to the repository itself: "in this project", "our code", a question about
#: what "we" do; with a request or a question it is about this code
_THIS_CODE = re.compile(
    r"\b(?:this|our) (?:code ?base|repo(?:sitory)?|project|library|package|app(?:lication)?|"
    r"code|tool|service|module)\b"
    r"|\b(?:how|where|why|when|what) (?:do|does|should|can|could|would) we\b",
    re.IGNORECASE)
#: "here" closing a clause: about this code with a request to explain or locate, not with
#: any question ("what's the weather like here?")
_HERE = re.compile(r"\bhere[ \t]*(?:[?.!,;:)]|$)", re.IGNORECASE | re.MULTILINE)
_HERE_ASKS = re.compile(
    r"\b(?:how|where|why|which)\b"
    r"|^[ \t]*(?:(?:now|then|so|next|also|please|can you|could you|would you),? )*"
    r"(?:explain|describe|document|walk me through|help me|go (?:through|over)|show me|find|"
    r"figure out|investigate|look into|dig into|trace|clarify|outline)\b",
    re.IGNORECASE | re.MULTILINE)
#: a request or a question: what a reference to the repository makes a code question
_ASKS = re.compile(
    r"\b(?:how|where|why|what|which|when|whether)\b|\?"
    # [ \t], not \s, after ^ in MULTILINE: \s crosses newlines (see _ERROR)
    r"|^[ \t]*(?:(?:now|then|so|next|also|please|can you|could you|would you|I'?d like you to"
    r"|I want you to),? )*(?:explain|describe|document|walk me through|help me|go (?:through|"
    r"over)|tell me|show me|find|figure out|investigate|look into|dig into|trace|check|"
    r"clarify|outline|summari[sz]e)\b", re.IGNORECASE | re.MULTILINE)
#: "implement X support for Y", "add support for Y", "drop support for Y": a feature of code
_SUPPORT = re.compile(
    r"^\s*(?:(?:now|then|so|next|also|please|can you|could you|let'?s|we need to|I want to"
    r"|I'?d like to),? )*(?:implement|add|drop|remove|improve|extend|finish|fix|restore"
    r"|complete)\b[^.!?\n]{0,80}?\bsupport(?:s|ed)?\b(?! (?:team|ticket|staff|agent|"
    r"group|call|line|desk))", re.IGNORECASE)
_WORDS_ONLY = re.compile(r"[A-Za-z']+")
#: snake_case words that are plain English (not identifiers) in prose
_PROSE_SNAKE = frozenset({"e_g", "i_e"})


#: A pleasantry that opens a prompt ("thanks!", "ok great", "hi there"); what follows it
#: decides, and a prompt that is only a pleasantry is chat
_SOCIAL = re.compile(
    r"^\s*(?:(?:hi|hello|hey|thanks|thank you|ty|cheers|great|perfect|nice|cool|awesome|"
    r"excellent|ok(?:ay)?|alright|all right|sounds good|looks good|lgtm|yes|yep|yeah|no|"
    r"nope|sure|hmm+|good (?:morning|afternoon|evening|night|job|work))\b"
    r"(?:[ \t]+(?:there|so much|very much|a lot|all|work|job|again|then|one)\b)?"
    r"[\s,.!;:-]*)+",
    re.IGNORECASE)
#: Questions about the conversation itself: what was said, done or decided in it
_SESSION = re.compile(
    r"\b(?:you|we) (?:just |already )?(?:said|mentioned|suggested|listed|meant|wrote|"
    r"decided|proposed|showed|gave|told)\b|\bI (?:just )?(?:said|meant)\b"
    r"|\bdid (?:you|we)\b"
    r"|\byour (?:\w+ )?(?:answer|reply|response|message|suggestion|explanation|summary|"
    r"plan|advice)s?\b"
    r"|\b(?:this|our|the) (?:conversation|chat)\b"
    r"|\b(?:previous|earlier|last) (?:answer|reply|message|step|steps|turn)\b"
    r"|\b(?:forget|repeat|ignore) (?:what|that|everything|the (?:previous|last))\b",
    re.IGNORECASE)
#: A piece of writing to edit or write: an email, a paragraph, a poem (not code); the noun
#: ends its phrase ("my email validation" is code, "my email to the team" is not)
_WRITING = re.compile(
    r"(?:\b(?:this|my|the following) (?:paragraph|sentence|e-?mail|essay|letter|resume|cv|"
    r"poem|article|blog post|tweet|speech|cover letter)s?"
    r"|\b(?:a|an) (?:poem|haiku|limerick|essay|joke|cover letter|blog post|tweet|speech|song"
    r"|lyrics))(?=[ \t]*(?:$|[,.;:!?]|(?:so|to|about|for|into|and|that|which|it|more|less|a"
    r"|an|the|in|on|with|from|as|because|I|we|please|sound|read|reads)\b))",
    re.IGNORECASE | re.MULTILINE)
#: General knowledge: comparing tools or ideas, what a name stands for, which is best
_GENERAL = re.compile(
    r"\bdifferences? between\b|\b(?:compare|compares|comparison) (?:to|with|between)\b"
    r"|\bstands? for\b|\bin general\b|\bgenerally speaking\b"
    r"|\b(?:is|are) \S+(?: or \S+)? (?:better|worse|faster|slower|preferred) (?:for|than)\b"
    r"|\bwhat (?:kind|type|sort) of \w+ (?:is|are|should|would)\b"
    r"|\b(?:best|recommended) (?:for|way to learn|practices?)\b",
    re.IGNORECASE)


@dataclass(frozen=True)
class Decision:
    """Whether a prompt is a code question, and the rule that said so.

    ``final`` False: no shape decided, so the repository's vocabulary may still make it a
    code question (``by_vocabulary``). ``evidence`` is what that rule counted.
    """

    code: bool
    reason: str
    final: bool = True
    evidence: str = ""


def _symbols(text: str) -> list[str]:
    found = [m.group() for m in _SNAKE.finditer(text) if m.group() not in _PROSE_SNAKE]
    found += [m.group() for m in _SCREAMING.finditer(text)]
    found += [m.group() for m in _CAMEL.finditer(text)]
    found += [m.group() for m in _CALL.finditer(text)]
    # dotted names, but not a sentence end glued to the next word or an abbreviation
    found += [m.group() for m in _DOTTED.finditer(text)
              if not re.fullmatch(r"(?:[a-z]\.)+[a-z]?", m.group(), re.IGNORECASE)]
    return found


def _strong_symbol(text: str) -> bool:
    """A call or a dotted name: code even after a process verb ("make Host.validate() ...")."""
    return any(m.group().endswith(")") or "." in m.group() and not re.fullmatch(
        r"(?:[a-z]\.)+[a-z]?", m.group(), re.IGNORECASE)
        for m in (*_CALL.finditer(text), *_DOTTED.finditer(text)))


def _shapes(text: str) -> Decision | None:
    """The rules of code shape that make a prompt a code question, or None."""
    if _PATH.search(text):
        return Decision(True, "source path")
    if _BACKTICKS.search(text):
        return Decision(True, "code span")
    if _symbols(text):
        return Decision(True, "code-form symbol")
    if _LOCATE.search(text):
        return Decision(True, "question that locates code")
    if _CODE_WORK.search(text) and (_FLAG.search(text) or _CODE_NOUN.search(text)):
        return Decision(True, "work on a named part of the code")
    if _CODE_NOUN.search(text) and _BEHAVIOUR.search(text):
        return Decision(True, "behaviour of a part of the code")
    if _SUPPORT.search(text):
        return Decision(True, "support for a feature")
    if (_THIS_CODE.search(text) and (_ASKS.search(text) or _CODE_WORK.search(text))
            or _HERE.search(text) and (_HERE_ASKS.search(text) or _CODE_WORK.search(text))):
        return Decision(True, "request about this codebase")
    return None


def classify(prompt: str) -> Decision:
    """Decide by the prompt's shape whether it asks about code in the repository.

    Strong evidence (a code fence, error text) wins over everything. A prompt that opens
    with a process, session or tool verb (commit, run the tests), or names version-control
    things, is silent unless it carries a call or a dotted name; one that is only a
    pleasantry is silent, and after a pleasantry the rest decides. A question about the
    conversation or a general-knowledge question is silent unless it names code (a path,
    a code span, a call). Then a source path, a code-form symbol, a flag in backticks or a
    question that locates code make it a code question. Otherwise the decision is not
    final: the repository's vocabulary may still make it one (``by_vocabulary``).
    """
    text = prompt.strip()
    if not text:
        return Decision(False, "empty prompt")
    if _FENCE.search(text):  # a plain substring search: the whole prompt is cheap
        return Decision(True, "code fence")
    if len(text) > SHAPE_HEAD_CHARS + SHAPE_TAIL_CHARS:
        text = f"{text[:SHAPE_HEAD_CHARS]}\n{text[-SHAPE_TAIL_CHARS:]}"
    if _ERROR.search(text):
        return Decision(True, "error text")
    if _PROCESS.search(text) and not _strong_symbol(text):
        return Decision(False, "process, status or tool request")
    opener = _SOCIAL.match(text)
    if opener is not None and opener.end() > 0:
        rest = text[opener.end():]
        if not (_CODE_WORK.search(rest) or _shapes(rest)):
            return Decision(False, "pleasantry")
        if _PROCESS.search(rest) and not _strong_symbol(rest):
            return Decision(False, "process, status or tool request")
        text = rest
    if _WRITING.search(text) and not (_PATH.search(text) or _BACKTICKS.search(text)
                                      or _strong_symbol(text)):
        return Decision(False, "a piece of writing, not code")
    if (_SESSION.search(text) or _GENERAL.search(text)) and not (
            _PATH.search(text) or _BACKTICKS.search(text) or _strong_symbol(text)):
        return Decision(False, "about the conversation or general knowledge")
    shaped = _shapes(text)
    if shaped is not None:
        return shaped
    if len(_WORDS_ONLY.findall(text)) <= 3:
        return Decision(False, "short reply")
    return Decision(False, "no code in the prompt", final=False)


# --- the repository's words ------------------------------------------------------------------

_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]+")
#: words of asking, not of any codebase: they are never evidence
_ASKING = frozenset("""
add added adding allow allows change changes changed fix fixes fixed fixing support supports
option options possible work works working happen happens happened wrong right problem issue
issues bug bugs help tell show give gives try tried trying keep keeps kept put puts take
takes long big small many lot lots every whole same different new old good bad better
best default thing stuff time times instead already again still ever never always also
""".split())
#: A request to work on, explain or look into something, and that thing (``subject``): the
#: words after the verb up to the first word that starts a clause of purpose, time or
#: manner, or a verb of its own ("refactor the retry loop | so that ...", "explain how the
#: cache | is invalidated").
_REQUEST = re.compile(
    r"^\s*(?:(?:now|then|so|next|also|please|can you|could you|would you|let'?s|we need to"
    r"|I want (?:you )?to|I'?d like (?:you )?to),? )*"
    r"(?:refactor|rework|restructure|reorgani[sz]e|rewrite|simplify|clean up|tidy(?: up)?|split"
    r"|port|migrate|extract|deduplicate|decouple|generali[sz]e|speed up|optimi[sz]e|profile"
    r"|debug|investigate|look into|dig into|figure out|track down|document|explain|describe"
    r"|walk me through|help me (?:understand|follow)|go (?:through|over)|tell me how"
    r"|show me how|get rid of|harden|improve|fix|extend|implement|add|remove|move"
    r"|write (?:\w+ )?tests? for|test)\b(?P<subject>.*)", re.IGNORECASE | re.DOTALL)
#: the words that end a request's subject: a clause of purpose, time, cause or manner, or
#: an auxiliary verb
_SUBJECT_END = re.compile(
    r"[,.;:!?]|\b(?:so|to|into|when|whenever|because|since|if|unless|which|who|while|but"
    r"|instead|without|than|as|by|and then|work|works|working|happens?"
    # a verb after the subject: "explain how the cache | is invalidated"
    r"|is|are|was|were|gets?|got|does|do|did|can|could|should|will|would|has|have|had)\b",
    re.IGNORECASE)
#: The request rule: of a request's subject's plain words, at least this share must be this
#: codebase's words, and one of them must name a file, folder or symbol whole (or two count).
MIN_SUBJECT_SHARE = 0.5
#: The repository rule: distinct plain words of the prompt that must be this codebase's
#: words, and the share of the prompt's plain words they must be.
MIN_HITS = 2
MIN_SHARE = 0.4
#: A word that names something in more than this share of the files is too common to be
#: evidence that one place is meant.
MAX_FILE_SHARE = 0.25


def plain_words(text: str) -> list[str]:
    """The prompt's content words: lower-cased, no stop words, no words of asking."""
    seen: dict[str, None] = {}  # ordered, and each look-up constant time
    for match in _PLAIN_WORD.finditer(text):
        word = match.group().lower()
        if len(word) >= 3 and word not in STOP_WORDS and word not in _ASKING:
            seen[word] = None
    return list(seen)


def request_subject(prompt: str) -> list[str] | None:
    """The plain words of the thing a request asks to work on or explain, or None when the
    prompt is no such request ("refactor the retry loop so that ...": retry, loop)."""
    found = _REQUEST.match(prompt[:QUERY_CHARS])
    if found is None:
        return None
    rest = re.sub(r"^\s*(?:how|why|what|where|which|whether)\b", "", found.group("subject"),
                  flags=re.IGNORECASE)
    end = _SUBJECT_END.search(rest)
    return plain_words(rest[:end.start()] if end else rest)


def by_vocabulary(prompt: str, vocabulary: Vocabulary) -> Decision:
    """A code question when the prompt's plain words are this codebase's words.

    A word counts when the repository has it as a path component or a declared symbol
    (whole, or one part of a compound name) in at most MAX_FILE_SHARE of its files. The
    prompt is a code question when at least MIN_HITS words count, they are at least
    MIN_SHARE of its plain words, and one of them names a file, folder or symbol whole
    (or more than MIN_HITS count): a general question shares a word or two with any large
    codebase, a request about this one is made of its words.
    """
    words = plain_words(prompt[:QUERY_CHARS])
    hits: list[str] = []
    named = False
    ceiling = max(2, math.ceil(MAX_FILE_SHARE * vocabulary.files))
    for word in words:
        found = vocabulary.lookup(word)
        if found is None or found[0] > ceiling:
            continue
        hits.append(word)
        named = named or bool(found[1] & NAME)
    evidence = f"{len(hits)} of {len(words)} words"
    if (len(hits) >= MIN_HITS and len(hits) >= MIN_SHARE * len(words)
            and (named or len(hits) > MIN_HITS)):
        return Decision(True, "words of this codebase", evidence=evidence)
    subject = request_subject(prompt)
    if subject:
        found_in = [vocabulary.lookup(word) for word in subject]
        known = [f for f in found_in if f is not None and f[0] <= ceiling]
        evidence += f"; the request's subject: {len(known)} of {len(subject)} words"
        if (len(known) >= MIN_SUBJECT_SHARE * len(subject)
                and (len(known) >= 2 or any(flags & NAME for _, flags in known))):
            return Decision(True, "a request about this codebase's words", evidence=evidence)
    return Decision(False, "no code in the prompt", evidence=evidence)
