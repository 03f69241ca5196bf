"""``multihop compare``: three programs on three questions with a scripted LM and a BM25 index write the
table (every mean with its interval), the paired tests, the charts and the report; a rerun skips finished rows; adding
a program runs only it; the budget reaches the programs and the output; the report renders in headless Chromium
(slow)."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import dspy
import pytest

import multihop
from multihop.cli import app
from multihop.cli.errors import run
from multihop.data.folders import RunMismatchError
from multihop.data.jsonl import read_rows
from multihop.evaluation import runner
from multihop.experiments.budget import Budget, paper_settings
from multihop.experiments.report import question_anchor

from helpers import field, local_ray, loopback_on_musique, runs_rows, scripted_lm, without_seconds

QUESTIONS = [
    ("q1", "Which city is the capital of France?", "Paris",
     [("France", "Paris is the capital of France."), ("Germany", "Berlin is the capital of Germany.")]),
    ("q2", "Who wrote Hamlet?", "William Shakespeare",
     [("Hamlet", "Hamlet is a tragedy written by William Shakespeare."), ("Faust", "Faust is a play by Goethe.")]),
    ("q3", "What is the largest planet?", "Jupiter",
     [("Jupiter", "Jupiter is the largest planet in the Solar System."), ("Mars", "Mars is the fourth planet.")]),
]
GOLD = {question: answer for _, question, answer, _ in QUESTIONS}
THREE = ["NoRetrieval", "SingleStepRAG", "HANRAG"]


@pytest.fixture
def musique(tmp_path, monkeypatch):
    """A MULTIHOP_DATA whose MuSiQue dev file holds the three questions (each with its gold paragraph first), and a
    MULTIHOP_HOME of the test's own for the BM25 index."""
    data = tmp_path / "data"
    (data / "musique" / "dev").mkdir(parents=True)
    records = [{"id": qid, "question": question, "answers": [answer],
                "paragraphs": [{"title": title, "text": text, "is_supporting": i == 0}
                               for i, (title, text) in enumerate(paragraphs)]}
               for qid, question, answer, paragraphs in QUESTIONS]
    (data / "musique" / "dev" / "musique_qa_100.json").write_text(json.dumps(records))
    monkeypatch.setenv("MULTIHOP_DATA", str(data))
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    return data


def outputs(prompt: str) -> list[str]:
    """The output fields a ChatAdapter prompt asks for."""
    asked = prompt.rsplit("Respond with the corresponding output fields", 1)[1]
    return [name for name in re.findall(r"\[\[ ## (\w+) ## \]\]", asked) if name != "completed"]


def respond(prompt: str) -> dict:
    """Any stage of the three programs: HANRAG's router says single-step and its relevance judge keeps every passage;
    an answer is right when the stage read passages, "I do not know" when it did not (NoRetrieval)."""
    read = "[[ ## passages ## ]]" in prompt or "[[ ## documents ## ]]" in prompt
    values = {"route": "single-step question", "relevant": "true",
              "answer": GOLD[field(prompt, "question")] if read else "I do not know",
              "next_sentence": "So the answer is: unknown."}
    return {name: values[name] for name in outputs(prompt)}


@pytest.fixture
def lm():
    """The scripted LM, configured; no cache, so every call reaches it (``engine.requests``)."""
    scripted, engine = scripted_lm(respond, cache=False)
    dspy.configure(lm=scripted)
    return engine


def compare(out, programs=THREE, budget=None, reference=None):
    return multihop.compare(out, programs=programs, datasets=["musique"], first_stage="bm25",
                            budget=budget or Budget(k=2, max_iterations=3), progress=False, reference=reference)


def test_three_programs_on_three_questions_write_the_table_the_charts_and_the_report(musique, lm, tmp_path):
    out = tmp_path / "cmp"
    comparison = compare(out)
    rows = {row["program"]: row for row in comparison["rows"]}
    assert list(rows) == THREE and all(row["questions"] == 3 and row["dataset"] == "musique" for row in rows.values())
    assert rows["NoRetrieval"]["em"] == 0.0 and rows["SingleStepRAG"]["em"] == rows["HANRAG"]["em"] == 1.0
    assert rows["NoRetrieval"]["recall@2"] is None and rows["SingleStepRAG"]["recall@2"] == 1.0
    assert rows["NoRetrieval"]["llm_calls"] == rows["SingleStepRAG"]["llm_calls"] == 1.0
    assert rows["NoRetrieval"]["retrieval_calls"] == 0.0 and rows["HANRAG"]["retrieval_calls"] == 1.0
    assert rows["HANRAG"]["llm_calls"] >= 3.0  # router, a relevance verdict per passage kept, the answer
    # the table's LLM calls are the calls the LM served, its tokens what the engine counted
    assert len(lm.requests) == sum(3 * row["llm_calls"] for row in rows.values())
    assert all(row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 for row in rows.values())
    assert all(row["errors"] == 0.0 and row["fallbacks"] == 0.0 for row in rows.values())
    assert json.loads((out / "comparison.json").read_text())["rows"] == comparison["rows"]

    markdown = (out / "comparison.md").read_text()
    table = [line for line in markdown.split("## Paired tests")[0].splitlines() if line.startswith("| ")]
    assert table[0].startswith("| program | n | EM | F1 | Acc | Cover-EM | R@2 | R@5 | R@k | nDCG@10 | MRR | "
                               "LLM calls/q | retrieval steps/q | input tokens/q | output tokens/q | s/q | errors/q | "
                               "fallbacks/q |")
    # the methods first, then the baselines, each group under its name; then the papers' numbers
    assert [line.split(" | ")[0].rstrip(" |") for line in table[1:]] == [
        "| **methods**", "| HANRAG", "| **baselines**", "| NoRetrieval", "| SingleStepRAG",
        "| HANRAG — paper (theirs, Llama-3.1-8B-Instruct) [1]"]
    # SingleStepRAG's EM and F1, in percent, each with its interval (right on every question: of zero width)
    assert table[5].split(" | ")[2:4] == ["100.0 [100.0–100.0]", "100.0 [100.0–100.0]"]
    assert table[6].split(" | ")[2:5] == ["29.8", "36.6", "43.2"]  # HANRAG Table 2, MuSiQue: theirs
    assert "1. Sun et al., 2025, Table 2: HANRAG with Llama-3.1-8B-Instruct" in markdown
    assert "_3 questions: the intervals are wide;" in markdown and "## Paired tests" in markdown

    charts = [out / name for name in ("f1_vs_llm_calls.png", "f1_vs_seconds.png", "recall_at_k.png")]
    assert comparison["charts"] == [chart.name for chart in charts]
    assert all(chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 5000 for chart in charts)

    report = (out / "report.html").read_text()
    assert report.count("data:image/png;base64,") == 3 and "<link" not in report and 'src="http' not in report
    assert report.count('<tr class="ours">') == 3 and report.count('<tr class="paper"') == 1
    assert '100.0 <span class="interval">[100.0–100.0]</span>' in report and "the intervals are wide" in report
    assert '<table class="paired" data-dataset="musique">' in report
    assert report.index(">methods</th>") < report.index("<td>HANRAG</td>") < report.index(">baselines</th>") < \
        report.index("<td>NoRetrieval</td>")
    assert all(f'id="{question_anchor("musique", qid)}"' in report for qid, *_ in QUESTIONS)
    assert report.count('<details class="trace"') == 9  # each program's trace of each question
    assert "router</td><td>lm</td>" in report and "single-step question" in report  # HANRAG's stages, traced
    for program in THREE:  # every question's trace file is in the report
        assert len(list((out / "musique" / program / "traces").glob("*.json"))) == 3


def test_a_rerun_skips_the_finished_rows(musique, lm, tmp_path):
    out = tmp_path / "cmp"
    compare(out)
    results = out / "musique" / "HANRAG" / "results.jsonl"
    kept = results.read_text().splitlines()[:2]  # the run died before HANRAG's third row was written
    results.write_text("\n".join(kept) + "\n")
    missing = next(qid for qid, *_ in QUESTIONS if qid not in read_rows(results))
    question = next(q for qid, q, *_ in QUESTIONS if qid == missing)
    before = len(lm.requests)
    comparison = compare(out)
    rerun = lm.requests[before:]
    assert rerun and all(field(prompt, "question") == question for prompt in rerun)  # that one question only
    assert len(rerun) == read_rows(results)[missing]["counts"]["llm_calls"]
    assert all(row["questions"] == 3 for row in comparison["rows"])
    before = len(lm.requests)
    compare(out)
    assert len(lm.requests) == before  # all done: nothing runs


def test_a_comparison_grows_to_more_questions_asking_only_the_new_ones(musique, lm, tmp_path):
    out = tmp_path / "cmp"
    multihop.compare(out, programs=["NoRetrieval"], datasets=["musique"], first_stage="bm25", limit=2,
                     budget=Budget(k=2, max_iterations=3), progress=False)
    first = (out / "musique" / "NoRetrieval" / "results.jsonl").read_text()
    before = len(lm.requests)
    comparison = compare(out, programs=["NoRetrieval"])  # every question now
    assert len(lm.requests) - before == 1 and comparison["rows"][0]["questions"] == 3
    assert (out / "musique" / "NoRetrieval" / "results.jsonl").read_text().startswith(first)


def test_adding_a_program_runs_only_it(musique, lm, tmp_path):
    out = tmp_path / "cmp"
    compare(out, programs=["NoRetrieval", "SingleStepRAG"])
    files = {program: (out / "musique" / program / "results.jsonl").read_bytes()
             for program in ("NoRetrieval", "SingleStepRAG")}
    before = len(lm.requests)
    comparison = compare(out, programs=THREE)
    added = lm.requests[before:]
    hanrag = read_rows(out / "musique" / "HANRAG" / "results.jsonl")
    assert len(added) == sum(row["counts"]["llm_calls"] for row in hanrag.values()) and len(hanrag) == 3
    assert {name for prompt in added for name in outputs(prompt)} == {"route", "relevant", "answer"}  # HANRAG's
    assert not any("[[ ## passages ## ]]" in prompt for prompt in added)  # no SingleStepRAG call
    assert all("[[ ## documents ## ]]" in prompt for prompt in added if outputs(prompt) == ["answer"])  # no closed-book
    assert {program: (out / "musique" / program / "results.jsonl").read_bytes() for program in files} == files
    assert [row["program"] for row in comparison["rows"]] == THREE
    assert "| HANRAG | 3 |" in (out / "comparison.md").read_text()


def test_the_budget_reaches_every_program_and_is_recorded_in_the_output(musique, lm, tmp_path):
    out = tmp_path / "cmp"
    comparison = compare(out, budget=Budget(k=1, max_iterations=2, max_tokens=50))
    assert comparison["budget"] == {"k": 1, "max_iterations": 2, "max_tokens": 50, "mode": "shared"}
    assert comparison["programs"]["HANRAG"]["budget"] == {"k": "k", "max_iterations": "max_steps"}
    assert comparison["programs"]["SingleStepRAG"]["budget"] == {"k": "k", "max_iterations": None}
    assert comparison["programs"]["NoRetrieval"]["budget"] == {"k": None, "max_iterations": None}
    assert comparison["programs"]["HANRAG"]["config"]["max_steps"] == 2
    for program in ("SingleStepRAG", "HANRAG"):  # each read the k = 1 passage the budget allows
        rows = read_rows(out / "musique" / program / "results.jsonl").values()
        assert all(len(row["passage_ids"]) == 1 for row in rows)
        manifest = json.loads((out / "musique" / program / "run.json").read_text())
        assert manifest["budget"] == comparison["budget"] and manifest["config"]["k"] == 1
        assert manifest["lm_settings"]["max_tokens"] == 50  # every LM call capped
    markdown = (out / "comparison.md").read_text()
    assert "k = 1 (passages per retrieval); max_iterations = 2" in markdown and "max_tokens = 50" in markdown
    assert "HANRAG: k → k, max_iterations → max_steps" in markdown
    with pytest.raises(RunMismatchError, match="budget"):  # another budget is another run: refused, not mixed
        compare(out, budget=Budget(k=2, max_iterations=2, max_tokens=50))


def test_the_papers_budget_runs_each_program_with_its_papers_settings_and_records_them(musique, lm, tmp_path):
    out = tmp_path / "cmp"
    comparison = compare(out, programs=["HANRAG", "ircot"], budget=Budget(k=1, max_iterations=2, mode="paper"))
    assert [row["program"] for row in comparison["rows"]] == ["HANRAG", "IRCoT"]  # "ircot" is IRCoT
    ircot, hanrag = comparison["programs"]["IRCoT"], comparison["programs"]["HANRAG"]
    assert ircot["paper_settings"] == {"max_steps": 8, "max_paragraphs": 15} and ircot["config"]["max_steps"] == 8
    assert ircot["config"]["k"] == 4 and hanrag["config"]["k"] == 5  # their defaults, not the shared k = 1
    assert hanrag["config"]["max_steps"] == 5 and hanrag["paper_settings"] == {} and "budget" not in hanrag
    assert comparison["budget"] == {"max_tokens": None, "mode": "paper"}  # k and iterations are each program's
    markdown = (out / "comparison.md").read_text()
    assert "budget: each program's paper's settings; max_tokens = " in markdown and "k = 1" not in markdown
    assert "IRCoT: max_steps = 8, max_paragraphs = 15" in markdown and "HANRAG: defaults" in markdown
    assert compare(out, programs=["IRCoT"], budget=Budget(k=3, mode="paper"))["rows"]  # its --k is not this run's
    with pytest.raises(RunMismatchError, match="budget"):  # the shared budget is another run: refused, not mixed
        compare(out, programs=["IRCoT"], budget=Budget(k=1, max_iterations=2))
    with pytest.raises(ValueError, match="budget mode must be one of shared, paper"):
        Budget(mode="theirs")


def test_each_program_reads_the_dense_index_pooled_as_its_class_asks(musique, lm, tmp_path):
    comparison = multihop.compare(tmp_path / "cmp", programs=["CoopRAG", "SingleStepRAG"], datasets=["musique"],
                                  first_stage="dense", encoder="minilm", budget=Budget(k=2), progress=False)
    indexes = comparison["retriever"]["indexes"]["musique"]
    assert set(indexes) == {"cls", "mean"}  # CoopRAG's Eq. 2 first stage is [CLS]; the others' the mean
    for name, pooling in (("CoopRAG", "cls"), ("SingleStepRAG", "mean")):
        manifest = json.loads((tmp_path / "cmp" / "musique" / name / "run.json").read_text())
        assert manifest["retriever"] == Path(indexes[pooling]).name


def test_a_named_papers_budget_runs_each_program_as_that_paper_ran_it_and_records_it(musique, lm, tmp_path):
    budget = Budget.parse("paper:DualRAG", max_tokens=40)
    assert (budget.mode, budget.paper) == ("paper", "DualRAG")
    comparison = multihop.compare(tmp_path / "cmp", programs=["IRCoT", "NoRetrieval"], datasets=["musique"],
                                  first_stage="dense", encoder="minilm", budget=budget, progress=False)
    # DualRAG §4.3: every iterative baseline at most 5 steps, the top 50 → reranker → top 10
    ircot = comparison["programs"]["IRCoT"]
    assert ircot["paper_settings"] == {"k": 10, "n": 50, "rerank": "maxsim", "max_steps": 5}
    manifest = json.loads((tmp_path / "cmp" / "musique" / "IRCoT" / "run.json").read_text())
    assert {key: manifest["config"][key] for key in ("k", "n", "rerank", "max_steps")} == ircot["paper_settings"]
    assert manifest["budget"] == {"max_tokens": 40, "mode": "paper", "paper": "DualRAG"}
    assert "budget: DualRAG's paper's settings for each program" in (tmp_path / "cmp" / "comparison.md").read_text()
    assert paper_settings("CoopRAG", "DualRAG") == {}  # a program the paper does not run: its own paper's settings
    with pytest.raises(ValueError, match="no paper of that name declares tables; choose from CoopRAG, DualRAG"):
        paper_settings("IRCoT", "IRCoT")
    with pytest.raises(ValueError, match="give mode='paper' with it"):
        Budget(paper="DualRAG")


def test_a_stage_that_falls_back_counts_in_fallbacks_per_question_not_in_errors(musique, tmp_path):
    scripted, _ = scripted_lm(lambda prompt: {"nonsense": "?"}, cache=False)  # no reply parses
    dspy.configure(lm=scripted)
    comparison = compare(tmp_path / "cmp", programs=["SingleStepRAG"])
    row = comparison["rows"][0]
    assert row["fallbacks"] == 1.0 and row["errors"] == 0.0 and row["em"] == 0.0  # one fallback answer a question
    line = next(line for line in (tmp_path / "cmp" / "comparison.md").read_text().splitlines()
                if line.startswith("| SingleStepRAG |"))
    assert line.endswith("| 0.00 | 1.0 [1.0–1.0] |")  # errors/q, fallbacks/q (one on every question)


def test_each_program_is_tested_against_the_reference_on_the_same_questions(musique, lm, tmp_path):
    out = tmp_path / "cmp"
    paired = compare(out)["paired"]["musique"]
    assert paired["reference"] == "HANRAG"  # the table's first row: the method
    assert paired["metrics"] == ["em", "f1", "acc", "cover_em", "recall@2", "recall@5", "recall@k", "ndcg@10", "mrr"]
    closed_book = paired["programs"]["NoRetrieval"]
    # wrong where HANRAG is right on all 3 questions: 2 of the 2**3 sign flips are as far from 0
    assert closed_book["em"] == {"difference": -1.0, "interval": [-1.0, -1.0], "p_value": 0.25, "n": 3}
    assert closed_book["recall@2"] == {"difference": None, "interval": None, "p_value": None, "n": 0}  # no retrieval
    assert paired["programs"]["SingleStepRAG"]["em"] == {"difference": 0.0, "interval": [0.0, 0.0], "p_value": 1.0,
                                                         "n": 3}
    markdown = (out / "comparison.md").read_text()
    assert "### musique: each program − HANRAG, on the same questions" in markdown
    assert "| NoRetrieval | 3 | -100.0 [-100.0, -100.0] p=0.250 |" in markdown
    before = len(lm.requests)
    paired = compare(out, reference="single-step-rag")["paired"]["musique"]  # the rows are there: nothing runs
    assert len(lm.requests) == before and paired["reference"] == "SingleStepRAG"
    assert list(paired["programs"]) == ["HANRAG", "NoRetrieval"]
    assert json.loads((out / "comparison.json").read_text())["paired"]["musique"] == paired
    with pytest.raises(ValueError, match="the reference program IRCoT is not compared"):
        compare(out, reference="IRCoT")


def test_bad_programs_students_and_budgets_are_one_line_errors(musique, tmp_path, capsys):
    assert run(app, ["compare", "--out", str(tmp_path / "c"), "--programs", "NoRetrieval,Nope"]) == 2
    assert "error: unknown program(s) Nope; choose from" in capsys.readouterr().err
    assert run(app, ["compare", "--out", str(tmp_path / "c"), "--student", "HANRAG"]) == 2
    assert "takes PROGRAM=ADAPTER_DIR or PROGRAM=SPEC[@DIR], got 'HANRAG'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="a student for HANRAG, which is not compared"):
        multihop.compare(tmp_path / "c", programs=["NoRetrieval"], students={"HANRAG": tmp_path})
    with pytest.raises(ValueError, match="budget k must be a whole number"):
        Budget(k=0)


def test_a_shard_that_means_nothing_is_a_one_line_error(musique, tmp_path, capsys):
    command = ["compare", "--out", str(tmp_path / "c"), "--programs", "NoRetrieval", "--datasets", "musique"]
    assert run(app, [*command, "--shard", "3/2"]) == 2
    assert "error: --shard '3/2': write i/n with 1 ≤ i ≤ n" in capsys.readouterr().err
    assert not list((tmp_path / "c").rglob("results.jsonl"))


@pytest.mark.slow
def test_the_report_renders_in_headless_chromium_with_its_table_and_an_opened_trace(musique, lm, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        pytest.skip("no Chromium on PATH (`make setup` installs it as root with apt-get: apt-get install chromium)")
    out = tmp_path / "cmp"
    compare(out)
    anchor = question_anchor("musique", "q2")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'chr'}"]
    url = f"{(out / 'report.html').as_uri()}#{anchor}"  # the link to a question opens it and its traces
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    assert dom.count('<tr class="ours">') == 3 and "HANRAG — paper (theirs, Llama-3.1-8B-Instruct)" in dom
    opened = re.search(rf'<details class="question" id="{anchor}" open="">(.*?)</details>\s*</details>\s*'
                       rf'<details class="question"', dom, re.S)
    assert opened, "the linked question was not opened by the page's script"
    assert opened.group(1).count('<details class="trace" data-program=') == 3
    assert re.search(r'<details class="trace" data-program="HANRAG" open="">', opened.group(1))
    assert "Who wrote Hamlet?" in opened.group(1) and "William Shakespeare" in opened.group(1)
    assert f'<details class="question" id="{question_anchor("musique", "q1")}">' in dom  # the others stay closed
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1280,2000", (out / "report.html").as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20000


def test_threads_run_every_programs_questions_through_one_pool_with_the_serial_rows(musique, tmp_path):
    import threading
    import time

    active, overlapped, lock = [], [], threading.Lock()

    def slow(prompt: str) -> dict:
        kind = "passages" if "[[ ## passages ## ]]" in prompt else "other"  # SingleStepRAG, or the two others
        with lock:
            active.append(kind)
            overlapped.append(len(set(active)) > 1)
        time.sleep(0.05)
        with lock:
            active.remove(kind)
        return respond(prompt)

    rows = {}
    for threads in (1, 6):
        dspy.configure(lm=scripted_lm(slow, cache=False)[0])
        out = tmp_path / f"cmp{threads}"
        comparison = multihop.compare(out, programs=THREE, datasets=["musique"], first_stage="bm25",
                                      budget=Budget(k=2, max_iterations=3), progress=False, threads=threads)
        assert [row["program"] for row in comparison["rows"]] == THREE
        rows[threads] = {program: sorted(({k: v for k, v in row.items() if k != "seconds"} for row in
                                          read_rows(out / "musique" / program / "results.jsonl").values()),
                                         key=lambda row: row["id"]) for program in THREE}
    assert rows[6] == rows[1]
    assert any(overlapped)  # SingleStepRAG's calls ran beside the other programs': one pool for all


def test_one_corpus_or_retriever_folder_serves_every_program_and_dataset(musique, lm, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"  # the dev paragraphs among others: ids are content hashes, so gold is found
    passages = [{"title": title, "text": text} for *_, paragraphs in QUESTIONS for title, text in paragraphs]
    passages += [{"title": f"Other {i}", "text": f"Unrelated passage number {i} about nothing."} for i in range(5)]
    corpus.write_text("".join(json.dumps(passage) + "\n" for passage in passages))
    comparison = multihop.compare(
        tmp_path / "by-corpus", programs=["SingleStepRAG"], datasets=["musique"], first_stage="bm25",
        budget=Budget(k=2, max_iterations=3), progress=False, corpus=corpus)
    index = Path(comparison["retriever"]["indexes"]["musique"]["mean"])
    assert len((index / "corpus.jsonl").read_text().splitlines()) == len(passages)  # the given corpus
    assert comparison["rows"][0]["recall@2"] == 1.0
    assert run(app, ["index", "build", str(corpus), "--first-stage", "bm25", "--out", str(tmp_path / "bm25")]) == 0
    comparison = multihop.compare(tmp_path / "by-folder", programs=["SingleStepRAG"], datasets=["musique"],
                                  first_stage="bm25", budget=Budget(k=2, max_iterations=3), progress=False,
                                  retriever=tmp_path / "bm25")
    assert comparison["retriever"]["indexes"]["musique"] == {"mean": str(tmp_path / "bm25")}
    assert comparison["rows"][0]["recall@2"] == 1.0
    assert run(app, ["compare", "--out", str(tmp_path / "both"), "--corpus", str(corpus), "--retriever",
                     str(tmp_path / "bm25"), "--first-stage", "bm25"]) == 2
    assert "not both" in capsys.readouterr().err


def test_a_run_on_the_embedded_model_says_what_its_scores_mean_in_the_table_and_the_report(musique, tmp_path):
    from multihop.lm.models import embedded_notice

    assert embedded_notice("openai/qwen") is None
    scripted, _ = scripted_lm(respond, name="smollm2-llamacpp-abc-json6", cache=False)  # local/smollm2-...: embedded
    dspy.configure(lm=scripted)
    comparison = compare(tmp_path / "cmp", programs=["NoRetrieval"])
    assert comparison["notice"] == embedded_notice("local/smollm2") and "pipeline runs" in comparison["notice"]
    assert f"note: {comparison['notice']}" in (tmp_path / "cmp" / "comparison.md").read_text()
    assert "pipeline runs, not how good a method is" in (tmp_path / "cmp" / "report.html").read_text()


@pytest.mark.slow  # a local two-CPU Ray cluster; three programs on four questions, here and on Ray (~40 s)
def test_a_comparison_run_on_ray_is_the_comparison_of_a_local_run(tmp_path, monkeypatch):
    one, on_ray = tmp_path / "one", tmp_path / "ray"
    (tmp_path / "short_answers.py").write_text("def short(example, prediction, trace=None):\n"
                                               "    return float(len(prediction.answer) < 20)\n")
    monkeypatch.chdir(tmp_path)  # --metric imports it from here; the workers receive it whole
    with loopback_on_musique(tmp_path, monkeypatch) as flags, local_ray():
        command = ["compare", "--programs", ",".join(THREE), "--datasets", "musique", "--first-stage", "bm25", "--k",
                   "2", "--max-iterations", "2", "--judge-lm", "hosted_vllm/judge", "--metric",
                   "short_answers:short", *flags]
        assert run(app, [*command, "--out", str(one)]) == 0
        monkeypatch.setattr(runner, "run_question", None)  # no question is answered in this process
        assert run(app, [*command, "--out", str(on_ray), "--ray", "auto", "--threads", "2"]) == 0
    assert without_seconds(json.loads((on_ray / "comparison.json").read_text())) == without_seconds(
        json.loads((one / "comparison.json").read_text()))
    assert runs_rows(on_ray) == runs_rows(one) and sorted(runs_rows(one)) == [f"musique/{name}" for name in
                                                                               sorted(THREE)]
    assert all(len(rows) == 4 for rows in runs_rows(on_ray).values())
    assert all({"llm_eval", "short"} <= set(row["metrics"]) for rows in runs_rows(on_ray).values()
               for row in rows.values())
