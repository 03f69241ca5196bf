"""multihop: five multi-hop RAG methods as DSPy programs on one shared stack.

Public names are imported lazily, so ``import multihop`` is fast and the floor never imports programs or
retrievers at import time.
"""

import os
from importlib import import_module

__version__ = "0.1.0"

# Offline (HF_HUB_OFFLINE, as the Makefile and the CLI's machines set it), nothing is fetched at run time: DSPy, through
# LiteLLM's variable, reads its bundled model metadata instead of failing to refresh it with a warning on every
# command. Online, the variable is left alone.
if os.environ.get("HF_HUB_OFFLINE") == "1":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")

_EXPORTS = {
    "load_dataset": "multihop.data.loaders",
    "build_corpus": "multihop.data.loaders",
    "load_corpus": "multihop.data.loaders",
    "Corpus": "multihop.data.corpus",
    "Passage": "multihop.data.corpus",
    "make_lm": "multihop.lm.backends",
    "configure_lm": "multihop.lm.backends",
    "BoundedJSONAdapter": "multihop.lm.adapter",
    "StageJSONAdapter": "multihop.lm.adapter",
    "evaluate": "multihop.evaluation.runner",
    "aevaluate": "multihop.evaluation.runner",
    "evaluate_all": "multihop.evaluation.runner",
    "results": "multihop.evaluation.results",
    "compare": "multihop.experiments.comparison",
    "Budget": "multihop.experiments.budget",
    "LLMJudge": "multihop.evaluation.metrics",
    "record_trace": "multihop.runtime.tracing",
    "load": "multihop.programs.saved",
    "save": "multihop.programs.saved",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'multihop' has no attribute {name!r}")
