"""The choices of the options that name something from a registry — programs, engines, structured modes, first
stages, rerankers, token-state forms, optimizers — shown in ``--help`` and offered by shell completion. They are read
from the registries when help or a completion is asked for, so a plain command starts without importing them; the
command itself checks the value (a wrong one is one line naming the choices)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def _programs() -> list[str]:
    from multihop.programs import PROGRAMS

    return [method.name for method in PROGRAMS.declared()]


def _engines() -> list[str]:
    from multihop.lm.defaults import LOCAL_ENGINES

    return list(LOCAL_ENGINES)


def _structured() -> list[str]:
    from multihop.lm.defaults import STRUCTURED

    return list(STRUCTURED)


def _cached_first_stages() -> list[str]:
    from multihop.retrievers import CACHED_FIRST_STAGES

    return list(CACHED_FIRST_STAGES)


def _retriever_kinds() -> list[str]:
    from multihop.retrievers.storage import FIRST_STAGES

    return list(FIRST_STAGES)  # what build_retriever builds (multihop index build)


def _rerankers() -> list[str]:
    from multihop.retrievers.rerankers import choices

    return ["none", *choices()]


def _token_states() -> list[str]:
    from multihop.retrievers import TOKEN_STATES
    from multihop.retrievers.plaid_codec import plaid_forms

    return [*TOKEN_STATES, *plaid_forms()]


def _optimizers() -> list[str]:
    from multihop.optimize import OPTIMIZERS

    return list(OPTIMIZERS)


# option → its choices; (command, option) where one option means other things in other commands
CHOICES: dict[str | tuple[str, str], Callable[[], list[str]]] = {
    "--program": _programs, "--engine": _engines, "--structured": _structured, "--first-stage": _cached_first_stages,
    ("build", "--first-stage"): _retriever_kinds, "--rerank": _rerankers, "--token-states": _token_states,
    "--optimizer": _optimizers,
}
PROGRAMS_NOTE = "programs and their switches: `multihop programs`; names as the papers spell them work too"


def wanted(args: list[str]) -> bool:
    """Whether the command line ``args`` (the sub-command's arguments, else the process's) asks for help, or this
    process completes a command line: the only times the choices are read."""
    return any(arg in ("--help", "-h") for arg in [*args, *sys.argv[1:]]) or any(
        name.endswith("_COMPLETE") for name in os.environ)


def describe_choices(command) -> None:
    """Name the choices of ``command``'s options (and its sub-commands') in their help, and offer them to shell
    completion; once a command (a Typer command: its Click is Typer's own)."""
    if getattr(command, "_choices_described", False):
        return
    command._choices_described = True
    for param in command.params:
        choices = next((CHOICES[key] for key in ((command.name, opt) for opt in param.opts) if key in CHOICES),
                       None) or next((CHOICES[opt] for opt in param.opts if opt in CHOICES), None)
        if choices is None or param.param_type_name != "option":
            continue
        names = choices()
        note = f"; {PROGRAMS_NOTE}" if "--program" in param.opts else ""
        param.help = f"{param.help or ''} (choose from: {', '.join(names)}{note})".strip()  # no [ ]: Rich markup
        param._custom_shell_complete = lambda ctx, param, incomplete, names=names: [  # Typer's completion hook
            name for name in names if name.lower().startswith(incomplete.lower())]
    for sub in getattr(command, "commands", {}).values():
        describe_choices(sub)
