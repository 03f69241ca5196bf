"""Loaders for MuSiQue, HotpotQA, 2WikiMultihopQA, HippoRAG corpus files and a generic JSONL format.

Questions become ``dspy.Example(id, question, answer, answers, gold_passage_ids, decomposition, hops, type, dataset,
paragraphs).with_inputs("question")`` and keep the annotations that build stage targets
(:mod:`multihop.optimize.gold_targets`): MuSiQue's ``decomposition_answers`` and ``decomposition_support`` (each hop's
supporting passage id), HotpotQA's and 2Wiki's ``supporting_sentences``, 2Wiki's ``evidences`` (``[head, relation,
tail]`` triples); corpora become a :class:`~multihop.data.corpus.Corpus`. Files are read with the standard ``json``
module rather than ``datasets``: the native schemas mix lists and nested lists per row (HotpotQA's ``context`` is
``[[title, [sentences]]]``), which Arrow cannot type, and errors must name the file, line and field.

Generic JSONL format (one question per line)::

    {"id": "q1", "question": "...", "answers": ["...", "alias"],
     "paragraphs": [{"title": "...", "text": "...", "is_supporting": true}, ...],      # optional
     "decomposition": ["sub-question 1", ...]}                                         # optional

A corpus file is a JSON list or JSON lines of ``{"title", "text"}`` (an ``id`` is optional), or a JSON object
mapping titles to a text or a list of sentences (HippoRAG's HotpotQA corpus).

Questions also come from the Hugging Face Hub and from memory (:func:`load_dataset`): ``hf://org/name@REVISION``
(``hf://datasets/org/name@REVISION/path/in/repo`` as ``huggingface_hub``'s file system writes it) is a dataset
repository at a pinned revision, downloaded by ``huggingface_hub`` into its cache, whose JSON, JSON-lines or Parquet
files of the split are read; a ``datasets.Dataset`` (or a ``DatasetDict``, a pandas DataFrame, a list of dicts) is read
row by row. Either holds records of the formats above, in the Arrow layout the Hub's copies use too: a column of
records stored as a record of columns (HotpotQA's ``context`` as ``{"title": [...], "sentences": [[...]]}``,
``supporting_facts`` as ``{"title": [...], "sent_id": [...]}``, a ``paragraphs`` column as ``{"title": [...], "text":
[...]}``) and ``id`` for ``_id``; a field missing is an error naming it and the row.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import dspy

from multihop.data.corpus import Corpus, DataFormatError, Passage, join_sentences
from multihop.data.paths import data_dir
from multihop.data.question_sets import QUESTION_SETS, question_file

logger = logging.getLogger(__name__)

FORMATS = ("musique", "hotpotqa", "2wiki", "jsonl")
_2WIKI_TYPES = {"comparison", "inference", "compositional", "bridge_comparison"}


def read_records(path: str | Path) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, record)`` from a JSON list, a ``{title: text}`` object or JSON lines (always, for a ``.jsonl``
    file); ``where`` is ``file:line N``, ``file:record N`` or ``file:key K`` for error messages. A title map yields
    ``(title, body)``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataFormatError(f"{path}:line {line}: byte {exc.start} is not UTF-8 ({exc.reason}); "
                              "re-encode the file as UTF-8") from None
    try:
        data = None if path.suffix == ".jsonl" else json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith("["):
            raise DataFormatError(f"{path}:line {exc.lineno}: not valid JSON ({exc.msg})") from None
        data = None  # JSON lines
    if isinstance(data, list):
        yield from ((f"{path}:record {i}", rec) for i, rec in enumerate(data, 1))
    elif isinstance(data, dict) and not _is_record(data):
        yield from ((f"{path}:key {k!r}", (k, v)) for k, v in data.items())
    else:
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                yield f"{path}:line {lineno}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(f"{path}:line {lineno}: not valid JSON ({exc.msg})") from None


def _is_record(obj: dict) -> bool:
    """A question or passage record, as opposed to a ``{title: text}`` corpus map."""
    return "question" in obj or {"title", "text"} <= obj.keys()


_MISSING = object()


def _field(rec: Any, name: str, where: str, kind: type | tuple[type, ...] = str, default: Any = _MISSING) -> Any:
    """``rec[name]``, checked to be ``kind``; a missing field is an error unless a ``default`` is given (a field set
    to null counts as missing then)."""
    if not isinstance(rec, dict):
        raise DataFormatError(f"{where}: expected a JSON object, got {_kind_name(type(rec))}")
    if rec.get(name) is None and default is not _MISSING:
        return default
    if name not in rec:
        raise DataFormatError(f"{where}: field {name!r} is missing")
    value = rec[name]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _kinds(kind):
        raise DataFormatError(f"{where}: field {name!r} should be {_kind_name(kind)}, got {_kind_name(type(value))}")
    return value


def _items(rec: Any, name: str, where: str, kind: type | tuple[type, ...], default: Any = _MISSING) -> list:
    """``rec[name]`` as a list whose every item is ``kind``."""
    values = _field(rec, name, where, list, default)
    for i, value in enumerate(values):
        if not isinstance(value, kind) or isinstance(value, bool) and bool not in _kinds(kind):
            raise DataFormatError(f"{where}: field {name!r}[{i}] should be {_kind_name(kind)}, got "
                                  f"{_kind_name(type(value))}")
    return values


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", bool: "true or false", list: "a list", dict: "an object",
             float: "a number", type(None): "null"}
    return " or ".join(names.get(k, k.__name__) for k in _kinds(kind))


def detect_format(rec: Any, where: str = "") -> str:
    """Tell the dataset format from one record (``where`` it is, for the error)."""
    at = f"{where}: " if where else ""
    if not isinstance(rec, dict):
        raise DataFormatError(f"{at}cannot detect the format: the record is not a JSON object")
    if "paragraphs" in rec and "question_decomposition" in rec:
        return "musique"
    if "context" in rec and "supporting_facts" in rec:
        is_2wiki = "evidences" in rec or "qa_pairs" in rec or (  # HotpotQA's comparison questions have a level
            isinstance(rec.get("type"), str) and rec["type"] in _2WIKI_TYPES and "level" not in rec)
        return "2wiki" if is_2wiki else "hotpotqa"
    if "question" in rec and ("answers" in rec or "answer" in rec):
        return "jsonl"
    missing = "'question'" if "question" not in rec else "'answers' (or 'answer')"
    raise DataFormatError(f"{at}field {missing} is missing: cannot detect the format of a record with fields "
                          f"{sorted(rec)} (a question record holds 'question' and 'answers', or is a MuSiQue, HotpotQA "
                          "or 2Wiki record)")


def _example(**fields: Any) -> dspy.Example:
    """A question as DSPy expects it: ``question`` is the input and ``answer`` (the first gold answer) the label that
    labelled demos, ``dspy.evaluate.answer_exact_match`` and the adapters read; ``answers`` keeps every alias."""
    return dspy.Example(answer=fields["answers"][0] if fields["answers"] else "", **fields).with_inputs("question")


def _musique(rec: dict, where: str) -> dspy.Example:
    qid = _field(rec, "id", where)
    paragraphs, gold = [], []
    for i, para in enumerate(_items(rec, "paragraphs", where, dict)):
        at = f"{where} paragraphs[{i}]"
        passage = Passage.make(_field(para, "title", at), _field(para, "paragraph_text", at))
        supporting = _field(para, "is_supporting", at, bool, False)
        paragraphs.append({**passage.to_dict(), "is_supporting": supporting})
        if supporting:
            gold.append(passage.id)
    decomposition = _items(rec, "question_decomposition", where, dict)
    steps = [f"{where} question_decomposition[{i}]" for i in range(len(decomposition))]
    support = [_field(step, "paragraph_support_idx", at, (int, type(None)), None)
               for step, at in zip(decomposition, steps, strict=True)]
    hops = re.match(r"(\d+)hop", qid)
    return _example(
        id=qid,
        question=_field(rec, "question", where),
        answers=[_field(rec, "answer", where), *_items(rec, "answer_aliases", where, str, [])],
        gold_passage_ids=gold,
        decomposition=[_field(step, "question", at) for step, at in zip(decomposition, steps, strict=True)],
        decomposition_answers=[_field(step, "answer", at, str, "") for step, at in zip(decomposition, steps,
                                                                                       strict=True)],
        decomposition_support=[paragraphs[i]["id"] if i is not None and 0 <= i < len(paragraphs) else None
                               for i in support],
        hops=int(hops.group(1)) if hops else len(decomposition),
        type="answerable" if _field(rec, "answerable", where, bool, True) else "unanswerable",
        dataset="musique",
        paragraphs=paragraphs,
    )


def _context_paragraphs(rec: dict, where: str) -> tuple[list[dict], list[str], list[str]]:
    """The paragraphs (supporting ones marked), the gold passage ids and the supporting sentences, in the order of
    ``supporting_facts``."""
    facts = _items(rec, "supporting_facts", where, list)
    if not all(fact and isinstance(fact[0], str) for fact in facts):
        raise DataFormatError(f"{where}: field 'supporting_facts' should hold [title, sentence index] pairs")
    supporting = {fact[0] for fact in facts}
    sentences_of: dict[str, list[str]] = {}
    paragraphs, gold = [], []
    for i, item in enumerate(_field(rec, "context", where, list)):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], list)
                and all(isinstance(sentence, str) for sentence in item[1])):
            raise DataFormatError(f"{where}: field 'context'[{i}] should be [title, [sentences]]")
        title, sentences = item
        sentences_of.setdefault(title, sentences)
        passage = Passage.make(title, join_sentences(sentences))
        paragraphs.append({**passage.to_dict(), "is_supporting": title in supporting})
        if title in supporting and passage.id not in gold:
            gold.append(passage.id)
    cited = [sentences_of.get(fact[0], []) for fact in facts]
    sentences = [text[fact[1]].strip() for text, fact in zip(cited, facts, strict=True)
                 if len(fact) > 1 and isinstance(fact[1], int) and 0 <= fact[1] < len(text) and text[fact[1]].strip()]
    return paragraphs, gold, sentences


def _hotpotqa(rec: dict, where: str) -> dspy.Example:
    paragraphs, gold, sentences = _context_paragraphs(rec, where)
    return _example(
        id=_field(rec, "_id", where),
        question=_field(rec, "question", where),
        answers=[_field(rec, "answer", where)],
        gold_passage_ids=gold,
        decomposition=[],
        hops=2,
        type=_field(rec, "type", where, str, ""),
        supporting_sentences=sentences,
        dataset="hotpotqa",
        paragraphs=paragraphs,
    )


def _2wiki(rec: dict, where: str) -> dspy.Example:
    paragraphs, gold, sentences = _context_paragraphs(rec, where)
    qa_pairs = _items(rec, "qa_pairs", where, dict, [])
    evidences = _items(rec, "evidences", where, list, [])
    if not all(len(triple) == 3 and all(isinstance(item, str) for item in triple) for triple in evidences):
        raise DataFormatError(f"{where}: field 'evidences' should hold [head, relation, tail] triples of strings")
    return _example(
        id=_field(rec, "_id", where),
        question=_field(rec, "question", where),
        answers=[_field(rec, "answer", where)],
        gold_passage_ids=gold,
        decomposition=[_field(pair, "question", f"{where} qa_pairs[{i}]") for i, pair in enumerate(qa_pairs)],
        hops=len(qa_pairs) or len(_field(rec, "evidences", where, list, [])) or 2,
        type=_field(rec, "type", where, str, ""),
        supporting_sentences=sentences,
        evidences=[list(triple) for triple in evidences],
        dataset="2wiki",
        paragraphs=paragraphs,
    )


def _generic(rec: dict, where: str) -> dspy.Example:
    answers = _items(rec, "answers", where, str) if "answers" in rec else [_field(rec, "answer", where)]
    paragraphs, gold = [], []
    for i, para in enumerate(_items(rec, "paragraphs", where, dict, [])):
        at = f"{where} paragraphs[{i}]"
        passage = Passage.make(_field(para, "title", at, str, ""), _field(para, "text", at),
                               _field(para, "id", at, str, None))
        supporting = _field(para, "is_supporting", at, bool, False)
        paragraphs.append({**passage.to_dict(), "is_supporting": supporting})
        if supporting:
            gold.append(passage.id)
    decomposition = _items(rec, "decomposition", where, str, [])
    return _example(
        id=str(_field(rec, "id", where, (str, int))),
        question=_field(rec, "question", where),
        answers=answers,
        gold_passage_ids=_items(rec, "gold_passage_ids", where, str, gold),
        decomposition=decomposition,
        hops=_field(rec, "hops", where, int, len(decomposition)),
        type=_field(rec, "type", where, str, ""),
        dataset=_field(rec, "dataset", where, str, "jsonl"),
        paragraphs=paragraphs,
    )


_PARSERS = {"musique": _musique, "hotpotqa": _hotpotqa, "2wiki": _2wiki, "jsonl": _generic}


def load_dataset(path: str | Path | Any, format: str | None = None, limit: int | None = None, split: str = "dev"
                 ) -> list[dspy.Example]:
    """Load questions as ``dspy.Example``\\ s with ``question`` as the input. ``path`` is one of:

    - a file, a path relative to ``MULTIHOP_DATA`` (``"musique/dev/musique_qa_100.json"``), or a dataset name
      (``"musique"``, ``"hotpotqa"``, ``"2wiki"``: its ``split`` file, dev or train), as the command line takes them
      (:func:`multihop.data.question_sets.question_file`);
    - a Hugging Face Hub dataset at a pinned revision, ``"hf://org/name@REVISION"`` (a commit hash pins it; a tag or
      branch is read at the commit it names now), optionally with a path in the repository after it (a file, or the
      folder of one configuration: ``"hf://hotpotqa/hotpot_qa@<commit>/distractor"``); ``hf://datasets/org/name@...``
      is the same. The ``split``'s JSON, JSON-lines or Parquet files (those whose path names it: dev is also
      ``validation`` or ``val``) are downloaded by ``huggingface_hub`` into its cache (offline: read from there) and
      read in order (:func:`hub_files`);
    - a ``datasets.Dataset`` (a ``DatasetDict``: its ``split``), a pandas DataFrame or a list of dicts, read row by
      row.

    ``format`` is one of ``musique``, ``hotpotqa``, ``2wiki``, ``jsonl``; detected from the first record when None.
    Records may be in the Hub's Arrow layout (the module docstring); a field a format needs and a record lacks is a
    ``DataFormatError`` naming the field and where (``file:line N``, ``hf://...:record N``, ``dataset row N``).
    Duplicate question ids are refused. Empty paragraphs are dropped from each example and counted in a log line.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    if isinstance(path, str) and path.startswith(HUB):
        source, records = path, hub_records(path, split)
    elif isinstance(path, str | Path):
        source = question_file(path, split)
        records = read_records(source)
    else:
        source, records = "dataset", memory_records(path, split)
    examples: list[dspy.Example] = []
    seen: dict[str, str] = {}
    empty = 0
    for where, rec in records:
        if isinstance(rec, tuple):
            raise DataFormatError(f"{source}: a {{title: text}} map is a corpus, not questions; a question file holds "
                                  "JSON objects with a 'question', one per line or in a list")
        rec = arrow_native(rec)
        format = format or detect_format(rec, where)
        example = _PARSERS[format](rec, where)
        if example.id in seen:
            raise DataFormatError(f"{where}: question id {example.id!r} repeats {seen[example.id]}")
        seen[example.id] = where
        kept = [p for p in example.paragraphs if p["text"].strip()]
        empty += len(example.paragraphs) - len(kept)
        dropped = {p["id"] for p in example.paragraphs} - {p["id"] for p in kept}
        example["paragraphs"] = kept
        if dropped:  # a gold id or a hop's support never points to a paragraph that is not there
            example["gold_passage_ids"] = [i for i in example.gold_passage_ids if i not in dropped]
            if example.get("decomposition_support") is not None:
                example["decomposition_support"] = [None if i in dropped else i
                                                    for i in example.decomposition_support]
        examples.append(example)
        if limit is not None and len(examples) >= limit:
            break
    if empty:
        logger.warning("%s: skipped %d empty paragraphs", source, empty)
    return examples


HUB = "hf://"
HUB_SOURCE = re.compile(r"hf://(?:datasets/)?(?P<repo>[\w.-]+/[\w.-]+)(?:@(?P<revision>[^/]+))?(?:/(?P<path>.*))?")
SPLIT_NAMES = {"dev": ("dev", "validation", "val"), "train": ("train",)}  # how a Hub repository names a split's files
HUB_SUFFIXES = (".jsonl", ".json", ".parquet")


class HubDatasetError(ValueError):
    """A Hub dataset that cannot be read: no revision given, not on the Hub, not cached offline, no file of the
    split, or files of several configurations."""


def hub_files(source: str, split: str = "dev") -> tuple[list[Path], str]:
    """The files of ``split`` of the Hub dataset ``source`` (``hf://org/name@REVISION[/path]``), downloaded by
    ``huggingface_hub.snapshot_download`` at that revision into its cache (only the files matched), and the commit
    they are at. A path naming a data file is that file; otherwise the split's files under the path (or the whole
    repository), which must lie in one folder (one configuration). Every failure is a :class:`HubDatasetError` of one
    line."""
    match = HUB_SOURCE.fullmatch(source)
    if match is None:
        raise HubDatasetError(f"{source!r}: write a Hub dataset as hf://org/name@REVISION, with a path in the "
                              "repository after it if needed (hf://org/name@REVISION/folder/file.parquet)")
    repo, revision, inside = match["repo"], match["revision"], (match["path"] or "").strip("/")
    if not revision:
        raise HubDatasetError(f"{source}: pin the dataset's revision, hf://{repo}@<commit> (the commit hash on the "
                              f"Hub page's history; a tag or branch is read at its commit of today)")
    if split not in SPLIT_NAMES:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLIT_NAMES)}")
    if inside.endswith(HUB_SUFFIXES):
        patterns = [inside]
    else:
        prefix = f"{inside}/" if inside else ""
        patterns = [f"{prefix}*{name}*{suffix}" for name in SPLIT_NAMES[split] for suffix in HUB_SUFFIXES]
    folder = _snapshot(source, repo, revision, patterns)
    files = sorted(path for path in folder.rglob("*") if path.is_file()
                   and any(fnmatch.fnmatch(path.relative_to(folder).as_posix(), pattern) for pattern in patterns))
    if not files:
        raise HubDatasetError(f"{source}: no {split} file ({', '.join(patterns)}) at revision {folder.name}; name "
                              f"one after the revision: hf://{repo}@{revision}/<path>")
    configs = sorted({path.parent.relative_to(folder).as_posix() for path in files})
    if len(configs) > 1:
        raise HubDatasetError(f"{source}: {split} files in {len(configs)} folders ({', '.join(configs)}): name one "
                              f"after the revision, e.g. hf://{repo}@{revision}/{configs[0]}")
    logger.info("%s: %d %s file(s) at commit %s", source, len(files), split, folder.name)
    return files, folder.name


def _snapshot(source: str, repo: str, revision: str, patterns: list[str]) -> Path:
    """``huggingface_hub.snapshot_download`` of the files of ``patterns`` in dataset ``repo`` at ``revision``."""
    import huggingface_hub
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        return Path(huggingface_hub.snapshot_download(repo, repo_type="dataset", revision=revision,
                                                      allow_patterns=patterns))
    except LocalEntryNotFoundError:
        raise HubDatasetError(f"{source}: not in the Hugging Face cache, and the Hub cannot be reached (HF_HUB_OFFLINE "
                              f"is set or there is no network): download it while online, with HF_HUB_OFFLINE unset: "
                              f"`hf download {repo} --repo-type dataset --revision {revision}`") from None
    except GatedRepoError:
        raise HubDatasetError(f"{source}: the dataset is gated on the Hugging Face Hub: accept its terms on its page "
                              "and log in with `hf auth login`") from None
    except RevisionNotFoundError:
        raise HubDatasetError(f"{source}: the dataset {repo!r} has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        raise HubDatasetError(f"{source}: no dataset {repo!r} on the Hugging Face Hub (a private one needs `hf auth "
                              "login`)") from None


def hub_records(source: str, split: str) -> Iterator[tuple[str, Any]]:
    """``(where, record)`` of every file of :func:`hub_files`, in order; ``where`` names the file in ``source``."""
    files, _ = hub_files(source, split)
    for path in files:
        if path.suffix == ".parquet":
            yield from ((f"{source}:{path.name}:record {i}", rec) for i, rec in enumerate(parquet_records(path), 1))
        else:
            yield from read_records(path)


def parquet_records(path: Path) -> list[dict]:
    """The rows of a Parquet file as plain Python records (pandas reads it, with pyarrow)."""
    import pandas

    return [plain(rec) for rec in pandas.read_parquet(path).to_dict("records")]


def memory_records(data: Any, split: str) -> Iterator[tuple[str, Any]]:
    """``(where, record)`` of a ``datasets.Dataset``, a ``DatasetDict`` (its ``split``, dev also as validation or
    val), a pandas DataFrame or a list of dicts; ``where`` is ``dataset row N``."""
    if isinstance(data, Mapping):  # a DatasetDict: its splits by name
        name = next((name for name in SPLIT_NAMES.get(split, (split,)) if name in data), None)
        if name is None:
            raise ValueError(f"the dataset has no {split} split: it has {', '.join(map(str, data))}; pass one split")
        data = data[name]
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        data = data.to_dict("records")
    if not isinstance(data, Iterable) or isinstance(data, str | bytes):
        raise TypeError(f"load_dataset takes a file, a dataset name, an hf:// dataset, a datasets.Dataset, a "
                        f"DataFrame or a list of dicts, not a {type(data).__name__}")
    yield from ((f"dataset row {i}", plain(rec)) for i, rec in enumerate(data, 1))


def plain(value: Any) -> Any:
    """``value`` with NumPy arrays and scalars (pandas' cells) made Python lists and numbers, in any nesting."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):  # numpy.ndarray, numpy.generic
        return plain(value.tolist())
    return value


_COLUMNS_OF_RECORDS = ("paragraphs", "question_decomposition", "qa_pairs")  # lists of records a Hub copy may store
# as a record of columns


def arrow_native(rec: Any) -> Any:
    """A record in the Hub's Arrow layout as the native formats write it: ``context`` ``{"title": [...],
    "sentences"|"content": [[...]]}`` as ``[[title, sentences]]``, ``supporting_facts`` ``{"title": [...], "sent_id":
    [...]}`` as ``[[title, index]]``, a list of records stored as a record of columns as the list of records, and
    ``id`` as ``_id`` beside a ``context``; any other record as it is."""
    if not isinstance(rec, dict):
        return rec
    rec = dict(rec)
    context = rec.get("context")
    if isinstance(context, dict) and "title" in context:
        sentences = context.get("sentences", context.get("content"))
        if isinstance(sentences, list) and isinstance(context["title"], list):
            rec["context"] = [[title, list(text)] for title, text in zip(context["title"], sentences, strict=False)]
    facts = rec.get("supporting_facts")
    if isinstance(facts, dict) and isinstance(facts.get("title"), list) and isinstance(facts.get("sent_id"), list):
        rec["supporting_facts"] = [[title, index] for title, index in zip(facts["title"], facts["sent_id"],
                                                                          strict=False)]
    for name in _COLUMNS_OF_RECORDS:
        columns = rec.get(name)
        if isinstance(columns, dict) and columns and all(isinstance(value, list) for value in columns.values()):
            rows = len(next(iter(columns.values())))
            rec[name] = [{key: value[i] for key, value in columns.items() if i < len(value)} for i in range(rows)]
    if "context" in rec and "_id" not in rec and "id" in rec:
        rec["_id"] = rec["id"]
    return rec


def build_corpus(examples: Iterable[dspy.Example], source: str = "questions") -> Corpus:
    """The IRCoT corpus of a question set: the union of all its questions' paragraphs, deduplicated, in order."""
    corpus = Corpus(source=source)
    for example in examples:
        for para in example.get("paragraphs", []):
            corpus.add(Passage(id=para["id"], title=para["title"], text=para["text"]))
    return corpus


def load_corpus(path: str | Path) -> Corpus:
    """Load a corpus file: ``[{title, text[, id]}]`` as JSON or JSON lines, ``{title: text | [sentences]}``, or a
    question file (any supported format), whose paragraphs then form the IRCoT corpus."""
    path = Path(path)
    records = read_records(path)
    first = next(records, None)
    if first is None:
        raise DataFormatError(f"{path}: the file holds no passages")
    where, rec = first
    if isinstance(rec, dict) and "question" in rec:
        return build_corpus(load_dataset(path), source=str(path))
    corpus = Corpus(source=str(path))
    for where, rec in itertools.chain([first], records):
        if isinstance(rec, tuple):  # {title: text | [sentences]}
            title, body = rec
            if isinstance(body, list) and all(isinstance(sentence, str) for sentence in body):
                body = join_sentences(body)
            if not isinstance(body, str):
                raise DataFormatError(f"{where}: value should be a text or a list of sentences")
            corpus.add(Passage.make(title, body))
        else:
            corpus.add(Passage.make(_field(rec, "title", where), _field(rec, "text", where),
                                    _field(rec, "id", where, str, None)))
    if corpus.skipped_empty:
        logger.warning("%s: skipped %d empty passages", path, corpus.skipped_empty)
    return corpus


def find_files(root: Path | None = None) -> list[dict]:
    """Every question or corpus file under ``root`` (default ``MULTIHOP_DATA``) with its detected kind and size."""
    root = root or data_dir()
    rows = []
    for path in sorted(root.rglob("*.json*")):
        if not path.is_file() or path.suffix not in {".json", ".jsonl"}:
            continue
        try:
            where, rec = next(read_records(path))
            if isinstance(rec, tuple) or "question" not in rec:
                kind, count = "corpus", len(load_corpus(path))
            else:
                kind, count = detect_format(rec), sum(1 for _ in read_records(path))
        except (DataFormatError, StopIteration) as exc:
            kind, count = f"unreadable ({exc})", 0
        rows.append({"path": str(path.relative_to(root)), "kind": kind, "records": count})
    return rows


def held_apart_ids() -> set[str]:
    """The ids of every dev question file in ``MULTIHOP_DATA``: the questions measured, never trained on. Without
    ``MULTIHOP_DATA`` there are no dev files to hold apart: none, said in one log line (a user's own train file is
    never refused for that)."""
    try:
        root = data_dir()
    except FileNotFoundError:
        logger.warning("MULTIHOP_DATA is not set: no dev questions to hold apart from training")
        return set()
    files = [root / relative for relative in QUESTION_SETS["dev"].values()]
    return {str(example.get("id")) for path in files if path.exists() for example in load_dataset(path)}


def load_questions(source: str | Path = "musique", split: str = "dev", limit: int | None = None) -> list:
    """The first ``limit`` questions (all by default) of :func:`question_file`\\ ``(source, split)``."""
    return load_dataset(source, split=split, limit=limit)


def questions_with_corpus(source: str | Path = "musique", split: str = "dev", limit: int | None = None) -> tuple:
    """:func:`load_questions` and their IRCoT corpus (the union of their paragraphs, deduplicated)."""
    path = source if isinstance(source, str) and source.startswith(HUB) else question_file(source, split)
    examples = load_dataset(path, limit=limit, split=split)
    return examples, build_corpus(examples, source=str(path))
