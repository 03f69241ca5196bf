"""How the command line ends on an error: one line ``error: …`` on stderr naming what to change, exit code 2 for bad
input or arguments and 1 for a failure at run time, the traceback only with ``--debug`` (or ``MULTIHOP_DEBUG=1``).
A run that finished with questions ended in an error exits 3, or 4 when every question did
(:func:`multihop.cli.runs.exit_on_errors`)."""

from __future__ import annotations

import os
import sys
import traceback

import typer

from multihop.data.folders import ChecksumMismatchError
from multihop.lm.models import ModelNotInstalledError

BAD_INPUT = 2  # exit code: the command line, a file or a folder given is wrong
FAILURE = 1  # exit code: the run failed (an endpoint, the disk, a bug)
ERRORED = 3  # exit code: the run finished and some of its questions ended in an error (--allow-errors: 0)
ALL_ERRORED = 4  # exit code: the run finished and every question ended in an error (--allow-errors: 0)
INTERRUPTED = 130
# Exceptions that mean the input is wrong: a bad value or file (ValueError: DataFormatError, IndexMismatchError...),
# something missing (a file, a model not installed), a file that changed on disk.
INPUT_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, ModelNotInstalledError,
                ChecksumMismatchError)
# The modules an extra installs (pyproject.toml's optional dependencies), by the name they are imported as: a command
# that needs one says which extra to install.
EXTRAS = {"trl": "train", "datasets": "train", "accelerate": "train", "matplotlib": "report", "llama_cpp": "llamacpp",
          "uvicorn": "llamacpp", "ray": "ray", "mlflow": "mlflow", "sqlalchemy": "mlflow", "alembic": "mlflow",
          "bitsandbytes": "gpu"}


def debugging(argv: list[str]) -> bool:
    """Whether to show tracebacks: ``--debug`` among the options, or ``MULTIHOP_DEBUG`` set to a true value."""
    return "--debug" in argv or os.environ.get("MULTIHOP_DEBUG", "").lower() in ("1", "true", "yes")


def run(app, argv: list[str] | None = None) -> int:
    """Run the Typer ``app`` on ``argv`` (default: the process's arguments) and return its exit code, turning every
    error into one line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        code = app(args=argv, prog_name="multihop", standalone_mode=False)  # Ctrl-C and Exit(n) come back as n
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        code = INTERRUPTED
    except typer.TyperException as exc:  # Click's usage errors and bad parameters (typer.BadParameter)
        message_ = exc.format_message()
        return report(message_, BAD_INPUT, argv) if message_ else BAD_INPUT  # no message: the help was shown
    except INPUT_ERRORS as exc:
        return report(message(exc), BAD_INPUT, argv)
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            return report(message(exc), FAILURE, argv)
        return report(f"{message(exc)}: this command needs pip install 'multihop[{extra}]'", BAD_INPUT, argv)
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, the traceback with --debug
        return report(message(exc), FAILURE, argv)
    if code == INTERRUPTED:
        print("error: interrupted (a rerun resumes where this run stopped)", file=sys.stderr)
    return code if isinstance(code, int) else 0


def message(exc: BaseException) -> str:
    """An exception as one line: its message, else its type."""
    return " ".join(str(exc).split()) or type(exc).__name__


def report(text: str, code: int, argv: list[str]) -> int:
    if debugging(argv):
        traceback.print_exc()
    print(f"error: {text}", file=sys.stderr)
    return code
