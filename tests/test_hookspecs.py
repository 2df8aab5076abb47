"""Each hook family, as the host uses it, through a plugin manager that holds only fakes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import fake_plugins as fakes
import pytest

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.errors import ConfigError, ContractError, RegistrationError, TransientError
from slm_rerank.host import Host
from slm_rerank.model.profiles import choose_profile
from slm_rerank.model.scoring import score_sync
from slm_rerank.pipeline import SearchRequest, run_search
from slm_rerank.registrations import (
    Document,
    DocumentScore,
    ModelProfile,
    OutputFormatter,
    PluginOption,
    Scorer,
    ScoreRequest,
)
from slm_rerank.report import Citation, Report


def registry(*plugins: object):
    return Host.with_plugins(Settings(), *plugins).registry


def docs(*texts: str) -> list[Document]:
    return [Document.of(str(i), t) for i, t in enumerate(texts)]


def test_hook_register_output_formatters() -> None:
    formatters = registry(fakes.Formats()).formatters()
    report = Report(query="q", root="/r", mode="fast",
                    results=[Citation("a.py", 1, 2, None, 1.0, 1.0)])
    assert formatters["paths"].render(report, tty=False) == "a.py\n"


def test_hook_register_candidate_sources(tmp_path: Path) -> None:
    # the pipeline asks the registered source and cites what it found
    (tmp_path / "a.py").write_text("def retry():\n    pass\n")
    host = Host.with_plugins(Settings(sources=["fixed"]), fakes.Sources())
    report = run_search(SearchRequest(query="retry", root=tmp_path), host)
    assert [c.path for c in report.results] == ["a.py"]
    assert report.notes[0].startswith("source: fixed;")


def test_hook_register_query_expanders(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def backoff():\n    pass\n")
    host = Host.with_plugins(Settings(sources=["fixed"]), fakes.Sources(), fakes.Expanders())
    plain = run_search(SearchRequest(query="retries", root=tmp_path), host)
    expanded = run_search(SearchRequest(query="retries", root=tmp_path,
                                        expanders=["synonyms"]), host)
    assert plain.notes[0].endswith("terms: retries")
    assert plain.results[0].matched_terms == []
    assert expanded.notes[0].endswith("terms: retries, backoff")
    assert expanded.results[0].matched_terms == ["backoff"]


def test_hook_register_model_profiles() -> None:
    profiles = registry(fakes.Profiles()).profiles()
    base = choose_profile(profiles, model_id="gemma-3-270m", fallback=None)
    tuned = choose_profile(profiles, model_id="google/gemma-3-270m-it-GGUF", fallback=None)
    assert base is not None and base.profile.name == "raw"
    assert tuned is not None and tuned.profile.name == "raw-it"
    assert choose_profile(profiles, model_id="qwen3-0.6b", fallback=None) is None


def test_hook_register_scorers() -> None:
    scorer = registry(fakes.Scorers()).scorers()["overlap"]
    outcome = score_sync(scorer, ScoreRequest("retry policy", docs("retry here", "nothing")))
    assert {i: s.probability for i, s in outcome.scores.items()} == {0: 1.0, 1: 0.0}
    assert outcome.stopped is None


# --- the registry ---------------------------------------------------------------------------


def test_a_duplicate_name_is_an_error_naming_both_plugins() -> None:
    host = Host.with_plugins(Settings())
    assert host.pm is not None
    host.pm.register(fakes.Formats(), name="first")
    host.pm.register(fakes.SameFormatAgain(), name="second")
    with pytest.raises(RegistrationError) as info:
        host.registry.formatters()
    message = str(info.value)
    assert "'paths'" in message and "'first'" in message and "'second'" in message


def test_a_plugin_that_raises_while_registering_is_named() -> None:
    host = Host.with_plugins(Settings())
    assert host.pm is not None
    host.pm.register(fakes.RaisesWhileRegistering(), name="explosive")
    with pytest.raises(RegistrationError, match="plugin 'explosive' raised .*ValueError: boom"):
        host.registry.formatters()


class FirstFormats:
    @slm_rerank.hookimpl(tryfirst=True)
    def register_output_formatters(self, register: Callable[[OutputFormatter], None]) -> None:
        register(OutputFormatter("first", "wants to go first", lambda report, tty=False: ""))


class LastFormats:
    @slm_rerank.hookimpl(trylast=True)
    def register_output_formatters(self, register: Callable[[OutputFormatter], None]) -> None:
        register(OutputFormatter("last", "wants to go last", lambda report, tty=False: ""))


class WrapsFormats:
    @slm_rerank.hookimpl(hookwrapper=True)
    def register_output_formatters(self, register: Callable[[OutputFormatter], None]
                                   ) -> Iterator[None]:
        register(OutputFormatter("wrapped", "around the others", lambda report, tty=False: ""))
        yield


class NewStyleWrapsFormats:
    @slm_rerank.hookimpl(wrapper=True)
    def register_output_formatters(self, register: Callable[[OutputFormatter], None]
                                   ) -> Iterator[None]:
        register(OutputFormatter("wrapped", "around the others", lambda report, tty=False: ""))
        return (yield)


@pytest.mark.parametrize(("plugin", "option"), [
    (FirstFormats(), "tryfirst=True"), (LastFormats(), "trylast=True"),
    (WrapsFormats(), "hookwrapper=True"), (NewStyleWrapsFormats(), "wrapper=True")])
def test_a_hook_option_the_registry_cannot_honour_is_an_error_naming_the_plugin(
        plugin: object, option: str) -> None:
    # each plugin's registry hook is called alone, to know whose each name is: there
    # tryfirst would do nothing and a wrapper would be called as a plain function
    host = Host.with_plugins(Settings())
    assert host.pm is not None
    host.pm.register(fakes.Formats(), name="plain")
    host.pm.register(plugin, name="eager")

    with pytest.raises(RegistrationError) as info:
        host.registry.formatters()
    message = str(info.value)
    assert "plugin 'eager'" in message and "register_output_formatters" in message
    assert option in message and "remove it" in message


def test_registering_the_wrong_type_is_an_error() -> None:
    with pytest.raises(RegistrationError, match="expected Scorer"):
        registry(fakes.WrongType()).scorers()


def test_names_by_plugin_attributes_each_name() -> None:
    host = Host.with_plugins(Settings())
    assert host.pm is not None
    host.pm.register(fakes.Formats(), name="fmt")
    host.pm.register(fakes.Scorers(), name="sc")
    assert host.registry.names_by_plugin() == {
        "fmt": {"register_output_formatters": ["paths"]},
        "sc": {"register_scorers": ["overlap"]},
    }


# --- model profiles: who claims a model id -----------------------------------------------


def test_two_profiles_claiming_one_id_equally_is_an_error_naming_both() -> None:
    a = fakes.RAW_PROFILE
    b = ModelProfile("other", "another family", a.instruction, a.completion, (" yes",),
                     (" no",), claims=(r"gemma",))
    with pytest.raises(ConfigError, match="claimed equally by the profiles other and raw"):
        choose_profile({"raw": a, "other": b}, model_id="gemma-3")
    # --model settles it
    choice = choose_profile({"raw": a, "other": b}, model_id="gemma-3", requested="other")
    assert choice is not None and choice.profile.name == "other"


def test_an_unknown_requested_profile_lists_the_installed_ones() -> None:
    with pytest.raises(ConfigError, match="unknown model profile 'qwen'.*installed: raw"):
        choose_profile({"raw": fakes.RAW_PROFILE}, requested="qwen")


def test_a_query_with_braces_fills_a_layout_verbatim() -> None:
    prompt = fakes.RAW_PROFILE.render_completion("dict {a}", "x = {'k': {instruction}}")
    assert "Query: dict {a}\nDocument: x = {'k': {instruction}}\nRelevant:" in prompt


# --- scorers: streaming, deadlines, faults ------------------------------------------------


def scorer_of(fn: Callable[[ScoreRequest], AsyncIterator[DocumentScore]]) -> Scorer:
    return Scorer("test", "a scorer under test", fn, needs_endpoint=False)


def test_a_deadline_keeps_what_was_already_scored() -> None:
    async def slow_second(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
        yield DocumentScore(0, 0.9)
        await asyncio.sleep(5)
        yield DocumentScore(1, 0.1)

    request = ScoreRequest("q", docs("a", "b"), deadline=time.monotonic() + 0.3)
    outcome = score_sync(scorer_of(slow_second), request)
    assert list(outcome.scores) == [0]
    assert outcome.stopped is not None and "deadline" in outcome.stopped


def test_a_transient_fault_keeps_what_was_already_scored() -> None:
    async def refused_midway(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
        yield DocumentScore(1, 0.7)
        raise TransientError("connection refused by http://127.0.0.1:8033", "http://x")

    outcome = score_sync(scorer_of(refused_midway), ScoreRequest("q", docs("a", "b")))
    assert {i: s.probability for i, s in outcome.scores.items()} == {1: 0.7}
    assert outcome.stopped == "connection refused by http://127.0.0.1:8033"


@pytest.mark.parametrize(("verdicts", "message"), [
    ([DocumentScore(0, 0.5), DocumentScore(0, 0.6)], "scored document 0 twice"),
    ([DocumentScore(2, 0.5)], "only 2 were sent"),
    ([DocumentScore(0, 1.5)], "probability 1.5"),
    ([DocumentScore(0, float("nan"))], "probability nan"),
])
def test_a_verdict_that_breaks_the_contract_is_a_contract_error(
        verdicts: list[DocumentScore], message: str) -> None:
    async def broken(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
        for verdict in verdicts:
            yield verdict

    with pytest.raises(ContractError, match=message):
        score_sync(scorer_of(broken), ScoreRequest("q", docs("a", "b")))


def test_score_sync_inside_an_event_loop_says_to_await_instead() -> None:
    async def main() -> None:
        score_sync(registry(fakes.Scorers()).scorers()["overlap"], ScoreRequest("q", docs("a")))

    with pytest.raises(RuntimeError, match="await"):
        asyncio.run(main())


# --- per-plugin settings ------------------------------------------------------------------


class OptionedFormat:
    @slm_rerank.hookimpl
    def register_output_formatters(self, register: Callable[[OutputFormatter], None]) -> None:
        register(OutputFormatter("csv", "comma separated", lambda report, tty=False: "",
                                 options=(PluginOption("delimiter", ",", "field separator"),
                                          PluginOption("width", 1.5, "a number"))))


def host_with(plugins: dict[str, dict[str, object]]) -> Host:
    origins = {"plugins.csv.colour": "repo: /r/x.toml", "plugins.csv.width": "repo: /r/x.toml",
               "plugins.nope.k": "user: /u/c.toml"}
    settings = Settings(format="csv", plugins=plugins, origins=origins)
    return Host.with_plugins(settings, OptionedFormat())


def test_plugin_options_have_defaults_and_take_configured_values() -> None:
    assert host_with({}).options_for("csv") == {"delimiter": ",", "width": 1.5}
    assert host_with({"csv": {"width": 2}}).options_for("csv") == {"delimiter": ",",
                                                                    "width": 2.0}


@pytest.mark.parametrize(("tables", "message"), [
    ({"csv": {"colour": "red"}}, r"repo: /r/x.toml: \[plugins.csv\]: unknown key 'colour'"),
    ({"csv": {"delimiter": 3}}, r"\[plugins.csv\]: key 'delimiter' must be a string"),
    ({"nope": {"k": 1}}, r"user: /u/c.toml: \[plugins.nope\]: nothing named 'nope'"),
])
def test_a_bad_plugin_setting_names_the_file_section_and_key(
        tables: dict[str, dict[str, object]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        host_with(tables).validate()


def test_an_expander_that_needs_no_model_never_looks_for_a_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_rerank.model import stage

    def no_server(*args: object, **kwargs: object) -> None:
        raise AssertionError("looked for a model server")

    monkeypatch.setattr(stage, "locate", no_server)
    (tmp_path / "a.py").write_text("def backoff():\n    pass\n")
    host = Host.with_plugins(Settings(sources=["fixed"]), fakes.Sources(), fakes.Expanders())
    report = run_search(SearchRequest(query="retries", root=tmp_path, expanders=["synonyms"]),
                        host)
    assert report.notes[0].endswith("terms: retries, backoff")
