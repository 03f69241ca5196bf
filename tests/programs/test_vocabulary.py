"""One doorway to retrieval and one vocabulary: every rerank is a ``rerank`` step of the stage trace, hits carry
titles and texts, ``run_stage`` counts ``<stage>.fallback`` itself, and the settings' and stages' former names are
refused in one line (constructor, ``--set``, saved configs)."""

import json

import dspy
import pytest

from multihop.cli import app
from multihop.cli.errors import run
from multihop.data.corpus import Passage
from multihop.programs import CIRAG, HANRAG, ComposeRAG, CoopRAG, DualRAG, SingleStepRAG, load, save
from multihop.retrievers.query import Hits, merge_hits, pick, texts_of, titles_of

from helpers import StaticRetriever, TypedScript, scripted_lm

QUESTION = "Who founded the company that makes the Xbox?"


def test_hits_carry_titles_and_texts_through_picks_and_merges():
    hits = Hits(passages=["A: a", "B: b", "C: c"], ids=["1", "2", "3"], scores=[0.9, 0.5, 0.1],
                titles=["A", "B", "C"], texts=["a", "b", "c"])
    picked = pick(hits, [2, 0], [0.3, 0.2])
    assert (picked.ids, picked.titles, picked.texts, picked.scores) == (["3", "1"], ["C", "A"], ["c", "a"], [0.3, 0.2])
    merged = merge_hits([picked, hits], k=3)
    assert (merged.ids, merged.titles, merged.scores) == (["3", "1", "2"], ["C", "A", "B"], [0.3, 0.2, 0.5])
    untitled = Hits(passages=["x y"], ids=["9"], scores=[1.0])  # a DSPy retriever's: no titles, no parsing
    assert (titles_of(untitled), texts_of(untitled)) == ([""], ["x y"])
    assert "titles" not in merge_hits([untitled, hits], k=2)


def test_a_dense_index_gives_each_hit_its_title_and_text(small_retriever):
    hits = small_retriever("Who is the president?", k=3)
    corpus = small_retriever.corpus
    assert hits.titles == [corpus[pid].title for pid in hits.ids]
    assert hits.texts == [corpus[pid].text for pid in hits.ids]


def test_every_rerank_is_a_step_of_the_trace_and_no_retrieval_is_counted_twice(small_retriever, musique_dev):
    coop = CoopRAG(retriever=small_retriever, rerank="maxsim", n=6, k=2)
    with dspy.context(lm=TypedScript(coop, garbled=0).lm):
        prediction = coop(question=musique_dev[0].question)
    kinds = [record["kind"] for record in prediction.stage_trace]
    assert kinds.count("retriever") == prediction.counts["retrieval_calls"] == 1 and kinds.count("rerank") == 1
    rerank = next(record for record in prediction.stage_trace if record["kind"] == "rerank")
    assert rerank["stage"] == "rerank" and len(rerank["inputs"]["candidates"]) == 6 and rerank["inputs"]["k"] == 2
    assert rerank["outputs"]["ids"] == prediction.passage_ids  # what the later stages read

    dual = DualRAG(retriever=small_retriever, rerank="maxsim", n=6, k=2, max_iterations=1)
    replies = {"reason": {"thought": "Find the founder.", "need_retrieval": "true"},
               "identify": {"entities": json.dumps([{"entity": "Xbox", "queries": ["Xbox maker", "Xbox company"]}])},
               "summarize": {"knowledge": "Microsoft makes it."}, "answer": {"answer": "Bill Gates"}}
    lm = scripted_lm(lambda prompt: next(reply for stage, reply in replies.items()
                                         if f"[[ ## {next(iter(reply))} ## ]]" in prompt.rsplit("Respond", 1)[-1]))[0]
    with dspy.context(lm=lm):
        prediction = dual(question=QUESTION)
    steps = [(record["kind"], record["inputs"].get("query", record["inputs"].get("arg0")))
             for record in prediction.stage_trace if record["kind"] in ("retriever", "rerank")]
    assert steps == [("retriever", "Xbox maker"), ("retriever", "Xbox company"), ("rerank", "Xbox")]  # Eqs. 6–8
    assert prediction.counts["retrieval_calls"] == 2


def test_run_stage_counts_each_stages_fallback_itself():
    program = SingleStepRAG(retriever=StaticRetriever([Passage.make("Xbox", "Microsoft makes the Xbox.")]))
    with dspy.context(lm=scripted_lm(lambda prompt: {"nothing": "here"})[0]):
        failed = program(question=QUESTION)
    with dspy.context(lm=scripted_lm(lambda prompt: {"answer": "Microsoft"}, name="parsing")[0]):
        parsed = program(question=QUESTION)
    assert (failed.counts["answer.fallback"], failed.counts["fallbacks"]) == (1, 1) and failed.answer == ""
    assert parsed.counts["answer.fallback"] == 0 and "fallbacks" not in parsed.counts


@pytest.mark.parametrize(("cls", "old", "new", "value"), [
    (ComposeRAG, "paper_examples", "paper_demos", False),
    (ComposeRAG, "max_subquestions", "max_sub_questions", 3),
    (HANRAG, "max_subquestions", "max_sub_questions", 3),
    (CIRAG, "n", "n_triples", 12),
])
def test_a_former_setting_name_is_refused_naming_the_setting(cls, old, new, value):
    with pytest.raises(TypeError, match=f"'{old}'"):
        cls(**{old: value})
    assert cls(**{new: value}).config()[new] == value


def test_former_names_in_set_lines_and_saved_configs_are_refused_in_one_line(tmp_path, questions, capsys):
    argv = ["eval", "--program", "HANRAG", "--set", "max_subquestions=2", "--data", str(questions), "--out",
            str(tmp_path / "e")]
    assert run(app, argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "HANRAG has no" in err and "max_subquestions" in err and "max_sub_questions" in err  # and its settings
    assert not (tmp_path / "e" / "run.json").exists()

    program = ComposeRAG(retriever=StaticRetriever([]), max_reflections=1)
    save(program, tmp_path / "saved")
    manifest = tmp_path / "saved" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"paper_demos"', '"paper_examples"'))  # as an older release
    (tmp_path / "saved" / "files.json").unlink()  # the inventory would (rightly) refuse the edited file
    with pytest.raises(ValueError, match="differ in paper_demos, paper_examples;") as raised:
        load(tmp_path / "saved", retriever=program.retriever)
    assert "\n" not in str(raised.value)
    with pytest.raises(KeyError, match="ComposeRAG has no stage 'rerank'; stages: .*rank_passages"):
        program.set_stage_lm("rerank", scripted_lm(lambda prompt: {})[0])  # the stage's former name
