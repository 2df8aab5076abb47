"""The contract written down stays true: every hook is tested and documented."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from slm_rerank import hookspecs
from slm_rerank.report import Citation, Report

ROOT = Path(__file__).resolve().parent.parent


def hook_names() -> list[str]:
    return sorted(name for name, fn in vars(hookspecs).items()
                  if callable(fn) and hasattr(fn, "slm_rerank_spec"))


def signature(name: str) -> str:
    # annotations are strings (PEP 563); print them as written
    return f"{name}{inspect.signature(getattr(hookspecs, name))}".replace("'", "")


def test_there_are_five_hooks() -> None:
    assert hook_names() == ["register_candidate_sources", "register_model_profiles",
                            "register_output_formatters", "register_query_expanders",
                            "register_scorers"]


def test_every_hook_has_a_test() -> None:
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    missing = [n for n in hook_names() if not re.search(rf"def test_hook_{n}\b", tests)]
    assert not missing, f"hooks without a test_hook_<name>: {missing}"


def test_every_hook_is_in_the_reference_with_its_exact_signature() -> None:
    doc = (ROOT / "docs" / "plugin-hooks.md").read_text()
    missing = [signature(n) for n in hook_names() if f"`{signature(n)}`" not in doc]
    assert not missing, f"docs/plugin-hooks.md lacks: {missing}"


def documented_keys(section: str) -> list[str]:
    doc = (ROOT / "docs" / "output.md").read_text()
    body = doc.split(f"<!-- keys:{section} -->", 1)[1].split("<!-- /keys -->", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", body, flags=re.M)


def test_the_json_document_matches_docs_output_md() -> None:
    report = Report(query="q", root="/r", mode="fast", results=[
        Citation("a.py", 1, 2, None, 1.0, 1.0)], timings={"total_ms": 1.0})
    doc = report.to_dict()
    assert documented_keys("document") == list(doc)
    assert documented_keys("result") == list(doc["results"][0])
