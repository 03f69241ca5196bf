import json

import dspy
import pytest

from multihop.data.corpus import Corpus, DataFormatError, Passage, join_sentences
from multihop.data.loaders import build_corpus, detect_format, find_files, load_corpus, load_dataset

from helpers import data_root


def test_musique_dev_loads_with_gold_and_decomposition(musique_dev):
    assert len(musique_dev) == 100
    first = musique_dev[0]
    assert first.id == "2hop__82713_84616"
    assert set(first.inputs().keys()) == {"question"}
    assert first.answers[0] == "for Best Performance by a Leading Actress in a Play in Ondine"
    assert "leading actress" in first.answers  # aliases included
    assert first.hops == 2 and len(first.decomposition) == 2 and "#1" in first.decomposition[1]
    assert len(first.gold_passage_ids) == 2
    assert all(p["id"] in first.gold_passage_ids for p in first.paragraphs if p["is_supporting"])


def test_gold_ids_match_the_hipporag_corpus_files():
    root = data_root()
    for questions, corpus_file in [
        ("musique/train/musique_train.json", "musique/train/musique_train_corpus.json"),
        ("hotpotqa/train/hotpotqa_train.json", "hotpotqa/train/hotpotqa_train_corpus.json"),
    ]:
        examples = load_dataset(root / questions)
        corpus = load_corpus(root / corpus_file)
        gold = [g for e in examples for g in e.gold_passage_ids]
        assert gold and all(g in corpus for g in gold), questions


def test_hotpotqa_and_2wiki_formats_are_detected():
    root = data_root()
    hotpot = load_dataset(root / "hotpotqa/dev/hotpot_dev100.jsonl")
    wiki = load_dataset(root / "2wikimultihopqa/train/wikihop_train_preprocess.json", limit=5)
    assert hotpot[0].dataset == "hotpotqa" and hotpot[0].answers == ["Rush"] and len(hotpot[0].gold_passage_ids) == 2
    assert wiki[0].dataset == "2wiki" and len(wiki[0].decomposition) == 2 and wiki[0].hops == 2


def test_ircot_corpus_is_the_deduplicated_union(musique_dev):
    corpus = build_corpus(musique_dev)
    all_ids = [p["id"] for e in musique_dev for p in e.paragraphs]
    assert len(corpus) == len(set(all_ids)) < len(all_ids)
    assert corpus.merged_duplicates == len(all_ids) - len(set(all_ids))
    assert corpus.checksum() == build_corpus(musique_dev).checksum()


def test_data_list_finds_every_file():
    rows = {r["path"]: r for r in find_files(data_root())}
    assert rows["musique/dev/musique_qa_100.json"] == {"path": "musique/dev/musique_qa_100.json", "kind": "musique",
                                                       "records": 100}
    assert rows["2wikimultihopqa/corpus/2wikimultihopqa_corpus.json"]["kind"] == "corpus"


def test_malformed_json_line_names_file_and_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "1", "question": "q", "answers": ["a"]}\n{"id": "2", "question": \n')
    with pytest.raises(DataFormatError, match=r"q\.jsonl:line 2: not valid JSON"):
        load_dataset(path)


def test_missing_field_names_the_field(tmp_path):
    path = tmp_path / "m.json"
    record = {"id": "2hop__1_2", "question": "q", "answer": "a", "question_decomposition": [],
              "paragraphs": [{"idx": 0, "title": "T"}]}
    path.write_text(json.dumps([record]))
    with pytest.raises(DataFormatError, match=r"m\.json:record 1 paragraphs\[0\]: field 'paragraph_text' is missing"):
        load_dataset(path)


def test_duplicate_question_ids_are_refused(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "1", "question": "q", "answers": ["a"]}\n{"id": "1", "question": "r", "answers": ["b"]}\n')
    with pytest.raises(DataFormatError, match="repeats"):
        load_dataset(path)


def test_empty_passages_are_skipped_and_counted(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"title": "A", "text": "alpha"}\n{"title": "B", "text": "  "}\n{"title": "A", "text": "alpha"}\n')
    corpus = load_corpus(path)
    assert len(corpus) == 1 and corpus.skipped_empty == 1 and corpus.merged_duplicates == 1


def test_conflicting_passage_ids_are_refused():
    corpus = Corpus([Passage("p1", "A", "alpha")])
    with pytest.raises(DataFormatError, match="used for two different passages"):
        corpus.add(Passage("p1", "B", "beta"))


def test_generic_jsonl_and_title_dict_corpus(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": 7, "question": "Who?", "answers": ["X", "Y"], "paragraphs": [
        {"title": "T", "text": "X did it.", "is_supporting": True}, {"title": "U", "text": "noise"}]}) + "\n")
    [example] = load_dataset(questions)
    assert example.id == "7" and example.answers == ["X", "Y"] and len(example.gold_passage_ids) == 1
    assert detect_format({"question": "q", "answer": "a"}) == "jsonl"
    titles = tmp_path / "t.json"
    titles.write_text(json.dumps({"T": ["First.", " Second."], "U": ["Uno.", "Dos."]}))
    assert [p.text for p in load_corpus(titles)] == ["First. Second.", "Uno. Dos."]


def test_join_sentences_adds_a_space_only_where_needed():
    assert join_sentences(["A.", " B.", "C."]) == "A. B. C."


def test_non_utf8_bytes_are_reported_with_their_position(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"title": "A", "text": "fine"}\n{"title": "B", "text": "caf\xe9"}\n')
    with pytest.raises(DataFormatError, match=r"corpus.jsonl:line 2: byte 58 is not UTF-8"):
        load_corpus(path)


def test_every_example_carries_answer_as_dspy_expects(musique_dev):
    from dspy.evaluate import answer_exact_match

    first = musique_dev[0]
    assert first.answer == first.answers[0] and first.labels().answer == first.answer
    assert answer_exact_match(first, dspy.Prediction(answer=first.answer.upper()))  # it raised before `answer`
    assert not answer_exact_match(first, dspy.Prediction(answer="certainly not this"))
