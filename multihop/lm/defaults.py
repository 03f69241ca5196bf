"""The LM defaults, defined here and nowhere else (every other module imports them from this one): the LM a run uses
when none is given, the generation caps of a local and of any other LM, the engines a local LM runs on, how stage
replies are constrained, how long a served LM's request may take, and the server key a command sends, with the
environment variables that set those two. The module imports nothing, so the command line reads it at once."""

DEFAULT_LM = "local:smollm2"
"""The LM spec (:func:`multihop.lm.backends.make_lm`) a run uses unless one is given: the embedded SmolLM2."""

LOCAL_MAX_TOKENS = 128
"""A local model's generation cap (in process, or served by ``multihop serve``) when neither the call nor the LM sets
one."""

DEFAULT_MAX_TOKENS = 384
"""Any other LM's generation cap when neither the call nor the LM sets one: ``make_lm``'s, and the budget
:class:`~multihop.lm.adapter.BoundedJSONAdapter` plans a call's schema for."""

LOCAL_ENGINES = ("auto", "llamacpp", "transformers")
"""The engines a local LM runs on (``make_lm(engine=...)``, ``--engine``)."""

DEFAULT_ENGINE = "auto"
"""The engine unless one is given: llama.cpp for a GGUF model when llama-cpp-python is installed, else
transformers."""

STRUCTURED = ("auto", "json_schema", "json_object", "off")
"""How stage replies are constrained (``make_lm(structured=...)``, ``--structured``;
:func:`multihop.lm.backends.schema_form`)."""

DEFAULT_STRUCTURED = "auto"
"""The constraint unless one is given: a local model's schema; ``json_schema`` for ``hosted_vllm/`` and for
``openai/`` with an ``api_base``; none for other LMs."""

LM_TIMEOUT_ENV = "MULTIHOP_LM_TIMEOUT"
"""The environment variable that sets the seconds a served LM's request may take when the caller does not."""

DEFAULT_LM_TIMEOUT = 120.0
"""Those seconds when neither the caller nor :data:`LM_TIMEOUT_ENV` sets them."""

API_KEY_ENV = "MULTIHOP_API_KEY"
"""The environment variable that gives the server key a command sends (and ``multihop serve`` requires) unless
``--api-key`` gives one."""
