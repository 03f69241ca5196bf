"""The installable package holds the whole library: the wheel is built from the tree, never a hand list, so
every module under the package folders, the shipped student and the typing marker are in it; (slow) the wheel alone,
installed into a fresh virtualenv on top of the base dependencies only (no extra), imports every module but those an
extra is for; the declared dependencies are what the code imports (deptry); the version is written once. The
measurement scripts of ``benchmarks/`` are no part of it."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"multihop": "multihop", "signatures": "multihop/signatures", "programs": "multihop/programs",
           "retrievers": "multihop/retrievers", "optimize": "multihop/optimize"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a copy of this checkout (no build/ folder of an earlier build, none left behind here)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    shutil.copytree(ROOT, source, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "runs", ".pytest_cache", ".ruff_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w",
                    str(out), str(source)], check=True, capture_output=True)
    return next(out.glob("multihop-*.whl"))


def tree_files() -> set[str]:
    """Every ``.py`` file under the package folders and every file of the shipped student, by its path in a wheel."""
    files = {f"{installed}/{path.relative_to(ROOT / folder)}" for folder, installed in FOLDERS.items()
             for path in (ROOT / folder).rglob("*.py") if "__pycache__" not in path.parts}
    adapters = ROOT / "multihop" / "student_adapters"
    shipped = [path for path in adapters.rglob("*") if path.is_file() and not path.name.startswith(".")]
    return files | {f"multihop/{path.relative_to(ROOT / 'multihop')}" for path in shipped}


def test_the_wheel_holds_every_module_and_the_shipped_student(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not tree_files() - names, sorted(tree_files() - names)
    stale = {name for name in names if name.endswith(".py")} - tree_files()  # e.g. a module left in build/lib
    assert not stale, sorted(stale)
    assert "multihop/programs/dualrag/program.py" in names and "multihop/programs/baselines/ircot/program.py" in names
    assert "multihop/py.typed" in names  # PEP 561: type checkers read the annotations
    assert not any(name.startswith(("multihop/benchmarks/", "benchmarks/")) for name in names)


# the modules an extra brings what they import (`pip install 'multihop[<extra>]'`): the base install promises the rest
EXTRA_MODULES = {"multihop.optimize.student_trainer": "train", "multihop.lm.engines.llamacpp_sampler": "llamacpp",
                 "multihop.lm.engines.llamacpp_prompt": "llamacpp"}


def base_distributions() -> set[str]:
    """The installed distributions ``pip install .`` brings: the project's base dependencies (pyproject.toml, no
    extra) and theirs, recursively, with the extras each names (``dspy[optuna]``), by canonical name."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    seen: dict[str, set[str]] = {}
    todo = [Requirement(line) for line in project["dependencies"]]
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name, extras = canonicalize_name(requirement.name), set(requirement.extras)
        if name in seen and extras <= seen[name]:
            continue
        seen[name] = seen.get(name, set()) | extras
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        for line in requires:
            needed = Requirement(line)
            if needed.marker is None or any(needed.marker.evaluate({"extra": extra}) for extra in ("", *seen[name])):
                needed.marker = None
                todo.append(needed)
    return set(seen)


def base_site(folder: Path) -> Path:
    """A site-packages folder holding only :func:`base_distributions` (links to this environment's copies): what a
    fresh ``pip install .`` would install, without a download."""
    from importlib.metadata import distributions

    from packaging.utils import canonicalize_name

    wanted = base_distributions()
    folder.mkdir()
    for dist in distributions():
        if canonicalize_name(dist.metadata["Name"]) not in wanted or canonicalize_name(dist.metadata["Name"]) == \
                "multihop":
            continue
        site = Path(dist.locate_file(""))
        for top in {Path(str(file)).parts[0] for file in dist.files or [] if not str(file).startswith("..")}:
            if (site / top).exists() and not (folder / top).exists():
                (folder / top).symlink_to(site / top)
    return folder


def test_the_base_install_holds_what_the_extras_do_not():
    base = base_distributions()
    assert {"dspy", "torch", "faiss-cpu", "typer", "numpy"} <= base
    assert not {"trl", "ray", "mlflow-skinny", "llama-cpp-python", "pytest"} & base


@pytest.mark.slow
def test_the_wheel_alone_imports_every_module_the_base_install_promises(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # the base dependencies only, linked from this environment (no extra: no trl, Ray, MLflow, llama.cpp, pytest)
    Path(site, "dependencies.pth").write_text(str(base_site(tmp_path / "base")) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--quiet", str(wheel)], check=True)
    modules = sorted(name.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for name in tree_files()
                     if name.endswith(".py") and not name.endswith("__main__.py"))  # running the CLI is no import
    promised = [name for name in modules if name not in EXTRA_MODULES]
    script = ("import importlib, multihop, sys\n"
              "assert multihop.__file__.startswith(sys.argv[1]), multihop.__file__\n"
              "for name in sys.argv[2:]:\n    importlib.import_module(name)\n"
              "from multihop.programs import PROGRAMS\nprint(len(sys.argv) - 2, sorted(PROGRAMS))\n")
    result = subprocess.run([str(python), "-c", script, site, *promised], capture_output=True, text=True,
                            cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[0] == str(len(promised)) and "DualRAG" in result.stdout
    for name, extra in EXTRA_MODULES.items():  # each extra's module needs it: listed here for that reason only
        missing = subprocess.run([str(python), "-c", f"import {name}"], capture_output=True, text=True, cwd=tmp_path,
                                 env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
        assert missing.returncode != 0 and "ModuleNotFoundError" in missing.stderr, (name, extra)


def test_declared_dependencies_are_what_the_code_imports():
    deptry = shutil.which("deptry", path=str(Path(sys.executable).parent))
    if deptry is None:
        pytest.skip("pip install 'multihop[dev]' for deptry")
    result = subprocess.run([deptry, "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_the_version_is_written_once_and_the_citation_agrees():
    import multihop

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert f'version: "{multihop.__version__}"' in (ROOT / "CITATION.cff").read_text()
    assert (ROOT / "multihop" / "py.typed").is_file()
