"""The documentation: the site builds under ``mkdocs build --strict`` with a page for every declared program (its
paper's title and its stages, written from the declaration at build time), the papers and the command line; (slow)
each program page renders in headless Chromium with its program's name; the README lists every declared program with
its paper (its Python blocks, and the docs', run in tests/test_doc_snippets.py); CITATION.cff cites the library at
pyproject's version and every paper the programs rebuild."""

import html
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import multihop

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def declared():
    """(declaration, program built at its defaults) for every declared program."""
    from multihop.programs import PROGRAMS

    quiet = logging.getLogger("multihop").level
    logging.getLogger("multihop").setLevel(logging.ERROR)  # AdaptiveRAG at its defaults warns of its classifier
    try:
        return [(method, method.program()) for method in PROGRAMS.declared()]
    finally:
        logging.getLogger("multihop").setLevel(quiet)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once by ``mkdocs build --strict`` (every warning an error) into a temporary folder."""
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason="the docs extra is not installed: pip install '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                             "-d", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return out


@pytest.mark.slow
def test_the_strict_build_has_a_page_for_every_declared_program_with_its_paper_and_stages(site):
    programs = declared()
    assert len(programs) == 14
    index = (site / "programs" / "index.html").read_text()
    for method, program in programs:
        page = site / "programs" / f"{method.name.lower()}.html"
        assert page.exists(), f"no page for {method.name}"
        text = page.read_text()
        assert re.search(rf"<h1[^>]*>{method.name}<", text), method.name
        if method.paper:
            assert html.escape(method.paper.title, quote=False) in text, method.name
        stages = [name for name, _ in program.named_predictors()]
        assert stages, method.name
        for stage in stages:
            assert f"<code>{stage}</code>" in text, (method.name, stage)
        for switch in method.program.settings():
            assert f"<code>{switch}</code>" in text, (method.name, switch)
        for table in method.tables:
            assert html.escape(table.title, quote=False) in text, (method.name, table.number)
        assert f'href="{method.name.lower()}.html"' in index
    papers = (site / "papers.html").read_text()
    for method, _ in programs:
        if method.paper:
            assert html.escape(method.paper.title, quote=False) in papers
            assert method.paper.key() in papers  # its BibTeX entry
    cli = (site / "cli.html").read_text()
    for command in ("multihop eval", "multihop compare", "multihop reproduce", "multihop trace show"):
        assert f"<code>{command}</code>" in cli, command
    for page in ("getting-started", "measurements", "design", "api/programs", "concepts/retrieval"):
        assert (site / f"{page}.html").exists(), page


@pytest.mark.slow
def test_the_api_page_shows_aevaluate_with_the_parameters_of_evaluate(site):
    import inspect

    from multihop.evaluation.runner import aevaluate

    signature = inspect.signature(aevaluate)
    bare = signature.replace(return_annotation=signature.empty, parameters=[
        parameter.replace(annotation=parameter.empty) for parameter in signature.parameters.values()])
    text = re.sub(r"<[^>]+>", "", html.unescape((site / "api" / "evaluation.html").read_text()))
    assert f"aevaluate{bare}" in re.sub(r"\s+", " ", text)


@pytest.mark.slow
def test_every_program_page_renders_in_headless_chromium_with_its_name(site, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        pytest.skip("no Chromium on PATH (`make browser` installs it as root with apt-get: apt-get install chromium)")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'chr'}"]
    for method, program in declared():
        page = site / "programs" / f"{method.name.lower()}.html"
        dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                             check=True).stdout
        assert re.search(rf"<h1[^>]*>{method.name}<", dom), method.name
        assert f"<title>{method.name} - multihop</title>" in dom
        first_stage = program.named_predictors()[0][0]
        assert f"<code>{first_stage}</code>" in dom
    shot = tmp_path / "cooprag.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1280,1600",
                    (site / "programs" / "cooprag.html").as_uri()], capture_output=True, timeout=120,
                   check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20000


def test_the_readme_lists_every_declared_program_with_its_kind_and_paper():
    text = README.read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+?) \|$", text, re.M))
    programs = declared()
    assert set(rows) == {method.name for method, _ in programs}
    for method, _ in programs:
        kind, paper = (cell.strip() for cell in rows[method.name].split("|"))
        assert kind == method.kind, method.name
        assert paper == (method.paper.short() if method.paper else paper), method.name
        if not method.paper:
            assert paper.startswith("the papers' own"), method.name
    assert len(text.splitlines()) <= 200


def test_citation_cites_the_library_at_its_version_and_every_paper_the_programs_rebuild():
    import yaml

    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["version"] == multihop.__version__
    assert citation["license"] == "MIT" and "MIT License" in (ROOT / "LICENSE").read_text()
    references = {reference["title"]: reference for reference in citation["references"]}
    papers = [method.paper for method, _ in declared() if method.paper]
    assert set(references) == {paper.title for paper in papers}
    for paper in papers:
        reference = references[paper.title]
        assert reference["year"] == paper.year
        assert [f"{a['given-names']} {a['family-names']}" for a in reference["authors"]] == \
            [author.strip() for author in paper.authors.split(",")]
