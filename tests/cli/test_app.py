"""Each method's own commands, mounted by the command line (``multihop <method> ...``) with what they declare: a
:class:`~multihop.programs.command_kit.CommandKit` parameter filled with the higher layers' steps, a shared option
(``--set``, ``--markers``) where a parameter names one, ``--config`` where a command asks for it."""

import importlib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from multihop.cli import app
from multihop.cli.errors import run
from multihop.programs.command_kit import CommandKit, SharedOption

app_module = importlib.import_module("multihop.cli.app")


def mounted_command(command) -> typer.Typer:
    sub = typer.Typer()
    sub.command("go")(command)
    return app_module.mounted(sub)


def test_a_method_command_receives_the_kit_and_takes_the_shared_option_it_names(monkeypatch, tmp_path):
    seen = {}

    def go(kit: CommandKit, settings: list[str] = SharedOption("--set"), markers: str = SharedOption("--markers"),
           out: Path = typer.Option(...)):
        seen.update(kit=kit, settings=settings, markers=markers)

    kit = object()
    monkeypatch.setattr(app_module, "method_kit", lambda: kit)
    sub = mounted_command(go)
    result = CliRunner().invoke(sub, ["--set", "k=3", "--set", "reader=x", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert seen == {"kit": kit, "settings": ["k=3", "reader=x"], "markers": None}
    helped = CliRunner().invoke(sub, ["--help"], env={"COLUMNS": "200"}).output
    assert "constructor switch as key=value" in helped and "query markers" in helped and "--kit" not in helped
    assert app_module.mounted(sub) is sub  # mounted once


def test_a_shared_option_the_command_line_lacks_is_refused_when_mounted():
    def go(thing: str = SharedOption("--nothing")):
        pass

    with pytest.raises(TypeError, match="no shared option --nothing; the shared options: --set, --markers"):
        mounted_command(go)


def test_the_kit_holds_the_shared_commands_steps():
    from multihop.cli.programs import retriever_folder
    from multihop.optimize.gold_targets import gold_trajectories

    kit = app_module.method_kit()
    assert kit.retriever_folder is retriever_folder and kit.gold_trajectories is gold_trajectories


def test_cooprag_train_takes_a_configuration_file(tmp_path, capsys):
    config = tmp_path / "train.toml"
    config.write_text('data = ["musique"]\nrecipe = "released"\nloss = "bce"\n')
    assert run(app, ["cooprag", "train", "--config", str(config), "--out", str(tmp_path / "enc")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "drop --loss or use --recipe paper" in err  # the file's values, refused
    assert run(app, ["cooprag", "train", "--config", str(config)]) == 2
    assert "--out" in capsys.readouterr().err


def test_the_method_commands_list_no_kit_option():
    runner = CliRunner()
    for command in (["dualrag", "sft"], ["hanrag", "revelator-data"], ["adaptiverag", "labels"],
                    ["adaptiverag", "train"], ["cooprag", "train"]):
        helped = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
        assert helped.exit_code == 0 and "--kit" not in helped.output, command
    assert "--config" in runner.invoke(app, ["cooprag", "train", "--help"], env={"COLUMNS": "200"}).output
