"""The docs are true to the code: every repository path, dotted module name and test name
that README.md, DEVELOPERS.md and docs/*.md mention exists in the repository.

The docs are read as text, found at collection (a page added to docs/ is checked from then
on). What is looked for, anywhere in a page (prose, backticked spans, tables, code blocks):

- **paths** whose first folder is one of the repository's top-level folders
  (`tests/fixtures/comp_test.yaml`, `harness/emulators/fleet.py`, `docs/x.md`; a `*`
  matches as a glob), each with an optional `::test_name`; and the target of every markdown
  link `[..](x.md)`, relative to the page that holds it;
- **dotted names** under `skycore.` or `harness.` (`harness.conformance`,
  `skycore.storage.s3.S3Store`): the longest prefix that is a module or package of the
  repository, and each further part a name its source defines or names; or a layer of
  docs/layers.toml (`skycore.leaves`);
- **test names** (`test_recovery`, `test_upload_order.py`, `...::test_x`): a test module
  (`test_*.py`), a test function, or a test a module makes from a name it spells out;
- **tables of the conformance suite**: a table whose first column names two or more of
  harness/conformance/'s test modules lists only those modules (a smoke-only test such as
  test_recovery in it would say the suite runs it).

Out of scope, and why (OUT_OF_SCOPE below): paths that are not in the repository (`~`,
`$HOME`, `$HARNESS_HOME`, absolute paths such as `/tmp` or a node's `/var/lib/...`), paths
under `build/` (written by `make test`, not kept), placeholders (a part holding `<...>`,
`NAME`, `STORE`, `X`, `N`, `...`), URLs, and paths of other projects that do not start with one
of our top-level folders (`vfs/dir.go` in rclone, `path/to/your-backend`). Bare file names
without a folder (`layers.toml`) are not checked: they name no place.

Reading the source with regular expressions keeps the test free of imports of the modules it
checks (importing an old path would spend its once-per-run deprecation warning).
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path

import pytest

from harness.old_paths import MOVED_NAMES as HARNESS_MOVED
from skycore.old_paths import MOVED_NAMES as SKYCORE_MOVED

MOVED_NAMES = {**HARNESS_MOVED, **SKYCORE_MOVED}
"""Old module paths served by an import hook: {module: {name: its new home}}."""

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "DEVELOPERS.md", *(ROOT / "docs").glob("*.md")],
    key=lambda p: p.relative_to(ROOT).as_posix(),
)
SUITE = ROOT / "harness" / "conformance"
LAYERS = ROOT / "docs" / "layers.toml"

OUT_OF_SCOPE = {
    "build": "written by make test and bench runs, not part of the repository",
}
"""Top-level folders whose paths are not checked, and why. Hidden folders (.venv, .git, tool
caches) and *.egg-info are out too: they are made by tools, not kept in the repository."""

PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|…|(?<![A-Za-z])(?:NAME|STORE|X|N)(?![A-Za-z])")
"""A part of a path or name that stands for something: `<store>`, `NAME`, `X`, `N`, `...`."""


def repo_folders() -> list[str]:
    """The top-level folders whose paths the docs may name."""
    return sorted(
        p.name
        for p in ROOT.iterdir()
        if p.is_dir()
        and not p.name.startswith(".")
        and not p.name.endswith(".egg-info")
        and p.name not in OUT_OF_SCOPE
    )


def path_pattern() -> re.Pattern[str]:
    """A repository path in running text: a top-level folder, then more of a path; not part
    of a longer path (`~/.skycore/...`, `/var/lib/skycore/...`, `$HOME/tests/...`)."""
    roots = "|".join(re.escape(r) for r in [*repo_folders(), *OUT_OF_SCOPE])
    return re.compile(rf"(?<![\w/.~$<>-])((?:{roots})/(?:[\w.*<>-]+/)*[\w.*<>-]*)(?:::(\w+))?")


DOTTED = re.compile(r"(?<![\w/.-])((?:skycore|harness)(?:\.[A-Za-z_*][\w*]*)+)")
TEST_NAME = re.compile(r"(?<![\w/.-])(test_\w+)(?:\.py)?(?:::(\w+))?")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^mailto:|^#")


@cache
def python_sources() -> dict[Path, str]:
    """Every Python file of the repository's folders (the tests, bench and tools too)."""
    found: dict[Path, str] = {}
    for folder in repo_folders():
        for path in (ROOT / folder).rglob("*.py"):
            found[path] = path.read_text(encoding="utf-8")
    return found


@cache
def known_test_names() -> frozenset[str]:
    """Test modules (by stem), test functions, and the tests a module makes by name (a
    scenario table's `"test_..."` strings)."""
    names = {p.stem for p in python_sources() if p.name.startswith("test_")}
    for text in python_sources().values():
        names.update(re.findall(r"^\s*(?:async\s+)?def\s+(test_\w+)", text, re.MULTILINE))
        names.update(re.findall(r"[\"'](test_\w+)[\"']", text))
    return frozenset(names)


def suite_modules() -> frozenset[str]:
    """The conformance suite's test modules."""
    return frozenset(p.stem for p in SUITE.glob("test_*.py"))


def numbered_lines(page: Path) -> list[tuple[int, str]]:
    return list(enumerate(page.read_text(encoding="utf-8").splitlines(), start=1))


def placeholder(text: str) -> bool:
    return bool(PLACEHOLDER.search(text))


def path_exists(relative: str, base: Path = ROOT) -> bool:
    """``relative`` names a file or folder under ``base`` (a `*` in it as a glob)."""
    relative = relative.rstrip("/")
    if "*" in relative:
        return any(base.glob(relative))
    return (base / relative).exists()


def defines(module: Path, name: str) -> bool:
    """``name`` is defined or named in ``module``'s source (a class, a function, an
    assignment, an attribute, an entry of a forwarding table)."""
    return re.search(rf"\b{re.escape(name)}\b", module.read_text(encoding="utf-8")) is not None


def module_file(parts: list[str]) -> Path | None:
    """The source of the module or package ``parts`` in the repository, or None."""
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def layer_names() -> frozenset[str]:
    """The layers and rule tables of docs/layers.toml (`skycore.leaves`,
    `skycore.rules.status_writers`): the docs name them like modules."""
    names: set[str] = set()
    for package, tables in tomllib.loads(LAYERS.read_text(encoding="utf-8")).items():
        names.update(f"{package}.{layer}" for layer in tables.get("layers", {}))
        names.update(f"{package}.rules.{rule}" for rule in tables.get("rules", {}))
    return frozenset(names)


def dotted_problem(name: str) -> str | None:
    """Why the dotted name ``name`` does not resolve, or None."""
    if name in layer_names():
        return None
    parts = name.removesuffix(".*").split(".")  # `harness.accounts.*`: the module's names
    if any("*" in part for part in parts):  # `harness.store_gates.*`: a glob of packages
        return None if any(ROOT.glob("/".join(parts))) else "matches no module"
    for cut in range(len(parts), 0, -1):
        forwarded = MOVED_NAMES.get(".".join(parts[:cut]))
        if forwarded is not None:  # an old path harness.old_paths serves
            missing = [p for p in parts[cut:] if p not in forwarded]
            return (
                f"{'.'.join(parts[:cut])} (harness.old_paths) has no {missing[0]!r}"
                if missing
                else None
            )
        source = module_file(parts[:cut])
        if source is None:
            continue
        missing = [p for p in parts[cut:] if not defines(source, p)]
        if not missing:
            return None
        where = source.relative_to(ROOT)
        return f"{'.'.join(parts[:cut])} ({where}) defines no {missing[0]!r}"
    return "is no module of the repository"


def path_problems(page: Path) -> list[str]:
    """Repository paths and link targets in ``page`` that do not exist."""
    problems = []
    pattern = path_pattern()
    for number, line in numbered_lines(page):
        for match in pattern.finditer(line):
            path = match.group(1).split("**")[0].rstrip(".")  # `**path**` is bold
            test = match.group(2)
            if path.split("/")[0] in OUT_OF_SCOPE or placeholder(path):
                continue
            if not path_exists(path):
                problems.append(f"{number}: {path} does not exist")
            elif test and not re.search(
                rf"^\s*(?:async\s+)?def\s+{test}\b",
                (ROOT / path).read_text(encoding="utf-8"),
                re.MULTILINE,
            ):
                problems.append(f"{number}: {path} has no test {test}")
        for target in LINK.findall(line):
            target = target.split("#")[0]
            if not target or URL.match(target) or placeholder(target):
                continue
            if not path_exists(target, page.parent):
                problems.append(f"{number}: link ({target}) leads nowhere")
    return problems


def name_problems(page: Path) -> list[str]:
    """Dotted module names and test names in ``page`` that the repository does not have."""
    problems = []
    tests = known_test_names()
    for number, line in numbered_lines(page):
        for name in DOTTED.findall(line):
            if placeholder(name):
                continue
            problem = dotted_problem(name)
            if problem:
                problems.append(f"{number}: {name}: {problem}")
        for match in TEST_NAME.finditer(line):
            for name in filter(None, match.groups()):
                if name not in tests:
                    problems.append(f"{number}: {name}: no such test module or test")
    return problems


def suite_table_problems(page: Path) -> list[str]:
    """Rows naming a test that is not the suite's, in tables that list the suite's modules."""
    problems = []
    suite = suite_modules()
    table: list[tuple[int, list[str]]] = []
    for number, line in [*numbered_lines(page), (0, "")]:
        if line.lstrip().startswith("|"):
            first_cell = line.strip().strip("|").split("|")[0]
            table.append((number, re.findall(r"(?<![\w/.-])test_[a-z0-9_]+", first_cell)))
            continue
        named = {name for _, names in table for name in names}
        if len(named & suite) >= 2:
            problems += [
                f"{row}: {name} is listed with the conformance suite's modules but is not "
                f"one (harness/conformance/ has {', '.join(sorted(suite))})"
                for row, names in table
                for name in names
                if name not in suite
            ]
        table = []
    return problems


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_paths_exist(page: Path) -> None:
    problems = path_problems(page)
    assert not problems, f"{page_id(page)} names paths that do not exist:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_module_and_test_names_exist(page: Path) -> None:
    problems = name_problems(page)
    assert not problems, f"{page_id(page)} names what the code lacks:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_suite_tables_list_the_suite(page: Path) -> None:
    problems = suite_table_problems(page)
    assert not problems, "\n".join(f"{page_id(page)}:{p}" for p in problems)


def test_the_checks_catch_what_they_should(tmp_path: Path) -> None:
    """Each check finds a made-up page's drift (a test that cannot fail is a defect)."""
    page = tmp_path / "drift.md"
    page.write_text(
        "See `tests/fixtures/comp_test_nowhere.yaml` and [x](nowhere.md).\n"
        "It runs `harness.conformance.no_such_module` and test_no_such_thing.\n"
        "\n"
        "| module | checks |\n"
        "|---|---|\n"
        "| test_mount_matrix | x |\n"
        "| test_comp_test | x |\n"
        "| test_recovery | x |\n",
        encoding="utf-8",
    )
    assert [p.split(":")[0] for p in path_problems(page)] == ["1", "1"]
    assert [p.split(":")[0] for p in name_problems(page)] == ["2", "2"]
    assert len(suite_table_problems(page)) == 1
    fine = tmp_path / "fine.md"
    fine.write_text(
        "`tests/fixtures/comp_test.yaml`, `harness/store_gates/*/`, `~/x/tests/y`,\n"
        "`$HARNESS_HOME/logs/x`, `build/test-logs/`, `skycore/storage/<name>.py`,\n"
        "`harness.conformance`, `skycore.storage.s3.AwsConfig`, `harness.store_gates.*`,\n"
        "test_recovery, tests/smoke/test_recovery.py::test_preempt_twice\n"
        "[home](https://example.com) [this](#fine)\n",
        encoding="utf-8",
    )
    assert path_problems(fine) + name_problems(fine) + suite_table_problems(fine) == []
