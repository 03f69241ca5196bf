"""Loaders and corpus readers under any JSON: a ``DataFormatError`` naming the place, or valid Examples/passages."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multihop.data.corpus import Corpus, DataFormatError
from multihop.data.loaders import load_corpus, load_dataset

MUSIQUE = {"id": "2hop__1_2", "question": "Q?", "answer": "A", "answer_aliases": ["a"], "answerable": True,
           "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "text", "is_supporting": True}],
           "question_decomposition": [{"id": 1, "question": "q1", "answer": "a1", "paragraph_support_idx": 0}]}
HOTPOT = {"_id": "h1", "question": "Q?", "answer": "A", "type": "bridge", "level": "easy",
          "supporting_facts": [["T", 0]], "context": [["T", ["First.", " Second."]]]}
TWOWIKI = {**HOTPOT, "_id": "w1", "type": "comparison", "evidences": [["a", "b", "c"]],
           "qa_pairs": [{"question": "q1", "answer": "a1"}]}
GENERIC = {"id": "g1", "question": "Q?", "answers": ["A"], "paragraphs": [{"title": "T", "text": "x", "id": "p"}],
           "decomposition": ["q1"], "hops": 1}
RECORDS = {"musique": MUSIQUE, "hotpotqa": HOTPOT, "2wiki": TWOWIKI, "jsonl": GENERIC}

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                 max_size=3), max_leaves=8)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def paths(record: dict) -> list[tuple]:
    """Every place in ``record`` a value sits: keys of objects and indexes of lists, nested."""
    found = []
    for key, value in (record.items() if isinstance(record, dict) else enumerate(record)):
        found.append((key,))
        if isinstance(value, dict | list):
            found += [(key, *rest) for rest in paths(value)]
    return found


def replaced(record, path: tuple, value):
    copy = json.loads(json.dumps(record))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


def load_or_refuse(path, format=None):
    """The one question ``path`` holds, or the ``DataFormatError`` that refused it."""
    try:
        [example] = load_dataset(path, format=format)
    except DataFormatError as exc:
        return exc
    return example


def check_example(example, record: dict) -> None:
    """A loaded question keeps the record's question, labels its first answer, and its gold ids and annotations
    point into its own paragraphs."""
    assert example.question == record["question"]
    assert example.answer == (example.answers[0] if example.answers else "")
    ids = [paragraph["id"] for paragraph in example.paragraphs]
    supporting = list(dict.fromkeys(p["id"] for p in example.paragraphs if p["is_supporting"]))
    if example.dataset != "jsonl":  # a generic record may name its gold ids itself
        assert example.gold_passage_ids == supporting
    support = example.get("decomposition_support")
    assert support is None or (len(support) == len(example.decomposition) and set(support) <= {*ids, None})
    texts = [p["text"] for p in example.paragraphs if p["is_supporting"]]
    assert all(any(sentence in text for text in texts) for sentence in example.get("supporting_sentences", []))
    assert all(len(triple) == 3 for triple in example.get("evidences", []))


@pytest.mark.parametrize("format", sorted(RECORDS))
@FUZZ
@given(data=st.data(), value=JSON)
def test_any_value_in_any_field_gives_a_data_format_error_or_a_valid_example(tmp_path, format, data, value):
    record = RECORDS[format]
    path = data.draw(st.sampled_from(paths(record)))
    file = tmp_path / "q.jsonl"
    fuzzed = replaced(record, path, value)
    file.write_text(json.dumps(fuzzed) + "\n")
    for result in (load_or_refuse(file, format), load_or_refuse(file)):  # named, then detected from the record
        if isinstance(result, DataFormatError):
            assert str(file) in str(result)  # the refusal names the file (and the line and field)
        else:
            check_example(result, fuzzed)


@FUZZ
@given(value=JSON)
def test_any_record_gives_a_data_format_error_or_a_valid_corpus(tmp_path, value):
    for text in (json.dumps([value]), json.dumps({"T": value}), json.dumps({"title": "T", "text": value}) + "\n"):
        file = tmp_path / "corpus.json"
        file.write_text(text)
        try:
            corpus = load_corpus(file)
        except DataFormatError as exc:
            assert str(file) in str(exc)
            continue
        assert isinstance(corpus, Corpus) and all(isinstance(t, str) for t in corpus.texts())


def test_a_record_without_question_and_paragraphs_as_text_name_file_line_and_field(tmp_path):
    file = tmp_path / "q.jsonl"
    file.write_text(json.dumps({k: v for k, v in MUSIQUE.items() if k != "question"}) + "\n")
    with pytest.raises(DataFormatError, match=r"q.jsonl:line 1: field 'question' is missing"):
        load_dataset(file, format="musique")
    file.write_text(json.dumps({**GENERIC, "paragraphs": "one long text"}) + "\n")
    with pytest.raises(DataFormatError, match=r"q.jsonl:line 1: field 'paragraphs' should be a list, got a string"):
        load_dataset(file)


def test_json_lines_in_a_json_file_are_read_line_by_line(tmp_path):
    file = tmp_path / "questions.json"
    file.write_text(json.dumps(GENERIC) + "\n" + json.dumps({**GENERIC, "id": "g2"}) + "\n")
    assert [example.id for example in load_dataset(file)] == ["g1", "g2"]
    corpus = tmp_path / "corpus.json"
    corpus.write_text('{"title": "A", "text": "a"}\n{"title": "B", "text": "b"}\n')
    assert load_corpus(corpus).texts() == ["A: a", "B: b"]


def test_an_empty_supporting_paragraph_leaves_no_gold_id_hop_support_or_sentence_behind(tmp_path):
    file = tmp_path / "q.jsonl"
    musique = {**MUSIQUE, "paragraphs": [{**MUSIQUE["paragraphs"][0], "paragraph_text": " "}]}
    twowiki = {**TWOWIKI, "context": [["T", [""]], ["U", ["x."]]]}
    file.write_text(json.dumps(musique) + "\n")
    [first] = load_dataset(file)
    file.write_text(json.dumps(twowiki) + "\n")
    [second] = load_dataset(file)
    assert first.paragraphs == [] and first.gold_passage_ids == [] and first.decomposition_support == [None]
    assert [p["title"] for p in second.paragraphs] == ["U"] and second.gold_passage_ids == []
    assert second.supporting_sentences == []
