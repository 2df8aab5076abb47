"""Plugins import only the declared surface of slm_rerank (docs/plugin-hooks.md says which).

The host may move a module without breaking a plugin: every plugin here, its tests too,
reaches the host through the public names, the plugin kit and the testing module only.
"""

from __future__ import annotations

import ast
import pkgutil
import re
from pathlib import Path

import slm_rerank
from slm_rerank import plugin_kit, testing

ROOT = Path(__file__).resolve().parent.parent
#: what a plugin may import of slm_rerank, besides the package's own public names
SURFACE = frozenset({"slm_rerank", "slm_rerank.registrations", "slm_rerank.errors",
                     "slm_rerank.testing", "slm_rerank.report", "slm_rerank.plugin_kit",
                     # what a plugin's tests need beside the contracts: isolation, helpers,
                     # misbehaving servers, recorded answers
                     *(f"slm_rerank.testing.{m.name}" for m in pkgutil.iter_modules(
                         testing.__path__))})
#: where plugins live in this repository: the built-ins and the copyable template
PLUGIN_FOLDERS = (ROOT / "plugins", ROOT / "contrib" / "plugin-template")


def _outside(module: str) -> bool:
    return (module == "slm_rerank" or module.startswith("slm_rerank.")) and (
        module not in SURFACE)


def surface_violations(path: Path) -> list[str]:
    """Each use of slm_rerank outside the surface in ``path``, as ``path:line: what``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    public = set(slm_rerank.__all__) | {m.rsplit(".", 1)[-1] for m in SURFACE}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad = [a.name for a in node.names if _outside(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            bad = [node.module] if _outside(node.module) else []
            if node.module == "slm_rerank":
                bad += [f"slm_rerank.{a.name}" for a in node.names if a.name not in public]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            # slm_rerank.host.Host after `import slm_rerank`: the first attribute decides
            named = node.value.id == "slm_rerank" and node.attr not in public
            bad = [f"slm_rerank.{node.attr}"] if named else []
        else:
            continue
        found += [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:"
                  f"{node.lineno}: {name} is not part of the plugin surface" for name in bad]
    return found


def plugin_files() -> list[Path]:
    return sorted(p for folder in PLUGIN_FOLDERS for p in folder.rglob("*.py")
                  if not {"build", ".venv"} & set(p.parts))


def test_plugins_import_only_the_declared_surface() -> None:
    files = plugin_files()
    assert len(files) > 30, "found too few plugin files: has plugins/ moved?"
    found = [v for path in files for v in surface_violations(path)]
    assert not found, ("plugins use slm_rerank outside its plugin surface "
                       "(use slm_rerank.plugin_kit or slm_rerank.testing):\n" + "\n".join(found))


def test_an_import_outside_the_surface_is_named_with_its_file_and_line(
        tmp_path: Path) -> None:
    planted = tmp_path / "plugin.py"
    planted.write_text("import slm_rerank\n"
                       "from slm_rerank.registrations import Scorer\n"
                       "from slm_rerank.model.fusion import sigmoid\n"
                       "import slm_rerank.lexical.terms\n"
                       "from slm_rerank import hookimpl, pipeline\n"
                       "HOST = slm_rerank.host.Host\n")

    found = surface_violations(planted)

    assert found == [
        f"{planted}:3: slm_rerank.model.fusion is not part of the plugin surface",
        f"{planted}:4: slm_rerank.lexical.terms is not part of the plugin surface",
        f"{planted}:5: slm_rerank.pipeline is not part of the plugin surface",
        f"{planted}:6: slm_rerank.host is not part of the plugin surface",
    ]


def test_the_surface_is_written_down_as_the_test_holds_it() -> None:
    doc = (ROOT / "docs" / "plugin-hooks.md").read_text()
    section = doc.split("## What a plugin may import", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^- `(slm_rerank[\w.]*)`", section, flags=re.M))
    assert documented == SURFACE


def test_every_name_of_the_kit_is_documented_and_importable() -> None:
    doc = (ROOT / "docs" / "plugin-hooks.md").read_text()
    section = doc.split("<!-- kit -->", 1)[1].split("<!-- /kit -->", 1)[0]
    documented = sorted(name for row in re.findall(r"^\| (.+?) \|", section, flags=re.M)
                        for name in re.findall(r"`(\w+)`", row))
    assert documented == sorted(plugin_kit.__all__)
    for name in plugin_kit.__all__:
        assert getattr(plugin_kit, name) is not None, name


def test_every_name_testing_exports_is_importable() -> None:
    missing = [name for name in testing.__all__ if not hasattr(testing, name)]
    assert not missing
