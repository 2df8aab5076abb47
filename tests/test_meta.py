"""The contract written down stays true: every hook is tested and documented."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
from pathlib import Path

from search_fixtures import cli

from slm_rerank import hookspecs, registrations
from slm_rerank.plugins import BUILTIN_DISTRIBUTIONS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def hook_names() -> list[str]:
    return sorted(name for name, fn in vars(hookspecs).items()
                  if callable(fn) and hasattr(fn, "slm_rerank_spec"))


def signature(name: str) -> str:
    # annotations are strings (PEP 563); print them as written
    return f"{name}{inspect.signature(getattr(hookspecs, name))}".replace("'", "")


def test_the_hook_reference_documents_no_hook_that_does_not_exist() -> None:
    doc = (ROOT / "docs" / "plugin-hooks.md").read_text()
    documented = sorted(re.findall(r"^### `(\w+)\(", doc, flags=re.M))
    assert documented == hook_names()


def test_every_hook_has_a_test() -> None:
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    missing = [n for n in hook_names() if not re.search(rf"def test_hook_{n}\b", tests)]
    assert not missing, f"hooks without a test_hook_<name>: {missing}"


def test_every_hook_is_in_the_reference_with_its_exact_signature() -> None:
    doc = (ROOT / "docs" / "plugin-hooks.md").read_text()
    missing = [signature(n) for n in hook_names() if f"`{signature(n)}`" not in doc]
    assert not missing, f"docs/plugin-hooks.md lacks: {missing}"


def field_tables(doc: str) -> dict[str, list[str]]:
    """Dataclass name -> the field names its table in the doc lists, in order."""
    tables = {}
    for name, body in re.findall(r"<!-- fields:(\w+) -->\n(.*?)<!-- /fields -->", doc,
                                 flags=re.S):
        assert name not in tables, f"two field tables for {name}"
        # the first cell: `name`, `a`, `b` or `method(arg: T) -> R`
        cells = re.findall(r"^\| (.+?) \|", body, flags=re.M)[2:]
        tables[name] = [field for cell in cells
                        for field in re.findall(r"`(\w+)(?:\(.*?\))?[^`]*`", cell)]
    return tables


def test_every_field_table_of_the_hook_reference_lists_its_dataclasses_fields() -> None:
    doc = (ROOT / "docs" / "plugin-hooks.md").read_text()
    tables = field_tables(doc)
    assert {"CandidateSource", "ModelProfile", "ScoreRequest"} <= set(tables)
    for name, documented in tables.items():
        fields = [f.name for f in dataclasses.fields(getattr(registrations, name))]
        assert sorted(documented) == sorted(fields), (
            f"docs/plugin-hooks.md's table of {name} lists {documented}; it has {fields}")


def test_every_table_of_fields_in_the_hook_reference_is_held_to_its_dataclass() -> None:
    doc = (ROOT / "docs" / "plugin-hooks.md").read_text()
    held = "".join(re.findall(r"<!-- fields:\w+ -->.*?<!-- /fields -->", doc, flags=re.S))
    assert doc.count("| field | meaning |") == held.count("| field | meaning |")


def documented_keys(section: str) -> list[str]:
    doc = (ROOT / "docs" / "output.md").read_text()
    body = doc.split(f"<!-- keys:{section} -->", 1)[1].split("<!-- /keys -->", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", body, flags=re.M)


def test_the_json_document_matches_docs_output_md(repo: Path) -> None:
    doc = cli("-q", "retry backoff", "--fast", "--format", "json", cwd=repo).json()
    assert documented_keys("document") == list(doc)
    assert doc["results"], "needs a result to compare its keys"
    for result in doc["results"]:
        assert documented_keys("result") == list(result)


def test_the_format_table_lists_every_builtin_format(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "output.md").read_text()
    table = doc.split("## The JSON document", 1)[0]
    documented = sorted(re.findall(r"^\| `(\w+)` \|", table, flags=re.M))
    rows = json.loads(cli("plugins", "--all", "--format", "json", cwd=tmp_path).stdout)
    installed = sorted(name for row in rows
                       for name in row["registers"].get("register_output_formatters", []))
    assert documented == installed


def test_ci_runs_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    command = [line.strip() for line in quickstart.splitlines()
               if line.startswith("    make ")][-1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in ci


def test_every_distribution_under_plugins_is_a_builtin() -> None:
    # Built-ins are what host tests load and what `slm-rerank plugins` hides without --all.
    shipped = {tomllib.loads(p.read_text())["project"]["name"]
               for p in (ROOT / "plugins").glob("*/pyproject.toml")}
    assert shipped == BUILTIN_DISTRIBUTIONS
