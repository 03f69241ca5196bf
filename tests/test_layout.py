"""The layers of the library (docs/design.md, "Layout"), checked on the source: each layer imports only the layers
below it, and no module imports itself back through others (function-level imports included, so a lazy import cannot
hide a cycle).

From the bottom: ``data`` (files, question sets, corpora, folders), ``lm`` (models, engines, LM construction, serving),
``runtime`` (what every program call runs on: traces, spans, fan-out), ``evaluation`` (running any program, metrics,
intervals, shards, Ray, MLflow runs), then ``signatures`` and ``retrievers``
(neither imports the other), ``programs`` (the methods and baselines and their registry), ``optimize`` (compiling,
gold targets, students), ``experiments`` (the comparison, the demo) and at the top the command line (``multihop.cli``,
each method's ``cli`` sub-app) and the lazy re-exports of ``multihop/__init__.py``, which may import anything.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"multihop": "multihop", "signatures": "multihop.signatures", "retrievers": "multihop.retrievers",
                "programs": "multihop.programs", "optimize": "multihop.optimize"}
ORDER = [
    "data", "lm", "runtime", "evaluation", "signatures", "retrievers", "programs", "optimize", "experiments", "top"]
SIBLINGS = {frozenset({"signatures", "retrievers"})}  # layers at one height that do not import each other
ALLOWED = {name: {lower for lower in ORDER[:ORDER.index(name) + 1]
                  if lower == name or frozenset({lower, name}) not in SIBLINGS} for name in ORDER}


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
    """The layer of module ``name``: the subpackage of ``multihop`` it lies in."""
    if re.fullmatch(r"multihop\.programs\.(\w+\.)*\w+\.cli", name):
        return "top"  # a method's command-line sub-app (``Declaration(cli=...)``): orchestration, read by the CLI only
    if name == "multihop" or name == "multihop.cli" or name.startswith("multihop.cli."):
        return "top"
    sub = name.split(".")[1]
    assert sub in ORDER, f"{name} lies in no layer: put it in one of {', '.join(ORDER[:-1])}"
    return sub


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


def test_the_root_of_the_library_holds_only_its_layers():
    modules_at_root = sorted(path.name for path in (ROOT / "multihop").glob("*.py"))
    assert modules_at_root == ["__init__.py"]
    folders = {path.name for path in (ROOT / "multihop").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert folders == {"cli", "data", "lm", "runtime", "evaluation", "experiments", "student_adapters"}


def test_a_module_importing_a_higher_layer_is_found(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from multihop.programs import CoopRAG\n")
    name = "multihop.evaluation.planted"
    wrong = [target for target in imports(name, planted, set(modules())) if layer(target) not in ALLOWED[layer(name)]]
    assert wrong == ["multihop.programs"]
