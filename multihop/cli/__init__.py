"""The ``multihop`` command line: the orchestration room, the one part of ``multihop`` that imports upward
(programs, retrievers, optimizers and ``multihop.benchmarks.common``). ``app`` is the console script."""

from multihop.cli.app import app

__all__ = ["app"]
