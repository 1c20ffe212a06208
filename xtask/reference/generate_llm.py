#!/usr/bin/env python3
"""Conformance fixtures for compaction-llm's request conversions, written by the reference.

Run by `cargo xtask fixtures` and `cargo xtask differential` (or:
.venv-ref/bin/python xtask/reference/generate_llm.py --out-root DIR --seed N [--random-cases K]).

For each conversation (the hand-written cases of generate.py, a few of our own, and seeded random
ones) it writes two fixtures:

* crates/compaction-llm/tests/data/responses/NAME.json: every message through the reference's
  `_convert_chat_message_to_responses_api_format`, and the body Haystack's `OpenAITokenCounter`
  actually POSTed to `/responses/input_tokens` (caught by a server on 127.0.0.1);
* crates/compaction-llm/tests/data/chat/NAME.json: every message through
  `ChatMessage.to_openai_dict_format()`, and the `messages` Haystack's `OpenAIChatGenerator`
  actually POSTed to `/chat/completions`.

Where compaction-llm deviates on purpose (README, "Deviations from the reference"), the fixture
keeps the reference's answer under `reference` and says what we expect instead, and why, under
`expected` and `deviation`; the expected answer is still computed by the reference's own function
wherever it can be.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate as g  # noqa: E402  (sets the environment the reference needs, then imports it)

from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.components.generators.chat.openai_responses import (  # noqa: E402
    _convert_chat_message_to_responses_api_format,
)
from haystack.dataclasses import ChatMessage, ChatRole, FileContent, ImageContent, TextContent  # noqa: E402
from haystack.dataclasses.chat_message import ReasoningContent, ToolCall  # noqa: E402
from haystack.token_counters import OpenAITokenCounter  # noqa: E402
from haystack.utils import Secret  # noqa: E402

RESPONSES_DIR = "crates/compaction-llm/tests/data/responses"
CHAT_DIR = "crates/compaction-llm/tests/data/chat"
MODEL = "gpt-test"


# --------------------------------------------------------------------------------------------
# A server on 127.0.0.1 that records what the reference's clients send
# --------------------------------------------------------------------------------------------
class Recorder(BaseHTTPRequestHandler):
    bodies: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        Recorder.bodies.append((self.path, body))
        if self.path.endswith("/responses/input_tokens"):
            reply = {"object": "response.input_tokens", "input_tokens": 7}
        else:
            reply = {"id": "c", "object": "chat.completion", "created": 1, "model": MODEL,
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "ok"}}],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args):
        pass


def start_server() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def sent(call) -> dict | None:
    """The body the reference POSTed while running `call`, or None when it raised first."""
    Recorder.bodies.clear()
    try:
        call()
    except ValueError:
        return None
    assert len(Recorder.bodies) == 1, Recorder.bodies
    return Recorder.bodies[0][1]


def error_text(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


# --------------------------------------------------------------------------------------------
# The conversions, with our deviations
# --------------------------------------------------------------------------------------------
def responses_entry(m: ChatMessage) -> dict:
    try:
        reference = _convert_chat_message_to_responses_api_format(m)
    except ValueError as e:
        return {"error": error_text(e)}
    media = bool(m.images or m.files)
    if m.role == ChatRole.ASSISTANT and media:
        return {"reference": reference, "expected": None,
                "deviation": "an assistant message with images or files is an error; the reference drops them"}
    if m.role == ChatRole.SYSTEM and media:
        as_user = ChatMessage(_role=ChatRole.USER, _content=m._content, _name=m._name, _meta=m._meta)
        expected = _convert_chat_message_to_responses_api_format(as_user)
        expected[0]["role"] = "system"
        return {"reference": reference, "expected": expected,
                "deviation": "a system message keeps its images and files; the reference keeps only its text"}
    if any(r.origin.id is None for r in m.tool_call_results):
        # The reference leaves such a result out; with any id it writes the item we write.
        patched = copy.deepcopy(m)
        for r in patched.tool_call_results:
            if r.origin.id is None:
                r.origin.id = "placeholder"
        expected = _convert_chat_message_to_responses_api_format(patched)
        return {"reference": reference, "expected": expected,
                "deviation": "a tool result whose call has no id is sent; the reference leaves it out"}
    return {"expected": reference}


def chat_entry(m: ChatMessage) -> dict:
    try:
        reference = m.to_openai_dict_format()
    except ValueError as e:
        return {"error": error_text(e)}
    media = bool(m.images or m.files)
    if m.role in (ChatRole.ASSISTANT, ChatRole.SYSTEM) and media:
        return {"reference": reference, "expected": None,
                "deviation": "images or files in a system or assistant message are an error; the reference drops them"}
    if m.role == ChatRole.USER and (m.tool_calls or m.tool_call_results):
        return {"reference": reference, "expected": None,
                "deviation": "a tool call or result in a user message is an error; the reference drops it"}
    if m.role in (ChatRole.ASSISTANT, ChatRole.SYSTEM) and len(m.texts) > 1 and not m.tool_call_results:
        expected = dict(reference)
        expected["content"] = [{"type": "text", "text": t} for t in m.texts]
        return {"reference": reference, "expected": expected,
                "deviation": "every text of a system or assistant message is sent; the reference sends the first"}
    return {"expected": reference}


def whole(entries: list[dict], reference_request: dict | None, key: str) -> dict | None:
    """The request we expect: the reference's, with its messages replaced by our expected ones."""
    if any("error" in e or e.get("expected", 0) is None for e in entries):
        return None
    if reference_request is None:
        return None
    expected = []
    for e in entries:
        expected.extend(e["expected"] if key == "input" else [e["expected"]])
    request = dict(reference_request)
    if not any("deviation" in e for e in entries):
        assert request[key] == expected, "the request holds the per-message conversions"
    request[key] = expected
    return request


# --------------------------------------------------------------------------------------------
# Our own hand-written cases
# --------------------------------------------------------------------------------------------
def llm_cases() -> list[tuple[str, list[ChatMessage], list[dict]]]:
    U, A = ChatMessage.from_user, ChatMessage.from_assistant
    cases = []
    c1 = ToolCall(tool_name="search", arguments={"q": "x"}, id="fc_1", extra={"call_id": "call_1"})
    c2 = ToolCall(tool_name="calc", arguments={}, id="fc_2", extra={"index": 3})
    c3 = ToolCall(tool_name="calc", arguments={"n": 1}, id="fc_3", extra={})
    cases.append(("llm_call_ids", [U("go"), A(tool_calls=[c1, c2, c3]), g.tr(c1, "one"), g.tr(c2, "two"),
                                   g.tr(c3, "three")], g.TOOL_SPECS[:1]))
    r1 = ReasoningContent("raw steps", {"id": "rs_1", "type": "reasoning", "encrypted_content": "enc",
                                        "status": "completed", "item_id": "x", "summary_index": 2, "sequence_number": 9})
    r2 = ReasoningContent("summarized", {"id": "rs_2", "content": [{"type": "reasoning_text", "text": "raw"}]})
    r3 = ReasoningContent("", {"id": "rs_3", "content": []})
    cases.append(("llm_reasoning_items", [U("think"), A("a", reasoning=r1, tool_calls=[c1]), g.tr(c1, "r"),
                                          A("b", reasoning=r2), A(reasoning=r3)], []))
    img = ImageContent(base64_image=g.PNG_B64, mime_type="image/png")
    cases.append(("llm_system_image", [
        ChatMessage(_role=ChatRole.SYSTEM, _content=[TextContent("look"), img, TextContent("closely")]),
        U("what is it?")], []))
    cases.append(("llm_media_defaults", [ChatMessage(_role=ChatRole.USER, _content=[
        ImageContent(base64_image="AAAA", mime_type=None, validation=False, detail="low"),
        FileContent(base64_data="AAAA", mime_type=None, filename=None, validation=False),
        FileContent(base64_data="AAAA", mime_type="", filename="", validation=False)])], []))
    cases.append(("llm_user_only_reasoning", [ChatMessage(_role=ChatRole.USER, _content=[ReasoningContent("x")])],
                  []))
    return cases


def random_cases(seed: int, k: int):
    rng = random.Random(seed * 7919 + 13)
    for i in range(k):
        messages = g.rand_conversation(rng, scale=0.05)
        for m in messages:
            for call in m.tool_calls:
                if rng.random() < 0.4:
                    call.extra = {**(call.extra or {}), "call_id": f"call_{rng.randint(0, 999)}"}
            for reasoning in m.reasonings:
                if rng.random() < 0.5:
                    reasoning.extra.update({"id": f"rs_{i}", "status": "completed", "output_index": 1})
        yield f"random_{i:03d}", messages, g.rand_tools(rng)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out-root", required=True, type=Path)
    ap.add_argument("--seed", required=True, type=int)
    ap.add_argument("--random-cases", type=int, default=30)
    args = ap.parse_args(argv)
    root = args.out_root.resolve()
    responses_dir, chat_dir = root / RESPONSES_DIR, root / CHAT_DIR
    g.prepare_dir(responses_dir)
    g.prepare_dir(chat_dir)
    base_url = start_server()
    secret = Secret.from_token("sk-test")
    counter = OpenAITokenCounter(MODEL, api_key=secret, api_base_url=base_url, max_retries=0)
    generator = OpenAIChatGenerator(api_key=secret, model=MODEL, api_base_url=base_url, max_retries=0)

    # `huge_result` only repeats 40,000 characters of text three times per fixture: nothing new for a conversion.
    named = [case for case in g.named_cases() if case[0] != "huge_result"]
    cases = named + llm_cases() + list(random_cases(args.seed, args.random_cases))
    for name, messages, specs in cases:
        tools = g.make_tools(specs)
        dicts = g.to_dicts(messages)

        entries = [responses_entry(m) for m in messages]
        # With nothing to count the reference asks nothing (the count is 0).
        request = sent(lambda: counter.count(messages, tools=tools or None)) if messages or tools else None
        g.write(responses_dir / f"{name}.json", {
            "name": name, "messages": dicts, "tools": specs, "items": entries,
            "request": whole(entries, request, "input"),
        })

        entries = [chat_entry(m) for m in messages]
        request = sent(lambda: generator.run(messages)) if messages else None
        g.write(chat_dir / f"{name}.json", {
            "name": name, "messages": dicts, "entries": entries,
            "request": whole(entries, request, "messages"),
        })
    print(f"llm: {len(cases)} conversations, 2 fixtures each", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
