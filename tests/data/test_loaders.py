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


# Questions from the Hugging Face Hub and from memory. A fake hub stands in for huggingface_hub.snapshot_download: it
# copies the files a call asks for (allow_patterns) from a local folder into a cache laid out as huggingface_hub lays
# it out (datasets--org--name/snapshots/<commit>). No test reaches the network.

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HOTPOT_ROW = {"id": "5a8b57f25542995d1e6f1371", "answer": "yes",
              "question": "Were Scott Derrickson and Ed Wood of the same nationality?", "type": "comparison",
              "level": "hard",
              "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]},
              "context": {"title": ["Ed Wood", "Scott Derrickson", "Other"],
                          "sentences": [["Ed Wood was an American filmmaker."],
                                        ["Scott Derrickson is an American director.", " He lives in LA."],
                                        ["Something else."]]}}


class FakeDatasetHub:
    """``snapshot_download`` of dataset repositories held in local folders (``repos``: repo id → folder), at
    :data:`COMMIT` only; records each call."""

    def __init__(self, cache, repos, offline=False):
        self.cache, self.repos, self.offline, self.calls = cache, repos, offline, []

    def __call__(self, repo_id, repo_type=None, revision=None, allow_patterns=None, **kwargs):
        import fnmatch
        import shutil

        import httpx2
        import huggingface_hub.errors

        self.calls.append({"repo": repo_id, "repo_type": repo_type, "revision": revision, "patterns": allow_patterns})
        if self.offline:
            raise huggingface_hub.errors.LocalEntryNotFoundError("offline")
        response = httpx2.Response(404, request=httpx2.Request("GET", f"https://huggingface.co/api/datasets/{repo_id}"))
        if repo_type != "dataset" or repo_id not in self.repos:
            raise huggingface_hub.errors.RepositoryNotFoundError(f"404: {repo_id}", response=response)
        if revision not in (COMMIT, "v1.0"):
            raise huggingface_hub.errors.RevisionNotFoundError(f"404: {revision}", response=response)
        snapshot = self.cache / f"datasets--{repo_id.replace('/', '--')}" / "snapshots" / COMMIT
        for path in self.repos[repo_id].rglob("*"):
            relative = path.relative_to(self.repos[repo_id]).as_posix()
            if path.is_file() and any(fnmatch.fnmatch(relative, pattern) for pattern in allow_patterns or ["*"]):
                (snapshot / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, snapshot / relative)
        snapshot.mkdir(parents=True, exist_ok=True)
        return str(snapshot)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The fake hub with ``org/hotpot`` (two configurations, Parquet in the Hub's Arrow layout, their train and
    validation splits) and ``org/generic`` (JSON lines: dev.jsonl, train.jsonl); the working folder holds an
    ``org/hotpot`` folder, which an hf:// source is never taken for."""
    import huggingface_hub
    import pandas

    hotpot, generic = tmp_path / "repos" / "hotpot", tmp_path / "repos" / "generic"
    for config in ("distractor", "fullwiki"):
        (hotpot / config).mkdir(parents=True)
        for split in ("train", "validation"):
            row = {**HOTPOT_ROW, "id": f"{config}-{split}"}
            pandas.DataFrame([row]).to_parquet(hotpot / config / f"{split}-00000-of-00001.parquet")
    generic.mkdir(parents=True)
    for split in ("dev", "train"):
        (generic / f"{split}.jsonl").write_text("".join(
            json.dumps({"id": f"{split}{i}", "question": f"q{i}?", "answers": ["a"]}) + "\n" for i in range(3)))
    (generic / "README.md").write_text("# a dataset card")
    fake = FakeDatasetHub(tmp_path / "cache", {"org/hotpot": hotpot, "org/generic": generic})
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "hotpot").mkdir(parents=True)
    return fake


def test_a_hub_dataset_at_a_pinned_revision_is_read_in_the_arrow_layout(hub):
    [example] = load_dataset(f"hf://org/hotpot@{COMMIT}/distractor")
    assert hub.calls == [{"repo": "org/hotpot", "repo_type": "dataset", "revision": COMMIT,
                          "patterns": [f"distractor/*{name}*{suffix}" for name in ("dev", "validation", "val")
                                       for suffix in (".jsonl", ".json", ".parquet")]}]
    assert example.id == "distractor-validation" and example.dataset == "hotpotqa" and example.answers == ["yes"]
    assert [p["title"] for p in example.paragraphs] == ["Ed Wood", "Scott Derrickson", "Other"]
    assert example.paragraphs[1]["text"] == "Scott Derrickson is an American director. He lives in LA."
    assert len(example.gold_passage_ids) == 2
    assert example.supporting_sentences == ["Scott Derrickson is an American director.", "Ed Wood was an American "
                                            "filmmaker."]
    [train] = load_dataset(f"hf://datasets/org/hotpot@{COMMIT}/fullwiki/train-00000-of-00001.parquet", split="train")
    assert train.id == "fullwiki-train"
    assert [e.id for e in load_dataset(f"hf://org/generic@{COMMIT}", limit=2)] == ["dev0", "dev1"]
    assert [e.id for e in load_dataset(f"hf://org/generic@{COMMIT}", split="train")] == ["train0", "train1", "train2"]


@pytest.mark.parametrize(("source", "message"), [
    ("hf://org/generic", "pin the dataset's revision, hf://org/generic@<commit>"),
    ("hf://nosuch/set@v1.0", "no dataset 'nosuch/set' on the Hugging Face Hub"),
    ("hf://org/generic@v9", "the dataset 'org/generic' has no revision 'v9'"),
    (f"hf://org/hotpot@{COMMIT}", "dev files in 2 folders (distractor, fullwiki): name one after the revision, "
                                  f"e.g. hf://org/hotpot@{COMMIT}/distractor"),
    (f"hf://org/hotpot@{COMMIT}/nosuch", "no dev file (nosuch/*dev*.jsonl"),
    ("hf://just-a-name", "write a Hub dataset as hf://org/name@REVISION"),
])
def test_a_hub_dataset_that_cannot_be_read_is_one_line(hub, source, message):
    from multihop.data.loaders import HubDatasetError

    with pytest.raises(HubDatasetError) as caught:
        load_dataset(source)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_offline_and_not_cached_names_the_command_that_downloads_it(hub):
    from multihop.data.loaders import HubDatasetError

    hub.offline = True
    with pytest.raises(HubDatasetError, match=f"hf download org/generic --repo-type dataset --revision {COMMIT}"):
        load_dataset(f"hf://org/generic@{COMMIT}")


def test_a_datasets_dataset_is_read_row_by_row_in_either_layout():
    datasets = pytest.importorskip("datasets")
    hotpot = datasets.Dataset.from_list([HOTPOT_ROW])
    [example] = load_dataset(hotpot)
    assert example.dataset == "hotpotqa" and example.id == HOTPOT_ROW["id"] and len(example.gold_passage_ids) == 2
    generic = datasets.Dataset.from_dict({
        "id": ["a", "b"], "question": ["q1?", "q2?"], "answers": [["x"], ["y", "z"]],
        "paragraphs": [[{"title": "T", "text": "x is here.", "is_supporting": True}],
                       [{"title": "U", "text": "y is there.", "is_supporting": False}]]})
    first, second = load_dataset(datasets.DatasetDict({"validation": generic}))
    assert (first.answer, second.answers, first.gold_passage_ids) == ("x", ["y", "z"], [first.paragraphs[0]["id"]])
    assert [e.id for e in load_dataset(generic.to_pandas())] == ["a", "b"]  # a DataFrame: NumPy cells made Python
    assert load_dataset([{"id": 1, "question": "q?", "answer": "a"}])[0].id == "1"


@pytest.mark.parametrize(("rows", "message"), [
    ([{"id": "a", "query": "q?", "answers": ["x"]}], "dataset row 1: field 'question' is missing"),
    ([{"id": "a", "question": "q?", "label": "x"}], "dataset row 1: field 'answers' (or 'answer') is missing"),
    ([{"question": "q?", "answers": ["x"]}], "dataset row 1: field 'id' is missing"),
    ([{**HOTPOT_ROW, "id": "h", "answer": None}], "dataset row 1: field 'answer' should be a string, got null"),
])
def test_a_dataset_lacking_a_field_names_it_in_one_line(rows, message):
    datasets = pytest.importorskip("datasets")
    with pytest.raises(DataFormatError) as caught:
        load_dataset(datasets.Dataset.from_list(rows))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
