"""The layout, checked from the imports: one wing per stage, lower floors never import higher ones, no
import circles, no module importing its own package's `__init__`, files small enough to read whole,
and every package shipped by a regular install."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pipeline"
CORE = {"conversation", "display", "errors", "ids", "jsonpolicy", "ledger", "resources", "suggest"}
MAX_LINES = 500

# What each wing may import besides itself and the core.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "formats": set(),
    "validate": set(),
    "render": set(),
    "ingest": {"formats"},
    "run": {"formats", "ingest", "validate", "render"},
    "qa": {"run.writers", "run.stats"},  # reads outputs: run's schema and stats, nothing else of run
    "api": {"formats", "ingest", "validate", "render", "run", "qa"},
    "cli": {"formats", "ingest", "validate", "render", "run", "qa", "api"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _imports(name: str, path: Path) -> set[str]:
    """Every project module `name` imports, anywhere in the file (function bodies included): a name
    imported from a package counts as that package's `__init__` unless it is a submodule."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "pipeline")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "pipeline":
                continue
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.add(child if child in MODULES else target)
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _wing(name: str) -> str:
    parts = name.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "top"
    return "core" if parts[1] in CORE else parts[1]


def test_the_wings_are_there():
    assert {_wing(name) for name in MODULES} == {"top", *ALLOWED}


def test_no_import_circles():
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    circles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[name] = 2

    for name in MODULES:
        if name not in state:
            visit(name, [name])
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def _allowed(source: str, target: str) -> bool:
    wing, other = _wing(source), _wing(target)
    if wing == "top" or other == "core" or wing == other:
        return True
    module = target.split(".", 1)[1]
    return any(module == rule or module.startswith(rule + ".") for rule in ALLOWED[wing])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_floors(name):
    upward = sorted(target for target in GRAPH[name] if not _allowed(name, target))
    assert not upward, f"{name} ({_wing(name)}) imports above its floor: {upward}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_its_own_package_init(name):
    own = sorted(target for target in GRAPH[name]
                 if _is_package(target) and (name.startswith(target + ".") or name == target))
    assert not own, f"{name} imports names from its own package's __init__: {own}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_files_are_small_enough_to_read_whole(name):
    lines = MODULES[name].read_text().count("\n")
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)} has {lines} lines (at most {MAX_LINES})"


def test_a_regular_install_ships_every_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {name for name in MODULES if _is_package(name)}
    assert packages <= set(config["packages"]), f"missing from pyproject: {sorted(packages - set(config['packages']))}"


def test_the_checker_sees_what_it_should():
    """The graph is built from real imports: a few known edges must be there, or the rules check nothing."""
    assert "pipeline.formats.registry" in GRAPH["pipeline.formats.convert"]
    assert "pipeline.run.item" in GRAPH["pipeline.run.render_stage"]
    assert "pipeline.run.render_stage" in GRAPH["pipeline.run.stages"]  # an import inside a function
    assert "pipeline.ingest" in GRAPH["pipeline.run.stages"]  # a name from a package counts as its __init__
    assert not _allowed("pipeline.render.engine", "pipeline.formats.registry")
    assert not _allowed("pipeline.run.job", "pipeline.qa")
    assert not _allowed("pipeline.qa.figures", "pipeline.run.stages")
    assert _allowed("pipeline.qa.figures", "pipeline.run.writers")
