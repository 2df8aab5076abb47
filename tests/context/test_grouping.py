"""--by-slice: results grouped by the vertical slice (packages/x, services/x, ...) holding them."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_fixtures import cli, make_repo, search

from slm_rerank.config import Settings
from slm_rerank.context.grouping import group, slice_of, wrapper_of

ROOTS = Settings().slice_roots


@pytest.mark.parametrize(("path", "expected"), [
    ("packages/auth/src/login.py", "packages/auth"),
    ("services/billing/api/handlers.go", "services/billing"),
    ("apps/web/main.ts", "apps/web"),
    ("features/cart/view.tsx", "features/cart"),
    ("plugins/slm-rerank-git/slm_rerank_git/__init__.py", "plugins/slm-rerank-git"),
    ("src/mypkg/core.py", "src/mypkg"),
    # a root folder below another root: the inner one names the slice, with its whole path
    ("src/features/auth/login.ts", "src/features/auth"),
    ("web/packages/ui/button.ts", "web/packages/ui"),
    # the outermost root wins over a root nested inside a slice
    ("packages/auth/src/components/x.ts", "packages/auth"),
    # directly inside a root, or outside every root: no slice
    ("src/main.py", None),
    ("packages/README.md", None),
    ("lib/util.py", None),
    ("setup.py", None),
])
def test_slice_of_finds_the_folder_under_the_outermost_slice_root(path: str,
                                                                  expected: str | None) -> None:
    assert slice_of(path, ROOTS) == expected


def test_a_root_with_a_slash_is_a_path_from_the_searched_root() -> None:
    roots = ["internal/handlers"]

    assert slice_of("internal/handlers/users/get.go", roots) == "internal/handlers/users"
    assert slice_of("x/internal/handlers/users/get.go", roots) is None


def test_no_roots_means_no_slices() -> None:
    assert slice_of("packages/auth/login.py", []) is None


def test_groups_come_best_first_and_keep_their_members_in_rank_order() -> None:
    groups = group(["a", "b", None, "a", "b"], [9.0, 8.0, 8.5, 7.0, 1.0])

    assert [(g.name, g.members) for g in groups] == [("a", [0, 3]), (None, [2]),
                                                     ("b", [1, 4])]


MONOREPO: dict[str, str | bytes] = {
    "packages/auth/login.py": "def login(token):\n    return check_token(token)\n",
    "packages/auth/token.py": "def check_token(token):\n    return bool(token)\n",
    "services/api/routes.py": "def route_login(token):\n    return token\n",
    "scripts/token_tool.py": "token = 1\n",
}


@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "mono", MONOREPO)


def test_search_by_slice_names_each_result_and_summarises_the_slices(monorepo: Path) -> None:
    report = search(monorepo, "login token", by_slice=True)

    by_path = {c.path: c.slice for c in report.results}
    assert by_path["packages/auth/login.py"] == "packages/auth"
    assert by_path["services/api/routes.py"] == "services/api"
    assert by_path["scripts/token_tool.py"] is None
    assert report.slices is not None
    names = [g.name for g in report.slices]
    assert set(names) == {"packages/auth", "services/api", None}
    assert report.slices[0].best_score == max(c.score for c in report.results)
    auth = next(g for g in report.slices if g.name == "packages/auth")
    assert sorted(report.results[i].path for i in auth.members) == [
        "packages/auth/login.py", "packages/auth/token.py"]


def test_a_repository_without_slice_folders_forms_one_group(tmp_path: Path) -> None:
    flat = make_repo(tmp_path / "flat", {"login.py": "def login(token): ...\n",
                                         "lib/token.py": "token = 1\n"})

    report = search(flat, "login token", by_slice=True)

    assert report.slices is not None and len(report.slices) == 1
    assert report.slices[0].name is None
    assert report.slices[0].members == list(range(len(report.results)))


def test_json_carries_slice_per_result_and_a_slices_summary(monorepo: Path) -> None:
    doc = cli("--fast", "--by-slice", "--format", "json", "-q", "login token",
              cwd=monorepo).json()

    assert {r["path"]: r["slice"] for r in doc["results"]}["packages/auth/token.py"] \
        == "packages/auth"
    ranks = sorted(rank for s in doc["slices"] for rank in s["ranks"])
    assert ranks == list(range(1, len(doc["results"]) + 1))
    assert doc["slices"][0]["best_score"] == doc["results"][0]["score"]


def test_without_by_slice_json_has_no_slices(monorepo: Path) -> None:
    doc = cli("--fast", "--format", "json", "-q", "login token", cwd=monorepo).json()

    assert doc["slices"] is None
    assert all(r["slice"] is None for r in doc["results"])


def test_piped_text_puts_each_slice_under_its_heading(monorepo: Path) -> None:
    run = cli("--fast", "--by-slice", "-q", "login token", cwd=monorepo)

    lines = run.stdout.splitlines()
    assert run.returncode == 0, run.stderr
    auth = lines.index("# slice: packages/auth")
    assert lines[auth + 1].startswith("packages/auth/")
    assert "# slice: (outside any slice)" in lines


def test_slice_roots_come_from_the_repository_config(monorepo: Path) -> None:
    (monorepo / ".slm-rerank.toml").write_text('slice_roots = ["scripts"]\n')

    doc = cli("--fast", "--by-slice", "--format", "json", "-q", "login token",
              cwd=monorepo).json()

    assert {r["path"]: r["slice"] for r in doc["results"]}["packages/auth/login.py"] is None


def test_a_bad_slice_roots_value_is_a_warning_naming_the_key(monorepo: Path) -> None:
    (monorepo / ".slm-rerank.toml").write_text('slice_roots = "packages"\n')

    run = cli("--fast", "--by-slice", "-q", "login token", cwd=monorepo)

    # a repository's file: the value is left out with a warning, the search runs
    assert run.returncode == 0, run.stderr
    assert "key 'slice_roots' must be a list of strings" in run.stderr


@pytest.mark.parametrize("root", ["", "/", ".", "..", "../x", "/abs/path", "a/../.."])
def test_a_slice_root_naming_no_folder_under_the_root_is_a_warning(
        monorepo: Path, root: str) -> None:
    (monorepo / ".slm-rerank.toml").write_text(f'slice_roots = ["packages", "{root}"]\n')

    run = cli("--fast", "--by-slice", "-q", "login token", cwd=monorepo)

    assert run.returncode == 0, run.stderr  # a repository's file: a warning, not an error
    assert "key 'slice_roots'" in run.stderr and "names no folder" in run.stderr


# --- how a slice root is spelled ---------------------------------------------------------


@pytest.mark.parametrize("root", ["./internal/handlers", "internal/./handlers",
                                  "internal//handlers", "x/../internal/handlers"])
def test_a_slice_root_path_is_read_as_the_same_path_however_it_is_spelled(root: str) -> None:
    assert slice_of("internal/handlers/users/get.go", [root]) == "internal/handlers/users"


def test_a_dot_slash_root_is_anchored_at_the_searched_root() -> None:
    assert slice_of("src/auth/login.py", ["./src"]) == "src/auth"
    assert slice_of("web/src/auth/login.py", ["./src"]) is None


@pytest.mark.parametrize("root", ["", "/", ".", "..", "../src", "src/../.."])
def test_a_slice_root_that_names_no_folder_under_the_root_matches_nothing(root: str) -> None:
    assert slice_of("src/auth/login.py", [root]) is None


# --- a wrapper folder that holds nearly all the code is looked through ------------------


def _package(prefix: str) -> dict[str, str | bytes]:
    """A Python project whose package sits at ``prefix``, with its tests and docs beside."""
    return {
        f"{prefix}/__init__.py": "from .cli import main\n",
        f"{prefix}/cli.py": "def main(): return score_terms(load_judge())\n",
        f"{prefix}/lexical/__init__.py": "",
        f"{prefix}/lexical/terms.py": "def score_terms(terms): return len(terms)\n",
        f"{prefix}/lexical/rank.py": "def rank_terms(terms): return score_terms(terms)\n",
        f"{prefix}/model/__init__.py": "",
        f"{prefix}/model/judge.py": "def load_judge(): return 'judge terms'\n",
        f"{prefix}/model/prompt.py": "def judge_prompt(terms): return load_judge()\n",
        "tests/test_terms.py": "def test_score_terms(): assert score_terms('judge')\n",
        "tests/test_judge.py": "def test_load_judge(): assert load_judge()\n",
        "tests/conftest.py": "import pytest\n",
        "docs/index.md": "# score terms, load judge\n",
        "docs/conf.py": "project = 'judge terms'\n",
        "README.md": "score terms and load the judge\n",
        "pyproject.toml": "[project]\nname = 'pkg'\n",
    }


#: the slices of the files above, by path below the package
PACKAGE_SLICES = {"cli.py": "", "lexical/terms.py": "/lexical", "lexical/rank.py": "/lexical",
                  "model/judge.py": "/model", "model/prompt.py": "/model"}


@pytest.mark.parametrize("prefix", ["src/pkg", "pkg", "src/main/python/org/pkg"])
def test_the_package_holding_all_the_code_is_split_into_its_subpackages(
        tmp_path: Path, prefix: str) -> None:
    repo = make_repo(tmp_path / "project", _package(prefix))

    report = search(repo, "score terms load judge prompt rank main", by_slice=True, top_k=20)

    by_path = {c.path: c.slice for c in report.results}
    for below, suffix in PACKAGE_SLICES.items():
        assert by_path[f"{prefix}/{below}"] == prefix + suffix, below
    assert by_path["tests/test_terms.py"] is None
    assert report.slices is not None
    assert {g.name for g in report.slices} >= {prefix, f"{prefix}/lexical", f"{prefix}/model"}


def test_a_src_layout_is_split_below_its_package_in_the_json_output(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project", _package("src/pkg"))

    doc = cli("--fast", "--by-slice", "--format", "json", "-q", "score terms load judge",
              cwd=repo).json()

    slices = {r["path"]: r["slice"] for r in doc["results"]}
    assert slices["src/pkg/lexical/terms.py"] == "src/pkg/lexical"
    assert slices["src/pkg/model/judge.py"] == "src/pkg/model"
    assert {s["slice"] for s in doc["slices"]} >= {"src/pkg/lexical", "src/pkg/model"}


@pytest.mark.parametrize(("files", "expected"), [
    (["src/pkg/a.py", "src/pkg/b/c.py", "src/pkg/b/d.py", "src/pkg/e/f.py", "tests/test_a.py",
      "tests/test_b.py", "docs/x.md", "docs/conf.py", "setup.py"], "src/pkg"),
    (["pkg/a.py", "pkg/b/c.py", "pkg/d/e.py", "pkg/f.py", "setup.py"], "pkg"),
    # scripts and benchmarks beside the package: under a fifth of the source
    (["src/pkg/a.py", "src/pkg/b.py", "src/pkg/c/d.py", "src/pkg/e.py", "scripts/run.py"],
     "src/pkg"),
    # no folder holds nearly all the code: no wrapper
    (["app/a.py", "app/b.py", "lib/c.py", "lib/d.py"], None),
    (["main.py", "util.py", "lib/x.py"], None),
    (["README.md", "docs/a.md", "tests/test_x.py"], None),
    ([], None),
])
def test_wrapper_of_goes_down_while_one_folder_holds_nearly_all_the_source(
        files: list[str], expected: str | None) -> None:
    assert wrapper_of(files) == expected


#: layouts whose slices the roots already give: the wrapper rule changes none of them
UNCHANGED_LAYOUTS = [
    # a monorepo: no folder holds nearly all its code
    ["packages/auth/login.py", "packages/auth/token.py", "packages/billing/pay.py",
     "services/api/routes.py", "services/api/app.py", "scripts/tool.py"],
    # a monorepo whose every package is under packages/: the wrapper is packages itself
    ["packages/auth/src/login.py", "packages/auth/src/token.py", "packages/ui/button.ts",
     "packages/ui/menu.ts", "packages/core/x.go"],
    # two top-level packages of equal size
    ["app/views/a.py", "app/models/b.py", "lib/io/c.py", "lib/net/d.py"],
    # this project's own shape: a package beside its plugins
    ["slm_rerank/a.py", "slm_rerank/b.py", "slm_rerank/c/d.py", "plugins/git/g.py",
     "plugins/rg/r.py", "plugins/rg/s.py"],
]


@pytest.mark.parametrize("files", UNCHANGED_LAYOUTS)
def test_layouts_the_roots_already_slice_keep_their_slices(files: list[str]) -> None:
    wrapper = wrapper_of(files)

    assert [slice_of(f, ROOTS, wrapper) for f in files] == [slice_of(f, ROOTS) for f in files]


def test_the_roots_still_name_a_slice_inside_the_wrapper() -> None:
    files = ["src/pkg/features/auth/login.ts", "src/pkg/features/cart/cart.ts",
             "src/pkg/core/a.ts", "src/pkg/main.ts"]
    wrapper = wrapper_of(files)

    assert wrapper == "src/pkg"
    assert slice_of("src/pkg/features/auth/login.ts", ROOTS, wrapper) == "src/pkg/features/auth"
    assert slice_of("src/pkg/core/a.ts", ROOTS, wrapper) == "src/pkg/core"
    assert slice_of("src/pkg/main.ts", ROOTS, wrapper) == "src/pkg"
    # a root path inside the wrapper: the roots decide
    assert slice_of("src/pkg/core/db/a.ts", ["src/pkg/core"], wrapper) == "src/pkg/core/db"


def test_a_wrapper_folder_that_is_a_root_name_is_looked_through_too() -> None:
    files = ["src/pkg/features/auth/login.ts", "src/pkg/features/cart/cart.ts"]
    wrapper = wrapper_of(files)

    assert wrapper == "src/pkg/features"
    assert slice_of(files[0], ROOTS, wrapper) == "src/pkg/features/auth"
    assert slice_of(files[0], ROOTS) == "src/pkg"  # the roots alone: one slice for both
