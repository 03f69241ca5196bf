"""``multihop serve``: one local model behind an OpenAI-compatible server on loopback; the command over the server
itself, :mod:`multihop.lm.serving`."""

from __future__ import annotations

from pathlib import Path

import typer

from multihop.lm.defaults import API_KEY_ENV, DEFAULT_LM
from multihop.runtime.console import console


def serve_cmd(
    lm: str = typer.Option(DEFAULT_LM, "--lm", help="a local GGUF model: local:smollm2 or local:<file.gguf>"),
    port: int = typer.Option(8000, "--port", help="the port to listen on", min=1, max=65535),
    host: str = typer.Option("127.0.0.1", "--host", help="the address to listen on (loopback by default)"),
    adapter: Path | None = typer.Option(None, "--adapter", help="a LoRA adapter folder from `multihop distill`"),
    api_key: str | None = typer.Option(None, "--api-key", envvar=API_KEY_ENV, show_envvar=False,
                                       help=f"the key clients must send (default: ${API_KEY_ENV}); needed to serve "
                                       "on an address other machines reach"),
    insecure: bool = typer.Option(False, "--insecure", help="serve on a non-loopback --host without a key"),
):
    """Serve a local model over the OpenAI API (llama-cpp-python's server) so that several processes share it. Off
    loopback it answers only clients with --api-key, unless told --insecure."""
    from multihop.lm.serving import server_app

    try:
        app = server_app(lm, port, host, adapter, api_key=api_key, insecure=insecure)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:  # RuntimeError: a model not installed or corrupt
        raise typer.BadParameter(str(exc), param_hint="--lm / --adapter / --host") from exc
    import uvicorn  # checked by server_app

    console.print(f"serving {lm} on http://{host}:{port}/v1 — clients pass --lm {lm} --api-base http://{host}:{port}/v1")
    uvicorn.run(app, host=host, port=port, log_level="warning")
