"""The package list, discovered from the tree: ``multihop`` and the top-level folders installed as its subpackages
(``programs/`` → ``multihop.programs``, ...), every package below them found by setuptools, so a new method's package
ships without a hand-kept list. Everything else about the project is in pyproject.toml."""

from setuptools import find_packages, setup

PACKAGE_DIRS = {"multihop": "multihop", "multihop.signatures": "signatures", "multihop.programs": "programs",
                "multihop.retrievers": "retrievers", "multihop.optimize": "optimize"}

setup(
    package_dir=PACKAGE_DIRS,
    packages=[f"{package}.{sub}" if sub else package
              for package, folder in PACKAGE_DIRS.items() for sub in ["", *find_packages(folder)]],
)
