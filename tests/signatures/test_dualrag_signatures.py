"""DualRAG's signatures: typed outputs the adapters parse, inputs the prompt shows."""

import dspy
import pytest

from multihop.signatures.dualrag import EntityIdentifier, KnowledgeSummarizer, OutlineAnswer, Reasoner


@pytest.mark.parametrize("adapter", [dspy.JSONAdapter(), dspy.ChatAdapter()], ids=["json", "chat"])
def test_the_reasoner_flag_and_the_entity_queries_parse_into_their_types(adapter):
    if isinstance(adapter, dspy.JSONAdapter):
        reasoner = '{"thought": "I need the director of Love In Pawn.", "need_retrieval": "false"}'
        entities = ('{"entities": [{"entity": "Love In Pawn", "queries": ["Love In Pawn director", '
                    '"Love In Pawn release"]}]}')
    else:
        reasoner = ("[[ ## thought ## ]]\nI need the director of Love In Pawn.\n\n[[ ## need_retrieval ## ]]\nfalse\n\n"
                    "[[ ## completed ## ]]")
        entities = ('[[ ## entities ## ]]\n[{"entity": "Love In Pawn", "queries": ["Love In Pawn director", '
                    '"Love In Pawn release"]}]\n\n[[ ## completed ## ]]')
    parsed = adapter.parse(Reasoner, reasoner)
    assert parsed["need_retrieval"] is False and parsed["thought"].startswith("I need")
    parsed, = adapter.parse(EntityIdentifier, entities)["entities"]
    assert (parsed.entity, parsed.queries) == ("Love In Pawn", ["Love In Pawn director", "Love In Pawn release"])


def test_each_stage_sees_its_inputs_and_its_rules():
    assert list(Reasoner.input_fields) == ["question", "knowledge_outline", "reasoning_history"]
    assert list(EntityIdentifier.input_fields) == ["question", "knowledge_outline", "reasoning_history",
                                                   "known_entities"]
    assert list(KnowledgeSummarizer.input_fields) == ["question", "reasoning_history", "entity", "queries",
                                                      "documents"]
    assert list(OutlineAnswer.output_fields) == ["answer"]
    reasoner, identifier, summarizer = (" ".join(signature.instructions.split()) for signature in (
        Reasoner, EntityIdentifier, KnowledgeSummarizer))
    assert "never guess or speculate" in reasoner  # reasoning only from retrieved knowledge
    assert "reuse that earlier name exactly" in identifier  # entity linking (Eq. 5)
    assert "the last reasoning step says is missing" in summarizer and "empty fragment" in summarizer
    inputs = {"question": "Who was born later?", "reasoning_history": ["I need the birth years."],
              "entity": "Charles Saunders", "queries": ["Charles Saunders birth year"],
              "documents": ["Charles Saunders (8 April 1904 – April 1997)"]}
    messages = dspy.ChatAdapter().format(KnowledgeSummarizer, demos=[], inputs=inputs)
    assert "Charles Saunders birth year" in messages[-1]["content"] and "8 April 1904" in messages[-1]["content"]
