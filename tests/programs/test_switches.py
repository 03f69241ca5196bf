"""Switch values typed by the program's annotations: ``--set`` and saved configs are coerced, and a value
that does not fit names the switch and its type in one line."""

from typing import Literal

import pytest
import typer

from multihop.cli import app
from multihop.cli.errors import run
from multihop.cli.programs import build_program
from multihop.programs import MultihopProgram
from multihop.programs.switches import SwitchTypeError, describe, typed


class Typed(MultihopProgram):
    def __init__(self, rounds: int = 1, share: float = 0.5, on: bool = True, mode: Literal["fast", "slow"] = "fast",
                 levels: tuple[str, ...] = ("a",), name: str | None = None):
        super().__init__()
        self.rounds, self.share, self.on, self.mode, self.levels, self.name = rounds, share, on, mode, levels, name


def test_each_annotation_is_described_in_words():
    assert [describe(t) for t in (int, float, bool, str, str | None, Literal["fast", "slow"], tuple[str, ...],
                                  list[int])] == ["an integer", "a number", "true or false", "a text",
                                                  "a text or none", "one of fast, slow", "a list of texts",
                                                  "a list of integers"]


def test_values_are_coerced_to_the_annotations_and_a_misfit_names_its_switch():
    assert typed(Typed, {"rounds": "3", "share": 1, "on": "no", "mode": "slow", "levels": ["a", "b"],
                         "name": None}) == {"rounds": 3, "share": 1.0, "on": False, "mode": "slow",
                                            "levels": ("a", "b"), "name": None}
    assert typed(Typed, {"name": False}) == {"name": None}  # false: none, for an optional switch (rerank=false)


def test_none_in_any_case_and_null_are_none_for_a_switch_that_takes_none():
    for written in ("none", "None", "NONE", " none ", "null", "Null"):
        assert typed(Typed, {"name": written}) == {"name": None}
    assert typed(Typed, {"mode": "fast", "levels": ["none"]}) == {"mode": "fast", "levels": ("none",)}
    with pytest.raises(SwitchTypeError, match="^Typed's rounds is an integer$"):  # a switch that takes no None
        typed(Typed, {"rounds": "none"})
    for switch, value, words in [("rounds", "abc", "an integer"), ("share", "half", "a number"),
                                 ("on", "maybe", "true or false"), ("mode", "medium", "one of fast, slow"),
                                 ("levels", 3, "a list of texts"),
                                 ("name", 5, r"a text or none \(write none or null\)")]:
        with pytest.raises(SwitchTypeError, match=f"^Typed's {switch} is {words}$"):
            typed(Typed, {switch: value})


def test_set_values_are_typed_on_the_command_line(questions, tmp_path, capsys):
    out = ["--data", str(questions), "--out", str(tmp_path / "e")]
    assert run(app, ["eval", "--program", "DualRAG", "--set", "max_iterations=abc", *out]) == 2
    assert capsys.readouterr().err == ("error: Invalid value for --set: max_iterations=abc: DualRAG's max_iterations "
                                       "is an integer\n")
    assert run(app, ["eval", "--program", "ComposeRAG", "--set", "simple_qa=perhaps", *out]) == 2
    assert "simple_qa=perhaps: ComposeRAG's simple_qa is true or false" in capsys.readouterr().err
    program, _ = build_program("CIRAG", None, None, None, None, "mpnet",
                               ['granularities=["triple", "passage"]', "max_iterations=2", "reranker=no"],
                               index=False)
    assert (program.granularities, program.max_iterations, program.reranker) == (["triple", "passage"], 2, False)


def test_set_says_none_as_none_in_any_case_or_null():
    for name in ("DualRAG", "CoopRAG", "IRCoT"):
        for written in ("None", "none", "NONE", "null", "false"):
            program, _ = build_program(name, None, None, None, None, "mpnet", [f"rerank={written}"], index=False)
            assert program.rerank is None
    with pytest.raises(typer.BadParameter, match=r"or None for no reranking \(--set rerank=none or rerank=null"):
        build_program("DualRAG", None, None, None, None, "mpnet", ["rerank=nothing"], index=False)
