"""Running a trained student: which stages of a program a ``multihop distill`` adapter learnt, and setting them on
its LM (``set_stage_lm``) while the other stages keep theirs."""

from __future__ import annotations

import json
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


def use_student(program: dspy.Module, lm: dspy.LM, adapter: str | Path | None) -> list[str]:
    """Run the stages of ``program`` that the student in ``adapter`` learnt on ``lm`` (that student's LM; a served
    student's folder may be None: then every stage); returns them. A student that learnt none of them is refused:
    the program would silently run on its base LM."""
    stages = trained_stages(program, adapter) if adapter is not None else program.stage_names()
    if not stages:
        raise ValueError(f"the student {adapter} learnt no stage of {type(program).__name__} (stages: "
                         f"{', '.join(program.stage_names())}): train it on that program's rows")
    for stage in stages:
        program.set_stage_lm(stage, lm)
    return stages
