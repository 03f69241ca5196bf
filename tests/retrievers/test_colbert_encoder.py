"""A ColBERT checkpoint as an encoder (:mod:`multihop.retrievers.colbert_encoder`): a folder in the authors' format
loads as one through ``Encoder``, and encodes queries and passages as ColBERT does, checked against the same weights
run through transformers' ``BertModel`` by hand."""

import functools
import pickle
import string

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import BertModel, BertTokenizerFast

from multihop.retrievers.colbert_encoder import ColBERTEncoder
from multihop.retrievers.encoder import Encoder

from helpers import tiny_colbert

QUERY_MAXLEN, DOC_MAXLEN, DIM = 12, 40, 16


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_colbert(tmp_path_factory.mktemp("colbert") / "checkpoint", QUERY_MAXLEN, DOC_MAXLEN, DIM)


@pytest.fixture(scope="module")
def encoder(checkpoint):
    return Encoder(str(checkpoint))


@functools.cache
def by_hand(checkpoint):
    """The checkpoint's BERT and projection, loaded with transformers and safetensors alone."""
    bert = BertModel.from_pretrained(str(checkpoint), add_pooling_layer=False).eval()
    return bert, load_file(str(checkpoint / "model.safetensors"))["linear.weight"]


def reference(checkpoint, ids: list[int], attention: list[int]) -> np.ndarray:
    """The checkpoint's normalised projected last-layer states of ``ids``, computed by hand."""
    bert, linear = by_hand(checkpoint)
    with torch.inference_mode():
        hidden = bert(input_ids=torch.tensor([ids]), attention_mask=torch.tensor([attention])).last_hidden_state[0]
    return torch.nn.functional.normalize(hidden @ linear.T, dim=-1).numpy()


def test_a_colbert_folder_loads_as_a_colbert_encoder_with_its_settings(encoder, checkpoint):
    assert isinstance(encoder, ColBERTEncoder)
    assert (encoder.dimension, encoder.num_layers) == (DIM, 2)
    assert encoder.colbert_config()["query_maxlen"] == QUERY_MAXLEN
    assert encoder.colbert_config()["doc_marker"] == "[unused1]"
    again = pickle.loads(pickle.dumps(encoder))
    assert isinstance(again, ColBERTEncoder) and again.checksum() == encoder.checksum()


def test_a_query_is_marked_padded_with_mask_and_projected_as_colbert_does(encoder, checkpoint):
    tokenizer = BertTokenizerFast.from_pretrained(str(checkpoint))
    words = tokenizer("ab c", add_special_tokens=False)["input_ids"]
    ids = [tokenizer.cls_token_id, tokenizer.convert_tokens_to_ids("[unused0]"), *words, tokenizer.sep_token_id]
    attention = [1] * len(ids) + [0] * (QUERY_MAXLEN - len(ids))  # the [MASK] padding is not attended to
    ids += [tokenizer.mask_token_id] * (QUERY_MAXLEN - len(ids))
    states = encoder.states(["ab c"]).tokens[0]
    assert states.shape == (QUERY_MAXLEN, DIM)  # every [MASK] position kept: query augmentation
    np.testing.assert_allclose(states, reference(checkpoint, ids, attention), atol=1e-5)


def test_a_passage_is_marked_cut_and_loses_its_punctuation(encoder, checkpoint):
    tokenizer = BertTokenizerFast.from_pretrained(str(checkpoint))
    text = "ab, c."
    words = tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = [tokenizer.cls_token_id, tokenizer.convert_tokens_to_ids("[unused1]"), *words, tokenizer.sep_token_id]
    expected = reference(checkpoint, ids, [1] * len(ids))
    punctuation = {tokenizer.convert_tokens_to_ids(symbol) for symbol in string.punctuation}
    kept = [i for i, token in enumerate(ids) if token not in punctuation]
    states = encoder.passage_states([text], ()).tokens[0]
    assert len(kept) == len(ids) - 2
    np.testing.assert_allclose(states, expected[kept], atol=1e-5)
    before = encoder.truncated
    long = encoder.passage_states([" ".join("x" * 100)], ()).tokens[0]
    assert len(long) == DOC_MAXLEN and encoder.truncated == before + 1
    assert np.allclose(np.linalg.norm(long, axis=1), 1.0, atol=1e-5)


def test_a_folder_without_the_projection_is_refused(tmp_path, checkpoint):
    import shutil

    from safetensors.torch import save_file

    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    weights = load_file(str(broken / "model.safetensors"))
    del weights["linear.weight"]
    save_file(weights, str(broken / "model.safetensors"))
    with pytest.raises(ValueError, match="no ColBERT projection"):
        Encoder(str(broken)).states(["a"])


def test_a_folder_whose_bert_weights_are_under_another_prefix_is_refused(tmp_path, checkpoint):
    import shutil

    from safetensors.torch import save_file

    renamed = tmp_path / "renamed"
    shutil.copytree(checkpoint, renamed)
    weights = load_file(str(renamed / "model.safetensors"))
    save_file({name.replace("bert.", "roberta.", 1): tensor for name, tensor in weights.items()},
              str(renamed / "model.safetensors"))
    with pytest.raises(ValueError, match="lacks BERT weights"):
        Encoder(str(renamed)).states(["a"])


def test_a_checkpoint_of_another_model_type_is_refused(tmp_path, checkpoint):
    import json
    import shutil

    other = tmp_path / "other"
    shutil.copytree(checkpoint, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "xlm-roberta"}))
    with pytest.raises(ValueError, match="'xlm-roberta' model"):
        Encoder(str(other)).states(["a"])


def test_settings_nested_under_config_are_read_as_the_authors_loader_reads_them(tmp_path, checkpoint):
    import json

    from multihop.retrievers.colbert_encoder import METADATA, ColBERTSettings

    flat = json.loads((checkpoint / METADATA).read_text())
    (tmp_path / METADATA).write_text(json.dumps({"config": {**flat, "doc_maxlen": 99}, "meta": {}}))
    settings = ColBERTSettings.read(tmp_path)
    assert (settings.doc_maxlen, settings.query_maxlen, settings.dim) == (99, QUERY_MAXLEN, DIM)
    assert ColBERTSettings.read(checkpoint).doc_maxlen == DOC_MAXLEN


def test_a_reranker_on_it_scores_query_tokens_against_passage_tokens(encoder):
    import dspy

    from multihop.retrievers import MaxSim

    texts = ["ab, cd.", "x y z", "cd ab"]
    candidates = dspy.Prediction(passages=texts, ids=["a", "b", "c"])
    hits = MaxSim(encoder=encoder).rerank("ab cd", candidates, k=3)
    query = encoder.states(["ab cd"]).tokens[0]
    passages = encoder.passage_states(texts, ()).tokens
    expected = [float((query @ tokens.T).max(axis=1).mean()) for tokens in passages]
    assert hits.ids == [candidates.ids[i] for i in np.argsort(expected)[::-1]]
    np.testing.assert_allclose(hits.scores, sorted(expected, reverse=True), atol=1e-5)


def test_a_hub_id_resolves_through_the_hub_cache_with_its_commit(checkpoint, tmp_path, monkeypatch):
    import huggingface_hub

    commit, asked = "0123456789abcdef0123456789abcdef01234567", []

    def snapshot_download(repo_id, revision=None, **kwargs):  # the Hub's cache layout over the local checkpoint
        asked.append((repo_id, revision))
        snapshot = tmp_path / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots" / (revision or commit)
        if not snapshot.exists():
            snapshot.mkdir(parents=True)
            for item in checkpoint.iterdir():
                (snapshot / item.name).symlink_to(item)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.chdir(tmp_path)  # no colbert-ir/ folder here
    hub = Encoder("colbert-ir/colbertv2.0")
    assert isinstance(hub, ColBERTEncoder) and hub.revision == commit
    assert hub.config()["revision"] == commit and asked[0][0] == "colbert-ir/colbertv2.0"
    assert hub.checksum() == Encoder(str(checkpoint)).checksum()
