"""The import rules of DESIGN.md's Layout, checked on the source: layers import only downwards, and no module imports
itself back through others (function-level imports included, so a lazy import cannot hide a cycle)."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"multihop": "multihop", "signatures": "multihop.signatures", "retrievers": "multihop.retrievers",
                "programs": "multihop.programs", "optimize": "multihop.optimize", "benchmarks": "multihop.benchmarks"}
# what each layer may import from this project; the CLI (the orchestration room) and the lazy re-exports of
# multihop/__init__.py may import anything
# benchmarks/ holds scripts: no library module, the CLI included, imports it
ALLOWED = {
    "floor": {"floor"},
    "signatures": {"floor", "signatures"},
    "retrievers": {"floor", "retrievers"},
    "programs": {"floor", "signatures", "retrievers", "programs"},
    "optimize": {"floor", "signatures", "retrievers", "programs", "optimize"},
    "top": {"floor", "signatures", "retrievers", "programs", "optimize", "top"},
    "benchmarks": {"floor", "signatures", "retrievers", "programs", "optimize", "benchmarks"},
}


def modules() -> dict[str, Path]:
    """Every module of the project by its installed dotted name."""
    found = {}
    for folder, dotted in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((dotted, *parts))] = path
    return found


def layer(name: str) -> str:
    if re.fullmatch(r"multihop\.programs\.\w+\.cli", name):
        return "top"  # a method's command-line sub-app (``Method(cli=...)``): orchestration, read by the CLI only
    for sub in ("signatures", "retrievers", "programs", "optimize", "benchmarks"):
        if name == f"multihop.{sub}" or name.startswith(f"multihop.{sub}."):
            return sub
    if name == "multihop" or name == "multihop.cli" or name.startswith("multihop.cli."):
        return "top"
    return "floor"


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports anywhere in its source (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known
            targets |= submodules if len(submodules) == len(node.names) else submodules | {base}
    return {target for target in targets if target in known and target != name}


GRAPH = {name: imports(name, path, set(modules())) for name, path in modules().items()}


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_each_layer_imports_only_layers_below_it(name):
    wrong = sorted(target for target in GRAPH[name] if layer(target) not in ALLOWED[layer(name)])
    assert not wrong, f"{name} ({layer(name)}) imports {wrong}"


def test_no_import_cycle_between_modules():
    def reachable(start: str) -> set[str]:
        seen, todo = set(), [t for t in GRAPH[start] if not start.startswith(t + ".")]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo += [t for t in GRAPH[current] if not current.startswith(t + ".")]
        return seen

    cycles = sorted(name for name in GRAPH if name in reachable(name) and layer(name) != "top")
    assert not cycles, f"modules that import themselves back: {cycles}"


def test_benchmarks_hold_scripts_that_no_library_module_imports():
    for name, path in modules().items():
        if layer(name) != "benchmarks" or name in ("multihop.benchmarks", "multihop.benchmarks.common"):
            continue
        assert 'if __name__ == "__main__":' in path.read_text(), f"{name} is no script (no __main__ guard)"
    library = [name for name, targets in GRAPH.items() if layer(name) != "benchmarks"
               and any(layer(target) == "benchmarks" for target in targets)]
    assert not library, f"library modules that import benchmarks/: {library}"
