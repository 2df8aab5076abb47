"""`slm-rerank plugins new KIND NAME`: write a ready plugin distribution from a template.

The templates ship inside the wheel (``plugin_templates/``), so writing a plugin needs no
checkout of slm-rerank. Nothing is installed or run: the command writes files and says
what to type next.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from string import Template

import click

from slm_rerank.cli.terminal import emit, fail
from slm_rerank.report import visible


@dataclass(frozen=True)
class Kind:
    """One kind of plugin: what it registers and how a user turns it on."""

    noun: str
    plural: str
    contract: str
    usage: str


KINDS: dict[str, Kind] = {
    "profile": Kind("model profile", "model profiles", "ModelProfileContract",
                    "Claims the model ids that contain `${name}`; choose it for any server "
                    "with `slm-rerank -q QUERY --model ${name}`."),
    "source": Kind("candidate source", "candidate sources", "CandidateSourceContract",
                   'Turn it on with `sources = ["${name}"]` in slm-rerank\'s config.'),
    "formatter": Kind("output format", "output formats", "OutputFormatterContract",
                      "Use it with `slm-rerank -q QUERY --format ${name}`."),
    "scorer": Kind("scorer", "scorers", "ScorerContract",
                   "Use it with `slm-rerank -q QUERY --scorer ${name}`."),
    "expander": Kind("query expander", "query expanders", "QueryExpanderContract",
                     "A search asks it when its request names it: "
                     '`run_search(SearchRequest(..., expanders=["${name}"]), host)`.'),
}

#: a plugin's short name: lower-case words of letters and digits joined by single dashes
NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
NAME_CHARS = 24


def check_name(name: str) -> str:
    """``name`` if it can name a distribution, a package and an entry point alike."""
    if name.startswith("slm-rerank"):
        short = name.removeprefix("slm-rerank").lstrip("-") or "myplugin"
        raise click.BadParameter(f"{name!r} is the distribution's name; give the plugin's "
                                 f"short name (e.g. {short!r}: it becomes slm-rerank-{short})",
                                 param_hint="NAME")
    from slm_rerank.plugins import BUILTIN_DISTRIBUTIONS

    if f"slm-rerank-{name}" in BUILTIN_DISTRIBUTIONS:
        raise click.BadParameter(f"{name!r} is a plugin slm-rerank ships (slm-rerank-{name}): "
                                 "installing yours would replace it; choose another NAME",
                                 param_hint="NAME")
    if not NAME.fullmatch(name) or len(name) > NAME_CHARS:
        raise click.BadParameter(
            f"{name!r} must be lower-case letters and digits, words joined by single dashes, "
            f"starting with a letter, at most {NAME_CHARS} characters (e.g. 'mymodel' or "
            "'my-model')", param_hint="NAME")
    return name


def fields(kind: str, name: str) -> dict[str, str]:
    """What the templates fill in."""
    module = name.replace("-", "_")
    return {
        "kind": kind, "name": name, "module": module, "package": f"slm_rerank_{module}",
        "distribution": f"slm-rerank-{name}",
        "klass": "".join(part.capitalize() for part in name.split("-")),
        "noun": KINDS[kind].noun, "plural": KINDS[kind].plural,
        "contract": KINDS[kind].contract,
        "usage": Template(KINDS[kind].usage).substitute(name=name),
    }


def render(kind: str, name: str) -> dict[str, str]:
    """Relative path -> text of every file of the distribution."""
    templates = files("slm_rerank.cli") / "plugin_templates"
    values = fields(kind, name)

    def fill(*parts: str) -> str:
        return Template(templates.joinpath(*parts).read_text(encoding="utf-8")).substitute(
            values)

    return {
        "pyproject.toml": fill("common", "pyproject.toml.tmpl"),
        "README.md": fill("common", "README.md.tmpl"),
        f"{values['package']}/__init__.py": fill(kind, "package.py.tmpl"),
        f"tests/test_{values['module']}.py": fill(kind, "test.py.tmpl"),
        "tests/conftest.py": fill("common", "conftest.py.tmpl"),
    }


def write(kind: str, name: str, parent: Path) -> Path:
    """The distribution written under ``parent``; an existing folder is never touched."""
    target = parent / f"slm-rerank-{name}"
    if os.path.lexists(target):
        raise FileExistsError(target)
    if os.path.lexists(parent) and not parent.is_dir():  # mkdir's FileExistsError misleads
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(parent))
    parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed into place: an interrupted run leaves no
    # half-written plugin under the name.
    staging = Path(tempfile.mkdtemp(prefix=f".slm-rerank-{name}-", dir=parent))
    try:
        umask = os.umask(0o022)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)  # mkdtemp's 0o700 would keep the plugin from the others
        for relative, text in render(kind, name).items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if os.path.lexists(target):  # made meanwhile: rename would replace an empty folder
            raise FileExistsError(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


@click.command("new")
@click.argument("kind", metavar="KIND", type=click.Choice(list(KINDS)))
@click.argument("name", callback=lambda _ctx, _param, value: check_name(value))
@click.option("--dir", "parent", type=click.Path(file_okay=False, path_type=Path),
              default=Path("."), show_default=True,
              help="Where to write the folder slm-rerank-NAME.")
def new_plugin(kind: str, name: str, parent: Path) -> None:
    """Write a plugin distribution, slm-rerank-NAME/, ready to install and test.

    KIND is what it registers: profile (how to talk to a model family), source (where
    candidate files come from), formatter (an output format), scorer (how documents are
    judged) or expander (extra recall words). The folder holds pyproject.toml with the
    entry point, a README, the package with a working example, and tests that inherit
    slm-rerank's contract suite for that kind and pass as written. Nothing is installed
    or run; an existing folder is never overwritten.
    """
    try:
        target = write(kind, name, parent)
    except FileExistsError:
        fail(f"{parent / f'slm-rerank-{name}'} already exists; choose another NAME or --dir "
             "(nothing was written)")
        return
    except OSError as exc:
        fail(f"cannot write {parent / f'slm-rerank-{name}'}: {exc.strerror or exc}")
        return
    values = fields(kind, name)
    # --dir is the user's, but may hold any character: shown escaped, never raw
    emit(visible(f"wrote {target}/ (the {values['noun']} '{name}'):\n"
                 + "".join(f"  {relative}\n" for relative in render(kind, name))
                 + "next:\n"
                 f"  pip install -e {shlex.quote(f'{target}[test]')}\n"
                 f"  slm-rerank plugins               # lists {name}\n"
                 f"  pytest {shlex.quote(str(target / 'tests'))}\n", keep_lines=True))
