"""The prompt hook's classifier: shapes of code talk, of process and chat, and the rule
that asks the repository's vocabulary about a prompt no shape decides."""

from __future__ import annotations

import pytest
from search_fixtures import linear_growth

from slm_rerank.hook.prompt_classifier import by_vocabulary, classify
from slm_rerank.hook.vocabulary import NAME, PART, Vocabulary

#: A codebase of 40 files with an upload progress bar, retries and a settings page.
WORDS = Vocabulary(40, {"upload": (2, NAME), "progress": (3, PART), "bar": (3, PART),
                        "retry": (4, NAME | PART), "settings": (2, NAME), "page": (5, PART),
                        "theme": (1, NAME), "test": (30, NAME | PART), "user": (2, PART)})


def judged(prompt: str) -> bool:
    decision = classify(prompt)
    return decision.code if decision.final else by_vocabulary(prompt, WORDS).code


@pytest.mark.parametrize("prompt", [
    "make the retry loop give up after a minute",
    "make it possible to pick a theme on the settings page",
])
def test_make_followed_by_what_to_change_is_not_the_build_tool(prompt: str) -> None:
    assert classify(prompt).reason != "process, status or tool request"
    assert judged(prompt)


@pytest.mark.parametrize("prompt", ["make", "make test", "run make in the docs folder"])
def test_make_with_a_target_is_the_build_tool(prompt: str) -> None:
    assert classify(prompt) == classify(prompt) and not judged(prompt)
    assert classify(prompt).reason == "process, status or tool request"


@pytest.mark.parametrize("prompt", [
    "the upload progress bar jumps backwards",
    "add a dark theme to the settings page",
    "why does the retry never stop for uploads",
])
def test_a_request_made_of_the_repositorys_words_is_a_code_question(prompt: str) -> None:
    assert judged(prompt)
    assert by_vocabulary(prompt, WORDS).reason == "words of this codebase"


@pytest.mark.parametrize("prompt", [
    "what should I cook for dinner tonight with what is left in the fridge",
    "the user asked for a page about our company history",  # two words, neither specific
    "every test in the test suite is a test",               # in most files: no evidence
])
def test_a_prompt_that_shares_a_word_or_two_with_the_codebase_is_not(prompt: str) -> None:
    assert not judged(prompt)


@pytest.mark.parametrize("prompt, reason", [
    ("thanks!", "pleasantry"),
    ("ok great, sounds good", "pleasantry"),
    ("good morning! ready when you are", "pleasantry"),
    ("what did you mean by that in your last answer", "about the conversation or general "
                                                      "knowledge"),
    ("what's the difference between a thread and a process",
     "about the conversation or general knowledge"),
    ("create a new branch for the upload work", "process, status or tool request"),
    ("what is the git command to undo the last upload change",
     "process, status or tool request"),
])
def test_pleasantries_conversation_general_knowledge_and_chores_stay_silent(
        prompt: str, reason: str) -> None:
    decision = classify(prompt)
    assert (decision.code, decision.final, decision.reason) == (False, True, reason)


def test_after_a_pleasantry_the_rest_of_the_prompt_decides() -> None:
    assert judged("thanks! now fix the upload progress bar that jumps backwards")
    assert not judged("thanks, that was quick")


def test_a_word_that_begins_like_a_greeting_is_not_one() -> None:
    # "histograms" begins with "hi", "okapi" with "ok"
    assert classify("histograms of upload sizes draw the progress bar twice").reason != \
        "pleasantry"


def test_names_in_code_beat_the_chat_shapes() -> None:
    assert classify("what is the difference between load() and loads() in your answer").code


@pytest.mark.parametrize("unit", ["thanks ", "ok, ", "upload ", "hi there, ", "\n", " \n",
                                  "here ", "explain the ", "add support ", "refactor the ",
                                  "please, "])
def test_the_chat_shapes_and_the_word_count_take_time_linear_in_the_prompt(unit: str) -> None:
    def both(text: str) -> None:
        classify(text)
        by_vocabulary(text, WORDS)

    small, large = unit * (4000 // len(unit)), unit * (32000 // len(unit))
    ratio = linear_growth(both, small + "x", large + "x")
    assert ratio < 20, f"{unit!r}: 8x the prompt took {ratio:.0f}x the time"


def test_the_shapes_read_a_bounded_part_of_a_huge_prompt() -> None:
    unit = "make the "  # the costliest prose for the shapes, measured
    small, large = unit * (64_000 // len(unit)), unit * (512_000 // len(unit))

    ratio = linear_growth(classify, small + "x", large + "x")

    assert ratio < 3, f"8x the prompt took {ratio:.1f}x the time: the whole of it was read"


def test_error_text_or_a_fence_anywhere_in_a_long_paste_still_decides() -> None:
    paste = "make the pipeline quiet " * 20_000
    traceback = '\nTraceback (most recent call last):\n  File "app.py", line 3, in run\n'

    assert classify(paste + traceback).reason == "error text"
    assert classify(traceback + paste).reason == "error text"
    assert classify(paste + "\n```\nrun()\n```\n" + paste).reason == "code fence"


# --- requests that name no file or symbol (issue 27) -----------------------------------------


@pytest.mark.parametrize("prompt, reason", [
    ("explain how uploads are resumed here", "request about this codebase"),
    ("walk me through uploads here", "request about this codebase"),
    ("walk me through the login flow in this project", "request about this codebase"),
    ("implement chunked support for large uploads", "support for a feature"),
    ("please add proxy support to the downloader", "support for a feature"),
    ("the tests for the settings page are flaky, investigate", "behaviour of a part of the code"),
    ("the upload tests fail intermittently on CI", "behaviour of a part of the code"),
])
def test_a_request_about_this_codebase_is_a_code_question_by_its_shape(
        prompt: str, reason: str) -> None:
    decision = classify(prompt)

    assert (decision.code, decision.final, decision.reason) == (True, True, reason)


@pytest.mark.parametrize("prompt", [
    "refactor the retry handling so that it backs off for longer each time",
    "clean up the theme handling so that it stops flashing on every reload",
    "explain how the theme gets applied on every single visit",
    "look into the retry handling, it gives up far too early on slow networks",
])
def test_a_request_whose_subject_is_this_codebases_words_is_a_code_question(
        prompt: str) -> None:
    # the prompt's words as a whole are too few of the codebase's for the repository rule;
    # the thing asked about (the retry handling) is the codebase's
    assert not classify(prompt).final
    assert by_vocabulary(prompt, WORDS).reason == "a request about this codebase's words"


@pytest.mark.parametrize("prompt", [
    "explain how photosynthesis works",
    "refactor my essay so that it flows better",
    "implement a weekly meal plan for me",
    "investigate why my wifi drops every evening",
    "help me understand how compound interest works",
    "I'm stuck here.",
    "explain the rules of cricket here briefly",
    "write a poem about the settings page",
    "rewrite this paragraph so that the user sees the theme first",
    "can you add a reminder to call the support team",
    "what's the weather like here?",
    "polish my email to the team so it sounds friendlier",
])
def test_the_same_verbs_about_other_things_stay_silent(prompt: str) -> None:
    assert not judged(prompt)


@pytest.mark.parametrize("prompt", [
    "format all the files with black",
    "lint the whole project",
    "update the dependencies",
    "bump the lock file",
])
def test_formatting_linting_and_dependency_chores_are_process(prompt: str) -> None:
    assert classify(prompt).reason == "process, status or tool request"


@pytest.mark.parametrize("prompt", ["execute the slow tests only", "list the flaky tests"])
def test_a_kind_of_test_is_not_a_behaviour(prompt: str) -> None:
    assert classify(prompt).reason != "behaviour of a part of the code"


@pytest.mark.parametrize("prompt", [
    "my email validation rejects addresses with a plus sign",
    "the joke endpoint returns the same joke every time",
])
def test_a_writing_word_that_names_part_of_the_code_is_not_a_piece_of_writing(
        prompt: str) -> None:
    decision = classify(prompt)

    assert decision.code or not decision.final  # left to the repository's words


def test_format_with_what_to_change_is_still_a_code_request() -> None:
    assert judged("format the upload sizes in the progress bar as megabytes")


def test_a_run_of_blank_lines_takes_time_linear_in_its_length() -> None:
    # each blank line starts a line; a pattern that let \s cross newlines after ^ rescanned
    # the rest of the run from each of them
    ratio = linear_growth(classify, "stuck here.\n" + "\n" * 2000 + "x",
                          "stuck here.\n" + "\n" * 16000 + "x")
    assert ratio < 20, f"8x the blank lines took {ratio:.0f}x the time"
