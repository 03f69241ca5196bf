"""A loopback OpenAI-compatible server for measuring the harness: every chat completion is answered after a fixed
latency with a reply drawn from the request's JSON schema, so a program runs its whole control flow against an LM
that costs exactly ``latency`` a call and nothing else.

The server listens on 127.0.0.1 on an ephemeral port, answers at most ``max_requests`` requests and stops after
``lifetime`` seconds whatever happens (:func:`loopback_server`). Replies are seeded by the request's messages: the
same prompt always gets the same reply, so two runs that send the same prompts (serial and threaded, threads and
asyncio) take the same branches. A request without a schema is answered with the fields its prompt asks for, each a
word, in the format of the adapter that wrote it (DSPy's ``ChatAdapter`` field markers, else a JSON object). A
request to ``/embeddings`` is answered with a vector a text (:func:`text_embedding`: its words hashed into
:data:`EMBEDDING_DIMENSIONS` dimensions, so texts that share words are close), as floats or, when the request asks for
``encoding_format="base64"`` (the OpenAI client's default), as base64 float32. It records each request's body
(``server.requests``), for tests of what a client sends.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import re
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORDS = ("Paris", "Nolan", "1987", "the river", "<no question>", "Who directed it?", "Berlin", "yes")
MODEL = "loopback"
FAULTS = ("500", "429", "garbage", "hang")  # how LoopbackServer.fault makes every completion fail
_JSON_FIELDS = re.compile(r"`(\w+)`")  # the output fields a JSONAdapter prompt asks for, in order
_CHAT_FIELDS = re.compile(r"\[\[ ## (\w+) ## \]\]")  # those a ChatAdapter prompt asks for
EMBEDDING_DIMENSIONS = 64  # the length of every vector /embeddings answers


def schema_value(schema: dict, draw: random.Random, defs: dict | None = None):
    """A value ``schema`` allows, drawn with ``draw`` from :data:`WORDS` (enums, caps and item counts respected)."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if "$ref" in schema:
        return schema_value(defs[schema["$ref"].rsplit("/", 1)[-1]], draw, defs)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [option for option in schema[key] if option.get("type") != "null"] or schema[key]
            return schema_value(draw.choice(options), draw, defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return draw.choice(schema["enum"])
    kind = schema.get("type")
    kind = draw.choice(kind) if isinstance(kind, list) else kind
    if kind == "object":
        return {name: schema_value(value, draw, defs) for name, value in schema.get("properties", {}).items()}
    if kind == "array":
        low, high = schema.get("minItems", 0), min(schema.get("maxItems", 3), 3)
        return [schema_value(schema.get("items", {}), draw, defs) for _ in range(draw.randint(low, max(low, high)))]
    if kind == "integer":
        return draw.randint(schema.get("minimum", 1), schema.get("maximum", 3))
    if kind == "number":
        return round(draw.uniform(0, 1), 2)
    if kind == "boolean":
        return draw.random() < 0.5
    if kind == "null":
        return None
    return draw.choice(WORDS)[: schema.get("maxLength", 200)]


def reply_text(body: dict) -> str:
    """The reply to a chat-completion request: JSON drawn from its schema (either form), seeded by its messages."""
    draw = random.Random(hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest())
    response_format = body.get("response_format") or {}
    schema = response_format.get("schema") or (response_format.get("json_schema") or {}).get("schema")
    if schema is None:
        last = ((body.get("messages") or [{}])[-1].get("content") or "").rpartition("Respond with")[2]
        chat = [name for name in _CHAT_FIELDS.findall(last) if name != "completed"]
        if chat:
            return "".join(f"[[ ## {name} ## ]]\n{draw.choice(WORDS)}\n\n" for name in chat) + "[[ ## completed ## ]]"
        return json.dumps({name: draw.choice(WORDS) for name in _JSON_FIELDS.findall(last) or ["answer"]})
    return json.dumps(schema_value(schema, draw))


def text_embedding(text: str) -> list[float]:
    """The unit vector /embeddings answers for ``text``: each lower-cased word adds 1 to the dimension its sha256
    picks (of :data:`EMBEDDING_DIMENSIONS`), so the same text always gets the same vector and texts sharing words
    have a positive cosine; a text without words gets the first unit vector."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % EMBEDDING_DIMENSIONS] += 1.0
    norm = sum(value * value for value in vector) ** 0.5
    return [value / norm for value in vector] if norm else [1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1)


def embeddings_reply(body: dict) -> dict:
    """The OpenAI reply to an embeddings request: a :func:`text_embedding` for each of its ``input`` texts (a string
    is one text), as a list of floats or, for ``encoding_format="base64"``, as base64 little-endian float32."""
    texts = body.get("input") or []
    texts = [texts] if isinstance(texts, str) else texts
    data = []
    for index, text in enumerate(texts):
        vector = text_embedding(str(text))
        if body.get("encoding_format") == "base64":
            vector = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = sum(len(str(text).split()) for text in texts)
    return {"object": "list", "data": data, "model": body.get("model", MODEL),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def certain_tokens(content: str) -> list[dict]:
    """The OpenAI log-probabilities of ``content`` as a server that was sure of every token gives them: one token a
    word (with the space before it), each of log-probability 0."""
    return [{"token": piece, "logprob": 0.0, "bytes": list(piece.encode()), "top_logprobs": []}
            for piece in re.findall(r"\s*\S+", content)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a client reuses its connections, as it would with vLLM
    disable_nagle_algorithm = True  # the headers and the body go out at once: no 40 ms delayed-ACK stall a reply

    def do_GET(self):  # noqa: N802 - the http.server API
        self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    def do_POST(self):  # noqa: N802 - the http.server API
        server: LoopbackServer = self.server
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        with server.lock:
            server.count += 1
            over = server.count > server.max_requests
            if not over and len(server.requests) < server.keep:
                server.requests.append(body)
        if over:
            self._send(503, {"error": {"message": "the loopback server's request budget is spent"}})
            return
        if server.fault is not None:
            self._fail(server)
            return
        if server.refuse_schemas and body.get("response_format"):
            self._send(400, {"error": {"message": "response_format with a JSON schema is not supported"}})
            return
        time.sleep(server.latency)
        if self.path.rstrip("/").endswith("/embeddings"):
            self._send(200, embeddings_reply(body))
            return
        content = reply_text(body)
        choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
        if server.logprobs and body.get("logprobs"):
            choice["logprobs"] = {"content": certain_tokens(content)}
        self._send(200, {"id": "loopback", "object": "chat.completion", "model": body.get("model", MODEL),
                         "choices": [choice],
                         "usage": {"prompt_tokens": len(json.dumps(body.get("messages"))) // 4,
                                   "completion_tokens": len(content) // 4}})

    def _fail(self, server: LoopbackServer) -> None:
        """Answer as a misbehaving server does: ``server.fault`` is ``"500"`` or ``"429"`` (an error status, retry
        at once), ``"garbage"`` (HTTP 200 whose body is no JSON) or ``"hang"`` (no answer for ``hang_seconds``)."""
        if server.fault == "hang":
            time.sleep(server.hang_seconds)
            self._send(504, {"error": {"message": "the loopback server hung on purpose"}})
        elif server.fault == "garbage":
            data = b"<html>not json</html>"
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._send(int(server.fault), {"error": {"message": "down on purpose"}}, {"retry-after": "0"})

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class LoopbackServer(ThreadingHTTPServer):
    """The server: ``latency`` seconds a completion, ``count`` completions asked, the first ``keep`` bodies in
    ``requests``; ``api_base`` is its address. ``refuse_schemas`` answers a request with a response format as a
    server without structured outputs does (HTTP 400); ``logprobs`` returns the reply's token log-probabilities when
    a request asks for them (every token certain), as vLLM does, instead of leaving them out. ``fault`` (None, or one
    of :data:`FAULTS`) makes every completion fail that way, for tests of how a run meets a misbehaving server."""

    daemon_threads = True
    request_queue_size = 1024  # many questions, each with its fan-out, connect at once

    def __init__(self, latency: float, max_requests: int, keep: int):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.latency, self.max_requests, self.keep = latency, max_requests, keep
        self.count, self.requests, self.lock = 0, [], threading.Lock()
        self.refuse_schemas, self.logprobs = False, False
        self.fault: str | None = None
        self.hang_seconds = 5.0

    def handle_error(self, request, client_address) -> None:
        """A client that gave up on a request (its timeout, over a hanging answer) is no error of the server's."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server_port}/v1"


@contextmanager
def loopback_server(latency: float = 0.0, lifetime: float = 600.0, max_requests: int = 1_000_000,
                    keep: int = 1000) -> Iterator[LoopbackServer]:
    """A :class:`LoopbackServer` answering in a thread while the block runs, and stopped after ``lifetime`` seconds
    even if the block is still running."""
    server = LoopbackServer(latency, max_requests, keep)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="multihop-loopback")
    thread.start()
    deadline = threading.Timer(lifetime, server.shutdown)
    deadline.daemon = True
    deadline.start()
    try:
        yield server
    finally:
        deadline.cancel()
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    """``python -m multihop.lm.loopback --latency 0.3``: serve in this process (so a measured client's CPU time is its
    own), printing the address on the first line of stdout; it stops after ``--lifetime`` seconds."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds every completion takes")
    parser.add_argument("--lifetime", type=float, default=3600.0, help="seconds before the server stops")
    args = parser.parse_args(argv)
    with loopback_server(args.latency, args.lifetime) as server:
        print(server.api_base, flush=True)
        time.sleep(args.lifetime)


if __name__ == "__main__":
    main()
