"""The papers are cited by first author, year and place ("Ko et al., 2025, §3.2"), never by a file of the developers'
shared folder that users do not have (the word "seed" and the file's number): checked on the source and docs, and on
the data the programs declare (their papers' numbers and tables), which the command line and the docs print."""

import dataclasses
import re
from pathlib import Path

import pytest

from multihop.programs import PROGRAMS

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("multihop", "programs", "signatures", "retrievers", "optimize", "docs")
TEXT = {".py", ".md", ".toml", ".json", ".jsonnet", ".txt", ".yml", ".yaml"}
SEED = "seed"  # spelt apart below, so that this file cites no seed file itself
FILE_CITATION = re.compile(r"\bseed\s+0\d\d\b|\bseed files?\b|\bseeds/", re.IGNORECASE)


def citations(text: str) -> list[str]:
    """The file citations in ``text``."""
    return FILE_CITATION.findall(text)


def strings(value) -> list[str]:
    """Every string ``value`` holds: a string, a dataclass's fields, a mapping's keys and values, a list's items."""
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for f in dataclasses.fields(value) for s in strings(getattr(value, f.name))]
    if isinstance(value, dict):
        return [s for pair in value.items() for item in pair for s in strings(item)]
    if isinstance(value, list | tuple | set | frozenset):
        return [s for item in value for s in strings(item)]
    return []


@pytest.mark.parametrize("text, found", [
    (f"CoopRAG ({SEED} 000, §3.2)", [f"{SEED} 000"]),
    ("read in Seed 004, Table 1", ["Seed 004"]),
    ("the seed files of ../shared/seeds/", ["seed files", "seeds/"]),
    ("CoopRAG (Ko et al., 2025, §3.2); seeds 0–3 of the layer draw; a seed question; seed=0", []),
])
def test_the_pattern_finds_file_citations_and_nothing_else(text, found):
    assert citations(text) == found


def test_no_source_or_doc_cites_a_paper_by_its_file():
    cited = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*")) if path.suffix in TEXT
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if citations(line)]
    assert not cited, "cite the paper by first author, year and place:\n" + "\n".join(cited)


def test_no_declared_number_or_table_cites_a_paper_by_its_file():
    cited = [f"{method.name}: {text}" for method in PROGRAMS.declared()
             for text in strings((method.papers, method.tables, method.paper_settings)) if citations(text)]
    assert not cited, "\n".join(cited)
    sources = [result.source for method in PROGRAMS.declared() for result in method.papers]
    assert sources and all(re.match(r"[A-Z][a-z]+ et al\., 20\d\d, (Tables?|Fig\.) ", s) for s in sources), sources
