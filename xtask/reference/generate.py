#!/usr/bin/env python3
"""Golden-fixture generator for the compaction workspace.

Runs the reference implementation (Haystack, installed in /work/main/.venv-ref) on
hand-written and seeded random agent conversations and writes one JSON file per case.
See README.md in this folder for the fixture formats.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import random
import sys
import warnings
from pathlib import Path

_HERE = Path(__file__).resolve().parent
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_HERE.parent.parent / ".venv-ref" / "tiktoken-cache"))
os.environ.setdefault("RAYON_RS_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

from haystack.components.agents.state.state import State  # noqa: E402
from haystack.components.agents.state.state_utils import replace_values  # noqa: E402
from haystack.dataclasses import ChatMessage, ChatRole, FileContent, ImageContent, TextContent  # noqa: E402
from haystack.dataclasses.chat_message import ReasoningContent, ToolCall, ToolCallResult  # noqa: E402
from haystack.hooks.compaction import CompactionHook, ToolResultPruningCompactor  # noqa: E402
from haystack.hooks.compaction.hooks import _estimated_context_tokens  # noqa: E402
from haystack.token_counters import ApproximateTokenCounter, TiktokenCounter  # noqa: E402
from haystack.token_counters.utils import _non_text_tokens, _rendered_conversation, _rendered_tools  # noqa: E402
from haystack.tools import Tool  # noqa: E402

DEFAULT_PLACEHOLDER = "[Tool result removed to free up context. Call `{tool_name}` again if you need it.]"

COUNT_DIR = "crates/compaction-tokens/tests/data/count"
TOKENIZER_DIR = "crates/compaction-tokens/tests/data/tokenizers"
CONVERT_DIR = "crates/compaction-model/tests/data/convert"
PRUNE_DIR = "crates/compaction-core/tests/data/prune"
HOOK_DIR = "crates/compaction-hook/tests/data/hook"

# --------------------------------------------------------------------------------------------
# Tiny real binary payloads (magic bytes are what `filetype` looks at).
# --------------------------------------------------------------------------------------------
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
GIF_B64 = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
JPEG_B64 = base64.b64encode(
    b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    b"\xff\xdb\x00C\x00" + bytes(range(1, 65)) + b"\xff\xd9"
).decode()
PDF_B64 = base64.b64encode(
    b"%PDF-1.4\n1 0 obj <</Type /Catalog /Pages 2 0 R>> endobj\n"
    b"2 0 obj <</Type /Pages /Kids [] /Count 0>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n"
).decode()
ZIP_B64 = base64.b64encode(b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(32)).decode()
TEXT_FILE_B64 = base64.b64encode("plain notes: ünïcødé 😀\n".encode()).decode()

IMAGES = [(PNG_B64, "image/png"), (GIF_B64, "image/gif"), (JPEG_B64, "image/jpeg")]


def noop(**_kwargs):
    return None


# --------------------------------------------------------------------------------------------
# Random building blocks
# --------------------------------------------------------------------------------------------
ASCII_WORDS = (
    "the of and to in is that for it with as was on be by this are from at or an have not which "
    "result error file path search query value line function return data config tool agent "
    "context token window step user model json list item index count total page http https www "
    "README main src lib test build run debug info warning status code message response request"
).split()
UNICODE_WORDS = [
    "café", "naïve", "Straße", "größer", "déjà", "ñandú", "Ελληνικά", "русский", "язык", "中文",
    "日本語", "한국어", "עברית", "العربية", "हिन्दी", "ไทย", "Tiếng", "ﬁ", "Å", "e\u0301",
]
ASTRAL = ["😀", "🧪", "🚀", "𝔘𝔫𝔦", "𝄞", "👩‍💻", "🇩🇪", "𠜎", "🤖", "\U0001F9D1\u200D\U0001F52C"]
PUNCT = ["{", "}", "[", "]", "{\"k\": 1}", "{tool_name}", "\"", "\\", "\n", "\n\n", "\t", "  ", ": ", ", ",
         "...", "->", "<b>", "</b>", "#", "$", "%", "&", "*", "()", "'", "`", "~", "\r\n", "|", "<"]


def clean(text: str) -> str:
    # tiktoken refuses special-token text such as "<|endoftext|>"; never let "<|" appear.
    while "<|" in text:
        text = text.replace("<|", "< |")
    return text


def rand_text(rng: random.Random, n: int) -> str:
    if n <= 0:
        return ""
    out: list[str] = []
    size = 0
    while size < n:
        r = rng.random()
        if r < 0.62:
            piece = rng.choice(ASCII_WORDS)
        elif r < 0.74:
            piece = rng.choice(UNICODE_WORDS)
        elif r < 0.80:
            piece = rng.choice(ASTRAL)
        elif r < 0.93:
            piece = rng.choice(PUNCT)
        else:
            piece = str(rng.randint(0, 10**rng.randint(1, 12)))
        out.append(piece)
        out.append(" " if rng.random() < 0.85 else "")
        size += len(piece) + 1
    return clean("".join(out)[:n])


FLOATS = [0.1, 0.5, 1.5, -2.25, 1e-05, 1e-07, 0.0001, 1e16, 1e+21, 1e22, 1.5e300, -0.0, 0.0, 123456789.123,
          5e-324, 1.7976931348623157e308, 2.5, -3.14159, 1e100, 9007199254740993.0, 0.30000000000000004, 1e-300]
BIG_INTS = [2**64, 2**64 + 1, -(2**70), 10**30, 2**63 - 1, -(2**63), 2**53 + 1, 18446744073709551615, 0, -1]
KEYS = ["query", "path", "limit", "options", "filters", "name", "q", "ключ", "名前", "clé", "😀key", "a b",
        "nested", "x", "z", "A", "_private", "emoji🚀", "ß", "k\"q"]


def rand_float(rng: random.Random) -> float:
    if rng.random() < 0.6:
        return rng.choice(FLOATS)
    return rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30)


def rand_value(rng: random.Random, depth: int):
    r = rng.random()
    if depth > 0 and r < 0.15:
        return rand_args(rng, depth - 1)
    if depth > 0 and r < 0.25:
        return [rand_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]
    r = rng.random()
    if r < 0.35:
        return rand_text(rng, rng.randint(0, 40))
    if r < 0.50:
        return rng.randint(-1000, 10**6)
    if r < 0.58:
        return rng.choice(BIG_INTS)
    if r < 0.78:
        return rand_float(rng)
    if r < 0.88:
        return rng.choice([True, False])
    return None


def rand_args(rng: random.Random, depth: int = 2) -> dict:
    return {rng.choice(KEYS) + ("" if rng.random() < 0.7 else str(i)): rand_value(rng, depth)
            for i in range(rng.randint(0, 5))}


def rand_meta(rng: random.Random, tool_result: bool = False) -> dict:
    r = rng.random()
    if r < 0.55:
        return {}
    meta: dict = {}
    if rng.random() < 0.5:
        meta["model"] = rng.choice(["gpt-x", "llama", "model-ü"])
    if rng.random() < 0.3:
        meta["usage"] = {"prompt_tokens": rng.randint(0, 5000), "completion_tokens": rng.randint(0, 500),
                         "ratio": rand_float(rng)}
    if tool_result and rng.random() < 0.25:
        meta["tool_result_offloaded"] = {"path": f"/tmp/offload/{rng.randint(0, 999)}.txt",
                                         "original_chars": rng.randint(100, 90000)}
    if rng.random() < 0.12:
        meta["context_compaction"] = {"strategy": rng.choice(["tool_result_pruning", "sliding_window"]),
                                      "original_tokens": rng.randint(1, 9000)}
    if rng.random() < 0.2:
        meta["custom_skip"] = True
    if rng.random() < 0.2:
        meta["tags"] = ["a", "ü", 1, 2.5, None]
    return meta


def rand_image(rng: random.Random) -> ImageContent:
    b64, mime = rng.choice(IMAGES)
    if rng.random() < 0.5:
        return ImageContent(base64_image=b64, mime_type=mime, detail=rng.choice([None, "auto", "low", "high"]),
                            meta=rng.choice([{}, {"source": "camera"}]))
    # validation off: arbitrary (even non-base64) data and no guessing
    return ImageContent(base64_image=rng.choice(["not-really-base64", b64, "AAAA"]),
                        mime_type=rng.choice([None, mime]), validation=False)


def rand_file(rng: random.Random) -> FileContent:
    if rng.random() < 0.5:
        return FileContent(base64_data=PDF_B64, mime_type="application/pdf",
                           filename=rng.choice([None, "report.pdf", "résumé 😀.pdf", "a{b}.pdf"]))
    return FileContent(base64_data=rng.choice([TEXT_FILE_B64, "zz"]), mime_type=rng.choice([None, "text/plain"]),
                       filename=rng.choice([None, "notes.txt", ""]), extra=rng.choice([{}, {"k": [1, 2]}]),
                       validation=False)


TOOL_NAMES = ["search", "read_file", "run_python", "fetch_url", "list_dir", "calc", "db_query", "wetter_ü"]


def rand_result_len(rng: random.Random, scale: float = 1.0) -> int:
    r = rng.random()
    if r < 0.08:
        n = 0
    elif r < 0.55:
        n = rng.randint(1, 300)
    elif r < 0.92:
        n = rng.randint(300, 1500)
    elif r < 0.98:
        n = rng.randint(1500, 4000)
    else:
        n = rng.randint(4000, 20000)
    return int(n * scale)


def msg(role: ChatRole, content: list, meta: dict | None = None, name: str | None = None) -> ChatMessage:
    return ChatMessage(_role=role, _content=content, _name=name, _meta=meta or {})


def rand_tool_result(rng: random.Random, call: ToolCall, scale: float = 1.0) -> ChatMessage:
    n = rand_result_len(rng, scale)
    if rng.random() < 0.15:
        parts: list = []
        for _ in range(rng.randint(1, 4)):
            r = rng.random()
            if r < 0.6:
                parts.append(TextContent(text=rand_text(rng, n // 2)))
            elif r < 0.85:
                parts.append(rand_image(rng))
            else:
                parts.append(rand_file(rng))
        result = parts
    else:
        result = rand_text(rng, n)
    meta = rand_meta(rng, tool_result=True)
    return ChatMessage.from_tool(tool_result=result, origin=call, error=rng.random() < 0.12, meta=meta)


def rand_conversation(rng: random.Random, scale: float = 1.0, max_turns: int = 3, max_steps: int = 6
                      ) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        messages.append(ChatMessage.from_system(rand_text(rng, rng.randint(0, 300)), meta=rand_meta(rng)))
    call_counter = 0
    for _turn in range(rng.randint(1, max_turns)):
        if rng.random() < 0.2:
            parts: list = [TextContent(text=rand_text(rng, rng.randint(1, 200)))]
            for _ in range(rng.randint(1, 3)):
                r = rng.random()
                parts.append(rand_image(rng) if r < 0.45 else rand_file(rng) if r < 0.75
                             else TextContent(text=rand_text(rng, rng.randint(0, 80))))
            messages.append(msg(ChatRole.USER, parts, rand_meta(rng), rng.choice([None, None, "alice"])))
        else:
            messages.append(ChatMessage.from_user(rand_text(rng, rng.randint(0, 400)), meta=rand_meta(rng)))
        for _step in range(rng.randint(0, max_steps)):
            content: list = []
            if rng.random() < 0.25:
                content.append(ReasoningContent(reasoning_text=rand_text(rng, rng.randint(0, 300)),
                                                extra=rng.choice([{}, {"signature": "abc"}])))
            if rng.random() < 0.5:
                content.append(TextContent(text=rand_text(rng, rng.randint(0, 200))))
            calls = []
            if rng.random() < 0.85:
                for _ in range(rng.choice([1, 1, 1, 2, 3, 4])):
                    call_counter += 1
                    calls.append(ToolCall(tool_name=rng.choice(TOOL_NAMES), arguments=rand_args(rng),
                                          id=None if rng.random() < 0.1 else f"call_{call_counter}",
                                          extra=rng.choice([None, None, {"index": call_counter}])))
            content.extend(calls)
            messages.append(msg(ChatRole.ASSISTANT, content, rand_meta(rng), rng.choice([None] * 9 + ["bot"])))
            if calls and rng.random() < 0.06:
                # several results in one message (Agent never does this, from_dict allows it)
                results = [ToolCallResult(result=rand_text(rng, rand_result_len(rng, scale)), origin=c,
                                          error=rng.random() < 0.1) for c in calls]
                messages.append(msg(ChatRole.TOOL, results, rand_meta(rng, True)))
            else:
                for call in calls:
                    if rng.random() < 0.05:
                        continue  # missing result
                    messages.append(rand_tool_result(rng, call, scale))
        if rng.random() < 0.6:
            messages.append(ChatMessage.from_assistant(rand_text(rng, rng.randint(0, 500)), meta=rand_meta(rng)))
    return messages


TOOL_SPECS = [
    {"name": "search", "description": "Search the web for a query.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "What to look for"},
                                                     "limit": {"type": "integer", "minimum": 1}},
                    "required": ["query"]}},
    {"name": "read_file", "description": "Read a file from disk — returns its text (UTF-8, ünïcødé 😀).",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "run_python", "description": "Run code.\nReturns {stdout, stderr}.",
     "parameters": {"type": "object", "properties": {"code": {"type": "string"},
                                                     "timeout": {"type": "number", "default": 2.5e-05}},
                    "required": ["code"], "additionalProperties": False}},
    {"name": "wetter_ü", "description": "",
     "parameters": {"type": "object", "properties": {"ort": {"type": "string", "enum": ["Köln", "東京"]},
                                                     "Zeit": {"type": "array", "items": {"type": "number"}}}}},
    {"name": "noargs", "description": "No arguments at all.", "parameters": {"type": "object", "properties": {}}},
]


def rand_tools(rng: random.Random) -> list[dict]:
    if rng.random() < 0.45:
        return []
    return rng.sample(TOOL_SPECS, rng.randint(1, len(TOOL_SPECS)))


def make_tools(specs: list[dict]) -> list[Tool]:
    return [Tool(name=s["name"], description=s["description"], parameters=s["parameters"], function=noop)
            for s in specs]


# --------------------------------------------------------------------------------------------
# Hand-written conversations
# --------------------------------------------------------------------------------------------
def tc(name: str, args: dict | None = None, cid: str | None = "c1", extra=None) -> ToolCall:
    return ToolCall(tool_name=name, arguments=args if args is not None else {}, id=cid, extra=extra)


def tr(call: ToolCall, result, error: bool = False, meta: dict | None = None) -> ChatMessage:
    return ChatMessage.from_tool(tool_result=result, origin=call, error=error, meta=meta)


def named_cases() -> list[tuple[str, list[ChatMessage], list[dict]]]:
    rng = random.Random(12345)
    S = ChatMessage.from_system
    U = ChatMessage.from_user
    A = ChatMessage.from_assistant
    cases: list[tuple[str, list[ChatMessage], list[dict]]] = []

    c = tc("search", {"q": "😀 𝔘𝔫𝔦 𠜎", "ключ": "значение", "emoji🚀": ["🇩🇪", "e\u0301"]}, "call_😀")
    cases.append(("unicode_astral", [
        S("Système: réponds en français 🤖"), U("Ünïcødé 𝄞 test 👩‍💻 \u2028 line sep"),
        A("Je cherche 🔎", tool_calls=[c]), tr(c, "Résultat: " + "😀🧪🚀𠜎" * 120 + " fin"),
        A("Voilà 𝔘𝔫𝔦")], TOOL_SPECS[:2]))

    c = tc("calc", {"values": FLOATS, "pos": 1e-05, "huge": 1e+21, "neg_zero": -0.0, "third": 1 / 3,
                    "nested": {"e": 2.718281828459045, "tiny": 5e-324}})
    cases.append(("floats_repr", [U("compute"), A(tool_calls=[c]), tr(c, "1e+21 -0.0 1e-05 " * 80)], []))

    c = tc("calc", {"big": 2**64, "bigger": 2**64 + 1, "neg": -(2**70), "googol": 10**100, "max_u64": 2**64 - 1,
                    "min_i64": -(2**63), "list": BIG_INTS})
    cases.append(("big_ints", [U("big"), A(tool_calls=[c]), tr(c, str(2**200) * 30)], []))

    c1, c2 = tc("search", {"q": "nothing"}, "a"), tc("search", {"q": "more"}, "b")
    cases.append(("empty_result", [U("find"), A(tool_calls=[c1]), tr(c1, ""), A(tool_calls=[c2]),
                                   tr(c2, "x" * 1200)], []))

    big = rand_text(random.Random(7), 20000)
    c1, c2, c3 = tc("read_file", {"path": "/a"}, "h1"), tc("read_file", {"path": "/b"}, "h2"), tc("calc", {}, "h3")
    cases.append(("huge_result", [S("sys"), U("read both"), A(tool_calls=[c1]), tr(c1, big),
                                  A(tool_calls=[c2]), tr(c2, big[::-1]), A(tool_calls=[c3]), tr(c3, "ok")],
                  TOOL_SPECS))

    img_v = ImageContent(base64_image=PNG_B64)  # mime type guessed from bytes
    img_nv = ImageContent(base64_image="@@not base64@@", validation=False)
    pdf = FileContent(base64_data=PDF_B64, filename="report.pdf")
    txt = FileContent(base64_data=TEXT_FILE_B64, mime_type="text/plain", filename=None)
    c = tc("fetch_url", {"url": "https://example.com/img"}, "img1")
    cases.append(("images_files", [
        msg(ChatRole.USER, [TextContent("look at these"), img_v, pdf, img_nv, txt]),
        A("fetching", tool_calls=[c]),
        tr(c, [TextContent("here: "), ImageContent(base64_image=GIF_B64, mime_type="image/gif"), TextContent(" and "),
               FileContent(base64_data=PDF_B64, mime_type="application/pdf", filename="x.pdf"), img_nv]),
        msg(ChatRole.ASSISTANT, [TextContent("an assistant image"), ImageContent(base64_image=JPEG_B64)])], []))

    calls = [tc(n, rand_args(rng), f"p{i}") for i, n in enumerate(["search", "read_file", "calc", "list_dir"])]
    cases.append(("parallel_calls", [U("do four things"), A("running 4", tool_calls=calls)]
                  + [tr(cl, rand_text(rng, 300 * (i + 1))) for i, cl in enumerate(calls)]
                  + [A(tool_calls=[tc("search", {"q": "again"}, "p9")]),
                     tr(tc("search", {"q": "again"}, "p9"), rand_text(rng, 900))], []))

    c1, c2 = tc("run_python", {"code": "1/0"}, "e1"), tc("run_python", {"code": "print(1)"}, "e2")
    cases.append(("errors", [U("run"), A(tool_calls=[c1]), tr(c1, "ZeroDivisionError: division by zero\n" * 40, True),
                             A(tool_calls=[c2]), tr(c2, "Traceback {...}\n" * 30, True)], []))

    c = tc("search", {"q": "r"}, "r1")
    cases.append(("reasoning_left_out", [
        U("think"), A("visible", reasoning="hidden chain of thought " * 50, tool_calls=[c]),
        tr(c, "ok " * 300), msg(ChatRole.ASSISTANT, [ReasoningContent("only reasoning", {"sig": "x"})]),
        A("done", reasoning=ReasoningContent("more", {"redacted": True}))], []))

    c = tc("list_dir", {"path": "."}, "n1")
    cases.append(("no_content_assistant", [U("go"), msg(ChatRole.ASSISTANT, []), A(tool_calls=[c]),
                                           tr(c, "file\n" * 300), msg(ChatRole.ASSISTANT, [], {"finish": "stop"})],
                  []))

    c = tc("db_query", {"filter": {"and": [{"field": "a", "op": ">=", "value": 1.5},
                                           {"or": [{"x": None}, {"y": [True, False, {"z": {"deep": {"deeper": []}}}]}]}]},
                        "sort": {"b": -1, "a": 1, "A": 0, "é": 2, "😀": 3, "_": 4}, "empty": {}, "list": [[], [[]]]})
    cases.append(("nested_args", [U("query"), A(tool_calls=[c]), tr(c, json.dumps({"rows": list(range(200))}))], []))

    cases.append(("multi_text_user", [S("a"), S("second system"), msg(ChatRole.USER, [
        TextContent("first"), TextContent(""), TextContent("third\nline")], name="bob"),
        msg(ChatRole.ASSISTANT, [TextContent("one"), TextContent("two")], name="helper")], []))

    c = tc("fetch_url", {"u": 1}, "t1")
    c2 = tc("fetch_url", {"u": 2}, "t2")
    cases.append(("tool_result_parts_list", [U("fetch"), A(tool_calls=[c]),
                                             tr(c, [TextContent("part one " * 100), TextContent("part two " * 100)]),
                                             A(tool_calls=[c2]), tr(c2, [])], []))

    cases.append(("file_unnamed", [msg(ChatRole.USER, [FileContent(base64_data=PDF_B64, mime_type="application/pdf"),
                                                       FileContent(base64_data="??", filename="", validation=False),
                                                       FileContent(base64_data=TEXT_FILE_B64, filename="n.txt",
                                                                   validation=False)])], []))

    c1, c2, c3 = tc("read_file", {"p": 1}, "o1"), tc("read_file", {"p": 2}, "o2"), tc("read_file", {"p": 3}, "o3")
    off = {"tool_result_offloaded": {"path": "/store/1", "chars": 99999}}
    cases.append(("offloaded_meta", [U("read"), A(tool_calls=[c1]), tr(c1, "ref: /store/1 " * 100, meta=off),
                                     A(tool_calls=[c2]), tr(c2, "data " * 400, meta={"custom_skip": 1}),
                                     A(tool_calls=[c3]), tr(c3, "last " * 400)], []))

    comp = {"context_compaction": {"strategy": "tool_result_pruning", "original_tokens": 512}}
    cases.append(("already_compacted", [
        S("summary of earlier work", meta={"context_compaction": {"strategy": "summarization"}}),
        U("continue"), A(tool_calls=[c1]), tr(c1, DEFAULT_PLACEHOLDER.replace("{tool_name}", "read_file") * 30,
                                             meta=comp),
        A(tool_calls=[c2]), tr(c2, "fresh " * 500), A(tool_calls=[c3]), tr(c3, "newest " * 500)], []))

    cs = [tc("search", {"i": i}, f"s{i}") for i in range(4)]
    cases.append(("steps_without_results", [
        U("go"), A(tool_calls=[cs[0]]), tr(cs[0], "alpha " * 300), A("thinking out loud"), A("still thinking"),
        A(tool_calls=[cs[1]]), tr(cs[1], "beta " * 300), A("no tools here"), A(tool_calls=[cs[2]]),
        tr(cs[2], "gamma " * 300), A("final no tools")], []))

    cases.append(("system_only", [S("You are a helpful assistant. " * 20)], TOOL_SPECS[2:]))
    cases.append(("empty_conversation", [], []))
    cases.append(("tools_only", [], TOOL_SPECS))

    # Several results inside ONE message: rendering joins them, pruning looks at only the first one.
    cs = [tc("search", {"i": i}, f"m{i}") for i in range(3)]
    cases.append(("multi_result_message", [
        U("batch"), A(tool_calls=cs),
        msg(ChatRole.TOOL, [ToolCallResult("first " * 300, cs[0], False), ToolCallResult("second " * 300, cs[1], True),
                            ToolCallResult("third " * 300, cs[2], False)], {"batch": True}),
        A(tool_calls=[tc("calc", {}, "m9")]), tr(tc("calc", {}, "m9"), "tail " * 300)], []))

    # A tool message that also carries text: the text is not rendered and pruning drops it.
    c = tc("search", {}, "x1")
    cases.append(("tool_result_with_text", [
        U("q"), A(tool_calls=[c]), msg(ChatRole.TOOL, [TextContent("hidden text"), ToolCallResult("r " * 600, c, False)],
                                       name="toolname"),
        A(tool_calls=[tc("calc", {}, "x2")]), tr(tc("calc", {}, "x2"), "z " * 400)], []))

    c = tc("search", {"q": "orphan"}, None)
    cases.append(("orphan_tool_results", [S("sys"), tr(c, "orphan before user " * 100), U("hi"),
                                          tr(c, "orphan after user " * 100), A("answer")], []))

    cases.append(("control_chars", [U("nul:\x00 bell:\x07 esc:\x1b del:\x7f nbsp:\xa0 bom:\ufeff"),
                                    A(tool_calls=[tc("calc", {"c": "\x00\x01\x1f\x7f\u2028\u2029\ufeff", "\x00k": 1})]),
                                    tr(tc("calc", {}), "tab\there\r\nCR\rend\x00")], []))

    c1, c2 = tc("calc", {}, "k1"), tc("calc", {}, "k2")
    cases.append(("no_ids_and_names", [
        msg(ChatRole.SYSTEM, [TextContent("sys")], name="sysname"), U("x", name="user name 😀"),
        A(tool_calls=[tc("calc", {"a": 1}, None, {"provider": {"k": [1, 2]}})]), tr(tc("calc", {"a": 1}, None), "1 " * 500),
        A(tool_calls=[c1, c2]), tr(c1, "2 " * 500), tr(c2, "3 " * 500)], []))

    # Several user turns: pruning is not limited to the current task.
    turns: list[ChatMessage] = [S("multi-turn")]
    for t in range(3):
        turns.append(U(f"task {t}"))
        for s in range(2):
            cl = tc(TOOL_NAMES[(t + s) % len(TOOL_NAMES)], {"t": t, "s": s}, f"u{t}{s}")
            turns += [A(tool_calls=[cl]), tr(cl, rand_text(rng, 800 + 300 * s))]
        turns.append(A(f"done {t}"))
    cases.append(("multi_turn", turns, TOOL_SPECS[:1]))
    return cases


# --------------------------------------------------------------------------------------------
# Counters
# --------------------------------------------------------------------------------------------
APPROX_DEFAULT = {"kind": "approximate", "chars_per_token": 4.0, "tokens_per_image": 85, "tokens_per_file": 1000}
APPROX_25 = {"kind": "approximate", "chars_per_token": 2.5, "tokens_per_image": 85, "tokens_per_file": 1000}
APPROX_37 = {"kind": "approximate", "chars_per_token": 3.7, "tokens_per_image": 120, "tokens_per_file": 333}
TIK_O200K = {"kind": "tiktoken", "encoding": "o200k_base", "tokens_per_image": 85, "tokens_per_file": 1000}
TIK_CL100K = {"kind": "tiktoken", "encoding": "cl100k_base", "tokens_per_image": 50, "tokens_per_file": 700}
TIK_P50K = {"kind": "tiktoken", "encoding": "p50k_base", "tokens_per_image": 85, "tokens_per_file": 1000}
TIK_R50K = {"kind": "tiktoken", "encoding": "r50k_base", "tokens_per_image": 0, "tokens_per_file": 0}
COMPACT_COUNTERS = [APPROX_DEFAULT, APPROX_25, APPROX_37, TIK_O200K, TIK_CL100K]

_COUNTER_CACHE: dict[str, object] = {}


def make_counter(spec: dict):
    key = json.dumps(spec, sort_keys=True)
    if key not in _COUNTER_CACHE:
        if spec["kind"] == "approximate":
            _COUNTER_CACHE[key] = ApproximateTokenCounter(chars_per_token=spec["chars_per_token"],
                                                          tokens_per_image=spec["tokens_per_image"],
                                                          tokens_per_file=spec["tokens_per_file"])
        elif spec["kind"] == "tiktoken":
            _COUNTER_CACHE[key] = TiktokenCounter(encoding=spec["encoding"], tokens_per_image=spec["tokens_per_image"],
                                                  tokens_per_file=spec["tokens_per_file"])
        else:
            raise ValueError(spec)
    return _COUNTER_CACHE[key]


# --------------------------------------------------------------------------------------------
# HF tokenizers (trained locally; no hub access)
# --------------------------------------------------------------------------------------------
def training_corpus() -> list[str]:
    rng = random.Random(424242)  # fixed: tokenizers do not depend on --seed
    lines = []
    for _ in range(120):
        conv = rand_conversation(rng)
        lines.extend(_rendered_conversation(conv).split("\n"))
    lines.append(_rendered_tools(make_tools(TOOL_SPECS)))
    return [ln for ln in lines if ln]


TOKENIZER_NAMES = ["bytelevel_bpe", "wordpiece_bert", "unigram_metaspace"]


def ensure_tokenizers(root: Path, retrain: bool) -> list[str]:
    """Reuse the committed tokenizer files; train them only when missing or asked to.

    Training (WordPiece and Unigram in particular) is not bit-for-bit reproducible across runs, so the
    committed files are the source of truth and a scratch --out-root gets a copy of them.
    """
    out_dir = root / TOKENIZER_DIR
    committed = _HERE.parent.parent / TOKENIZER_DIR
    if not retrain:
        if all((out_dir / f"{n}.json").is_file() for n in TOKENIZER_NAMES):
            return TOKENIZER_NAMES
        if all((committed / f"{n}.json").is_file() for n in TOKENIZER_NAMES):
            out_dir.mkdir(parents=True, exist_ok=True)
            for n in TOKENIZER_NAMES:
                if (committed / f"{n}.json").resolve() != (out_dir / f"{n}.json").resolve():
                    (out_dir / f"{n}.json").write_bytes((committed / f"{n}.json").read_bytes())
            return TOKENIZER_NAMES
    return build_tokenizers(out_dir)


def build_tokenizers(out_dir: Path) -> list[str]:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    out_dir.mkdir(parents=True, exist_ok=True)
    corpus = training_corpus()
    specs = []

    # 1. Byte-level BPE (GPT-2 style), ~2000 merges.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + 2000 + 1, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.save(str(out_dir / "bytelevel_bpe.json"))
    specs.append("bytelevel_bpe")

    # 2. WordPiece, BERT-style, with normalizer, [CLS]/[SEP] template, truncation + padding saved in the file,
    #    and "<image>" registered as a special added token (it occurs in rendered conversations).
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=3000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "<image>"],
                                        show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    tok.enable_truncation(max_length=64)
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]", length=64)
    tok.save(str(out_dir / "wordpiece_bert.json"))
    specs.append("wordpiece_bert")

    # 3. Unigram with Metaspace pre-tokenizer and NFKC normalizer, plus a non-special added token.
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("\t", " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=2000, special_tokens=["<s>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_tokens(["[tool:"])
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                       special_tokens=[("<s>", bos)])
    tok.save(str(out_dir / "unigram_metaspace.json"))
    specs.append("unigram_metaspace")
    return specs


_HF_CACHE: dict[str, object] = {}


def hf_count(path: Path, rendered: str, messages: list[ChatMessage], spec: dict) -> int:
    from tokenizers import Tokenizer

    key = str(path)
    if key not in _HF_CACHE:
        tok = Tokenizer.from_file(key)
        tok.no_truncation()
        tok.no_padding()
        _HF_CACHE[key] = tok
    tok = _HF_CACHE[key]
    ids = tok.encode(rendered, add_special_tokens=False).ids if rendered else []
    return len(ids) + _non_text_tokens(messages, tokens_per_image=spec["tokens_per_image"],
                                       tokens_per_file=spec["tokens_per_file"])


# --------------------------------------------------------------------------------------------
# Output helpers
# --------------------------------------------------------------------------------------------
def dumps(obj) -> str:
    return json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def prepare_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.json"):
        old.unlink()


def write(path: Path, obj) -> None:
    path.write_text(dumps(obj), encoding="utf-8")


def to_dicts(messages: list[ChatMessage]) -> list[dict]:
    # round-trip through JSON text so every fixture holds plain JSON values
    return json.loads(json.dumps([m.to_dict() for m in messages]))


# --------------------------------------------------------------------------------------------
# COUNT
# --------------------------------------------------------------------------------------------
def gen_count(root: Path, seed: int, k: int, retrain: bool = False) -> int:
    out = root / COUNT_DIR
    prepare_dir(out)
    tok_names = ensure_tokenizers(root, retrain)
    hf_specs = [
        {"kind": "huggingface", "tokenizer": f"tokenizers/{tok_names[0]}.json", "tokens_per_image": 85,
         "tokens_per_file": 1000},
        {"kind": "huggingface", "tokenizer": f"tokenizers/{tok_names[1]}.json", "tokens_per_image": 10,
         "tokens_per_file": 20},
        {"kind": "huggingface", "tokenizer": f"tokenizers/{tok_names[2]}.json", "tokens_per_image": 0,
         "tokens_per_file": 1},
    ]
    counters = [APPROX_DEFAULT, APPROX_25, APPROX_37, TIK_O200K, TIK_CL100K, TIK_P50K, TIK_R50K] + hf_specs
    rng = random.Random(f"count-{seed}")
    cases = list(named_cases())
    for i in range(k):
        cases.append((f"random_{i:03d}", rand_conversation(rng), rand_tools(rng)))
    for name, messages, tool_specs in cases:
        tools = make_tools(tool_specs)
        rendered = _rendered_conversation(messages) + _rendered_tools(tools)
        counts = []
        for spec in counters:
            if spec["kind"] == "huggingface":
                n = hf_count(root / "crates/compaction-tokens/tests/data" / spec["tokenizer"], rendered, messages, spec)
            else:
                n = make_counter(spec).count(messages=messages, tools=tools or None)
            counts.append({"counter": spec, "count": n})
        write(out / f"{name}.json", {"name": name, "messages": to_dicts(messages), "tools": tool_specs,
                                     "rendered": rendered, "counts": counts})
    return len(cases)


# --------------------------------------------------------------------------------------------
# CONVERT
# --------------------------------------------------------------------------------------------
def origin_d(name="search", args=None, cid="c1"):
    return {"tool_name": name, "arguments": args or {}, "id": cid, "extra": None}


def convert_named() -> list[tuple[str, list[dict]]]:
    o = origin_d()
    cases: list[tuple[str, list[dict]]] = [
        ("current_format", [
            {"role": "system", "meta": {}, "name": None, "content": [{"text": "sys"}]},
            {"role": "user", "meta": {"k": 1}, "name": "alice", "content": [{"text": "hi"}, {"text": "there"}]},
            {"role": "assistant", "meta": {}, "name": None, "content": [
                {"reasoning": {"reasoning_text": "hmm", "extra": {}}}, {"text": "calling"},
                {"tool_call": {"tool_name": "search", "arguments": {"q": "x", "n": 1e+21}, "id": "c1",
                               "extra": None}}]},
            {"role": "tool", "meta": {}, "name": None, "content": [
                {"tool_call_result": {"result": "r", "origin": o, "error": False}}]}]),
        ("content_string", [{"role": "user", "content": "plain string"},
                            {"role": "assistant", "content": ""},
                            {"role": "system", "content": "s 😀", "meta": {"a": [1]}}]),
        ("legacy_underscore", [
            {"_role": "user", "_content": [{"text": "legacy"}], "_name": "n", "_meta": {"m": True}},
            {"_role": "assistant", "_content": [{"tool_call": origin_d()}]},
            {"_role": "tool", "_content": [{"tool_call_result": {"result": "x", "origin": o, "error": True}}],
             "_meta": None}]),
        ("flat_parts", [
            {"role": "assistant", "content": [{"tool_name": "search", "arguments": {"q": 1}, "id": "f1"},
                                              {"tool_name": "calc", "arguments": {}}]},
            {"role": "tool", "content": [{"result": "flat", "origin": {"tool_name": "search", "arguments": {"q": 1}},
                                          "error": False}]},
            {"role": "assistant", "content": [{"reasoning_text": "flat reasoning"},
                                              {"reasoning_text": "with extra", "extra": {"s": 1}}]},
            {"role": "user", "content": [{"base64_image": PNG_B64, "mime_type": "image/png"},
                                         {"base64_data": PDF_B64, "mime_type": "application/pdf",
                                          "filename": "f.pdf"}]}]),
        ("flat_tool_result_parts_list", [
            {"role": "tool", "content": [{"result": [{"text": "a"}, {"base64_image": GIF_B64},
                                                     {"image": {"base64_image": PNG_B64}},
                                                     {"file": {"base64_data": PDF_B64}}],
                                          "origin": o, "error": False}]}]),
        ("image_mime_guessed", [{"role": "user", "content": [
            {"image": {"base64_image": PNG_B64}}, {"image": {"base64_image": GIF_B64, "mime_type": None}},
            {"image": {"base64_image": JPEG_B64, "mime_type": ""}},
            {"image": {"base64_image": PNG_B64, "mime_type": "image/jpg", "detail": "low"}}]}]),
        ("file_mime_guessed", [{"role": "user", "content": [
            {"file": {"base64_data": PDF_B64}}, {"file": {"base64_data": PNG_B64, "filename": "pic"}},
            {"file": {"base64_data": TEXT_FILE_B64, "filename": "notes.txt"}},
            {"file": {"base64_data": "", "filename": "empty"}}]}]),
        # Haystack's image MIME list comes from PIL and includes application/pdf, application/postscript and
        # video/mpeg, so these are accepted as images (explicitly or guessed from PDF bytes).
        ("image_pdf_mime_accepted", [{"role": "user", "content": [
            {"image": {"base64_image": PNG_B64, "mime_type": "application/pdf"}},
            {"image": {"base64_image": PDF_B64}},
            {"image": {"base64_image": PNG_B64, "mime_type": "video/mpeg"}}]}]),
        ("image_unguessable_mime", [{"role": "user", "content": [
            {"image": {"base64_image": TEXT_FILE_B64}}]}]),
        ("validation_off", [{"role": "user", "content": [
            {"image": {"base64_image": "!!!", "validation": False}},
            {"image": {"base64_image": PDF_B64, "mime_type": "application/pdf", "validation": False}},
            {"file": {"base64_data": "%%%", "validation": False, "extra": {"x": 1}}}]}]),
        ("meta_null_and_name", [{"role": "user", "content": "x", "meta": None, "name": "bob"},
                                {"role": "assistant", "content": [], "meta": None, "name": None},
                                {"role": "tool", "content": [{"tool_call_result": {"result": [], "origin": o,
                                                                                    "error": False}}],
                                 "meta": {}}]),
        ("missing_optional_keys", [{"role": "user", "content": [{"text": "only role and content"}]},
                                   {"role": "assistant", "content": [{"tool_call": {"tool_name": "t",
                                                                                    "arguments": {}}}]}]),
        ("numbers_in_args", [{"role": "assistant", "content": [{"tool_call": {
            "tool_name": "calc", "arguments": {"f": FLOATS, "i": BIG_INTS, "nested": {"x": [1e-05, -0.0]}},
            "id": None, "extra": {"big": 2**65}}}]}]),
        ("unicode_everywhere", [{"role": "user", "content": "😀 𝔘𝔫𝔦 e\u0301 \u2028", "name": "ユーザー",
                                 "meta": {"ключ": "😀"}}]),
        ("tool_result_error_flag", [{"role": "tool", "content": [
            {"tool_call_result": {"result": "boom", "origin": o, "error": True}},
            {"tool_call_result": {"result": "ok", "origin": origin_d("calc", {"a": 1}, None), "error": False}}]}]),
    ]
    return cases


def convert_errors() -> list[tuple[str, list[dict]]]:
    o = origin_d()
    return [
        ("err_no_role", [{"role": "user", "content": "ok"}, {"content": "no role here"}]),
        ("err_unknown_role", [{"role": "developer", "content": "x"}]),
        ("err_unknown_role_legacy", [{"role": "user", "content": "fine"}, {"_role": "robot", "_content": []}]),
        ("err_legacy_role_with_content", [{"_role": "user", "content": "x"}]),
        ("err_unknown_part", [{"role": "user", "content": [{"text": "fine"}, {"video": {"url": "x"}}]}]),
        ("err_empty_part", [{"role": "user", "content": [{}]}]),
        ("err_invalid_base64_image", [{"role": "user", "content": [{"image": {"base64_image": "not base64!!"}}]}]),
        ("err_invalid_base64_file", [{"role": "user", "content": [{"file": {"base64_data": "@@@"}}]}]),
        ("err_image_non_image_mime", [{"role": "user", "content": [
            {"image": {"base64_image": PNG_B64, "mime_type": "text/plain"}}]}]),
        ("err_image_guessed_zip", [{"role": "user", "content": [{"image": {"base64_image": ZIP_B64}}]}]),
        ("err_flat_image_bad_mime", [{"role": "user", "content": [{"base64_image": GIF_B64,
                                                                   "mime_type": "application/json"}]}]),
        ("err_content_number", [{"role": "user", "content": 5}]),
        ("err_content_missing", [{"role": "user", "meta": {}}]),
        ("err_tool_result_missing_error", [{"role": "tool", "content": [
            {"tool_call_result": {"result": "x", "origin": o}}]}]),
        ("err_tool_result_number", [{"role": "user", "content": "ok"}, {"role": "tool", "content": [
            {"tool_call_result": {"result": 42, "origin": o, "error": False}}]}]),
        ("err_tool_result_float", [{"role": "tool", "content": [
            {"tool_call_result": {"result": 1.5, "origin": o, "error": False}}]}]),
        ("err_tool_result_null", [{"role": "tool", "content": [
            {"tool_call_result": {"result": None, "origin": o, "error": False}}]}]),
        ("err_tool_result_list_of_numbers", [{"role": "tool", "content": [
            {"tool_call_result": {"result": [1, 2], "origin": o, "error": False}}]}]),
        ("err_tool_call_missing_arguments", [{"role": "assistant", "content": [{"tool_call": {"tool_name": "x"}}]}]),
    ]


def run_convert(raw: list[dict]):
    """from_dict every message, then to_dict it and render it (which is what any counter does).

    Returns (outputs, None) or (None, (index, "Type: message")) for the first message that fails.
    """
    outputs = []
    for i, d in enumerate(raw):
        try:
            m = ChatMessage.from_dict(json.loads(json.dumps(d)))
            out = m.to_dict()
            json.dumps(out)
            _rendered_conversation([m])
        except Exception as e:  # noqa: BLE001
            return None, (i, f"{type(e).__name__}: {e}")
        outputs.append(json.loads(json.dumps(out)))
    return outputs, None


def reshape(rng: random.Random, d: dict) -> dict:
    """Rewrite one to_dict() message into another shape from_dict accepts."""
    d = json.loads(json.dumps(d))
    parts = d["content"]
    # flat (unwrapped) parts
    if rng.random() < 0.4:
        new_parts = []
        for p in parts:
            if len(p) == 1 and next(iter(p)) in ("tool_call", "tool_call_result", "reasoning", "image", "file") \
                    and rng.random() < 0.7:
                inner = p[next(iter(p))]
                if "result" in inner and isinstance(inner["result"], list) and rng.random() < 0.5:
                    inner["result"] = [q[next(iter(q))] if len(q) == 1 and next(iter(q)) in ("image", "file")
                                       else q for q in inner["result"]]
                new_parts.append(inner)
            else:
                new_parts.append(p)
        parts = new_parts
    r = rng.random()
    if r < 0.2 and len(parts) == 1 and set(parts[0]) == {"text"}:
        out = {"role": d["role"], "content": parts[0]["text"]}
        if rng.random() < 0.5:
            out["meta"] = d["meta"] or None
        if d["name"] is not None or rng.random() < 0.3:
            out["name"] = d["name"]
        return out
    if r < 0.4:
        out = {"_role": d["role"], "_content": parts}
        if d["name"] is not None or rng.random() < 0.5:
            out["_name"] = d["name"]
        if d["meta"] or rng.random() < 0.5:
            out["_meta"] = d["meta"] or None
        return out
    out = {"role": d["role"], "content": parts}
    if d["meta"] or rng.random() < 0.6:
        out["meta"] = d["meta"] if (d["meta"] or rng.random() < 0.5) else None
    if d["name"] is not None or rng.random() < 0.6:
        out["name"] = d["name"]
    keys = list(out)
    rng.shuffle(keys)
    return {key: out[key] for key in keys}


def gen_convert(root: Path, seed: int, k: int) -> int:
    out = root / CONVERT_DIR
    prepare_dir(out)
    rng = random.Random(f"convert-{seed}")
    cases = convert_named() + convert_errors()
    for name, messages, _tools in named_cases():
        if messages and name != "huge_result":
            cases.append((f"conv_{name}", [reshape(rng, d) for d in to_dicts(messages)]))
    for i in range(k):
        conv = rand_conversation(rng, scale=0.05, max_turns=2, max_steps=3)  # shapes matter here, not sizes
        cases.append((f"random_{i:03d}", [reshape(rng, d) for d in to_dicts(conv)]))
    for name, raw in cases:
        outputs, err = run_convert(raw)
        obj: dict = {"name": name, "input": raw}
        if err is None:
            obj["output"] = outputs
        else:
            obj["error"] = {"index": err[0], "python": err[1]}
        write(out / f"{name}.json", obj)
    return len(cases)


# --------------------------------------------------------------------------------------------
# PRUNE
# --------------------------------------------------------------------------------------------
CUSTOM_PLACEHOLDERS = ['{"x": 1} {tool_name} {other}', "[pruned {tool_name}/{tool_name}]", "", "✂️ {TOOL_NAME} {}",
                       "x" * 3000]


def rand_settings(rng: random.Random) -> dict:
    r = rng.random()
    return {
        "min_keep_steps": rng.randint(1, 3),
        "min_tokens": rng.choice([0, 0, 10, 50, 200, 200, rng.randint(0, 400)]),
        "placeholder": DEFAULT_PLACEHOLDER if rng.random() < 0.6 else rng.choice(CUSTOM_PLACEHOLDERS),
        "skip_meta_keys": ["tool_result_offloaded"] if r < 0.5 else [] if r < 0.75
        else rng.choice([["custom_skip"], ["custom_skip", "tool_result_offloaded"], ["model"]]),
    }


DEFAULT_SETTINGS = {"min_keep_steps": 1, "min_tokens": 200, "placeholder": DEFAULT_PLACEHOLDER,
                    "skip_meta_keys": ["tool_result_offloaded"]}


def make_compactor(settings: dict) -> ToolResultPruningCompactor:
    return ToolResultPruningCompactor(min_keep_steps=settings["min_keep_steps"], min_tokens=settings["min_tokens"],
                                      placeholder=settings["placeholder"],
                                      skip_meta_keys=tuple(settings["skip_meta_keys"]))


def rand_target(rng: random.Random, total: int) -> int:
    r = rng.random()
    if r < 0.1:
        return 0
    if r < 0.2:
        return total
    if r < 0.3:
        return total + rng.randint(1, 50)
    if r < 0.38:
        return max(total - 1, 0)
    return int(total * rng.uniform(0.05, 0.95))


def gen_prune(root: Path, seed: int, k: int) -> int:
    out = root / PRUNE_DIR
    prepare_dir(out)
    rng = random.Random(f"prune-{seed}")
    jobs = []
    for name, messages, _tools in named_cases():
        jobs.append((f"{name}__default", messages, APPROX_DEFAULT, dict(DEFAULT_SETTINGS), None))
        tight = {"min_keep_steps": 1, "min_tokens": 0, "placeholder": '{"x": 1} {tool_name} {other}',
                 "skip_meta_keys": []}
        jobs.append((f"{name}__tight", messages, rng.choice(COMPACT_COUNTERS), tight, 0))
    for i in range(k):
        jobs.append((f"random_{i:03d}", rand_conversation(rng), rng.choice(COMPACT_COUNTERS), rand_settings(rng),
                     "random"))
    for name, messages, cspec, settings, target in jobs:
        counter = make_counter(cspec)
        total = counter.count(messages=messages)
        if target is None:
            target = total // 2
        elif target == "random":
            target = rand_target(rng, total)
        result = make_compactor(settings).compact(messages=messages, target_tokens=target, token_counter=counter)
        write(out / f"{name}.json", {"name": name, "messages": to_dicts(messages), "target_tokens": target,
                                     "counter": cspec, "settings": settings,
                                     "output": None if result is None else to_dicts(result)})
    return len(jobs)


# --------------------------------------------------------------------------------------------
# HOOK
# --------------------------------------------------------------------------------------------
def make_state(messages: list[ChatMessage], context_tokens: int | None, tools: list[Tool] | None) -> State:
    schema = {"tools": {"type": list, "handler": replace_values},
              "context_tokens": {"type": int, "handler": replace_values}}
    data: dict = {"messages": list(messages)}
    if context_tokens is not None:
        data["context_tokens"] = context_tokens
    if tools is not None:
        data["tools"] = tools
    return State(schema=schema, data=data)


def gen_hook(root: Path, seed: int, k: int) -> int:
    out = root / HOOK_DIR
    prepare_dir(out)
    rng = random.Random(f"hook-{seed}")
    jobs = []
    for name, messages, tool_specs in named_cases():
        jobs.append((f"{name}__fresh", messages, tool_specs, APPROX_DEFAULT, dict(DEFAULT_SETTINGS), "fresh"))
        jobs.append((f"{name}__anchored", messages, tool_specs, rng.choice(COMPACT_COUNTERS),
                     {**DEFAULT_SETTINGS, "min_tokens": 0}, "anchored"))
    for i in range(k):
        jobs.append((f"random_{i:03d}", rand_conversation(rng, scale=0.6), rand_tools(rng), rng.choice(COMPACT_COUNTERS),
                     rand_settings(rng), "random"))
    for name, messages, tool_specs, cspec, settings, mode in jobs:
        counter = make_counter(cspec)
        tools = make_tools(tool_specs)
        full = counter.count(messages=messages, tools=tools or None)
        compact_at, compact_to = 0.7, 0.4
        if mode == "fresh":
            context_tokens = 0
            window = max(1, int(full / 0.8))
        elif mode == "anchored":
            last = max((i for i, m in enumerate(messages) if m.is_from(ChatRole.ASSISTANT)), default=-1)
            accounted = messages if last < 0 else messages[: last + 1]
            context_tokens = counter.count(messages=accounted, tools=tools or None) + 37
            window = max(1, int(full / 0.75))
        else:
            r = rng.random()
            if r < 0.35:
                context_tokens = 0
            elif r < 0.7:
                last = max((i for i, m in enumerate(messages) if m.is_from(ChatRole.ASSISTANT)), default=-1)
                accounted = messages if last < 0 else messages[: last + 1]
                context_tokens = max(0, counter.count(messages=accounted) + rng.randint(-50, 600))
            else:
                context_tokens = rng.randint(1, max(2, full * 2))
            pair = rng.choice([(0.7, 0.4), (1.0, 0.5), (0.9, 0.1), (0.5, 0.25), (0.8, 0.79)])
            if rng.random() < 0.3:
                a = round(rng.uniform(0.2, 1.0), 3)
                pair = (a, round(rng.uniform(0.01, a - 0.005), 3))
            compact_at, compact_to = pair
            window = max(1, int(max(full, 1) / rng.uniform(0.3, 1.6)))
        context_window = window
        hook = CompactionHook(compactor=make_compactor(settings), context_window=context_window,
                              compact_at=compact_at, compact_to=compact_to, token_counter=counter)
        estimated = _estimated_context_tokens(messages=messages, context_tokens=context_tokens, token_counter=counter,
                                              tools=tools or None)
        triggered = estimated >= context_window * compact_at
        target = hook._target_tokens(messages=messages, context_tokens=context_tokens, tools=tools or None)
        assert (target is not None) == triggered
        state = make_state(messages, context_tokens, tools)
        original = state.data["messages"]
        hook.run(state)
        after = state.data["messages"]
        compacted = after is not original
        write(out / f"{name}.json", {
            "name": name, "messages": to_dicts(messages), "tools": tool_specs, "context_tokens": context_tokens,
            "context_window": context_window, "compact_at": compact_at, "compact_to": compact_to, "counter": cspec,
            "compactor": {"kind": "pruning", "settings": settings},
            "expected": {"messages": to_dicts(after), "context_tokens": state.data["context_tokens"],
                         "compacted": compacted, "estimated_tokens": estimated, "triggered": triggered,
                         "target_tokens": None if target is None else target[0]},
        })
    return len(jobs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out-root", required=True, type=Path)
    ap.add_argument("--seed", required=True, type=int)
    ap.add_argument("--random-cases", type=int, default=60)
    ap.add_argument("--only", default="count,convert,prune,hook")
    ap.add_argument("--retrain-tokenizers", action="store_true",
                    help="train the HF tokenizers afresh instead of reusing the committed files")
    args = ap.parse_args(argv)
    kinds = [x.strip() for x in args.only.split(",") if x.strip()]
    gens = {"count": gen_count, "convert": gen_convert, "prune": gen_prune, "hook": gen_hook}
    for kind in kinds:
        if kind not in gens:
            ap.error(f"unknown kind {kind!r}; expected some of {sorted(gens)}")
    root = args.out_root.resolve()
    for kind in kinds:
        if kind == "count":
            n = gen_count(root, args.seed, args.random_cases, args.retrain_tokenizers)
        else:
            n = gens[kind](root, args.seed, args.random_cases)
        print(f"{kind}: {n} fixtures", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
