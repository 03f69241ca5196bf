"""The installable package holds the whole library: the wheel is built from the tree, never a hand list, so
every module under the package folders and the shipped student are in it; and (slow) the wheel alone, installed
into a fresh virtualenv on top of the project's dependencies, imports every module. The measurement scripts of
``benchmarks/`` are no part of it."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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
    assert not any(name.startswith(("multihop/benchmarks/", "benchmarks/")) for name in names)


@pytest.mark.slow
def test_the_wheel_alone_imports_every_module_in_a_fresh_virtualenv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # the project's dependencies from this environment (a .pth line adds its site-packages, not its .pth files,
    # so this checkout's editable install is not seen): the package itself comes from the wheel alone
    ours = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "dependencies.pth").write_text(ours + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--quiet", str(wheel)], check=True)
    modules = sorted(name.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for name in tree_files()
                     if name.endswith(".py") and not name.endswith("__main__.py"))  # running the CLI is no import
    script = ("import importlib, multihop, sys\n"
              "assert multihop.__file__.startswith(sys.argv[1]), multihop.__file__\n"
              "for name in sys.argv[2:]:\n    importlib.import_module(name)\n"
              "from multihop.programs import PROGRAMS\nprint(len(sys.argv) - 2, sorted(PROGRAMS))\n")
    result = subprocess.run([str(python), "-c", script, site, *modules], capture_output=True, text=True,
                            cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[0] == str(len(modules)) and "DualRAG" in result.stdout
