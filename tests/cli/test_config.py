"""Run configurations in files: ``--config FILE`` gives every option of a command a key, flags on the command line
win, an unknown key or a file that is no TOML is one line, and the configuration a run resolved is written into its
folder as ``config.toml`` (without the API key), from which the run is started again."""

import pytest
import tomllib
from typer.testing import CliRunner

from multihop.cli import app
from multihop.cli.errors import run

from helpers import ROOT

runner = CliRunner()


def write(path, text):
    path.write_text(text)
    return path


def test_a_file_sets_the_options_flags_win_and_the_run_folder_keeps_what_it_resolved(questions, tmp_path,
                                                                                     monkeypatch):
    config = write(tmp_path / "run.toml", f'program = "NoRetrieval"\ndata = "{questions}"\nout = "{tmp_path / "x"}"\n'
                   'lm = "openai/m"\napi-base = "http://127.0.0.1:9/v1"\napi-key = "secret"\nlimit = 5\n')
    import multihop.evaluation.runner as runner_module

    seen = {}

    def fake_evaluate(program, examples, out, **kwargs):  # what the command resolved, without running an LM
        seen.update(program=type(program).__name__, examples=len(examples), out=str(out))
        return {"program": "NoRetrieval", "questions": len(examples)}

    monkeypatch.setattr(runner_module, "evaluate", fake_evaluate)
    monkeypatch.setattr(runner_module, "render_table", lambda summaries: "")
    result = runner.invoke(app, ["eval", "--config", str(config), "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert seen == {"program": "NoRetrieval", "examples": 1, "out": str(tmp_path / "x")}  # --limit 1 won
    kept = tomllib.loads((tmp_path / "x" / "config.toml").read_text())
    assert kept["program"] == "NoRetrieval" and kept["limit"] == 1 and kept["lm"] == "openai/m"
    assert "api_key" not in kept and "secret" not in (tmp_path / "x" / "config.toml").read_text()
    seen.clear()
    again = runner.invoke(app, ["eval", "--config", str(tmp_path / "x" / "config.toml")])  # the folder reruns itself
    assert again.exit_code == 0 and seen == {"program": "NoRetrieval", "examples": 1, "out": str(tmp_path / "x")}


@pytest.mark.parametrize("text, message", [
    ('program = "NoRetrieval"\ndepth = 3\n', "depth is no option of `multihop eval` (its keys: "),
    ("program = \n", "--config"),
])
def test_an_unknown_key_or_a_file_that_is_no_toml_is_one_line(tmp_path, capsys, text, message):
    config = write(tmp_path / "run.toml", text)
    assert run(app, ["eval", "--config", str(config)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and message in error[0] and error[0].startswith("error: ")


def test_the_examples_name_only_options_of_their_commands():

    import typer

    from multihop.cli.app import app as typer_app
    from multihop.cli.config import key_of

    group = typer.main.get_command(typer_app)
    for example in sorted((ROOT / "examples").glob("*.toml")):
        command = group.commands[example.stem]
        keys = {key_of(param) for param in command.params}
        assert set(k.replace("-", "_") for k in tomllib.loads(example.read_text())) <= keys, example.name


def test_an_index_build_keeps_its_configuration_beside_the_index(tmp_path):
    corpus = write(tmp_path / "corpus.jsonl", '{"id": "p1", "title": "Paris", "text": "Paris is in France."}\n')
    config = write(tmp_path / "index.toml", f'corpus = "{corpus}"\nfirst-stage = "bm25"\nk = 1\n')
    result = runner.invoke(app, ["index", "build", "--config", str(config), "--out", str(tmp_path / "index")])
    assert result.exit_code == 0, result.output
    kept = tomllib.loads((tmp_path / "index" / "config.toml").read_text())
    assert kept["first_stage"] == "bm25" and kept["corpus"] == str(corpus) and kept["out"] == str(tmp_path / "index")


def test_a_table_of_a_repeatable_key_value_option_reaches_the_command_as_its_pairs(tmp_path, monkeypatch):
    import multihop.experiments.reproduce as reproduce_module

    seen = {}
    monkeypatch.setattr(reproduce_module, "reproduce", lambda paper, out, **kwargs: seen.update(kwargs))
    config = write(tmp_path / "table.toml", 'lm = "openai/m"\n[lm-for]\n"Gemma2-9B" = "openai/gemma"\n'
                   '"GPT-4o-mini" = "openai/mini"\n')
    result = runner.invoke(app, ["reproduce", "CoopRAG", "--config", str(config), "--table", "2", "--out",
                                 str(tmp_path / "out"), "--lm-for", "Gemma2-27B=openai/big"])
    assert result.exit_code == 0, result.output
    assert seen["lm_for"] == {"Gemma2-27B": "openai/big"}  # a flag wins over the file, as every option's does
    result = runner.invoke(app, ["reproduce", "CoopRAG", "--config", str(config), "--table", "2", "--out",
                                 str(tmp_path / "out")])
    assert seen["lm_for"] == {"Gemma2-9B": "openai/gemma", "GPT-4o-mini": "openai/mini"}
    assert run(app, ["reproduce", "CoopRAG", "--table", "2", "--lm-for", "Gemma2-9B"]) == 2
