"""docs/models.md "How a prompt is assembled" names functions that exist where it says."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: "`slm_rerank/model/passages.py`: `head_passages`, `cut_lines`" in the section's table
CITED = re.compile(r"`((?:slm_rerank|plugins)/[\w/.-]+\.py)`: ((?:`[\w.]+`(?:, )?)+)")


def _module(path: str) -> str:
    """The import name of a module file of the host or of a plugin distribution."""
    parts = Path(path).with_suffix("").parts
    if parts[0] == "plugins":
        parts = parts[2:]  # plugins/<distribution>/<package>/...
    return ".".join(p for p in parts if p != "__init__")


def test_every_function_the_prompt_section_cites_is_in_the_module_it_names() -> None:
    doc = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    section = doc.split("## How a prompt is assembled", 1)[1].split("\n## ", 1)[0]
    cited = [(path, name) for path, names in CITED.findall(section)
             for name in re.findall(r"`([\w.]+)`", names)]
    assert len(cited) >= 15, cited  # the table was read, not skipped

    missing = []
    for path, name in cited:
        assert (ROOT / path).is_file(), f"docs/models.md cites {path}, which does not exist"
        found: object = importlib.import_module(_module(path))
        for part in name.split("."):
            found = getattr(found, part, None)
        if found is None:
            missing.append(f"{path}: {name}")
    assert not missing, f"docs/models.md cites names its modules lack: {missing}"
