"""The App. G prompts' examples as demos of HANRAG's stages (:data:`PAPER_DEMOS`, by stage name).

Router, decomposer, refiner, relevance discriminator and answerer: the paper's examples (Prompts 10–14), verbatim
but for the code fences the adapter replaces (see :mod:`multihop.signatures.hanrag`) and one answer: the answerer's
Example-2 ("Did Nanjing University found in 1958?") has none in App. G, so its "no" is ours. The ending discriminator
and the aggregator have no prompt in App. G; their demos are ours, built from the paper's own examples (Prompt 12's
Example-3 and App. F's compound case) and the facts of Prompt 15's example documents.
"""

from __future__ import annotations

import dspy

from .routes import render_steps


def _text(paragraph: str) -> str:
    return " ".join(paragraph.split())


_LIU_XIANG = _text("""
Liu Xiang (born July 13, 1983), born in Shanghai, with ancestral roots in Xihe Village, Dafeng, Yancheng, Jiangsu,
is a Chinese male athlete. He won one Olympic gold medal, six World Championship medals, and three Asian Games
gold medals. He is a two-time world champion and held the 110m hurdles world record for 23 months, which still
stands as the Olympic record.""")
_MAYO = _text("""
The Mayo Clinic is a medical institution located in Rochester, Minnesota, USA, established in 1864. It has
branches in Jacksonville, Florida, and Scottsdale, Arizona, as well as smaller clinics and hospitals in Minnesota,
Iowa, and Wisconsin. It is consistently ranked as the best hospital in the world by major authoritative reports.""")
_WASHINGTON = _text("""
George Washington (February 22, 1732 – December 14, 1799) was the first president of the United States, serving
from 1789 to 1797. As commander of the Continental Army, Washington led Patriot forces to victory in the American
Revolutionary War against the British Empire. He has become commonly known as the "Father of His Country" for his
role in American independence.""")
_NANJING = _text("""
Nanjing University, located in the ancient capital of China - Nanjing, is one of the oldest and most prestigious
institutions of higher learning in the country. Founded in 1902 as Sanjiang Normal School, it has since evolved
through various transformations to become the comprehensive university we know today. Renowned for its strong
emphasis on academic research and teaching excellence, Nanjing University offers a wide range of disciplines
including humanities, social sciences, natural sciences, engineering, and medicine.""")
_USTC = _text("""
The University of Science and Technology of China (USTC), founded in 1958 in Beijing and later relocated to Hefei,
Anhui Province, is a premier institution dedicated to fostering academic excellence and innovation. USTC is
particularly renowned for its strong emphasis on science and technology education and research. As one of the key
universities under the national Double First-Class University Plan, it has established itself as a leader in
various scientific disciplines including physics, chemistry, life sciences, engineering, and information
technology.""")
_NANJING_FIELDS = _text("""
Nanjing University stands out for its exceptional academic programs across various fields, with several
disciplines earning national and international acclaim. The university’s Astronomy department is particularly
noteworthy, boasting a rich history and pioneering research in astrophysics, cosmology, and radio astronomy.
Additionally, the Earth Sciences division, including Geology and related fields, is highly regarded for its
comprehensive studies in paleontology, stratigraphy, and tectonic geology.""")
_USTC_UCAS = _text("""
The University of Science and Technology of China (USTC), located in Hefei, Anhui Province, is renowned for its
strong emphasis on science and technology education. Established in 1958, USTC has been a pioneer in fostering
innovation and cutting-edge research in various scientific fields. On the other hand, the University of Chinese
Academy of Sciences (UCAS), with its main campus in Beijing, focuses on graduate education and high-level
scientific research. UCAS, established much later in 2012, collaborates closely with the Chinese Academy of
Sciences, offering students unique opportunities to engage in advanced research projects under the guidance of
leading scientists.""")

def _demos(inputs: tuple[str, ...], rows: list[tuple]) -> list[dspy.Example]:
    """One demo per row: the values of ``inputs``, then a dict of the outputs."""
    return [dspy.Example(**dict(zip(inputs, row, strict=False)), **row[len(inputs)]).with_inputs(*inputs)
            for row in rows]


_HYOJEONG = "Who is the father-in-law of Queen Hyojeong?"
_HYOJEONG_STEP = [("Who is the husband of Queen Hyojeong?", "Heonjong of Joseon")]
_CRANFIELD = ("When did Lionel Cranfield, 3rd Earl of Middlesex succeed his brother James as Earl of Middlesex and who "
              "is his wife?")

PAPER_DEMOS: dict[str, list[dspy.Example]] = {
    "router": _demos(("question",), [
        ("Who is the first President of America?", {"route": "straightforward question"}),
        ("Which company acquired Intime Department Store?", {"route": "single-step question"}),
        ("What honors did Yao Ming win in the NBA? When did he retire from the NBA?", {"route": "compound question"}),
        ("What city is the person who broadened the doctrine of philosophy of language from?",
         {"route": "complex question"}),
        ("What is the scientific classification of conch shells, and what are the common uses of conch shells in "
         "various cultures?", {"route": "compound question"}),
        ("In which country was Einstein born?", {"route": "straightforward question"}),
        ("Who is Colin Kaepernick and what is his preferred nickname?", {"route": "complex question"}),
        ("Where is Pan Jianwei’s ancestral home?", {"route": "single-step question"}),
    ]),
    "decompose": _demos(("question",), [
        ("Who was the first president of the United States?", {
            "thought": "This question is a very direct and simple question. There is no need to decompose it. It "
                       "itself consists of only one sub-problem",
            "sub_questions": ["Who was the first president of the United States?"]}),
        ("What honors has Liu Xiang won and when did he retire?", {
            "thought": "This question consists of two sub-questions. On the one hand, it asks about the honors Liu "
                       "Xiang has won, and on the other hand, it asks about the time when Liu Xiang retired, so the "
                       "original question can be decomposed into two sub-questions.",
            "sub_questions": ["What honors has Liu Xiang won?", "When did Liu Xiang retire?"]}),
        ("What departments are there in Mayo Clinic, and which are the most famous ones?", {
            "thought": "This question consists of two sub-questions. On the one hand, it asks about the department "
                       "composition of Mayo Clinic, and on the other hand, it asks about which are the most famous "
                       "departments of Mayo Clinic, so the original question can be decomposed into two "
                       "sub-questions.",
            "sub_questions": ["What departments are there in Mayo Clinic?",
                              "What are the most famous departments of Mayo Clinic?"]}),
    ]),
    "refine": _demos(("question", "thought"), [
        ("Where was the director of film Eisenstein In Guanajuato born?", render_steps([]),
         {"seed_question": "Who is the director of the film Eisenstein In Guanajuato?"}),
        ("Who is the first President of America?", render_steps([]),
         {"seed_question": "Who is the first President of America?"}),
        (_HYOJEONG, render_steps(_HYOJEONG_STEP), {"seed_question": "Who is the father of Heonjong of Joseon?"}),
    ]),
    "relevance": _demos(("question", "document"), [
        ("Who was the first president of the United States?", _WASHINGTON, {"relevant": True}),
        ("What honors has Liu Xiang received, and when did he retire?", _LIU_XIANG, {"relevant": True}),
        ("Who founded the Mayo Clinic?", _MAYO, {"relevant": False}),
    ]),
    "ending": _demos(("question", "thought"), [
        (_HYOJEONG, render_steps(_HYOJEONG_STEP), {"finished": False}),
        (_HYOJEONG, render_steps(_HYOJEONG_STEP + [("Who is the father of Heonjong of Joseon?",
                                                    "Crown Prince Hyomyeong")]), {"finished": True}),
    ]),
    "answer": _demos(("question", "documents"), [
        ("Which year did Liu Xiang retire?", [_LIU_XIANG, _MAYO, "On April 7, In 2015, Liu announced his retirement "
                                              "in a statement posted to his Sina Weibo. He had not competed since the "
                                              "2012 Olympic race."], {"answer": "2015"}),
        ("Did Nanjing University found in 1958?", [_NANJING, _USTC, _NANJING_FIELDS, _USTC_UCAS], {"answer": "no"}),
    ]),
    "aggregate": _demos(("question", "sub_questions", "sub_answers"), [
        (_CRANFIELD, ["When did Lionel Cranfield, 3rd Earl of Middlesex succeed his brother James as Earl of "
                      "Middlesex?", "Who is the wife of Lionel Cranfield, 3rd Earl of Middlesex?"],
         ["1651", "Rachael"], {"answer": "1651 && Rachael"}),
        ("Who was born first, Yao Ming or Liu Xiang?", ["When was Yao Ming born?", "When was Liu Xiang born?"],
         ["September 12, 1980", "July 13, 1983"], {"answer": "Yao Ming"}),
    ]),
}
