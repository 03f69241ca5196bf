"""What the tests share: a scripted LM, a stage script that answers each stage by its signature, a fixed retriever,
a program that echoes, and example factories."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import dspy
import pytest
from dspy.lm15 import Message, Response, TextPart, TokenLogprob, Usage

from multihop.data.corpus import Passage
from multihop.programs import MultihopProgram
from multihop.retrievers import BM25Retriever
from multihop.retrievers.query import Hits

ROOT = Path(__file__).resolve().parent.parent  # the repository
Reply = dict | Callable[[str], dict]


class ScriptedEngine:
    """Answers ``respond(prompt_text) -> {field: value}`` in the ChatAdapter format; usage = words in / words out;
    asked for token log-probabilities, :meth:`logprobs` gives them."""

    def __init__(self, respond: Callable[[str], dict]):
        self.respond, self.requests = respond, []

    def complete(self, request) -> Response:
        prompt = (request.system or "") + "\n".join(m.text or "" for m in request.messages)
        self.requests.append(prompt)
        fields = self.respond(prompt)
        text = "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in fields.items()) + "[[ ## completed ## ]]"
        return Response(id=None, model="scripted", message=Message.assistant((TextPart(text),)), finish_reason="stop",
                        usage=Usage(input_tokens=len(prompt.split()), output_tokens=len(text.split())),
                        logprobs=self.logprobs(text) if request.config.logprobs is not None else None)

    def logprobs(self, text: str) -> tuple[TokenLogprob, ...]:
        """One token a word of the reply (with the space before it), each certain (log-probability 0)."""
        return tuple(TokenLogprob(token=word, logprob=0.0) for word in re.findall(r"\s*\S+", text))

    def close(self):
        pass


def scripted_lm(respond: Callable[[str], dict], name: str = "scripted", cache: bool = True
                ) -> tuple[dspy.LM, ScriptedEngine]:
    """``cache=False`` makes every call reach ``respond``, for scripts whose replies change between identical
    prompts (a verdict that fails, then passes)."""
    engine = ScriptedEngine(respond)
    return dspy.LM(f"local/{name}", engine=engine, cache=cache), engine


class StageScript:
    """A scripted LM for programs: it tells which stage a prompt is for by the stage's signature instructions (every
    instruction line of the signature is in the prompt; the most specific signature wins) and answers with
    ``replies[stage]``, a dict of output fields or a function of the prompt. The stages are those of the programs
    attached (at construction or with :meth:`attach`); ``seen`` lists the stages called, in order."""

    def __init__(self, replies: dict[str, Reply], *programs: dspy.Module, cache: bool = False,
                 name: str = "scripted"):
        self.signatures: list[tuple[str, type[dspy.Signature]]] = []
        self.replies, self.seen = dict(replies), []
        self.lm, self.engine = scripted_lm(self.respond, name=name, cache=cache)
        for program in programs:
            self.attach(program)

    def attach(self, program: dspy.Module) -> dspy.Module:
        """Answer ``program``'s stages too; returns the program."""
        self.signatures += [(stage, predictor.signature) for stage, predictor in program.named_predictors()]
        return program

    def stage_of(self, prompt: str) -> str:
        matched: dict[str, int] = {}
        for stage, signature in self.signatures:
            lines = [line.strip() for line in signature.instructions.splitlines() if line.strip()]
            if lines and all(line in prompt for line in lines):
                matched[stage] = max(matched.get(stage, 0), len(lines))
        best = [stage for stage, size in matched.items() if size == max(matched.values(), default=0)]
        if len(best) != 1:
            raise AssertionError(f"{len(best)} stages match this prompt: {prompt[:300]}")
        return best[0]

    def prompts_of(self, stage: str) -> list[str]:
        """The prompts the LM was sent for ``stage``, in order (a script without the cache: one a call)."""
        return [prompt for seen, prompt in zip(self.seen, self.engine.requests, strict=True) if seen == stage]

    def respond(self, prompt: str) -> dict:
        stage = self.stage_of(prompt)
        self.seen.append(stage)
        reply = self.replies[stage]
        return reply(prompt) if callable(reply) else reply


def paris_data(tmp_path: Path, monkeypatch) -> Path:
    """A MULTIHOP_DATA whose MuSiQue dev file holds one question ("Capital of France?", Paris, with its gold
    paragraph), and a MULTIHOP_HOME of the test's own."""
    import json

    data = tmp_path / "data"
    (data / "musique" / "dev").mkdir(parents=True)
    records = [{"id": "q1", "question": "Capital of France?", "answers": ["Paris"],
                "paragraphs": [{"title": "France", "text": "Paris is the capital of France.", "is_supporting": True}]}]
    (data / "musique" / "dev" / "musique_qa_100.json").write_text(json.dumps(records))
    monkeypatch.setenv("MULTIHOP_DATA", str(data))
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    return data


def data_root() -> Path:
    """``MULTIHOP_DATA``, or the test is skipped (the Makefile points it at ../shared/data)."""
    value = os.environ.get("MULTIHOP_DATA")
    if not value or not Path(value).is_dir():
        pytest.skip("MULTIHOP_DATA is not set (the Makefile points it at ../shared/data)")
    return Path(value)


def field(prompt: str, name: str) -> str:
    """The value of an input field in the last (non-demo) user message of a ChatAdapter prompt."""
    value = prompt.rsplit(f"[[ ## {name} ## ]]", 1)[1].split("[[ ##", 1)[0]
    return value.split("Respond with the corresponding output fields", 1)[0].strip()


class StaticRetriever(dspy.Module):
    """A retriever that returns fixed passages and counts its calls."""

    def __init__(self, passages: list[Passage]):
        super().__init__()
        self.passages, self.calls = passages, []

    def forward(self, query, k=5):
        self.calls.append((query, k))
        hits = self.passages[:k]
        return Hits(passages=[p.render() for p in hits], ids=[p.id for p in hits],
                    scores=[1.0 - i / 10 for i in range(len(hits))])


class KeyedRetriever(dspy.Module):
    """The passages listed for each query (``default``'s for any other), recording every query and k."""

    def __init__(self, by_query: dict[str, list[Passage]], default: list[Passage]):
        super().__init__()
        self.by_query, self.default, self.calls = by_query, default, []

    def forward(self, query, k=5):
        self.calls.append((query, k))
        hits = self.by_query.get(query, self.default)[:k]
        return Hits(passages=[p.render() for p in hits], ids=[p.id for p in hits], scores=[1.0] * len(hits))


class Echo(MultihopProgram):
    """Answers every question with a fixed answer; can be told to crash or die on given questions (faults injected,
    not settings: they are not part of its ``config()``, as a crash is not part of a run)."""

    def __init__(self, answer="x"):
        super().__init__()
        self.answer, self.fail_on, self.die_on, self.seen = answer, set(), set(), []

    @classmethod
    def faulty(cls, fail_on=(), die_on=()) -> Echo:
        """An Echo that raises ``RuntimeError`` on the questions ``fail_on`` and dies (``KeyboardInterrupt``) on
        ``die_on``."""
        program = cls()
        program.fail_on, program.die_on = set(fail_on), set(die_on)
        return program

    def forward(self, question):
        self.seen.append(question)
        if question in self.die_on:
            raise KeyboardInterrupt
        if question in self.fail_on:
            raise RuntimeError("boom")
        return dspy.Prediction(answer=self.answer, passage_ids=["g1", "n1"])


def example(i: int, answer: str | None = None, **fields) -> dspy.Example:
    """Question ``i`` as the data loaders build one: ``question N``, its ``answer`` (default ``answer N``) and
    ``answers``."""
    answer = f"answer {i}" if answer is None else answer
    return dspy.Example({"id": f"q{i}", "question": f"question {i}", "answer": answer, "answers": [answer],
                         **fields}).with_inputs("question")


def examples(n: int, **fields) -> list[dspy.Example]:
    return [example(i, **fields) for i in range(n)]


def echo_examples(n: int) -> list[dspy.Example]:
    """Questions for :class:`Echo` (answer "x"): the even ones are right, each has two gold passages."""
    return [example(i, answer="x" if i % 2 == 0 else "y", gold_passage_ids=["g1", "g2"]) for i in range(n)]


def uncached_dspy() -> None:
    """DSPy without its request cache in this process (a Ray worker's setup hook in :func:`local_ray`): every request
    reaches the LM and counts its tokens, as a first run's do."""
    dspy.cache = dspy.clients.Cache(enable_disk_cache=False, enable_memory_cache=False, disk_cache_dir=None)


@contextmanager
def local_ray(*folders: Path):
    """A local Ray cluster of two CPUs for the test, its workers importing the tests' helpers and the modules of
    ``folders``, with DSPy's cache off (:func:`uncached_dspy`); shut down after."""
    ray = pytest.importorskip("ray")
    paths = [str(ROOT / "tests"), *map(str, folders), *sys.path]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)},
                          "worker_process_setup_hook": uncached_dspy})
    try:
        yield ray
    finally:
        ray.shutdown()


def musique_subset(folder: Path, count: int) -> Path:
    """A MULTIHOP_DATA in ``folder`` whose MuSiQue dev file holds the first ``count`` questions of the shipped one
    (its index: their paragraphs)."""
    import json

    target = folder / "musique" / "dev" / "musique_qa_100.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(json.loads((data_root() / "musique/dev/musique_qa_100.json").read_text())[:count]))
    return folder


@contextmanager
def loopback_on_musique(tmp_path: Path, monkeypatch, count: int = 4):
    """The first ``count`` MuSiQue dev questions as MULTIHOP_DATA (:func:`musique_subset`), a MULTIHOP_HOME of the
    test's own and DSPy's cache off (every run asks the LM and counts its tokens), around the loopback server: yields
    the LM flags of a command that runs on it."""
    from multihop.lm.loopback import loopback_server

    monkeypatch.setenv("MULTIHOP_DATA", str(musique_subset(tmp_path / "data", count)))
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(dspy, "cache", dspy.cache)
    uncached_dspy()
    with loopback_server(latency=0.0, lifetime=600) as server:
        yield ["--lm", "hosted_vllm/loopback", "--api-base", server.api_base]


def without_seconds(value):
    """``value`` (JSON) without the seconds anything took: all that two runs of the same questions on a deterministic
    LM differ in."""
    if isinstance(value, dict):
        return {key: without_seconds(item) for key, item in value.items() if "seconds" not in key}
    if isinstance(value, list):
        return [without_seconds(item) for item in value]
    return value


def runs_rows(folder: Path) -> dict:
    """The rows of every evaluation folder under ``folder`` (a comparison's, a reproduction's), by its path there,
    without their seconds."""
    from multihop.data.jsonl import read_rows

    return {str(path.parent.relative_to(folder)): without_seconds(read_rows(path))
            for path in sorted(folder.rglob("results.jsonl"))}


def tiny_causal_lm(folder, texts: list[str], seed: int = 0):
    """A 2-layer Llama with a byte-level BPE tokenizer trained on ``texts`` and SmolLM2's ChatML chat template, saved
    to ``folder``: the real code paths of local models and students in seconds on a CPU, without converting the
    SmolLM2 GGUF. ``seed`` draws its weights (another seed: another base model)."""
    import torch
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>")
    tokenizer.chat_template = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
                               "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
                               "{{ '<|im_start|>assistant\\n' }}{% endif %}")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, eos_token_id=tokenizer.eos_token_id,
                         initializer_range=0.5)  # wide logits, so a small adapter can move them
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def spy_schemas(monkeypatch) -> list:
    """The JSON schema of every generation the local transformers engine runs from here on, in order."""
    from multihop.lm.engines import TransformersEngine

    schemas = []
    original = TransformersEngine.generate

    def spy(self, messages, config, max_tokens, schema):
        schemas.append(schema)
        return original(self, messages, config, max_tokens, schema)

    monkeypatch.setattr(TransformersEngine, "generate", spy)
    return schemas


def tiny(folder, layers: int) -> str:
    """A random BERT of ``layers`` layers (hidden size 32, a character vocabulary) saved as a sentence-transformers
    folder: the training code on a real transformer, in a fraction of MiniLM's time."""
    import string

    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    chars = string.ascii_lowercase + string.digits + string.punctuation
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(folder / "hf")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128)  # texts are cut at 128 characters
    BertModel(config).save_pretrained(folder / "hf")
    SentenceTransformer(modules=[Transformer(str(folder / "hf")), Pooling(32, "mean")]).save(str(folder / "st"))
    return str(folder / "st")


def tiny_cross_encoder(folder: Path, seed: int = 0) -> Path:
    """A random cross-encoder: a one-layer BERT sequence classifier with one label (hidden size 32, a character
    vocabulary, pairs cut at 256 tokens) saved with its tokenizer as a model folder that sentence-transformers'
    ``CrossEncoder`` loads — bge-reranker's stand-in offline."""
    import string

    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    chars = string.ascii_lowercase + string.digits + string.punctuation
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=256, num_labels=1, initializer_range=0.5)
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizerFast(str(folder / "vocab.txt"), model_max_length=256).save_pretrained(folder)
    return folder


class TypedScript(StageScript):
    """A :class:`StageScript` whose replies are drawn from each stage's output types (strings, ints, bools, lists,
    triples, Literals, pydantic models), seeded by the prompt: the same prompt always gets the same reply, so two runs
    of a program that send the same prompts take the same branches. ``garbled`` is the share of prompts answered
    with a reply that does not parse (every fallback gets exercised)."""

    WORDS = ("Paris", "Nolan", "1987", "the river", "<no question>", "Who directed it?", "Berlin", "yes")

    def __init__(self, *programs: dspy.Module, garbled: float = 0.15):
        super().__init__({}, *programs)
        self.garbled = garbled

    def respond(self, prompt: str) -> dict:
        import hashlib
        import json
        import random

        stage = self.stage_of(prompt)
        self.seen.append(stage)
        draw = random.Random(hashlib.sha256(prompt.encode()).hexdigest())
        signature = dict(self.signatures)[stage]
        if draw.random() < self.garbled:
            return {"garbled": "no fields here"}
        reply = {}
        for name, info in signature.output_fields.items():
            value = typed_value(info.annotation, draw, self.WORDS)
            reply[name] = value if isinstance(value, str) else json.dumps(value)
        return reply


def typed_value(annotation, draw, words):
    """A value of ``annotation`` drawn with ``draw`` (a ``random.Random``) from ``words``."""
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is str:
        return draw.choice(words)
    if annotation is bool:
        return draw.random() < 0.5
    if annotation is int:
        return draw.randint(1, 3)
    if origin is typing.Literal:
        return draw.choice(args)
    if origin is list:
        if args and typing.get_origin(args[0]) is list:
            return [[draw.choice(words[:3]), "is related to", draw.choice(("<UNCERTAIN>", "<FILL>", *words[:3]))]
                    for _ in range(draw.randint(0, 3))]
        return [typed_value(args[0] if args else str, draw, words) for _ in range(draw.randint(0, 3))]
    if hasattr(annotation, "model_fields"):
        return {name: typed_value(field.annotation, draw, words) for name, field in annotation.model_fields.items()}
    return draw.choice(words)


# a MuSiQue record with a two-hop decomposition, its supporting paragraphs and four distractors (gold-row tests)
TWO_HOP_MUSIQUE = {
    "id": "2hop__1_2", "question": "Who founded the publisher of Journal X?", "answer": "Ann Lee",
    "answer_aliases": [], "answerable": True,
    "paragraphs": [{"idx": 0, "title": "Journal X", "paragraph_text": "Journal X is a journal about rivers. It is "
                    "published by Acme Press.", "is_supporting": True},
                   {"idx": 1, "title": "Acme Press", "paragraph_text": "Acme Press is a publisher in Leeds. It was "
                    "founded by Ann Lee in 1990.", "is_supporting": True},
                   *[{"idx": 2 + i, "title": f"Town {c}", "paragraph_text": f"Town {c} is a town in a valley.",
                      "is_supporting": False} for i, c in enumerate("ABCD")]],
    "question_decomposition": [{"id": 1, "question": "Journal X >> publisher", "answer": "Acme Press",
                                "paragraph_support_idx": 0},
                               {"id": 2, "question": "Who founded #1?", "answer": "Ann Lee",
                                "paragraph_support_idx": 1}],
}


LOST_GRAVITY = [
    Passage.make("Lost Gravity", "Lost Gravity is a roller coaster manufactured by Mack Rides."),
    Passage.make("Mack Rides", "Mack Rides is a company based in Waldkirch, Germany."),
    Passage.make("Waldkirch", "Waldkirch is a town in Baden-Württemberg."),
    Passage.make("Xbox", "The Xbox is a console made by Microsoft."),
]  # a two-hop chain (Lost Gravity → Mack Rides → Germany) and a distractor, for the retrieval loops' tests
LOST_GRAVITY_QUESTION = "In what country was Lost Gravity manufactured?"


class QueryRecordingBM25(BM25Retriever):
    """BM25 that records each query it was asked, with its k, in ``asked``."""

    def search(self, queries, k):
        self.asked = [*getattr(self, "asked", []), *((q, k) for q in queries)]
        return super().search(queries, k)


def sentences(*texts: str) -> Callable[[str], dict]:
    """A ``reason`` stage's replies: each call the next of ``texts`` as IRCoT's next sentence."""
    replies = iter(texts)
    return lambda prompt: {"next_sentence": next(replies)}


def run_loop(program, **replies):
    """``program`` asked :data:`LOST_GRAVITY_QUESTION` with each stage answered by ``replies`` (a
    :class:`StageScript`): the prediction and the script."""
    script = StageScript(replies, program)
    with dspy.context(lm=script.lm):
        return program(question=LOST_GRAVITY_QUESTION), script


def gold_stage_rows(program, example) -> dict[str, list[tuple[dict, dict]]]:
    """The gold rows ``program`` learns from ``example``, as (inputs, outputs) by stage."""
    from multihop.optimize.gold_targets import gold_targets

    rows: dict[str, list] = {}
    for target in gold_targets(program, [example]):
        rows.setdefault(target.stage, []).append((target.inputs, target.outputs))
    return rows


# five linked passages: Nolan, Inception, London, Emma Thomas, Thames
PASSAGES = [Passage(f"p{i}", title, text) for i, (title, text) in enumerate([
    ("Nolan", "Christopher Nolan directed Inception. He was born in London in 1970."),
    ("Inception", "Inception is a 2010 film. It was produced by Emma Thomas."),
    ("London", "London is the capital of England. It lies on the Thames."),
    ("Emma Thomas", "Emma Thomas is a British film producer. She married Christopher Nolan."),
    ("Thames", "The Thames is a river in England. It flows through London."),
])]


# a chain of four passages: Xbox → Microsoft → Bill Gates → Seattle
XBOX_PASSAGES = [Passage.make(title, text) for title, text in [
    ("Xbox", "The Xbox is a video game console made by Microsoft."),
    ("Microsoft", "Microsoft was founded by Bill Gates and Paul Allen in 1975."),
    ("Bill Gates", "Bill Gates was born in Seattle in 1955."),
    ("Seattle", "Seattle is a city in Washington.")]]


def declared_program(name: str, **switches) -> MultihopProgram:
    """Program ``name`` over a fixed retriever (:data:`XBOX_PASSAGES`), reranking nothing (no encoder to load) and
    embedding with MiniLM."""
    from multihop.programs import PROGRAMS, takes_retriever

    cls = PROGRAMS[name]
    settings = cls.settings()
    light = {key: value for key, value in {"rerank": None, "encoder": "minilm"}.items() if key in settings}
    retriever = {"retriever": StaticRetriever(XBOX_PASSAGES)} if takes_retriever(cls) else {}
    return cls(**retriever, **light, **switches)


def tiny_colbert(folder: Path, query_maxlen: int = 12, doc_maxlen: int = 48, dim: int = 16, seed: int = 0) -> Path:
    """A random ColBERT checkpoint in the format its authors publish (a 2-layer BERT of hidden size 32 over a character
    vocabulary with ``[unused0]``/``[unused1]``/``[MASK]``, its weights under ``bert.*`` with a ``linear.weight``
    projection to ``dim``, the tokenizer and ``artifact.metadata``), written with transformers and safetensors alone:
    colbertv2.0's stand-in offline."""
    import json
    import string

    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    chars = string.ascii_lowercase + string.digits + string.punctuation
    vocab = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128, architectures=["HF_ColBERT"])
    config.save_pretrained(folder)
    weights = {f"bert.{name}": tensor.contiguous() for name, tensor in BertModel(config).state_dict().items()}
    weights["linear.weight"] = torch.randn(dim, 32) / 32**0.5
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "artifact.metadata").write_text(json.dumps({
        "query_token_id": "[unused0]", "doc_token_id": "[unused1]", "query_token": "[Q]", "doc_token": "[D]",
        "query_maxlen": query_maxlen, "doc_maxlen": doc_maxlen, "dim": dim, "mask_punctuation": True,
        "attend_to_mask_tokens": False, "similarity": "cosine", "nbits": 2, "checkpoint": "tiny"}, indent=4))
    return folder
