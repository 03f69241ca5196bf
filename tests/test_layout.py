"""The layers of the library (docs/design.md, "Layout"), checked on the source: each layer imports only the layers
below it, and no module imports itself back through others (function-level imports included, so a lazy import cannot
hide a cycle).

From the bottom: ``data`` (files, question sets, corpora, folders), ``lm`` (models, engines, LM construction, serving),
``runtime`` (what every program call runs on: traces, spans, fan-out; the console), ``evaluation`` (running any
program, metrics, intervals, shards, Ray, MLflow runs), then ``signatures`` and ``retrievers``
(neither imports the other), ``programs`` (the methods and baselines, each with its own command-line sub-app, and their
registry), ``optimize`` (compiling, gold targets, students), ``experiments`` (the comparison, the demo) and at the top
the command line (``multihop.cli``) and the lazy re-exports of ``multihop/__init__.py``, which may import anything. A
module's layer is its folder, with no exception.

Each method and baseline is reached through its declaration only: a shared module — any module outside a method's or
baseline's own package — imports no module of one and no program class by name (it reads ``PROGRAMS``). A package's
front (its ``__init__``) may import what lies inside it, which is how ``multihop.programs`` registers every method and
re-exports the classes. And no two shared modules share a name unless each one's docstring names the other (the same
concept's command and library function): a method's own modules (``program.py``, ``gold.py``, ``cli.py``, ...) play
the same role in each method and are not shared.
"""

import ast
import itertools
from collections import defaultdict
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
    if name == "multihop" or name == "multihop.cli" or name.startswith("multihop.cli."):
        return "top"
    sub = name.split(".")[1]
    assert sub in ORDER, f"{name} lies in no layer: put it in one of {', '.join(ORDER[:-1])}"
    return sub


def import_statements(name: str, path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """Every import in the source of module ``name`` (function-level ones included) as ``(module, names)``: ``import
    a.b`` is ``("a.b", ())``, ``from .c import d`` is ``("<package>.c", ("d",))``, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.append((base, tuple(alias.name for alias in node.names)))
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports anywhere in its source (relative imports resolved)."""
    targets = set()
    for base, names in import_statements(name, path):
        submodules = {f"{base}.{imported}" for imported in names} & known
        targets |= submodules if names and len(submodules) == len(names) else submodules | {base}
    return {target for target in targets if target in known and target != name}


MODULES = modules()
GRAPH = {name: imports(name, path, set(MODULES)) for name, path in MODULES.items()}


def declared_classes() -> dict[str, str]:
    """Each declared method's and baseline's class name → the module defining it (the library's, from the registry)."""
    from multihop.programs import PROGRAMS

    return {declaration.program.__name__: declaration.program.__module__ for declaration in PROGRAMS.declared()
            if declaration.program.__module__ in MODULES}


def own_units(classes: dict[str, str]) -> dict[str, str]:
    """Each declared class name → its method's or baseline's own unit: on the way to the module defining it, the child
    of the deepest package that holds two declared classes or more (``multihop.programs.cooprag``, a baseline's
    package ``multihop.programs.baselines.ircot``, or a module holding baselines alone,
    ``multihop.programs.baselines.single_step``)."""

    def holds(package: str) -> int:
        return sum(home == package or home.startswith(package + ".") for home in classes.values())

    units = {}
    for cls, home in classes.items():
        parts = home.split(".")
        shared = [i for i in range(1, len(parts)) if MODULES[".".join(parts[:i])].name == "__init__.py"
                  and holds(".".join(parts[:i])) >= 2]
        units[cls] = ".".join(parts[:shared[-1] + 1])
    return units


UNITS = own_units(declared_classes())


def unit_of(name: str) -> str | None:
    """The method's or baseline's own unit module ``name`` lies in, or None for a shared module."""
    return next((unit for unit in set(UNITS.values()) if name == unit or name.startswith(unit + ".")), None)


def method_reach(name: str, path: Path) -> list[str]:
    """What module ``name`` imports of a method or baseline that it may not: nothing when it lies in one's own unit,
    and for a package's front (its ``__init__``) nothing that lies inside that package; else every module of a unit
    and every declared program class it names."""
    if unit_of(name) is not None:
        return []
    inside = name + "." if path.name == "__init__.py" else None  # a package's front may import its contents

    def allowed(unit: str) -> bool:
        return inside is not None and unit.startswith(inside)

    found = set()
    for base, names in import_statements(name, path):
        for target in (base, *(f"{base}.{imported}" for imported in names)):
            unit = unit_of(target)
            if unit is not None and target in MODULES and not allowed(unit):
                found.add(target)
        if unit_of(base) is None:
            found |= {imported for imported in names if imported in UNITS and not allowed(UNITS[imported])}
    return sorted(found)


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


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_shared_modules_reach_a_method_through_its_declaration_only(name):
    reached = method_reach(name, MODULES[name])
    assert not reached, f"{name} imports {reached} of a method's own package: read it from PROGRAMS instead"


def test_every_declared_program_has_its_own_unit():
    assert {"multihop.programs.cooprag", "multihop.programs.baselines.ircot",
            "multihop.programs.baselines.single_step"} <= set(UNITS.values())
    assert not {"multihop.programs", "multihop.programs.baselines"} & set(UNITS.values())


@pytest.mark.parametrize(("source", "upward"), [
    ("from multihop.cli.shared_options import SET_OPT", "multihop.cli.shared_options"),
    ("from multihop.cli.programs import retriever_folder", "multihop.cli.programs"),
    ("from multihop.optimize.gold_targets import gold_trajectories", "multihop.optimize.gold_targets"),
])
def test_a_method_command_importing_the_command_line_is_found(tmp_path, source, upward):
    planted = tmp_path / "planted.py"
    planted.write_text(source + "\n")
    name = "multihop.programs.cooprag.planted"  # beside the method's cli.py: in the programs layer
    wrong = [target for target in imports(name, planted, set(MODULES)) if layer(target) not in ALLOWED[layer(name)]]
    assert layer(name) == "programs" and wrong == [upward]


@pytest.mark.parametrize(("name", "source", "reached"), [
    ("multihop.cli.planted", "from multihop.programs.cooprag.training import fine_tune",
     ["multihop.programs.cooprag.training"]),
    ("multihop.experiments.planted", "from multihop.programs import CoopRAG, PROGRAMS", ["CoopRAG"]),
    ("multihop.programs.planted", "from .baselines import IRCoT", ["IRCoT"]),
    ("multihop.programs.planted", "import multihop.programs.dualrag.sft", ["multihop.programs.dualrag.sft"]),
    ("multihop.cli.planted", "from multihop.programs import PROGRAMS", []),
    ("multihop.programs.cooprag.planted", "from multihop.programs import CoopRAG", []),  # its own method's
])
def test_a_shared_module_importing_a_method_is_found(tmp_path, name, source, reached):
    planted = tmp_path / "planted.py"
    planted.write_text(source + "\n")
    assert method_reach(name, planted) == reached


def test_a_package_front_imports_what_lies_inside_it_only(tmp_path):
    front = tmp_path / "__init__.py"
    front.write_text("from .cooprag import CoopRAG\nfrom .baselines import IRCoT\n")
    assert method_reach("multihop.programs", front) == []
    front.write_text("from multihop.programs import CoopRAG\n")
    assert method_reach("multihop.experiments", front) == ["CoopRAG"]


def docstring(name: str) -> str:
    return ast.get_docstring(ast.parse(MODULES[name].read_text())) or ""


def test_no_two_shared_modules_share_a_name_unless_each_names_the_other():
    by_name = defaultdict(list)
    for name, path in MODULES.items():
        if unit_of(name) is None and path.name != "__init__.py":
            by_name[name.rsplit(".", 1)[1]].append(name)
    unexplained = [(a, b) for names in by_name.values() for a, b in itertools.combinations(sorted(names), 2)
                   if b not in docstring(a) or a not in docstring(b)]
    assert not unexplained, (f"shared modules of one name whose docstrings do not name each other: {unexplained}; "
                             "name each for what it holds, or say in both that they are one concept's two layers")
