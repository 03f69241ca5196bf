"""A served local LM: llama-cpp-python's OpenAI-compatible server on one GGUF model, so several processes share one
copy of the weights (``multihop serve`` runs it with uvicorn).

Clients reach it with ``make_lm("local:smollm2", api_base="http://127.0.0.1:8000/v1")``
(:class:`~multihop.lm.engines.served.ServedEngine`: the in-process engines' bounded schema decoding) or as any
OpenAI-compatible endpoint (``make_lm("openai/<model>", api_base=...)``, free decoding: DSPy sends no schema to a model
it does not know, and this server refuses the ``json_schema`` form it would send). The server is llama-cpp-python's own
(FastAPI and uvicorn, installed with the ``llamacpp`` extra); it runs the model on the physical cores with the
in-process engine's context, a LoRA student converted to GGUF (:mod:`multihop.lm.engines.lora`), and the same AMX
workaround. The model's name on the server carries its weights' checksum (and its adapter's), so clients key DSPy's
cache by the exact weights. llama-cpp-python's server settings also read environment variables (``N_GPU_LAYERS``...);
the model, context, threads and adapter set here take precedence, and ``CONFIG_FILE``, which would replace them, is
refused.

This module is the server; :mod:`multihop.cli.serving` is its command (``multihop serve``), the command line's layer
over it.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
from pathlib import Path

from multihop.lm.backends import check_adapter, llamacpp_weights, local_gguf
from multihop.lm.engines.llamacpp import MAX_CONTEXT, llama_cpp_available, physical_cores, plain_weight_buffers

SERVER_MODULES = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address only this machine reaches (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def server_app(spec: str, port: int, host: str = "127.0.0.1", adapter: Path | None = None, api_key: str | None = None,
               insecure: bool = False):
    """llama-cpp-python's server application with the model of ``spec`` loaded; ``ValueError`` says what to change
    when the spec is not a local GGUF model, the server's packages are missing, or the host is reachable from other
    machines while no ``api_key`` guards it (unless ``insecure``). With ``api_key`` every request must carry it as a
    bearer token (401 otherwise)."""
    if not is_loopback(host) and not api_key and not insecure:
        raise ValueError(f"--host {host} opens the model to the network: give --api-key (or $MULTIHOP_API_KEY) so "
                         "only clients with the key are answered, or --insecure to serve it to anyone")
    if not spec.startswith("local:") or local_gguf(spec.removeprefix("local:")) is None:
        raise ValueError(f"{spec!r} is not a local GGUF model: serve local:smollm2 or local:<file.gguf>")
    if os.environ.get("CONFIG_FILE"):
        raise ValueError("CONFIG_FILE is set: llama-cpp-python's server would serve its models instead; unset it")
    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if not llama_cpp_available() or missing:
        raise ValueError("serving needs llama-cpp-python with its server packages: `pip install -e '.[llamacpp]'` "
                         f"(missing: {', '.join(missing) or 'llama-cpp-python'})")
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    if adapter is not None:
        try:
            check_adapter(Path(adapter), spec.removeprefix("local:"))
        except FileNotFoundError as exc:
            raise ValueError(str(exc)) from None
    weights = llamacpp_weights(spec.removeprefix("local:"), adapter)  # one file: the server builds one model
    threads = physical_cores()
    model = ModelSettings(model=str(weights.gguf), model_alias=weights.identity, n_ctx=MAX_CONTEXT, n_threads=threads,
                          n_threads_batch=threads, lora_path=str(weights.lora) if weights.lora else None,
                          verbose=False)
    from multihop.lm.engines.llamacpp_sampler import models_built_guided

    with plain_weight_buffers(), models_built_guided():  # replies under a schema decoded as the engine decodes them
        return create_app(server_settings=ServerSettings(host=host, port=port, api_key=api_key or None),
                          model_settings=[model])
