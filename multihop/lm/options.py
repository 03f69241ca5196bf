"""The LM a run uses, as every command and benchmark takes it: the spec, its server and key, a LoRA adapter, the
engine, the generation cap, the request timeout and the decoding (:class:`LMOptions`), with the help texts, the
argparse arguments that set them and the Typer options every command takes them as, the shared commands' and each
method's own (:func:`lm_options`, received as one :class:`CommandLM`; :func:`option_group`, the mechanism, also gives
the command line its other option groups).

Imports stay light (the LM modules load inside the methods), so the command line starts at once."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import os
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import typer

from multihop.lm.defaults import (
    API_KEY_ENV,
    DEFAULT_ENGINE,
    DEFAULT_LM,
    DEFAULT_LM_TIMEOUT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_STRUCTURED,
    LM_TIMEOUT_ENV,
    LOCAL_ENGINES,
    LOCAL_MAX_TOKENS,
    STRUCTURED,
)

LM_HELP = ("local:smollm2, local:<HF folder | .gguf>, local:<org/name> (a Hugging Face Hub model, downloaded to its "
           "cache when online), or a dspy.LM model string (openai/<model>, ollama_chat/<model>)")
API_BASE_HELP = ("base URL of an OpenAI-compatible server; with a local:<model> spec, the server `multihop serve` "
                 "runs")
API_KEY_HELP = (f"API key of the server (default: ${API_KEY_ENV}); provider variables such as OPENAI_API_KEY also "
                "work, through LiteLLM")
ADAPTER_HELP = "LoRA adapter folder for a local LM (from `multihop distill`)"
MAX_TOKENS_HELP = (f"generation cap per LM call (default: {LOCAL_MAX_TOKENS} for a local LM, {DEFAULT_MAX_TOKENS} "
                   "for a served one)")
TIMEOUT_HELP = (f"seconds one LM request may take before it is retried (twice, with backoff, as are HTTP 429 and 5xx "
                f"answers); default ${LM_TIMEOUT_ENV} or {DEFAULT_LM_TIMEOUT:g}, for a served LM")
STRUCTURED_HELP = ("how stage replies are constrained: auto (a local model's schema; json_schema for hosted_vllm/ and "
                   "for openai/ with --api-base), json_schema (vLLM, SGLang), json_object (llama-cpp-python's "
                   "server), off (free decoding)")
LM_PANEL = "LM options"  # the LM options in their own panel of --help
ENGINE_HELP = ("local LM engine: auto (llama.cpp for a GGUF model when llama-cpp-python is installed, a LoRA adapter "
               "converted to GGUF; else transformers), llamacpp or transformers")


def served_student(student: str | Path) -> tuple[str | None, Path | None]:
    """A ``--student`` value as (LM spec, distill folder): a folder is a local student ``(None, folder)``; anything
    else is a served one, ``SPEC`` or ``SPEC@DIR`` — the LM spec that reaches it (``openai/<lora-name>``, the name
    ``vllm serve --lora-modules name=DIR`` gives it) and the folder it was trained into, whose manifest says which
    stages it learnt (None: every stage of the program)."""
    text = str(student)
    if Path(text).is_dir():
        return None, Path(text)
    spec, at, folder = text.rpartition("@")
    if not at or not (Path(folder).is_dir() or "/" in folder or os.sep in folder):
        spec, folder = text, ""  # an @ of the model's own name (vertex_ai/claude-3-5-sonnet@20240620)
    if folder and not Path(folder).is_dir():
        raise ValueError(f"--student {student!r}: {folder} is not the student's `multihop distill` folder")
    parent = Path(spec).parent
    if "/" not in spec or (parent != Path(".") and parent.is_dir()):
        raise ValueError(f"--student {student!r} is neither a `multihop distill` folder (no such folder) nor an LM "
                         "spec (openai/<lora-name>[@DIR])")
    return spec, Path(folder) if folder else None


@dataclass(frozen=True)
class LMOptions:
    """The LM a run uses: its spec (``lm``), server (``api_base``, ``api_key``), LoRA ``adapter`` and ``engine``
    (local LMs), generation cap (``max_tokens``; None: the backend's default), the time a served LM's request may
    take (``timeout``; None: ``$MULTIHOP_LM_TIMEOUT`` or 120 s) and how replies are constrained (``structured``,
    :func:`multihop.lm.backends.schema_form`); each default is :mod:`multihop.lm.defaults`'. Other LMs of the run (a
    teacher, a judge, a prompt writer) share the server and key, and the engine and decoding choices."""

    lm: str = DEFAULT_LM
    api_base: str | None = None
    api_key: str | None = None
    adapter: str | None = None
    max_tokens: int | None = None
    engine: str = DEFAULT_ENGINE
    timeout: float | None = None
    structured: str = DEFAULT_STRUCTURED

    def make(self, spec: str | None = None, max_tokens: int | None = None):
        """``spec`` (default: this LM, with its adapter and cap) as a ``dspy.LM``; ``max_tokens`` replaces the cap."""
        from multihop.lm.backends import make_lm

        return make_lm(spec or self.lm, **self._settings(spec, max_tokens))

    def configure(self, spec: str | None = None, max_tokens: int | None = None):
        """:meth:`make` it and ``dspy.configure`` it with the adapter its spec runs best with."""
        from multihop.lm.backends import configure_lm

        return configure_lm(spec or self.lm, **self._settings(spec, max_tokens))

    def _settings(self, spec: str | None, max_tokens: int | None) -> dict:
        own = spec is None or spec == self.lm
        local = (spec or self.lm).startswith("local:")
        # a server address serves the run's own LM; another local LM (a judge, a student) runs in-process
        api_base = self.api_base if own or not local else None
        return {"adapter": self.adapter if own else None, "api_base": api_base, "api_key": self.api_key,
                "max_tokens": max_tokens or (self.max_tokens if own else None), "timeout": self.timeout,
                "structured": self.structured, **({"engine": self.engine} if local else {})}

    def student(self, student: str | Path) -> tuple:
        """A student's LM, and what identifies its weights (which keys the folders of its resumable runs): for a
        ``multihop distill`` folder, this LM with that LoRA adapter and the first 8 hex digits of its weights'
        sha256; for a served student, ``SPEC[@DIR]`` (:func:`served_student`), the LM of ``SPEC`` on this run's
        server (vLLM serves a LoRA under its own model name) and the spec."""
        from multihop.data.folders import sha256_file

        spec, _ = served_student(student)
        if spec is not None:  # on the run's server, under the run's cap
            return self.make(spec, max_tokens=self.max_tokens), spec
        weights = sha256_file(Path(student) / "adapter_model.safetensors")[:8]
        return dataclasses.replace(self, adapter=str(student)).make(), weights

    def default_adapter(self):
        """The adapter this LM runs under (:func:`multihop.lm.backends.spec_adapter`), without building it: the one a
        student's rows are rendered with, as its LM will be prompted."""
        from multihop.lm.backends import spec_adapter

        return spec_adapter(self.lm, self.api_base, self.structured)

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser, max_tokens: int | None = None) -> None:
        """``--lm --api-base --api-key --adapter --max-tokens`` on an argparse script (``max_tokens``: its default)."""
        parser.add_argument("--lm", default=DEFAULT_LM, help=LM_HELP)
        parser.add_argument("--api-base", default=None, help=API_BASE_HELP)
        parser.add_argument("--api-key", default=os.environ.get(API_KEY_ENV), help=API_KEY_HELP)
        parser.add_argument("--adapter", default=None, help=ADAPTER_HELP)
        parser.add_argument("--max-tokens", type=int, default=max_tokens, help=MAX_TOKENS_HELP)
        parser.add_argument("--engine", default=DEFAULT_ENGINE, choices=LOCAL_ENGINES,
                            help=ENGINE_HELP)
        parser.add_argument("--lm-timeout", type=float, default=None, help=TIMEOUT_HELP)
        parser.add_argument("--structured", default=DEFAULT_STRUCTURED, choices=STRUCTURED, help=STRUCTURED_HELP)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LMOptions:
        return cls(args.lm, args.api_base, args.api_key, args.adapter, args.max_tokens, args.engine, args.lm_timeout,
                   args.structured)


class CommandLM(LMOptions):
    """:class:`LMOptions` whose bad values (an unknown model, a missing adapter folder) end the command with one line
    naming the options to change."""

    def make(self, spec: str | None = None, max_tokens: int | None = None):
        with _lm_errors():
            return super().make(spec, max_tokens)

    def configure(self, spec: str | None = None, max_tokens: int | None = None):
        with _lm_errors():
            return super().configure(spec, max_tokens)


@contextmanager
def _lm_errors():
    try:
        yield
    except (FileNotFoundError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="the LM options (--lm, --adapter, --engine, --structured)"
                                 ) from exc


def option_group(param: str, options: dict[str, tuple[type, typer.models.OptionInfo]],
                 build: Callable[..., object]) -> Callable:
    """Give a command a group of options defined once: typer sees each of ``options`` (name → (type, option)) as a
    parameter of its own, through the signature this sets on the command (``__signature__``), and the command
    receives them together as its one parameter ``param``, ``build(**values)``."""

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        if param not in signature.parameters:
            raise TypeError(f"{command.__name__} takes no `{param}` parameter for its {param} options")
        kept = [p for p in signature.parameters.values() if p.name != param]
        added = [inspect.Parameter(f"{param}_{name}", inspect.Parameter.KEYWORD_ONLY, default=default,
                                   annotation=kind) for name, (kind, default) in options.items()]

        @functools.wraps(command)
        def run(**kwargs):
            group = build(**{name: kwargs.pop(f"{param}_{name}") for name in options})
            return command(**{param: group}, **kwargs)

        run.__signature__ = signature.replace(parameters=[*kept, *added])
        run.__annotations__ = {p.name: p.annotation for p in run.__signature__.parameters.values()}
        return run

    return decorate


def lm_options(*names: str, help: str = LM_HELP, max_tokens: int | None = None) -> Callable:
    """Give a command the LM options: the LM (``--lm``, or the option ``names``), ``--api-base``, ``--api-key``
    (default: ``$MULTIHOP_API_KEY``), ``--adapter``, ``--max-tokens`` (default ``max_tokens``), ``--engine``,
    ``--lm-timeout`` and ``--structured``. The command declares one parameter ``lm`` and receives them in it as a
    :class:`CommandLM`."""
    return option_group("lm", {
        "lm": (str, typer.Option(DEFAULT_LM, *(names or ("--lm",)), help=help, rich_help_panel=LM_PANEL)),
        "api_base": (str | None, typer.Option(None, "--api-base", help=API_BASE_HELP, rich_help_panel=LM_PANEL)),
        "api_key": (str | None, typer.Option(None, "--api-key", envvar=API_KEY_ENV, show_envvar=False,
                                             help=API_KEY_HELP, rich_help_panel=LM_PANEL)),
        "adapter": (str | None, typer.Option(None, "--adapter", help=ADAPTER_HELP, rich_help_panel=LM_PANEL)),
        "max_tokens": (int | None, typer.Option(max_tokens, "--max-tokens", min=1, help=MAX_TOKENS_HELP,
                                                rich_help_panel=LM_PANEL)),
        "engine": (str, typer.Option(DEFAULT_ENGINE, "--engine", help=ENGINE_HELP, rich_help_panel=LM_PANEL)),
        "timeout": (float | None, typer.Option(None, "--lm-timeout", envvar=LM_TIMEOUT_ENV, min=1.0,
                                               help=TIMEOUT_HELP, rich_help_panel=LM_PANEL)),
        "structured": (str, typer.Option(DEFAULT_STRUCTURED, "--structured", help=STRUCTURED_HELP,
                                         rich_help_panel=LM_PANEL)),
    }, CommandLM)
