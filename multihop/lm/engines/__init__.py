"""Local LM engines behind DSPy's engine protocol (``complete(Request) -> Response``), all decoding under the
request's bounded JSON schema and reusing the KV state of a shared prompt prefix: :class:`TransformersEngine`
(``transformers``: any HF folder, LoRA adapters, GPUs), :class:`LlamaCppEngine` (``llama-cpp-python``: GGUF files,
LoRA adapters converted to GGUF) and :class:`ServedEngine` (a model ``multihop serve`` runs in another process).
:func:`multihop.lm.backends.make_lm` picks one."""

from .llamacpp import LlamaCppEngine, llama_cpp_available
from .served import ServedEngine
from .transformers import TransformersEngine

__all__ = ["LlamaCppEngine", "ServedEngine", "TransformersEngine", "llama_cpp_available"]
