"""A trained student on a program's stages: which stages of a program a ``multihop distill`` adapter learnt
(:func:`trained_stages`), and running those stages on the student's LM (:func:`use_student`, by ``set_stage_lm``)
while the other stages keep theirs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import dspy

from multihop.lm.backends import STUDENT_MANIFEST


def trained_stages(program: dspy.Module, adapter: str | Path) -> list[str]:
    """The stages of ``program`` the student in ``adapter`` was trained for: those its manifest lists under the
    program's class (a student of several programs learnt each one's stages from that program's prompts), or, for a
    manifest that does not say which program its rows came from (rows without their collection's manifest), every
    stage of that name."""
    path = Path(adapter) / STUDENT_MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        programs = manifest.get("programs")
        learnt = programs.get(type(program).__name__, []) if programs else manifest["stages"]
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path} is not a distillation manifest ({exc}): pass a `multihop distill` folder") from None
    return [stage for stage in program.stage_names() if stage in learnt]


def use_student(program: dspy.Module, lm: dspy.LM, adapter: str | Path | None,
                stages: Sequence[str] | None = None) -> list[str]:
    """Run the stages of ``program`` that the student in ``adapter`` learnt on ``lm`` (that student's LM; a served
    student's folder may be None: it learnt every stage); returns them. ``stages`` (names or their first parts, as
    ``set_stage_lm`` takes them) narrows that to those stages, each of which the student must have learnt: a stage it
    did not learn is refused in one line, as is a student that learnt none of ``program``'s stages — the program
    would silently run on its base LM."""
    learnt = trained_stages(program, adapter) if adapter is not None else program.stage_names()
    if not learnt:
        raise ValueError(f"the student {adapter} learnt no stage of {type(program).__name__} (stages: "
                         f"{', '.join(program.stage_names())}): train it on that program's rows")
    if stages is None:
        chosen = learnt
    else:
        unknown = [stage for stage in stages if not any(name == stage or name.split(".")[0] == stage
                                                        for name in learnt)]
        if unknown:
            raise ValueError(f"the student {adapter or lm.model} did not learn {', '.join(unknown)} of "
                             f"{type(program).__name__} (it learnt {', '.join(learnt)}): train it on those stages' "
                             "rows too")
        chosen = list(stages)
    for stage in chosen:
        program.set_stage_lm(stage, lm)
    return chosen
