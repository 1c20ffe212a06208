"""Regenerates the offload exactness fixtures from the reference (Haystack 3.4.1).

Run by `cargo xtask fixtures` (or: .venv-ref/bin/python xtask/reference/generate_offload.py OUT_ROOT).
Writes one JSON file per case into OUT_ROOT/crates/compaction-offload/tests/data/offload. Store paths are written with the resolved
root replaced by `{ROOT}`; `uuid4` is patched so the compactor's keys are deterministic.
"""

import base64
import json
import tempfile
import warnings
from pathlib import Path
from unittest import mock

warnings.filterwarnings("ignore")

from haystack.components.agents.state.state import State  # noqa: E402
from haystack.components.agents.state.state_utils import replace_values  # noqa: E402
from haystack.dataclasses import ChatMessage, FileContent, ImageContent, TextContent, ToolCall  # noqa: E402
from haystack.hooks.compaction import CompactionHook, ToolResultOffloadCompactor, ToolResultPruningCompactor  # noqa: E402
from haystack.hooks.tool_result_offloading import (  # noqa: E402
    AlwaysOffload,
    FileSystemToolResultStore,
    NeverOffload,
    OffloadOverChars,
    ToolResultOffloadHook,
)
from haystack.token_counters import ApproximateTokenCounter  # noqa: E402

import sys  # noqa: E402

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[2]) / "crates/compaction-offload/tests/data/offload"
OUT.mkdir(parents=True, exist_ok=True)
PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")).decode()
PDF = base64.b64encode(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n").decode()


def call(tool, id_, **args):
    return ToolCall(tool_name=tool, arguments=args, id=id_)


def step(calls, results, text=None):
    msgs = [ChatMessage.from_assistant(text=text, tool_calls=calls)]
    for c, r in zip(calls, results):
        error = False
        if isinstance(r, tuple):
            r, error = r
        msgs.append(ChatMessage.from_tool(tool_result=r, origin=c, error=error))
    return msgs


def state_of(messages, step_count):
    schema = {"context_tokens": {"type": int, "handler": replace_values}}
    return State(schema=schema, data={"messages": list(messages), "step_count": step_count})


def store_contents(root: Path):
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            rel = str(path.relative_to(root))
            try:
                out[rel] = {"text": data.decode("utf-8")}
            except UnicodeDecodeError:
                out[rel] = {"base64": base64.b64encode(data).decode()}
    return out


def dump(messages, root):
    text = json.dumps([m.to_dict() for m in messages], ensure_ascii=False)
    return json.loads(text.replace(str(root), "{ROOT}"))


def hook_case(name, messages, step_count, strategies, preview_chars=200):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        hook = ToolResultOffloadHook(store=FileSystemToolResultStore(root=root), offload_strategies=strategies,
                                     preview_chars=preview_chars)
        config = json.loads(json.dumps(hook.to_dict()).replace(str(root), "{ROOT}"))
        state = state_of(messages, step_count)
        hook.run(state)
        write(name, {"name": name, "kind": "hook", "hook": config, "step_count": step_count,
                     "messages": [m.to_dict() for m in messages],
                     "expected": {"messages": dump(state.data["messages"], root), "store": store_contents(root)}})


class FakeUuid:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1
        return mock.Mock(hex=f"{self.n:032x}")


def compactor_case(name, messages, target, settings, counter):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        compactor = ToolResultOffloadCompactor(store=FileSystemToolResultStore(root=root), **settings)
        with mock.patch("haystack.hooks.compaction.tool_result_offloading.uuid4", FakeUuid()):
            out = compactor.compact(messages=messages, target_tokens=target, token_counter=counter)
        write(name, {"name": name, "kind": "compactor", "settings": settings, "target_tokens": target,
                     "counter": {"chars_per_token": counter.chars_per_token},
                     "messages": [m.to_dict() for m in messages],
                     "expected": {"messages": None if out is None else dump(out, root),
                                  "store": store_contents(root)}})


def sequence_case(name):
    """Offload a result, run more steps, prune: the pointer survives."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        offload = ToolResultOffloadHook(store=FileSystemToolResultStore(root=root),
                                        offload_strategies={"fetch": AlwaysOffload()}, preview_chars=40)
        prune = CompactionHook(compactor=ToolResultPruningCompactor(min_tokens=0), context_window=600)
        c1 = call("fetch", "f1", url="https://example.com")
        messages = [ChatMessage.from_system("You are helpful."), ChatMessage.from_user("Fetch and search."),
                    *step([c1], ["<html>" + "page body " * 300 + "</html>"])]
        state = state_of(messages, 1)
        offload.run(state)
        after_offload = state.data["messages"]
        more = list(after_offload)
        for i in range(2, 5):
            c = call("search", f"s{i}", query=f"q{i}")
            more += step([c], [f"result {i} " * 120])
        state = state_of(more, 4)
        state.data["context_tokens"] = 0
        prune.run(state)
        write(name, {"name": name, "kind": "sequence", "offload_hook": json.loads(json.dumps(offload.to_dict()).replace(str(root), "{ROOT}")),
                     "prune_hook": prune.to_dict(), "messages": [m.to_dict() for m in messages],
                     "more": [m.to_dict() for m in more[len(after_offload):]],
                     "expected": {"after_offload": dump(after_offload, root),
                                  "after_prune": dump(state.data["messages"], root),
                                  "store": store_contents(root)}})


def write(name, data):
    (OUT / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def main():
    base = [ChatMessage.from_system("sys"), ChatMessage.from_user("go")]
    big = "Lorem ipsum dolor sit amet. " * 20
    unicode_text = "Grüße aus Köln 😀 東京 " * 15

    c = [call("web_search", "w1", q="rust"), call("get_time", "t1"), call("read_file", None, path="/a"),
         call("list_dir", "", path="/"), call("other", "o1")]
    hook_case("hook_policies", base + step(c, [big, "12:00", unicode_text, "a\nb\nc\n" * 50, "x" * 201]), 3,
              {"web_search": AlwaysOffload(), "get_time": NeverOffload(),
               ("read_file", "list_dir"): OffloadOverChars(100), "*": OffloadOverChars(200)})

    c = [call("a", "a1"), call("a", "a2"), call("a", "a3"), call("a", "a4")]
    hook_case("hook_skips", base + step(c, [("failure " * 50, True), "", [TextContent(text="")], "short"]), 2,
              {"*": AlwaysOffload()})

    c = [call("shot", "i1"), call("doc", "d1"), call("doc", "d2"), call("mixed", "m1"), call("img", "i2")]
    results = [
        [ImageContent(base64_image=PNG, mime_type="image/png")],
        [FileContent(base64_data=PDF, mime_type="application/pdf", filename="report.final.pdf")],
        [FileContent(base64_data=PDF, mime_type="application/x-unknown-thing")],
        [TextContent(text="caption " * 40), ImageContent(base64_image=PNG, mime_type="image/png"),
         FileContent(base64_data=PDF, mime_type="application/pdf", filename="noext")],
        [ImageContent(base64_image=PNG, mime_type="image/png"), ImageContent(base64_image=PNG, mime_type="image/png")],
    ]
    hook_case("hook_binary", base + step(c, results), 5, {"*": AlwaysOffload()}, preview_chars=10)

    # History is left alone: only the trailing block of results is fresh.
    old = step([call("s", "old")], [big])
    fresh = step([call("s", "new")], [big])
    already = ChatMessage.from_tool(tool_result="pointer", origin=call("s", "p1"), meta={"tool_result_offloaded": ["x"]})
    hook_case("hook_fresh_only", base + old + fresh + [already], 7, {"s": AlwaysOffload()}, preview_chars=0)

    msgs = [ChatMessage.from_system("sys"), ChatMessage.from_user("research")]
    for i in range(4):
        msgs += step([call("search", f"s{i}", q=f"q{i}"), call("fetch", f"f{i}")],
                     [f"hit {i} " * (60 + 30 * i), [TextContent(text=f"page {i} " * 80),
                                                    ImageContent(base64_image=PNG, mime_type="image/png")]])
    msgs.insert(4, ChatMessage.from_tool(tool_result="x" * 900, origin=call("search", "e0"), error=True))
    counter = ApproximateTokenCounter()
    full = counter.count(messages=msgs)
    compactor_case("compactor_until_target", msgs, full // 2, {"min_keep_steps": 1, "min_tokens": 50, "preview_chars": 30},
                   counter)
    compactor_case("compactor_all", msgs, 0, {"min_keep_steps": 2, "min_tokens": 0, "preview_chars": 200}, counter)
    compactor_case("compactor_declines", msgs, full, {"min_keep_steps": 1, "min_tokens": 200, "preview_chars": 200},
                   counter)
    sequence_case("sequence_offload_then_prune")


if __name__ == "__main__":
    main()
