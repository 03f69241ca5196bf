"""Every command that reads a user's file or folder, given a broken one — or a program module, an MLflow server or a
Hugging Face Hub model that is not there (offline) —: exit 2 and one line naming it (and the line or field where there
is one) and what to change, no traceback, and no output left behind that a rerun would trip over."""


import pytest
from hostile import one_line

BAD_JSONL = '{"id": "q1", "question": "Where?", "answers": ["Paris"]}\n{"id": "q2", "question": \n'


def broken(tmp_path):
    """name → (argv, a fragment the one line holds)."""
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text(BAD_JSONL)
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"id": "q1", "label": "A"}\n')
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"prompt": "x"}\n')
    toml = tmp_path / "run.toml"
    toml.write_text('programs = "NoRetrieval"\nbudgett = "shared"\n')
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    return {
        "eval --data": (["eval", "--program", "NoRetrieval", "--data", jsonl, "--out", out], f"{jsonl}"),
        "compare --datasets": (["compare", "--programs", "NoRetrieval", "--datasets", jsonl, "--out", out],
                               f"{jsonl}"),
        "reproduce --config": (["reproduce", "--config", toml], "no option of `multihop reproduce`"),
        "compare --config": (["compare", "--config", toml], "budgett is no option of `multihop compare`"),
        "index build": (["index", "build", jsonl, "--out", out, "--first-stage", "bm25"], f"{jsonl}"),
        "adaptiverag train": (["adaptiverag", "train", labels, "--out", out], "field question is missing"),
        "distill": (["distill", rows, "--out", out], f"{rows}"),
        "merge": (["merge", out, empty, empty], f"{empty}"),
        "trace show": (["trace", "show", empty], f"{empty}"),
        "eval --load": (["eval", "--load", empty, "--data", "musique", "--out", out], f"{empty}"),
        "cirag extract": (["cirag", "extract", jsonl, "--out", out], f"{jsonl}"),
        "cooprag train": (["cooprag", "train", jsonl, "--out", out], f"{jsonl}"),
        "eval --program module:Class": (["eval", "--program", "no_such_module:Program", "--data", "musique", "--out",
                                         out], "no_such_module"),
        "eval --mlflow": (["eval", "--program", "NoRetrieval", "--data", "musique", "--out", out, "--mlflow",
                           "http://127.0.0.1:9"], "no tracking server answers there"),
        "index build --encoder Hub id": (["index", "build", "musique", "--out", out, "--encoder",
                                          "nobody-here/no-such-encoder"], "hf download nobody-here/no-such-encoder"),
        "eval --lm local:Hub id": (["eval", "--program", "NoRetrieval", "--data", "musique", "--out", out, "--lm",
                                    "local:nobody-here/no-such-lm"], "hf download nobody-here/no-such-lm"),
    }


CASES = ["eval --data", "compare --datasets", "reproduce --config", "compare --config", "index build",
         "adaptiverag train", "distill", "merge", "trace show", "eval --load", "cirag extract", "cooprag train",
         "eval --program module:Class", "eval --mlflow", "index build --encoder Hub id", "eval --lm local:Hub id"]


@pytest.mark.parametrize("case", CASES)
def test_a_broken_file_or_folder_is_one_line_naming_it(case, data, cli, tmp_path):
    argv, fragment = broken(tmp_path)[case]
    code, error = cli(*argv)
    assert code == 2, error
    line = one_line(error)
    assert fragment in line, line
    assert not (tmp_path / "out" / "results.jsonl").exists()
