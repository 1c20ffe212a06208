"""`compaction.haystack`'s offloading family against Haystack 3.4.1 itself.

Each test runs our class and Haystack's on the same inputs, each writing under its own temporary
root, and compares the conversations they leave (messages by `to_dict`, roots replaced by a
marker, the compactor's random key parts by another) and the files they write, byte for byte.
"""

import asyncio
import base64
import copy
import logging
import re
from pathlib import Path

import pytest
from haystack.components.agents.state.state import State
from haystack.core.serialization import allow_deserialization_module
from haystack.dataclasses import ChatMessage, FileContent, ImageContent, TextContent, ToolCall
from haystack.hooks.compaction import ToolResultOffloadCompactor as HaystackCompactor
from haystack.hooks.tool_result_offloading import AlwaysOffload as HaystackAlways
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore as HaystackStore
from haystack.hooks.tool_result_offloading import NeverOffload as HaystackNever
from haystack.hooks.tool_result_offloading import OffloadOverChars as HaystackOverChars
from haystack.hooks.tool_result_offloading import ToolResultOffloadHook as HaystackHook
from haystack.token_counters import ApproximateTokenCounter as HaystackApproximate

from compaction.haystack import (
    AlwaysOffload,
    ApproximateTokenCounter,
    FileSystemToolResultStore,
    NeverOffload,
    OffloadOverChars,
    ToolResultOffloadCompactor,
    ToolResultOffloadHook,
)

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

OURS = {
    "store": FileSystemToolResultStore,
    "hook": ToolResultOffloadHook,
    "compactor": ToolResultOffloadCompactor,
    "always": AlwaysOffload,
    "never": NeverOffload,
    "over": OffloadOverChars,
    "counter": ApproximateTokenCounter,
}
HAYSTACK = {
    "store": HaystackStore,
    "hook": HaystackHook,
    "compactor": HaystackCompactor,
    "always": HaystackAlways,
    "never": HaystackNever,
    "over": HaystackOverChars,
    "counter": HaystackApproximate,
}
SIDES = {"ours": OURS, "haystack": HAYSTACK}

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n not text \xff").decode()
PDF = base64.b64encode(b"%PDF-1.4 \xfe\xff").decode()


def call(call_id, name="search", **arguments):
    return ToolCall(tool_name=name, arguments=arguments, id=call_id)


def tool(name, result, call_id="c1", *, error=False, meta=None):
    return ChatMessage.from_tool(tool_result=result, origin=call(call_id, name), error=error, meta=meta)


# The trailing tool results of one agent step (what the hook looks at), after some history.
HISTORY = [ChatMessage.from_user("Find the bug."), ChatMessage.from_assistant("Looking.", tool_calls=[call("c0")])]
BATCHES = {
    "texts": [tool("a", "A" * 5, "1"), tool("b", "B" * 50, "2"), tool("d", "D" * 500, "3"), tool("z", "ü✓" * 40, "4")],
    "errors": [tool("a", "boom " * 30, "1", error=True), tool("a", "fine " * 30, "2")],
    "id-less": [tool("a", "FIRST" * 20, None), tool("a", "SECOND" * 20, None)],
    "parts": [tool("a", [TextContent("A" * 30), TextContent("B" * 30)], "1")],
    "image": [tool("a", [TextContent("caption"), ImageContent(base64_image=PNG, mime_type="image/png")], "1")],
    "files": [
        tool("a", [FileContent(base64_data=PDF, mime_type="application/pdf", filename="report.final.pdf")], "1"),
        tool("b", [FileContent(base64_data=PDF, mime_type="application/pdf")], "2"),
        tool("c", [FileContent(base64_data=PDF, mime_type=None)], "3"),
    ],
    "empty": [tool("a", "", "1"), tool("b", [TextContent("")], "2")],
    "already offloaded": [tool("a", "pointer " * 20, "1", meta={"tool_result_offloaded": ["x.txt"]})],
    "history only": [tool("a", "H" * 50, "old"), ChatMessage.from_assistant("and now?")],
}
STRATEGIES = {
    "always": lambda s: {"*": s["always"]()},
    "over 40": lambda s: {"*": s["over"](40)},
    "mixed": lambda s: {"a": s["always"](), ("b", "c"): s["over"](10), "d": s["never"]()},
}


def normalized(messages, roots):
    """The messages as dicts, with each root's path replaced by a marker and random key parts by another."""
    text = repr([m.to_dict() for m in messages])
    for root in roots:
        text = text.replace(str(Path(root).resolve()), "<root>")
    return re.sub(r"[0-9a-f]{32}", "<hex>", text)


def files(root):
    """Every file under `root`: relative path (random key parts replaced) and bytes, sorted."""
    root = Path(root)
    if not root.exists():
        return []
    found = [(str(p.relative_to(root)), p.read_bytes()) for p in root.rglob("*") if p.is_file()]
    return sorted((re.sub(r"[0-9a-f]{32}", "<hex>", name), data) for name, data in found)


def state_of(messages, step=1, **data):
    schema = {"messages": {"type": list[ChatMessage]}}
    return State(schema=schema, data={"messages": list(messages), "step_count": step, **data})


def run_hook(side, tmp_path, batch, strategies, **settings):
    classes = SIDES[side]
    root = tmp_path / side
    hook = classes["hook"](store=classes["store"](root), offload_strategies=STRATEGIES[strategies](classes), **settings)
    state = state_of(HISTORY + BATCHES[batch])
    hook.run(state)
    return normalized(state.data["messages"], [root]), files(root)


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("strategies", STRATEGIES)
@pytest.mark.parametrize("settings", [{}, {"preview_chars": 5}, {"preview_chars": 0}])
def test_the_hook_leaves_haystacks_conversation_and_files(tmp_path, batch, strategies, settings):
    ours = run_hook("ours", tmp_path, batch, strategies, **settings)
    assert ours == run_hook("haystack", tmp_path, batch, strategies, **settings)


class DictStore:
    """A store of the user's own, in memory, with Haystack's protocol."""

    def __init__(self, binary=False, fail_on=None):
        self.supports_binary_content = binary
        self.entries = {}
        self.fail_on = fail_on

    def write(self, *, key, content):
        if self.fail_on and self.fail_on in key:
            raise OSError(f"disk full writing {key}")
        self.entries[key] = content
        return f"mem://{key}"

    def read(self, reference):
        return self.entries[reference.removeprefix("mem://")]


class EvenPolicy:
    """A policy of the user's own: offloads results of even length, and records what it was asked."""

    def __init__(self):
        self.calls = []

    def should_offload(self, tool_name, result, state):
        self.calls.append((tool_name, len(result), state.data["step_count"]))
        return len(result) % 2 == 0


@pytest.mark.parametrize("batch", ["texts", "image", "files", "id-less", "errors"])
@pytest.mark.parametrize("binary", [False, True])
def test_a_python_store_and_policy_are_called_back_as_haystack_calls_them(batch, binary):
    outcome = {}
    for side, classes in SIDES.items():
        store, policy = DictStore(binary), EvenPolicy()
        hook = classes["hook"](store=store, offload_strategies={"*": policy, "b": classes["always"]()})
        state = state_of(HISTORY + BATCHES[batch], step=7)
        hook.run(state)
        outcome[side] = (normalized(state.data["messages"], []), store.entries, policy.calls)
    assert outcome["ours"] == outcome["haystack"]


def test_a_policys_exception_reaches_the_caller_and_nothing_is_written(tmp_path):
    class Broken:
        def should_offload(self, tool_name, result, state):
            raise RuntimeError(f"policy broke on {tool_name}")

    store = DictStore()
    hook = ToolResultOffloadHook(store=store, offload_strategies={"a": AlwaysOffload(), "b": Broken()})
    state = state_of(HISTORY + BATCHES["texts"])
    with pytest.raises(RuntimeError, match="policy broke on b"):
        hook.run(state)
    assert store.entries == {}
    assert state.data["messages"] == HISTORY + BATCHES["texts"]


def test_a_failed_write_leaves_the_result_in_context_and_is_logged(caplog):
    store = DictStore(fail_on="_b_")
    hook = ToolResultOffloadHook(store=store, offload_strategies={"*": AlwaysOffload()})
    state = state_of(HISTORY + BATCHES["texts"])
    with caplog.at_level(logging.WARNING):
        hook.run(state)
    results = [m.tool_call_result.result for m in state.data["messages"][len(HISTORY) :]]
    assert results[1] == "B" * 50
    assert all(r.startswith("Tool result offloaded") for i, r in enumerate(results) if i != 1)
    assert "Failed to offload the result of tool 'b' to DictStore" in caplog.text
    assert "disk full writing 1_b_2.txt" in caplog.text


def test_the_per_run_store_in_hook_context_is_written_to(tmp_path):
    default, per_run = FileSystemToolResultStore(tmp_path / "default"), DictStore()
    hook = ToolResultOffloadHook(store=default, offload_strategies={"*": AlwaysOffload()})
    state = state_of(HISTORY + BATCHES["id-less"], hook_context={"tool_result_store": per_run})
    hook.run(state)
    assert per_run.entries == {"1_a_call0.txt": "FIRST" * 20, "1_a_call1.txt": "SECOND" * 20}
    assert files(tmp_path / "default") == []


def test_with_our_store_and_policies_no_python_is_called_per_message(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("called from Rust")

    store = FileSystemToolResultStore(tmp_path)
    for cls in (AlwaysOffload, NeverOffload, OffloadOverChars):
        monkeypatch.setattr(cls, "should_offload", refuse)
    monkeypatch.setattr(FileSystemToolResultStore, "write", refuse)
    hook = ToolResultOffloadHook(store=store, offload_strategies=STRATEGIES["mixed"](OURS))
    state = state_of(HISTORY + BATCHES["texts"])
    hook.run(state)
    assert [name for name, _ in files(tmp_path)] == ["1_a_1.txt", "1_b_2.txt"]


@pytest.mark.parametrize(("key", "content"), [("a.txt", "hello ✓"), ("sub/dir/b.bin", b"\x00\xff bytes"), ("c", "")])
def test_the_store_writes_and_reads_as_haystacks(tmp_path, key, content):
    ours, theirs = FileSystemToolResultStore(tmp_path / "ours"), HaystackStore(tmp_path / "haystack")
    references = [ours.write(key=key, content=content), theirs.write(key=key, content=content)]
    assert references == [str(tmp_path / side / key) for side in ("ours", "haystack")]
    assert ours.read(references[0]) == theirs.read(references[1]) == content
    assert files(tmp_path / "ours") == files(tmp_path / "haystack")


@pytest.mark.parametrize("outside", ["../escape.txt", "/etc/passwd", "a/../../escape.txt"])
def test_a_key_or_reference_outside_the_root_is_haystacks_value_error(tmp_path, outside):
    root = tmp_path / "root"
    for store in (FileSystemToolResultStore(root), HaystackStore(root)):
        with pytest.raises(ValueError, match=f"Result key '{re.escape(outside)}' resolves outside the store root"):
            store.write(key=outside, content="x")
        with pytest.raises(ValueError, match=f"Result reference '{re.escape(outside)}' resolves outside the store"):
            store.read(outside)
    assert not (tmp_path / "escape.txt").exists()


def test_store_errors(tmp_path):
    store = FileSystemToolResultStore(tmp_path)
    with pytest.raises(FileNotFoundError):
        store.read(str(tmp_path / "missing.txt"))
    with pytest.raises(TypeError, match="content must be str or bytes, not int"):
        store.write(key="a.txt", content=3)
    with pytest.raises(TypeError):
        store.read(["a list of references"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        FileSystemToolResultStore(tmp_path / "file" / "root")


def test_the_store_never_replaces_a_result(tmp_path):
    store = FileSystemToolResultStore(tmp_path)
    first, second = store.write(key="1_a_c1.txt", content="first"), store.write(key="1_a_c1.txt", content="second")
    assert (first, second) == (str(tmp_path / "1_a_c1.txt"), str(tmp_path / "1_a_c1_2.txt"))
    assert (store.read(first), store.read(second)) == ("first", "second")


def test_the_stores_root_can_be_changed(tmp_path):
    store = FileSystemToolResultStore(tmp_path / "one")
    store.root = tmp_path / "two"
    assert store.write(key="a.txt", content="x") == str(tmp_path / "two" / "a.txt")


def test_the_policies_decide_as_haystacks():
    state = State(schema={})
    for result in ["", "x" * 10, "x" * 11, "ü" * 11]:
        for threshold in [-1, 0, 10]:
            assert OffloadOverChars(threshold).should_offload("t", result, state) is HaystackOverChars(
                threshold
            ).should_offload("t", result, state)
        assert AlwaysOffload().should_offload("t", result, state) is True
        assert NeverOffload().should_offload("t", result, state) is False


def test_a_negative_or_odd_threshold_offloads_as_haystacks(tmp_path):
    outcome = {}
    for side, classes in SIDES.items():
        store = DictStore()
        strategies = {"a": classes["over"](-3), "b": classes["over"](49.5), "*": classes["over"](True)}
        classes["hook"](store=store, offload_strategies=strategies).run(state_of(HISTORY + BATCHES["texts"]))
        outcome[side] = store.entries
    assert outcome["ours"] == outcome["haystack"]
    assert set(outcome["ours"]) == {"1_a_1.txt", "1_b_2.txt", "1_d_3.txt", "1_z_4.txt"}


def long_run(steps=5, size=2000):
    messages = [ChatMessage.from_system("You are terse."), ChatMessage.from_user("Find the bug.")]
    for index in range(steps):
        origin = call(f"c{index}", name=["read_file", "grep"][index % 2], path=f"f{index}.py")
        messages.append(ChatMessage.from_assistant(f"step {index}", tool_calls=[origin]))
        result = [TextContent("ü" * size), ImageContent(base64_image=PNG, mime_type="image/png")] if index == 2 else None
        messages.append(ChatMessage.from_tool(result or f"line {index}\n" * (size // 7), origin=origin, error=index == 1))
    messages.append(ChatMessage.from_assistant("Done: it was an off-by-one."))
    return messages


class CharCounter:
    """A counter of the user's own: one token per character of text."""

    def count(self, messages, tools=None):
        total = 0
        for message in messages:
            for part in message._content:
                text = getattr(part, "text", None) or getattr(part, "result", None)
                total += len(text) if isinstance(text, str) else 10
        return total


@pytest.mark.parametrize("target", [0, 1500, 3000, 100_000])
@pytest.mark.parametrize("settings", [{}, {"min_keep_steps": 2, "min_tokens": 10, "preview_chars": 7}])
@pytest.mark.parametrize("counter", ["ours", "python"])
@pytest.mark.parametrize("store", ["file system", "python"])
def test_the_compactor_leaves_haystacks_conversation_and_files(tmp_path, target, settings, counter, store):
    outcome = {}
    for side, classes in SIDES.items():
        root = tmp_path / side
        the_store = classes["store"](root) if store == "file system" else DictStore(binary=True)
        compactor = classes["compactor"](store=the_store, **settings)
        the_counter = classes["counter"]() if counter == "ours" else CharCounter()
        compacted = compactor.compact(long_run(), target_tokens=target, token_counter=the_counter)
        written = files(root) if store == "file system" else sorted(the_store.entries.values(), key=repr)
        outcome[side] = (None if compacted is None else normalized(compacted, [root]), written)
    assert outcome["ours"] == outcome["haystack"]


def test_compact_async_equals_compact(tmp_path):
    compactor = ToolResultOffloadCompactor(store=FileSystemToolResultStore(tmp_path), min_tokens=10)
    counter = ApproximateTokenCounter()
    compacted = asyncio.run(compactor.compact_async(long_run(), target_tokens=0, token_counter=counter))
    assert normalized(compacted, [tmp_path]) == normalized(compactor.compact(long_run(), 0, counter), [tmp_path])


def test_unchanged_messages_are_the_callers_own_objects(tmp_path):
    messages = long_run()
    compacted = ToolResultOffloadCompactor(store=FileSystemToolResultStore(tmp_path)).compact(
        messages, target_tokens=0, token_counter=ApproximateTokenCounter()
    )
    assert compacted[0] is messages[0] and compacted[-1] is messages[-1]
    assert compacted[3] is not messages[3]


def test_a_python_counters_exception_reaches_the_caller(tmp_path):
    class Broken:
        def count(self, messages, tools=None):
            raise RuntimeError("counter broke")

    compactor = ToolResultOffloadCompactor(store=FileSystemToolResultStore(tmp_path))
    with pytest.raises(RuntimeError, match="counter broke"):
        compactor.compact(long_run(), target_tokens=0, token_counter=Broken())


def test_a_failed_compactor_write_leaves_the_result_and_is_logged(caplog):
    compactor = ToolResultOffloadCompactor(store=DictStore(fail_on="read_file"), min_tokens=10)
    with caplog.at_level(logging.WARNING):
        compacted = compactor.compact(long_run(), target_tokens=0, token_counter=ApproximateTokenCounter())
    assert compacted[3].tool_call_result.result == long_run()[3].tool_call_result.result
    assert "Failed to offload the result of tool 'read_file' to DictStore" in caplog.text


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"min_keep_steps": 0}, "`min_keep_steps` must be at least 1, got 0"),
        ({"min_tokens": -1}, "`min_tokens` must be at least 0, got -1"),
        ({"preview_chars": -2}, "`preview_chars` must be at least 0, got -2"),
    ],
)
def test_bad_compactor_settings_raise_haystacks_errors(tmp_path, settings, message):
    for cls in (ToolResultOffloadCompactor, HaystackCompactor):
        with pytest.raises(ValueError, match=re.escape(message)):
            cls(store=DictStore(), **settings)


def made(classes, root):
    store = classes["store"](root)
    strategies = {"a": classes["always"](), ("b", "c"): classes["over"](100), "*": classes["never"]()}
    return {
        "store": store,
        "always": classes["always"](),
        "never": classes["never"](),
        "over": classes["over"](42),
        "hook": classes["hook"](store=store, offload_strategies=strategies, preview_chars=42),
        "compactor": classes["compactor"](store=store, min_keep_steps=2, min_tokens=5, preview_chars=9),
    }


@pytest.mark.parametrize("name", ["store", "always", "never", "over", "hook", "compactor"])
def test_to_dict_is_haystacks_and_each_loads_the_other(tmp_path, name):
    ours, theirs = made(OURS, tmp_path)[name], made(HAYSTACK, tmp_path)[name]
    assert ours.to_dict() == theirs.to_dict()
    loaded_by_haystack = type(theirs).from_dict(ours.to_dict())
    loaded_by_us = type(ours).from_dict(theirs.to_dict())
    assert type(loaded_by_haystack) is type(theirs) and type(loaded_by_us) is type(ours)
    assert loaded_by_us.to_dict() == loaded_by_haystack.to_dict() == theirs.to_dict()
    if name == "hook":
        assert type(loaded_by_us.store) is FileSystemToolResultStore
        assert {k: type(p) for k, p in loaded_by_us.offload_strategies.items()} == {
            "a": AlwaysOffload,
            ("b", "c"): OffloadOverChars,
            "*": NeverOffload,
        }


class LongPolicy:
    """A policy of the user's own that serializes itself."""

    def should_offload(self, tool_name, result, state):
        return len(result) > 60

    def to_dict(self):
        return {"type": f"{__name__}.LongPolicy", "init_parameters": {}}

    @classmethod
    def from_dict(cls, data):
        return cls()


def test_a_users_own_policy_loads_as_haystack_loads_it(tmp_path):
    data = made(HAYSTACK, tmp_path)["hook"].to_dict()
    data["init_parameters"]["offload_strategies"] = {"*": LongPolicy().to_dict()}
    errors = []
    for cls in (ToolResultOffloadHook, HaystackHook):
        with pytest.raises(Exception) as raised:
            cls.from_dict(copy.deepcopy(data))  # Haystack changes what it is given
        errors.append((type(raised.value), str(raised.value)))
    assert errors[0] == errors[1] and "not on the trusted-module allowlist" in errors[0][1]
    allow_deserialization_module(__name__)
    outcome = []
    for cls in (ToolResultOffloadHook, HaystackHook):
        hook = cls.from_dict(copy.deepcopy(data))
        assert type(hook.offload_strategies["*"]) is LongPolicy
        hook.store = DictStore()
        hook.run(state_of(HISTORY + BATCHES["texts"]))
        outcome.append(hook.store.entries)
    assert outcome[0] == outcome[1] and set(outcome[0]) == {"1_d_3.txt", "1_z_4.txt"}
    with pytest.raises(Exception, match="The value of 'store' is not a dictionary"):
        ToolResultOffloadHook.from_dict({**data, "init_parameters": {**data["init_parameters"], "store": 3}})


class RecordingPolicy:
    """A policy of the user's own that offloads everything and records the texts it was shown."""

    def __init__(self):
        self.seen = []

    def should_offload(self, tool_name, result, state):
        self.seen.append((tool_name, result))
        return True


LONE_SURROGATES = [
    tool("a", "ab\ud83dcd" * 3, "1"),
    tool("p", "\udc00 half an emoji " * 3, "2"),
    tool("a", "a whole text", "id\ud800"),
]


@pytest.mark.parametrize("store", ["file system", "python"])
def test_lone_surrogates_are_offloaded_as_haystack_offloads_them(tmp_path, store):
    outcome = {}
    for side, classes in SIDES.items():
        root = tmp_path / side
        the_store = classes["store"](root) if store == "file system" else DictStore()
        policy = RecordingPolicy()
        hook = classes["hook"](store=the_store, offload_strategies={"a": classes["always"](), "p": policy})
        state = state_of(HISTORY + LONE_SURROGATES)
        hook.run(state)
        written = files(root) if store == "file system" else the_store.entries
        outcome[side] = (normalized(state.data["messages"], [root]), written, policy.seen)
    if store == "file system":
        # UTF-8 cannot hold a lone surrogate: both leave the results in context, but Haystack's
        # `write_text` leaves an empty file behind, where ours writes none.
        assert outcome["haystack"][1] == [("1_a_1.txt", b""), ("1_p_2.txt", b"")]  # and none for the key
        outcome["haystack"] = (outcome["haystack"][0], [], outcome["haystack"][2])
        assert "\\ud83d" in outcome["ours"][0]
    assert outcome["ours"] == outcome["haystack"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_compactor_in_haystacks_compaction_hook_equals_haystacks(tmp_path, mode):
    from haystack.hooks.compaction import CompactionHook

    outcome = {}
    for side, classes in SIDES.items():
        root = tmp_path / side
        hook = CompactionHook(compactor=classes["compactor"](store=classes["store"](root)), context_window=3000)
        state = state_of(long_run())
        asyncio.run(hook.run_async(state)) if mode == "async" else hook.run(state)
        outcome[side] = (normalized(state.data["messages"], [root]), files(root))
    assert outcome["ours"] == outcome["haystack"]
    assert "Tool result offloaded" in outcome["ours"][0]


@pytest.mark.parametrize("store", ["file system", "python"])
def test_the_compactor_offloads_lone_surrogates_as_haystack_does(tmp_path, store):
    messages = long_run()
    origin = messages[3].tool_call_result.origin
    messages[3] = ChatMessage.from_tool("\ud83d ab " * 400, origin=origin)
    outcome = {}
    for side, classes in SIDES.items():
        root = tmp_path / side
        the_store = classes["store"](root) if store == "file system" else DictStore()
        compacted = classes["compactor"](store=the_store, min_tokens=10).compact(messages, 0, classes["counter"]())
        written = the_store.entries if store == "python" else [f for f in files(root) if f[1]]
        outcome[side] = (normalized(compacted, [root]), sorted(written.values()) if store == "python" else written)
    assert outcome["ours"] == outcome["haystack"]


@pytest.mark.parametrize("batch", ["texts", "files", "id-less"])
def test_each_hook_works_with_the_others_store_and_policies(tmp_path, batch):
    outcome = []
    for hook_side, parts_side in (("haystack", "haystack"), ("ours", "haystack"), ("haystack", "ours")):
        root = tmp_path / f"{hook_side}-{parts_side}"
        parts = SIDES[parts_side]
        hook = SIDES[hook_side]["hook"](store=parts["store"](root), offload_strategies=STRATEGIES["mixed"](parts))
        state = state_of(HISTORY + BATCHES[batch])
        hook.run(state)
        outcome.append((normalized(state.data["messages"], [root]), files(root)))
    assert outcome[1] == outcome[0] and outcome[2] == outcome[0]


def test_the_store_can_be_copied_and_pickled_as_haystacks(tmp_path):
    import pickle

    store = FileSystemToolResultStore(tmp_path)
    for copied in (copy.deepcopy(store), copy.copy(store), pickle.loads(pickle.dumps(store))):
        assert copied.root == tmp_path
        assert copied.read(copied.write(key="a.txt", content="x")) == "x"
    hook = ToolResultOffloadHook(store=store, offload_strategies={"*": OffloadOverChars(3)})
    assert copy.deepcopy(hook).to_dict() == hook.to_dict()


def test_a_negative_preview_is_a_value_error_and_a_missing_step_is_0(tmp_path):
    hook = ToolResultOffloadHook(store=DictStore(), offload_strategies={"*": AlwaysOffload()}, preview_chars=-1)
    with pytest.raises(ValueError, match="`preview_chars` must be at least 0, got -1"):
        hook.run(state_of(HISTORY + BATCHES["texts"]))
    outcome = []
    for classes in (OURS, HAYSTACK):
        store = DictStore()
        hook = classes["hook"](store=store, offload_strategies={"*": classes["always"]()})
        hook.run(State(schema={"messages": {"type": list[ChatMessage]}}, data={"messages": BATCHES["id-less"]}))
        outcome.append(store.entries)
    assert outcome[0] == outcome[1] and set(outcome[0]) == {"0_a_call0.txt", "0_a_call1.txt"}
