"""Fitting a stage prompt into the student's context by cutting inside its documents (ours; the papers do not say how
their students' long prompts were cut).

A distillation row is the chat messages a program's adapter sent for one stage call and the teacher's completion.
When the student's chat template over the messages plus the completion exceeds the training length,
:func:`fit_prompt` cuts tokens from the **documents of the call's own user turn** (the last message) and nowhere
else: the instructions (the system message), the demos, the field headers, the other inputs and the completion stay
whole.

- **Documents** are the text items of the call's list-valued inputs (``row["inputs"]``: retrieved passages,
  documents, facts), each found in its field's ``[[ ## field ## ]]`` section of the last user message as DSPy renders
  a list: an item of a JSON array (a ``list[str]`` field), or a numbered ``«…»`` / indented ``«««…»»»`` blob (a
  ``str`` field given a list). A string input (the question, a single passage) is never cut.
- **The rule**: every document longer than a cap ``C`` tokens keeps its first ``C`` tokens (each document counted
  alone with the student's tokenizer, cut at a token boundary of its text), ``C`` the largest cap that removes at
  least the prompt's excess (:func:`cap`) — the longest documents lose their ends first, the short ones stay whole.
  The rendered prompt's tokens are not exactly its documents' (escaping, merges across a cut), so the excess is
  measured again on the prompt and the cut repeated until the prompt fits.
- A prompt that does not fit with every document emptied raises :class:`PromptTooLongError`, which gives its length
  so emptied.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

# How DSPy writes a list item into a field's section (dspy.adapters.utils.format_field_value): escaped in a JSON array
# (a list-typed field), or as is with continuation lines indented (the «…» / «««…»»» blobs of a str field); tried in
# this order. Each is a per-character transform, so the rendering of a prefix is a prefix of the rendering.
RENDERINGS: tuple[Callable[[str], str], ...] = (lambda text: json.dumps(text, ensure_ascii=False)[1:-1],
                                                 lambda text: text.replace("\n", "\n    "))


class PromptTooLongError(ValueError):
    """A prompt that exceeds the length even with every document of its user turn emptied."""

    def __init__(self, tokens: int):
        super().__init__(f"the prompt takes {tokens} tokens with its documents emptied")
        self.tokens = tokens


@dataclass(frozen=True)
class Document:
    """One document of the last user message: ``text`` written at ``start`` of the message by ``render``.

    Args:
        start: where its rendering begins in the message's content.
        text: the document as the program passed it.
        render: how the adapter wrote it (one of :data:`RENDERINGS`).
    """

    start: int
    text: str
    render: Callable[[str], str]

    @property
    def end(self) -> int:
        return self.start + len(self.render(self.text))


def cap(lengths: list[int], excess: int) -> int:
    """The largest cap ``C`` >= 0 such that cutting every length above ``C`` down to ``C`` removes at least
    ``excess`` (0 when even emptying everything removes less)."""
    low, high = 0, max(lengths, default=0)
    while low < high:  # the removal shrinks as the cap grows: the last cap that still removes enough
        middle = (low + high + 1) // 2
        if sum(max(0, length - middle) for length in lengths) >= excess:
            low = middle
        else:
            high = middle - 1
    return low


def documents(content: str, inputs: dict) -> list[Document]:
    """The documents of a user message ``content`` rendered from ``inputs``: the string items of each list-valued
    input, in order, found in that field's section (an item not found there is not a document)."""
    found = []
    for field, value in inputs.items():
        if not isinstance(value, list):
            continue
        header = f"[[ ## {field} ## ]]"
        start = content.find(header)
        if start < 0:
            continue
        cursor = start + len(header)
        following = content.find("[[ ## ", cursor)
        stop = len(content) if following < 0 else following
        for item in value:
            if not isinstance(item, str) or not item:
                continue
            for render in RENDERINGS:
                at = content.find(render(item), cursor, stop)
                if at >= 0:
                    found.append(Document(at, item, render))
                    cursor = at + len(render(item))
                    break
    return found


def fit_prompt(tokenizer, messages: list[dict], inputs: dict, budget: int) -> tuple[list[int], int]:
    """The token ids of the student's chat template over ``messages`` (with its generation prompt) in at most
    ``budget`` tokens, its documents cut by the rule of this module, and the tokens cut (0: the prompt fit).
    ``tokenizer`` is a fast tokenizer (its offsets place the cuts)."""
    prompt = _template(tokenizer, messages)
    over = len(prompt) - budget
    if over <= 0:
        return prompt, 0
    content = messages[-1]["content"] if messages and isinstance(messages[-1].get("content"), str) else ""
    docs = documents(content, inputs) if messages[-1].get("role") == "user" else []
    ends = [_token_ends(tokenizer, doc.text) for doc in docs]
    kept = [len(doc_ends) for doc_ends in ends]
    fitted = prompt
    while over > 0:
        if not any(kept):
            raise PromptTooLongError(len(fitted))
        kept = [min(tokens, cap(kept, over)) for tokens in kept]
        cut = [doc.text[: doc_ends[tokens - 1] if tokens else 0] for doc, doc_ends, tokens in zip(docs, ends, kept,
                                                                                                   strict=True)]
        fitted = _template(tokenizer, [*messages[:-1], {**messages[-1], "content": _replace(content, docs, cut)}])
        over = len(fitted) - budget
    return fitted, len(prompt) - len(fitted)


def _template(tokenizer, messages: list[dict]) -> list[int]:
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                         return_dict=True)["input_ids"]


def _token_ends(tokenizer, text: str) -> list[int]:
    """Where each token of ``text`` ends in it (the first k tokens are ``text[:ends[k - 1]]``)."""
    return [end for _, end in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]


def _replace(content: str, docs: list[Document], texts: list[str]) -> str:
    """``content`` with each document rendered from its text in ``texts`` instead."""
    pieces, cursor = [], 0
    for doc, text in zip(docs, texts, strict=True):
        pieces += [content[cursor:doc.start], doc.render(text)]
        cursor = doc.end
    return "".join([*pieces, content[cursor:]])
