"""The README's Python block runs as written, from an empty folder, on the real data and the embedded LM
(slow: MPNet indexes ten questions' paragraphs and SmolLM2 answers six questions)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import data_root

README = Path(__file__).resolve().parent.parent / "README.md"


def python_block() -> str:
    """The first ```python block after the README's "## Python" heading."""
    section = README.read_text().split("\n## Python\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_the_readme_python_block_runs_as_written_from_an_empty_folder(tmp_path):
    data = data_root()
    script = python_block() + ("\nassert isinstance(summary, dict) and summary['questions'] == 5, summary\n"
                               "assert type(program).__name__ == 'SingleStepRAG' and prediction.counts['llm_calls']\n"
                               "print('ran', summary['questions'], 'questions')\n")
    env = {**os.environ, "MULTIHOP_DATA": str(data), "HF_HUB_OFFLINE": "1", "DSPY_CACHEDIR": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ran 5 questions" in result.stdout and (tmp_path / "runs" / "prog" / "manifest.json").exists()
    assert "truncated" not in result.stderr  # no stage reply cut at the default budget
