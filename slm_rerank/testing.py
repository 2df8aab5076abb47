"""Contract tests every plugin's test-suite subclasses, one base class per hook family.

    from slm_rerank.testing import OutputFormatterContract
    import my_plugin

    class TestMyFormats(OutputFormatterContract):
        plugin = my_plugin
        distribution = "slm-rerank-myformats"
        names = {"csv"}

The base classes are not collected by pytest themselves (their names do not start with
``Test``); each subclass gets every test below.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.registrations import SourceQuery
from slm_rerank.report import Citation, Report


class PluginContract:
    """What every plugin distribution promises, whatever it registers."""

    #: the plugin module (the object its entry point loads)
    plugin: ClassVar[ModuleType | object]
    #: its distribution name, as pip knows it (None for a plugin object that is not installed)
    distribution: ClassVar[str | None]
    #: the register_* hook it implements
    hook: ClassVar[str]
    #: the names it registers from that hook
    names: ClassVar[set[str]]

    def registered(self) -> dict[str, Any]:
        host = Host.with_plugins(Settings(), self.plugin)
        return host.registry.items(self.hook)

    def test_distribution_is_listed_by_plugins_command(self) -> None:
        from click.testing import CliRunner

        from slm_rerank.commands import cli

        if self.distribution is None:
            import pytest

            pytest.skip("not an installed distribution")
        result = CliRunner().invoke(cli, ["plugins", "--all", "--format", "json"])
        assert result.exit_code == 0, result.output
        rows = {row["distribution"]: row for row in json.loads(result.output)}
        assert self.distribution in rows, f"{self.distribution} not installed as a plugin"
        row = rows[self.distribution]
        assert row["error"] is None
        assert self.hook in row["hooks"]
        assert set(row["registers"][self.hook]) == self.names

    def test_registers_its_names(self) -> None:
        assert set(self.registered()) == self.names

    def test_every_registration_is_described(self) -> None:
        for name, item in self.registered().items():
            assert item.description.strip(), f"{name} has no description"


def sample_report() -> Report:
    return Report(
        query="where are retries configured",
        root="/repo",
        mode="fast",
        results=[
            Citation("src/http/retry.py", 10, 42, "RetryPolicy.backoff", 2.5, 2.5, None,
                     ["retry"]),
            Citation("docs/réglages|pipes.md", 1, 30, None, 0.75, 0.75, 0.61, ["configur"]),
        ],
        timings={"total_ms": 12.0},
    )


class OutputFormatterContract(PluginContract):
    hook = "register_output_formatters"

    def test_every_result_path_is_in_the_output(self) -> None:
        report = sample_report()
        for name, formatter in self.registered().items():
            for tty in (False, True):
                out = formatter.render(report, tty=tty)
                assert isinstance(out, str)
                for citation in report.results:
                    # markdown may escape the pipe; compare the part before it
                    assert citation.path.split("|")[0] in out, (name, tty, out)

    def test_an_empty_report_renders(self) -> None:
        report = Report(query="nothing matches", root="/repo", mode="fast")
        for formatter in self.registered().values():
            assert isinstance(formatter.render(report, tty=False), str)
            assert isinstance(formatter.render(report, tty=True), str)


class CandidateSourceContract(PluginContract):
    hook = "register_candidate_sources"

    def make_tree(self, root: Path) -> Path:
        """A small repository: two matching files, one other, one binary, one ignored."""
        (root / "src").mkdir(parents=True)
        (root / "src" / "retry.py").write_text("def backoff():\n    return RETRY * 2\n")
        (root / "src" / "client.py").write_text("import retry\nretry.backoff()\n")
        (root / "README.md").write_text("Nothing to see.\n")
        (root / "blob.bin").write_bytes(b"\x00\x01retry\x00" * 64)
        (root / ".gitignore").write_text("ignored/\n")
        (root / "ignored").mkdir()
        (root / "ignored" / "retry.txt").write_text("retry retry\n")
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        return root

    def sources(self) -> dict[str, Any]:
        return self.registered()

    def test_finds_files_and_counts_terms_case_insensitively(self, tmp_path: Path) -> None:
        root = self.make_tree(tmp_path / "repo")
        for name, source in self.sources().items():
            assert source.unavailable(root) is None, name
            hits = source.search(SourceQuery(root=root.resolve(), terms=["retry", "backoff"]))
            assert {"src/retry.py", "src/client.py", "README.md"} <= set(hits.files), name
            assert hits.body_counts["src/retry.py"] == {"retry": 1, "backoff": 1}
            assert hits.body_counts["src/client.py"]["retry"] == 2
            assert "README.md" not in hits.body_counts

    def test_skips_ignored_and_binary_files(self, tmp_path: Path) -> None:
        root = self.make_tree(tmp_path / "repo")
        for source in self.sources().values():
            hits = source.search(SourceQuery(root=root.resolve(), terms=["retry"]))
            assert "ignored/retry.txt" not in hits.files
            assert "ignored/retry.txt" not in hits.body_counts
            assert "blob.bin" not in hits.body_counts

    def test_paths_restrict_the_search(self, tmp_path: Path) -> None:
        root = self.make_tree(tmp_path / "repo").resolve()
        for source in self.sources().values():
            hits = source.search(
                SourceQuery(root=root, terms=["retry"], paths=[root / "src" / "client.py"])
            )
            assert hits.files == ["src/client.py"]
            assert set(hits.body_counts) == {"src/client.py"}

    def test_no_terms_still_lists_files(self, tmp_path: Path) -> None:
        root = self.make_tree(tmp_path / "repo").resolve()
        for source in self.sources().values():
            hits = source.search(SourceQuery(root=root, terms=[]))
            assert "src/retry.py" in hits.files
            assert hits.body_counts == {}


class QueryExpanderContract(PluginContract):
    hook = "register_query_expanders"

    def test_expansions_are_words(self) -> None:
        for expander in self.registered().values():
            extra = expander.expand("where are retries configured")
            assert isinstance(extra, list)
            assert all(isinstance(word, str) and word.strip() for word in extra)


class ModelProfileContract(PluginContract):
    hook = "register_model_profiles"

    def test_template_has_every_field(self) -> None:
        for name, profile in self.registered().items():
            for placeholder in ("{query}", "{document}"):
                assert placeholder in profile.template, (name, placeholder)
            assert profile.yes_words and profile.no_words, name
            assert not set(profile.yes_words) & set(profile.no_words), name
            for pattern in profile.claims:
                re.compile(pattern)


class ScorerContract(PluginContract):
    hook = "register_scorers"

    def score_kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments a scorer needs (a server endpoint, say)."""
        return {}

    def test_one_probability_per_document(self) -> None:
        for scorer in self.registered().values():
            scores = scorer.score("retries", ["def retry(): ...", "colour = 'red'"],
                                  **self.score_kwargs())
            assert len(scores) == 2
            assert all(0.0 <= s <= 1.0 for s in scores)
