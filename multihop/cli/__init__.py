"""The ``multihop`` command line: the orchestration room, the one part of ``multihop`` that imports upward
(programs, retrievers and optimizers). ``main`` is the console script: ``app`` with
every error as one line (:mod:`multihop.cli.errors`)."""

import sys

from multihop.cli.app import app
from multihop.cli.errors import run

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(app, argv))
