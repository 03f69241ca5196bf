"""CIRAG's pure triple helpers: normal form, well-formed triples, provenance assignment, top-N and matching
the distiller's core triples back to the candidates, against hand-computed values."""

from multihop.programs.cirag.triples import Triple, assign, match_core, normalize_phrase, top_n, well_formed
from multihop.programs.text import split_sentences
from multihop.signatures.cirag import CASCADE_LEVELS, UNANSWERABLE


def test_the_normal_form_is_the_case_studys():
    assert normalize_phrase("Aldri annet enn bråk") == "aldri annet enn br k"
    assert normalize_phrase("God's Gift to Women") == "god s gift to women"
    assert normalize_phrase("December 24, 1886") == "december 24 1886"


def test_well_formed_keeps_three_non_empty_strings_once():
    raw = [["Erik Hort", "born in", "Montebello"], ["erik hort", "Born in", "montebello!"], ["a", "b"],
           ["x", "", "y"], "text", ["Montebello", "is located in", "Rockland County"]]
    assert well_formed(raw) == [("Erik Hort", "born in", "Montebello"),
                                ("Montebello", "is located in", "Rockland County")]
    assert well_formed({"triples": []}) == []


def test_a_triple_renders_as_fig_12_prints_it_and_keeps_its_provenance():
    triple = Triple("Erik Hort", "born in", "Montebello", doc_id="d1", sentence="Erik Hort was born in Montebello.")
    assert triple.render() == "('erik hort', 'born in', 'montebello')"
    assert triple.words() == "Erik Hort born in Montebello" and triple.doc_id == "d1"


def test_assign_takes_each_triples_most_similar_sentence_and_top_n_the_highest_scores():
    assert assign([[0.1, 0.9, 0.3], [0.5, 0.5], []]) == [1, 0, -1]  # a tie: the first sentence
    assert top_n([0.2, 0.9, 0.5, 0.9], 3) == [1, 3, 2] and top_n([0.1], 5) == [0]


def test_core_triples_match_exactly_then_by_a_reworded_relation_and_the_rest_are_counted():
    born = Triple("Erik Hort", "born in", "Montebello", "d1")
    county = Triple("Montebello", "is located in", "Rockland County", "d2")
    other = Triple("Rockland County", "is in", "New York", "d2")
    core = [["erik hort", "born in", "montebello"],          # exact in normal form
            ["Montebello", "located in", "Rockland County"],  # reworded: its words are among "is located in"'s
            ["Erik Hort", "born in", "Montebello"],          # a repeat: kept once
            ["Paris", "capital of", "France"], ["bad"]]       # no candidate; malformed
    assert match_core(core, [born, county, other]) == ([born, county], 2, 1)
    performer = Triple("Get Low", "performer", "Dillon Francis")
    reworded = [["Get Low", "performers", "Dillon Francis"]]  # ratio 2·9/19 ≈ 0.95
    assert match_core(reworded, [performer]) == ([performer], 0, 1)
    different = [["Erik Hort", "died in", "Montebello"],      # another relation: ratio 2·3/14 ≈ 0.43
                 ["Get Low", "producer", "Dillon Francis"],   # ratio 2·3/17 ≈ 0.35
                 ["Erik Hort", "born in", "Montebelo"],       # another object
                 ["Erik Horst", "born in", "Montebello"]]     # another subject
    assert match_core(different, [born, performer]) == ([], 4, 0)


def test_sentences_split_at_ends_but_not_after_initials():
    assert split_sentences("G. Stanley Hall was born in 1844. He died in 1924.  ") == [
        "G. Stanley Hall was born in 1844.", "He died in 1924."]


def test_the_cascade_levels_share_figure_12s_prompt_over_their_own_evidence():
    assert list(CASCADE_LEVELS) == ["triple", "sentence", "passage"]
    assert "analyze triples" in CASCADE_LEVELS["triple"].instructions
    assert "analyze sentences" in CASCADE_LEVELS["sentence"].instructions
    assert "analyze passages" in CASCADE_LEVELS["passage"].instructions
    assert all(UNANSWERABLE in s.instructions for s in CASCADE_LEVELS.values())
