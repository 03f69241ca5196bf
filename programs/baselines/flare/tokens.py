"""Token confidence for FLARE: the token log-probabilities of an LM reply read back onto the characters of one output
field, the threshold rule and the masked query. Pure functions, no LM.

An LM asked for log-probabilities (``config={"logprobs": True}``) gives those of every token of its reply, which DSPy
hands on as the prediction's ``logprobs`` (``{"content": [{"token", "logprob", "bytes", ...}]}``, or the OpenAI
object LiteLLM returns). Under constrained decoding the reply is a JSON object (``{"sentence": "..."}``), under the
ChatAdapter ``[[ ## sentence ## ]]`` sections: its structure tokens (braces, quotes, the field's name) say nothing of
what the model knows, and their probabilities reflect the format, so :func:`field_pieces` keeps the tokens that write
the field's value, each cut to the characters of the value it writes (a token may write a quote and a word).
"""

from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Piece:
    """The characters of a field's value that one token wrote (JSON escapes decoded), with the token's
    log-probability."""

    text: str
    logprob: float

    @property
    def probability(self) -> float:
        return math.exp(self.logprob)


def reply_tokens(logprobs) -> list[tuple[bytes, float]]:
    """Each token of a reply as its UTF-8 bytes and its log-probability, from a prediction's ``logprobs`` (a dict
    with ``content``, an object with ``.content``, or the list itself); the bytes are the token's own when the LM gives
    them, else its text encoded."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else getattr(logprobs, "content", logprobs)
    tokens = []
    for entry in content or ():
        get = entry.get if isinstance(entry, dict) else lambda name, entry=entry: getattr(entry, name, None)
        raw = get("bytes")
        tokens.append((bytes(raw) if raw is not None else str(get("token")).encode(), float(get("logprob"))))
    return tokens


def field_pieces(logprobs, field: str) -> list[Piece] | None:
    """The tokens that write the value of output ``field`` in the reply the ``logprobs`` spell, in order, each with
    the characters of the value it writes (their texts join to the value). The reply is read as a JSON object (the
    first ``{`` on; the value must be a string) or as the ChatAdapter's ``[[ ## field ## ]]`` section (its value
    stripped); None when the field is in neither."""
    tokens = reply_tokens(logprobs)
    spelled = b"".join(raw for raw, _ in tokens)
    reply = spelled.decode("utf-8", errors="replace")
    chars = json_string_chars(reply, field)
    if chars is None:
        chars = section_chars(reply, field)
    if chars is None:
        return None
    char_starts = [0]  # the byte offset of each character of the reply
    for char in reply:
        char_starts.append(char_starts[-1] + len(char.encode()))
    token_starts = [0]
    for raw, _ in tokens:
        token_starts.append(token_starts[-1] + len(raw))
    pieces: list[tuple[int, str]] = []  # (token index, text)
    for position, char in chars:
        token = bisect.bisect_right(token_starts, char_starts[position]) - 1
        if pieces and pieces[-1][0] == token:
            pieces[-1] = (token, pieces[-1][1] + char)
        else:
            pieces.append((token, char))
    return [Piece(text, tokens[token][1]) for token, text in pieces]


def json_string_chars(reply: str, field: str) -> list[tuple[int, str]] | None:
    """The characters of the string value of ``field`` in the JSON object that starts at the reply's first ``{``, each
    with the position in ``reply`` where the text that writes it starts (an escape such as ``\\"`` or ``\\u00e9`` is
    one character, at its backslash); an unterminated value gives the characters written so far. None when the object
    has no such string member."""
    start = reply.find("{")
    if start < 0:
        return None
    decoder, i = json.JSONDecoder(), start + 1
    try:
        while True:
            i = _skip_space(reply, i)
            if reply[i] != '"':
                return None
            key, i = json.decoder.scanstring(reply, i + 1)
            i = _skip_space(reply, i)
            if reply[i] != ":":
                return None
            i = _skip_space(reply, i + 1)
            if key == field:
                return _string_chars(reply, i + 1) if reply[i] == '"' else None
            _, i = decoder.raw_decode(reply, i)
            i = _skip_space(reply, i)
            if reply[i] != ",":
                return None
            i += 1
    except (ValueError, IndexError):
        return None


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _string_chars(reply: str, i: int) -> list[tuple[int, str]]:
    chars = []
    while i < len(reply) and reply[i] != '"':
        if reply[i] == "\\":
            width = 6 if reply[i + 1: i + 2] == "u" else 2
            if width == 6 and reply[i + 6: i + 8] == "\\u" and 0xD800 <= int(reply[i + 2: i + 6], 16) < 0xDC00:
                width = 12  # a surrogate pair: one character
            chars.extend((i, char) for char in json.loads(f'"{reply[i: i + width]}"'))
            i += width
        else:
            chars.append((i, reply[i]))
            i += 1
    return chars


def section_chars(reply: str, field: str) -> list[tuple[int, str]] | None:
    """The characters of the ChatAdapter section ``[[ ## field ## ]]`` (up to the next ``[[ ##`` marker, stripped),
    each with its position in ``reply``; None without the section."""
    marker = re.search(rf"\[\[ ## {re.escape(field)} ## \]\]", reply)
    if marker is None:
        return None
    end = reply.find("[[ ##", marker.end())
    end = len(reply) if end < 0 else end
    value = reply[marker.end(): end]
    first = marker.end() + len(value) - len(value.lstrip())
    return [(first + i, char) for i, char in enumerate(value.strip())]


def low_confidence(pieces: list[Piece], threshold: float) -> bool:
    """FLARE's retrieval rule: some token has a probability at or below ``threshold`` (θ; the authors' ``<=``)."""
    return any(piece.probability <= threshold for piece in pieces)


def masked_query(pieces: list[Piece], mask_threshold: float) -> str:
    """FLARE's implicit query: the text with every token whose probability is at or below ``mask_threshold`` (β)
    masked out, whitespace collapsed (the authors keep a token when its probability is above β; 0: the whole
    text)."""
    kept = "".join(piece.text if piece.probability > mask_threshold else " " for piece in pieces)
    return " ".join(kept.split())
