"""App. A's examples as demos of CIRAG's stages (:data:`PAPER_DEMOS`): Figs. 9–10's Radio City paragraph (HippoRAG's
OpenIE example) for the extractors and Fig. 12's Erik Hort example for the triple-level answer. The sentence- and
passage-level prompts "differ only in the examples used" and are not printed: their examples are ours, Fig. 12's
Erik Hort question over the sentences and passages its triples come from. Fig. 11 has no example."""

from __future__ import annotations

import dspy

_RADIO_CITY = ("Radio City is India's first private FM radio station and was started on 3 July 2001. It plays Hindi, "
               "English and regional songs. Radio City recently forayed into New Media in May 2008 with the launch of "
               "a music portal - PlanetRadiocity.com that offers music related news, videos, songs, and other "
               "music-related features.")
_ENTITIES = ["Radio City", "India", "3 July 2001", "Hindi", "English", "May 2008", "PlanetRadiocity.com"]
_TRIPLES = [["Radio City", "located in", "India"], ["Radio City", "is", "private FM radio station"],
            ["Radio City", "started on", "3 July 2001"], ["Radio City", "plays songs in", "Hindi"],
            ["Radio City", "plays songs in", "English"], ["Radio City", "forayed into", "New Media"],
            ["Radio City", "launched", "PlanetRadiocity.com"], ["PlanetRadiocity.com", "launched in", "May 2008"],
            ["PlanetRadiocity.com", "is", "music portal"], ["PlanetRadiocity.com", "offers", "news"],
            ["PlanetRadiocity.com", "offers", "videos"], ["PlanetRadiocity.com", "offers", "songs"]]

PAPER_DEMOS: dict[str, list[dspy.Example]] = {
    "extract_entities": [dspy.Example(passage=f"Radio City: {_RADIO_CITY}", named_entities=_ENTITIES)
                         .with_inputs("passage")],
    "extract_triples": [dspy.Example(title="Radio City", text=_RADIO_CITY, named_entities=_ENTITIES,
                                     triples=_TRIPLES).with_inputs("title", "text", "named_entities")],
    "answer_triple": [dspy.Example(
        evidence=["('erik hort', 'born in', 'montebello')", "('erik hort', 'is', 'american')",
                  "('montebello', 'is located in', 'rockland county')"],
        query="What county is Erik Hort's birthplace a part of?",
        thought="The triplet ('erik hort', 'born in', 'montebello') tells us that Erik Hort was born in Montebello. "
                "The triplet ('montebello', 'is located in', 'rockland county') tells us that Montebello is located "
                "in Rockland County. Therefore, since Erik Hort was born in Montebello and Montebello is in Rockland "
                "County, Erik Hort's birthplace is part of Rockland County.",
        answer="Rockland County.").with_inputs("evidence", "query")],
    "answer_sentence": [dspy.Example(
        evidence=["Erik Hort: Erik Hort (born February 16, 1987) is an American soccer player.",
                  "Erik Hort: He was born in Montebello, New York.",
                  "Montebello, New York: Montebello is a village in Rockland County, New York."],
        query="What county is Erik Hort's birthplace a part of?",
        thought="The second sentence tells us that Erik Hort was born in Montebello. The third sentence tells us that "
                "Montebello is a village in Rockland County. Therefore, Erik Hort's birthplace is part of Rockland "
                "County.",
        answer="Rockland County.").with_inputs("evidence", "query")],
    "answer_passage": [dspy.Example(
        evidence=["Erik Hort: Erik Hort (born February 16, 1987) is an American soccer player who plays as a "
                  "defender. He was born in Montebello, New York.",
                  "Montebello, New York: Montebello is a village in the town of Ramapo, Rockland County, New York, "
                  "United States."],
        query="What county is Erik Hort's birthplace a part of?",
        thought="The first passage says that Erik Hort was born in Montebello, New York. The second passage says that "
                "Montebello is a village in Rockland County. Therefore, Erik Hort's birthplace is part of Rockland "
                "County.",
        answer="Rockland County.").with_inputs("evidence", "query")],
}
