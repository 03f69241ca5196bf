"""Run configurations in files: ``--config run.toml`` on the commands that run something. Every option of the command
has a key — its long flag without the dashes (``max-tokens`` or ``max_tokens``), an argument its name — whose value
becomes the option's default, so a flag given on the command line overrides the file; a key that is no option of the
command is one line naming it. The configuration the run resolved (every option, from the file, the command line or
the defaults; never ``api-key``) is written as ``config.toml`` into its output folder, so that folder reproduces
itself: ``multihop eval --config runs/x/config.toml``.
"""

from __future__ import annotations

import enum
import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path

import tomli_w
import typer

from multihop.data.paths import atomic_write_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_FILE = "config.toml"
SECRET_KEYS = {"api_key"}  # never written into a run folder
CONFIG_HELP = "a TOML file of this command's options (keys: the long flags without dashes); flags given here win"


def key_of(param) -> str:
    """A parameter's key in a configuration file: its first long flag without the dashes, in snake case (an argument:
    its name)."""
    flags = [opt for opt in getattr(param, "opts", []) if opt.startswith("--")]
    return (flags[0][2:] if flags else param.name).replace("-", "_")


def load_config(ctx: typer.Context, param, path: Path | None) -> Path | None:
    """The ``--config`` callback (eager: before every other option): the file's values become the command's
    defaults; a file that is no TOML or names no option of the command is refused in one line."""
    if path is None or ctx.resilient_parsing:
        return path
    try:
        values = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="--config") from None
    params = {key_of(p): p for p in ctx.command.params if p.name not in ("config", "help")}
    unknown = [key for key in values if key.replace("-", "_") not in params]
    if unknown:
        raise typer.BadParameter(f"{path}: {unknown[0]} is no option of `multihop {ctx.info_name}` (its keys: "
                                 f"{', '.join(sorted(params))})", param_hint="--config")
    ctx.default_map = {**(ctx.default_map or {}),
                       **{params[key.replace("-", "_")].name: pairs(value) for key, value in values.items()}}
    return path


def pairs(value):
    """A file's value as its option takes it: a table (``[lm-for]``, ``"Gemma2-9B" = "SPEC"``) as the ``KEY=VALUE``
    values of a repeatable option; anything else as it is."""
    return [f"{key}={item}" for key, item in value.items()] if isinstance(value, dict) else value


def resolved(ctx: typer.Context) -> dict:
    """The configuration a command resolved, by key: every option with a value, secrets left out."""
    values = {}
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        key = key_of(param)
        if param.name in ("config", "help") or key in SECRET_KEYS or value is None or value == ():
            continue
        values[key] = _plain(value)
    return values


def _plain(value):
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def configurable(out: str = "out", after: bool = False) -> Callable:
    """Give a command ``--config FILE`` and write the configuration it resolved into its output folder (the
    parameter ``out``) as :data:`CONFIG_FILE`: before the command runs (a run folder that is interrupted keeps it),
    or ``after`` it succeeded, for a folder the command writes whole (an index, a compiled program, an adapter)."""

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        added = [inspect.Parameter("config_context", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
                 inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=Path | None,
                                   default=typer.Option(None, "--config", is_eager=True, callback=load_config,
                                                        exists=True, dir_okay=False, help=CONFIG_HELP))]

        @functools.wraps(command)
        def run(config_context: typer.Context, config: Path | None = None, **kwargs):
            folder, text = config_context.params.get(out), tomli_w.dumps(resolved(config_context))
            if folder is not None and not after:
                Path(folder).mkdir(parents=True, exist_ok=True)
                atomic_write_text(Path(folder) / CONFIG_FILE, text)
            result = command(**kwargs)
            if folder is not None and after:
                atomic_write_text(Path(folder) / CONFIG_FILE, text)
            return result

        run.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *added])
        run.__annotations__ = {p.name: p.annotation for p in run.__signature__.parameters.values()}
        return run

    return decorate
