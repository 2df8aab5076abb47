"""The package is built in layers: no import circle, and no module imports one of a higher
layer, whether the import is at the top of the module, inside a function or under
``TYPE_CHECKING``. The order is written down here and in README's layout section."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "slm_rerank"
README = SOURCE.parent / "README.md"

#: The layers, lowest first. A module may import its own layer and those below it. A name
#: ending in ``.*`` is a package and every module under it; any other name is one module.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("slm_rerank.errors", "slm_rerank.report", "slm_rerank.usage",
                    "slm_rerank.safefile", "slm_rerank.query_limit", "slm_rerank.piped",
                    "slm_rerank.registrations", "slm_rerank.event_loop",
                    "slm_rerank.plain_json", "slm_rerank.idle_work", "slm_rerank.digests")),
    ("settings", ("slm_rerank.config_keys", "slm_rerank.config_file", "slm_rerank.config",
                  "slm_rerank.cache_folder")),
    ("managed server", ("slm_rerank.llama.*",)),
    ("plugin host", ("slm_rerank.hookspecs", "slm_rerank.plugin_listing", "slm_rerank.plugins",
                     "slm_rerank.host", "slm_rerank.warm")),
    ("lexical", ("slm_rerank.lexical.*", "slm_rerank.git_runner", "slm_rerank.memory_budget")),
    ("model", ("slm_rerank.model.*",)),
    ("context", ("slm_rerank.context.*",)),
    ("composer", ("slm_rerank.overrides", "slm_rerank.pipeline")),
    ("calibration", ("slm_rerank.calibration.*",)),
    ("front doors", ("slm_rerank", "slm_rerank.api", "slm_rerank.documents",
                     "slm_rerank.reranker", "slm_rerank.rrf", "slm_rerank.plugin_kit",
                     "slm_rerank.testing", "slm_rerank.testing.*")),
    ("claude hook", ("slm_rerank.hook.*",)),
    ("servers", ("slm_rerank.servers.*",)),
    ("warm client", ("slm_rerank.warm_process", "slm_rerank.warm_process.wire",
                     "slm_rerank.warm_process.switch", "slm_rerank.warm_process.client")),
    ("cli", ("slm_rerank.cli.*", "slm_rerank.__main__")),
    ("warm process", ("slm_rerank.warm_process.isolation", "slm_rerank.warm_process.command_fork",
                      "slm_rerank.warm_process.worker", "slm_rerank.warm_process.server")),
)

#: Imports up a layer that are known and on their way out: (importer, imported).
KNOWN_UPWARD: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Import:
    """One import of a module of the package by another: where it is written."""

    importer: str
    imported: str
    path: Path
    line: int

    def __str__(self) -> str:
        return (f"{self.path.relative_to(SOURCE.parent)}:{self.line} imports {self.imported}")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def _owner(name: str, known: dict[str, Path]) -> str | None:
    """The package's module that ``name`` (a module, or a name in one) belongs to."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports() -> list[Import]:
    """Every import of one of the package's modules, at any depth of every module."""
    known = modules()
    found: list[Import] = []
    for importer, path in known.items():
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                # `from slm_rerank import safefile` imports the module safefile; `from
                # slm_rerank import __version__` the package itself
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                         for alias in node.names]
            for name in names:
                imported = _owner(name, known)
                if imported is not None and imported != importer:
                    found.append(Import(importer, imported, path, node.lineno))
    return sorted(set(found), key=str)


def layer_of(module: str) -> int | None:
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            if module == name.removesuffix(".*") or (
                    name.endswith(".*") and module.startswith(name[:-1])):
                return index
    return None


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm, without
    recursion: a long chain of imports must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def test_the_parser_sees_imports_at_every_depth() -> None:
    # an import graph that missed function-level imports would let every check below pass
    seen = {(i.importer, i.imported) for i in imports()}
    assert len(seen) > 300
    assert ("slm_rerank.model.local", "slm_rerank.model.discovery") in seen  # in a function
    assert ("slm_rerank.cli.commands", "slm_rerank") in seen  # from slm_rerank import ...
    assert ("slm_rerank.lexical.chunk_cache", "slm_rerank.safefile") in seen


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_every_module_has_one_layer() -> None:
    unplaced = sorted(name for name in modules() if layer_of(name) is None)
    assert unplaced == [], f"give these a layer in tests/test_imports.py and README: {unplaced}"
    declared = [name for _, names in LAYERS for name in names]
    assert len(declared) == len(set(declared))


def test_no_import_circle() -> None:
    edges: dict[str, set[str]] = {name: set() for name in modules()}
    for each in imports():
        edges[each.importer].add(each.imported)
    found = circles(edges)
    said = ["modules that import each other in a circle, by these imports:\n  " + "\n  ".join(
        str(i) for i in imports() if i.importer in part and i.imported in part)
        for part in found]
    assert found == [], "\n".join(said)


def test_no_import_runs_up_a_layer() -> None:
    upward = []
    for each in imports():
        mine, theirs = layer_of(each.importer), layer_of(each.imported)
        if mine is None or theirs is None or theirs <= mine:
            continue
        if (each.importer, each.imported) in KNOWN_UPWARD:
            continue
        upward.append(f"{each} (layer {LAYERS[theirs][0]!r}, above {LAYERS[mine][0]!r})")
    assert upward == [], ("imports that run up a layer (tests/test_imports.py, LAYERS): move "
                          "the code they need down, or hand it in from above:\n"
                          + "\n".join(upward))


def _as_readme_says(name: str) -> str:
    """``slm_rerank`` -> ``__init__``, ``slm_rerank.llama.*`` -> ``llama/``,
    ``slm_rerank.host`` -> ``host``."""
    if name == "slm_rerank":
        return "__init__"
    short = name.removeprefix("slm_rerank.")
    return short[:-2].replace(".", "/") + "/" if short.endswith(".*") else short


def test_the_readme_names_the_layers_in_their_order() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Layout"):]
    line = next(line for line in section.splitlines() if line.startswith("Layers, lowest"))
    said = [(name, re.findall(r"`([^`]+)`", members))
            for name, members in re.findall(r"\*\*([^*]+)\*\* \(([^)]*)\)", line)]
    assert said == [(name, [_as_readme_says(n) for n in names]) for name, names in LAYERS]
