"""Local LM engines behind DSPy's engine protocol (``complete(Request) -> Response``): :class:`TransformersEngine`
(``transformers``, any HF folder, LoRA adapters, GPUs) and :class:`LlamaCppEngine` (``llama-cpp-python``, GGUF
files, decoding under the signature's JSON schema). :func:`multihop.lms.make_lm` picks one."""

from .llamacpp import LlamaCppEngine, llama_cpp_available
from .transformers import TransformersEngine

__all__ = ["LlamaCppEngine", "TransformersEngine", "llama_cpp_available"]
