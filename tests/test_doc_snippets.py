"""Every ```python block of README.md and docs/**/*.md runs as written: the blocks of a page are found by
:func:`python_blocks` (a new block or page is picked up with no edit here) and run in order, in one fresh Python
(``python -c``) started in an empty temporary folder, in one namespace (a later block uses the names of the earlier
ones), with ``MULTIHOP_HOME`` (its ``models/`` a link to the models installed already, when they are) and DSPy's
cache under the test's temporary folder and ``MULTIHOP_DATA`` the real data; the page passes when that Python exits
0. Each block is compiled under its page's path and line numbers, so a traceback points at the line of the page that
failed. A block that is not meant to run is fenced as another language (```text, ```bash); none is skipped.

What is swapped, and nothing else: no LM the snippets name is reachable here (a vLLM server at localhost:8000, OpenAI,
the embedded SmolLM2, whose answers would also make a page take minutes), so the Python first runs :data:`STAND_IN`,
which points every LM at the loopback OpenAI-compatible server (:mod:`multihop.lm.loopback`) this test runs, which
answers each stage from its JSON schema:

- ``multihop.make_lm`` (which ``multihop.configure_lm`` calls, and so every LM the library builds): its ``api_base``
  becomes the loopback's (``api_key`` a dummy); a ``local:`` spec (the embedded model, with or without a LoRA
  ``adapter``) becomes ``hosted_vllm/loopback`` there, the options that apply to local models alone (``adapter``,
  ``engine``, ``constrained``) dropped. The spec and every other option are kept, so a hosted or served spec runs
  under the adapter and schema decoding it would get on a server of its own.
- ``dspy.LM`` built without one of our engines (a snippet's own ``dspy.LM("openai/...")``): its ``api_base``, the
  loopback's.
- ``dspy.Embedder`` over a hosted model name: its ``api_base``, the loopback's, whose ``/embeddings`` answers a
  hashed bag-of-words vector a text.

The encoders (MPNet), BM25, FAISS, the data and the files a snippet writes are real. A page whose snippets load an
encoder or take more than a few seconds is ``slow``, listed in :data:`SLOW_PAGES` with its reason (a page not listed
runs in the fast tests); the others run in seconds. The README's embedded-LM block also runs on the real SmolLM2 in
``tests/test_readme.py``, the traces page's MLflow blocks on a scripted LM and on SmolLM2 with their output checked in
``tests/evaluation/test_mlflow_runs.py``."""

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from multihop.data.paths import home
from multihop.lm.loopback import loopback_server

from helpers import data_root

ROOT = Path(__file__).resolve().parent.parent
PYTHON = {"python", "py", "python3"}  # the fence languages that mark a block as Python
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*\{?\.?(?P<lang>[\w+-]*)")
SLOW_PAGES = {
    "README.md": "MPNet indexes ten questions' paragraphs",
    "docs/getting-started.md": "MPNet indexes ten questions' paragraphs",
    "docs/concepts/methods.md": "MPNet indexes five questions' paragraphs; RaLa, MaxSim and CIRAG's cosine read it",
    "docs/concepts/programs.md": "MPNet indexes five questions' paragraphs for CoopRAG's RaLa",
    "docs/concepts/retrieval.md": "MPNet indexes five questions' paragraphs with their token states; RaLa and MaxSim",
    "docs/concepts/traces.md": "MLflow's SQLite store in a subprocess (~12 s)",
}
PAGE_TIMEOUT = 600  # seconds a page's Python may run (each page takes under two minutes on 2 CPU cores)

STAND_IN = '''
import dspy
import multihop.lm.backends as _backends

_LOOPBACK = {api_base!r}
_LOCAL_ONLY = ("adapter", "engine", "constrained")
_make_lm = _backends.make_lm


def _loopback_make_lm(spec=_backends.DEFAULT_LM, **options):
    if spec.startswith("local:"):
        spec = "hosted_vllm/loopback"
        for option in _LOCAL_ONLY:
            options.pop(option, None)
    return _make_lm(spec, **{{**options, "api_base": _LOOPBACK, "api_key": "loopback"}})


_backends.make_lm = _loopback_make_lm
_lm_init = dspy.LM.__init__


def _loopback_lm_init(self, model, *args, **kwargs):
    if isinstance(kwargs.get("engine", "auto"), str):  # not one of our engines, which make_lm aimed already
        kwargs.update(api_base=_LOOPBACK, api_key="loopback")
    _lm_init(self, model, *args, **kwargs)


dspy.LM.__init__ = _loopback_lm_init
_embedder_init = dspy.Embedder.__init__


def _loopback_embedder_init(self, model, *args, **kwargs):
    if isinstance(model, str):
        kwargs.update(api_base=_LOOPBACK, api_key="loopback")
    _embedder_init(self, model, *args, **kwargs)


dspy.Embedder.__init__ = _loopback_embedder_init
del dspy
'''

RUNNER = '''
import json as _json
import sys as _sys

_blocks = _json.loads(open(_sys.argv[1]).read())
_sys.argv = ["-c"]
for _page, _line, _code in _blocks:
    exec(compile("\\n" * (_line - 1) + _code, _page, "exec"), globals())
'''


def pages() -> list[Path]:
    """README.md and every page under docs/, in order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """The ```python (or ```py, ```python3, ~~~python) blocks of a Markdown page, in order: (the page's line number
    of the block's first line, the block dedented by its fence's indent). A fence closes at a line of the same
    character, at least as long, with nothing after it."""
    blocks, lines, number = [], page.read_text().splitlines(), 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        number += 1
        if not opening:
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        body, start = [], number + 1
        while number < len(lines):
            closing = re.fullmatch(r"[ \t]*(`{3,}|~{3,})[ \t]*", lines[number])
            number += 1
            if closing and closing[1][0] == fence[0] and len(closing[1]) >= len(fence):
                break
            body.append(lines[number - 1])
        if opening["lang"].lower() in PYTHON:
            blocks.append((start, textwrap.dedent("\n".join(line[indent:] if line[:indent].isspace() else line
                                                            for line in body)) + "\n"))
    return blocks


def page_name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


PAGES = [page for page in pages() if python_blocks(page)]


def test_every_python_block_is_found_in_order_with_its_line_and_indent(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n```python\nx = 1\n```\n\n```bash\necho no\n```\n- item\n\n    ```py title=\"t\"\n"
                    "    if x:\n        y = x\n    ```\n~~~~python3\n```\nz = 2\n~~~~\n```text\nnot = python\n```\n")
    assert python_blocks(page) == [(3, "x = 1\n"), (12, "if x:\n    y = x\n"), (16, "```\nz = 2\n")]


def test_the_pages_with_python_blocks_are_found_and_every_slow_page_has_some():
    names = {page_name(page) for page in PAGES}
    assert {"README.md", "docs/getting-started.md", "docs/concepts/traces.md"} <= names
    assert set(SLOW_PAGES) <= names


def run_page(page: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``page``'s blocks in order in a fresh Python in an empty folder, its LMs on the loopback server."""
    blocks = tmp_path / "blocks.json"  # outside the folder the snippets run in
    blocks.write_text(json.dumps([[page_name(page), line, code] for line, code in python_blocks(page)]))
    folder = tmp_path / "work"
    folder.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "OPENAI_"))}
    env.update(MULTIHOP_DATA=str(data_root()), MULTIHOP_HOME=str(tmp_path / "home"), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", DSPY_CACHEDIR=str(tmp_path / "cache"))
    models = home() / "models"
    if models.is_dir():  # the models installed already, rather than 400 MB assembled again from their packages
        (tmp_path / "home").mkdir()
        (tmp_path / "home" / "models").symlink_to(models)
    with loopback_server(latency=0.0, lifetime=PAGE_TIMEOUT + 30) as server:
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-c", STAND_IN.format(api_base=server.api_base) + RUNNER,
                                 str(blocks)], cwd=folder, env=env, capture_output=True, text=True,
                                timeout=PAGE_TIMEOUT)
    print(f"{page_name(page)}: {time.monotonic() - started:.1f} s, {server.count} LM requests")
    return result


@pytest.mark.parametrize("page", [pytest.param(page, id=page_name(page), marks=[pytest.mark.slow]
                                               if page_name(page) in SLOW_PAGES else []) for page in PAGES])
def test_the_python_blocks_of_a_page_run_in_order_from_an_empty_folder(page, tmp_path):
    result = run_page(page, tmp_path)
    report = f"{page_name(page)} exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-6000:]}"
    assert result.returncode == 0, report
