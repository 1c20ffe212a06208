"""`compaction.haystack` against Haystack 3.4.1 itself: the same counts, the same compactions.

Each test runs our class and Haystack's on the same `ChatMessage` objects and compares what
they return (messages by `to_dict`). TiktokenCounter's counts are compared with numbers Haystack's
own counter gave (its vocabularies are downloaded on first use; ours are built in).
"""

from typing import Annotated

import pytest
from haystack.core.serialization import component_from_dict, import_class_by_name
from haystack.dataclasses import ChatMessage, FileContent, ImageContent, ReasoningContent, TextContent, ToolCall
from haystack.hooks.compaction import SlidingWindowCompactor as HaystackSliding
from haystack.hooks.compaction import ToolResultPruningCompactor as HaystackPruning
from haystack.token_counters import ApproximateTokenCounter as HaystackApproximate
from haystack.token_counters.utils import _rendered_conversation
from haystack.tools import tool

from compaction.haystack import (
    ApproximateTokenCounter,
    SlidingWindowCompactor,
    TiktokenCounter,
    ToolResultPruningCompactor,
)

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

IMAGE = ImageContent(base64_image="Zm9v", mime_type="image/png")
FILE = FileContent(base64_data="Zm9v", mime_type="application/pdf", filename="report.pdf")


@tool
def search(query: Annotated[str, "the search query"]) -> str:
    """Search the web for a query and return the top results."""
    return "result"


# Every character serde_json escapes in a string (and DEL, which it does not).
ESCAPES = 'echo "a\\b"\n\t\x00\x01\x1f\x7f\b\f\r done'
ESCAPED = {"cmd": ESCAPES, "nested": {'k"ey': ["\u2028", "é"]}}
# Each character that needs escaping at each offset in a word of eight bytes and after it.
EVERY_OFFSET = {
    f"k{index}": "x" * offset + special + "y" * (17 - offset)
    for index, (special, offset) in enumerate((c, o) for c in '"\\\n\x00\x1f' for o in range(18))
}


def call(call_id, name="search", **arguments):
    return ToolCall(tool_name=name, arguments=arguments, id=call_id)


def agent_run(*results):
    """A user task, then one tool call and its result per item of `results`."""
    messages = [ChatMessage.from_system("You are terse."), ChatMessage.from_user("Find the bug.")]
    for index, result in enumerate(results):
        origin = call(f"c{index}", query=f"q{index}", page=index, exact=index % 2 == 0)
        messages.append(ChatMessage.from_assistant(f"step {index}", tool_calls=[origin]))
        messages.append(ChatMessage.from_tool(result, origin=origin, error=index == 1))
    messages.append(ChatMessage.from_assistant("Done: it was an off-by-one."))
    return messages


CONVERSATIONS = {
    "empty": [],
    "text": [ChatMessage.from_user("Hello, how are you?"), ChatMessage.from_assistant("Fine — thanks! ✓")],
    "agent run": agent_run("a" * 900, "error: not found " * 40, "ünïcödé " * 100),
    "images and files": [
        ChatMessage.from_user(content_parts=[TextContent("look"), IMAGE, FILE]),
        ChatMessage.from_tool(tool_result=[TextContent(text="shot:"), IMAGE], origin=call("s1", name="shot")),
    ],
    "parallel calls": [
        ChatMessage.from_user("both"),
        ChatMessage.from_assistant(tool_calls=[call("p1", q="x"), call("p2", nested={"b": [1, 2.5, None], "a": True})]),
        ChatMessage.from_tool("first " * 300, origin=call("p1", q="x")),
        ChatMessage.from_tool("second " * 300, origin=call("p2", nested={"b": [1, 2.5, None], "a": True})),
    ],
    # Every content part kind, each with its optional fields set, read from the objects in Rust.
    "every part kind": [
        ChatMessage.from_system("Be brief.", name="boss", meta={"v": 1}),
        ChatMessage.from_user(
            content_parts=[
                TextContent("see these"),
                ImageContent(base64_image="Zm9v", mime_type="image/png", detail="low", meta={"page": 2}),
                FileContent(base64_data="Zm9v", mime_type="text/plain", filename="a.txt", extra={"k": [1]}),
            ],
            name="alice",
        ),
        ChatMessage.from_assistant(
            "thinking done",
            reasoning=ReasoningContent(reasoning_text="let me see " * 50, extra={"signature": "sig"}),
            tool_calls=[ToolCall(tool_name="shot", arguments={"x": 1}, id="k1", extra={"provider": {"i": 0}})],
        ),
        ChatMessage.from_tool(
            tool_result=[TextContent(text="shot: " * 100), IMAGE, FILE], origin=call("k1", name="shot", x=1)
        ),
        ChatMessage.from_tool("plain " * 200, origin=call("k2", name="shot"), error=True),
        ChatMessage.from_assistant("done"),
    ],
    # Metadata with nested values of every JSON type, tuples and non-string keys (json.dumps's way).
    "nested meta": [
        ChatMessage.from_user(
            "hi",
            meta={"a": {"b": [1, {"c": None}, (2, 3)], "d": True}, 7: "seven", 2.5: "x", None: 0, False: [], "e": ""},
        ),
        ChatMessage.from_assistant("yo " * 300, meta={"usage": {"prompt_tokens": 12, "ratio": 0.25}}),
    ],
    "non-ascii": [
        ChatMessage.from_user("Grüße, 世界! 🎉 " * 20, name="zoë"),
        ChatMessage.from_assistant("Ответ: ✓ " * 20, tool_calls=[call("u1", q="naïve café 🍵")]),
        ChatMessage.from_tool("résultat " * 200, origin=call("u1", q="naïve café 🍵")),
        ChatMessage.from_assistant("fin"),
    ],
    # Arguments as json.dumps writes them: floats by repr, ints of any size digit for digit.
    "floats and large ints": [
        ChatMessage.from_user("compute"),
        ChatMessage.from_assistant(
            tool_calls=[
                call(
                    "f1",
                    name="calc",
                    big=2**70,
                    negative=-(2**65) + 1,
                    small=-3,
                    floats=[0.1, 1e16, 1.5e-7, -0.0, 123456789.123, 1e300],
                    pair=(1, 2.0),
                )
            ]
        ),
        ChatMessage.from_tool("number " * 300, origin=call("f1", name="calc", big=2**70, floats=[0.1, 1e16])),
        ChatMessage.from_assistant("ok"),
    ],
    # Arguments written to JSON text straight from the dicts: strings that need escaping, and a
    # key that is not a string (that message goes through its JSON, where json.dumps spells it).
    "escaped arguments": [
        ChatMessage.from_user("run"),
        ChatMessage.from_assistant(tool_calls=[call("e1", name="sh", **ESCAPED)]),
        ChatMessage.from_tool("out " * 300, origin=call("e1", name="sh", **ESCAPED)),
        ChatMessage.from_assistant(tool_calls=[call("e2", name="sh", **EVERY_OFFSET)]),
        ChatMessage.from_tool("all " * 300, origin=call("e2", name="sh", **EVERY_OFFSET)),
        ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="odd", arguments={1: "one", 2: {3: True}}, id="o1")]),
        ChatMessage.from_tool("odd " * 300, origin=ToolCall(tool_name="odd", arguments={1: "one", 2: {3: True}}, id="o1")),
        ChatMessage.from_assistant("end"),
    ],
    # A lone surrogate cannot be UTF-8: that message goes through its JSON, as all did before.
    "lone surrogate": [
        ChatMessage.from_user("bad \ud800 half"),
        ChatMessage.from_assistant(tool_calls=[call("s1", q="ok")]),
        ChatMessage.from_tool("long \udfff " * 200, origin=call("s1", q="ok")),
        ChatMessage.from_assistant("end"),
    ],
}

PRUNABLE = [
    "agent run",
    "parallel calls",
    "images and files",
    "every part kind",
    "non-ascii",
    "floats and large ints",
    "escaped arguments",
]


@pytest.mark.parametrize("name", CONVERSATIONS)
@pytest.mark.parametrize("settings", [{}, {"chars_per_token": 2.5, "tokens_per_image": 7, "tokens_per_file": 11}])
@pytest.mark.parametrize("tools", [None, [search]])
def test_approximate_counts_equal_haystacks(name, settings, tools):
    messages = CONVERSATIONS[name]
    ours = ApproximateTokenCounter(**settings).count(messages, tools=tools)
    assert ours == HaystackApproximate(**settings).count(messages, tools=tools)
    if messages and not tools and not settings:
        assert ours >= len(_rendered_conversation(messages)) // 4


# Haystack 3.4.1's TiktokenCounter (tiktoken 0.12) on the same conversations, with no tools.
TIKTOKEN_COUNTS = {
    ("o200k_base", "text"): 16,
    ("o200k_base", "agent run"): 815,
    ("cl100k_base", "agent run"): 1115,
    ("o200k_base", "parallel calls"): 658,
}


@pytest.mark.parametrize(("encoding", "name"), TIKTOKEN_COUNTS)
def test_tiktoken_counts_equal_haystacks(encoding, name):
    assert TiktokenCounter(encoding=encoding).count(CONVERSATIONS[name]) == TIKTOKEN_COUNTS[(encoding, name)]


class CharCounter:
    """A counter written in Python, as a Haystack user might: one token per three characters."""

    def __init__(self):
        self.calls = 0

    def count(self, messages, tools=None):
        self.calls += 1
        return len(_rendered_conversation(messages)) // 3


def dicts(messages):
    return None if messages is None else [m.to_dict() for m in messages]


@pytest.mark.parametrize("name", PRUNABLE)
@pytest.mark.parametrize("target", [0, 150, 400, 10_000])
@pytest.mark.parametrize(
    "settings", [{}, {"min_tokens": 0}, {"min_keep_steps": 2, "min_tokens": 10, "placeholder": "[gone {tool_name}]"}]
)
@pytest.mark.parametrize("counter", ["ours", "python"])
def test_pruning_equals_haystacks(name, target, settings, counter):
    messages = CONVERSATIONS[name]
    before = dicts(messages)
    if counter == "ours":
        ours_counter, their_counter = ApproximateTokenCounter(), HaystackApproximate()
    else:
        ours_counter = their_counter = CharCounter()
    ours = ToolResultPruningCompactor(**settings).compact(messages, target_tokens=target, token_counter=ours_counter)
    theirs = HaystackPruning(**settings).compact(messages, target_tokens=target, token_counter=their_counter)
    assert dicts(ours) == dicts(theirs)
    assert dicts(messages) == before, "the input is left as it was"
    if ours is not None:
        # Messages that were not pruned are the caller's own objects.
        assert any(new is old for new, old in zip(ours, messages))


def long_run():
    """Two tasks, the second with four steps, long enough that a window has something to drop."""
    first = agent_run("old " * 300, "older " * 300)
    return [*first, ChatMessage.from_user("Now the second task."), *agent_run("x" * 800, "y" * 800, "z" * 800, "w")[2:]]


@pytest.mark.parametrize("target", [0, 300, 900, 1500, 100_000])
@pytest.mark.parametrize("settings", [{}, {"min_keep_steps": 0}, {"min_keep_steps": 2, "omission_note": None}])
@pytest.mark.parametrize("counter", ["ours", "python"])
def test_sliding_window_equals_haystacks(target, settings, counter):
    messages = long_run()
    if counter == "ours":
        ours_counter, their_counter = ApproximateTokenCounter(), HaystackApproximate()
    else:
        ours_counter = their_counter = CharCounter()
    ours = SlidingWindowCompactor(**settings).compact(messages, target_tokens=target, token_counter=ours_counter)
    theirs = HaystackSliding(**settings).compact(messages, target_tokens=target, token_counter=their_counter)
    if theirs is not None and their_counter.count(theirs) >= their_counter.count(messages):
        # README, "Deviations from the reference": no note that outweighs what it replaces.
        assert ours is None
    else:
        assert dicts(ours) == dicts(theirs)
    if ours is not None:
        kept = [m for m in ours if "context_compaction" not in m.meta]
        assert all(any(m is old for old in messages) for m in kept), "kept messages are the caller's own objects"


def test_pruning_prunes_old_results_and_keeps_the_newest_step():
    messages = agent_run("a" * 2000, "b" * 2000, "c" * 2000)
    compacted = ToolResultPruningCompactor().compact(messages, target_tokens=100, token_counter=ApproximateTokenCounter())
    assert compacted is not None
    assert compacted[3].tool_call_result.result.startswith("[Tool result removed")
    assert compacted[3].meta["context_compaction"]["strategy"] == "tool_result_pruning"
    assert compacted[7].to_dict() == messages[7].to_dict()


@pytest.mark.parametrize("collecting", [True, False])
@pytest.mark.parametrize("sequence", [list, tuple])
def test_pruning_returns_a_new_list_of_the_callers_objects_and_leaves_the_collector_as_it_was(collecting, sequence):
    import gc

    messages = sequence(agent_run("a" * 2000, "b" * 2000, "c" * 2000))
    theirs = HaystackPruning().compact(list(messages), target_tokens=100, token_counter=HaystackApproximate())
    was = gc.isenabled()
    (gc.enable if collecting else gc.disable)()
    try:
        ours = ToolResultPruningCompactor().compact(messages, target_tokens=100, token_counter=ApproximateTokenCounter())
        assert gc.isenabled() is collecting, "the garbage collector is left as it was found"
    finally:
        (gc.enable if was else gc.disable)()
    assert type(ours) is list and ours is not messages
    assert dicts(ours) == dicts(theirs)
    for new, old in zip(ours, messages):
        # Unchanged messages are the caller's own objects; pruned ones are new.
        assert (new is old) == (new.to_dict() == old.to_dict())


def test_a_python_counters_exception_reaches_the_caller():
    class Broken:
        def count(self, messages, tools=None):
            raise RuntimeError("counter is down")

    with pytest.raises(RuntimeError, match="counter is down"):
        ToolResultPruningCompactor().compact(agent_run("a" * 2000, "b"), target_tokens=1, token_counter=Broken())


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ApproximateTokenCounter(chars_per_token=0), "`chars_per_token` must be greater than 0, got 0."),
        (lambda: ToolResultPruningCompactor(min_keep_steps=0), "`min_keep_steps` must be at least 1, got 0."),
        (lambda: ToolResultPruningCompactor(min_tokens=-1), "`min_tokens` must be at least 0, got -1."),
        (lambda: SlidingWindowCompactor(min_keep_steps=-1), "`min_keep_steps` must be at least 0, got -1."),
    ],
)
def test_bad_settings_raise_haystacks_errors(make, message):
    with pytest.raises(ValueError) as raised:
        make()
    assert str(raised.value).startswith(message)


def test_an_unknown_encoding_is_a_value_error():
    with pytest.raises(ValueError, match="nope"):
        TiktokenCounter(encoding="nope").count([ChatMessage.from_user("hi")])


@pytest.mark.parametrize(
    "make",
    [
        lambda: (ApproximateTokenCounter(chars_per_token=3.5, tokens_per_image=200), HaystackApproximate(3.5, 200)),
        lambda: (
            ToolResultPruningCompactor(min_keep_steps=2, skip_meta_keys=("a", "b")),
            HaystackPruning(min_keep_steps=2, skip_meta_keys=("a", "b")),
        ),
        lambda: (SlidingWindowCompactor(omission_note=None), HaystackSliding(omission_note=None)),
        lambda: (SlidingWindowCompactor(min_keep_steps=3), HaystackSliding(min_keep_steps=3)),
    ],
)
def test_to_dict_is_haystacks_and_each_loads_the_other(make):
    ours, theirs = make()
    assert ours.to_dict() == theirs.to_dict()
    # Haystack's loader reads our dictionary into Haystack's class ...
    loaded = component_from_dict(import_class_by_name(ours.to_dict()["type"]), ours.to_dict(), name="x")
    assert type(loaded) is type(theirs) and loaded.to_dict() == theirs.to_dict()
    # ... and ours reads Haystack's.
    assert type(ours).from_dict(theirs.to_dict()).to_dict() == ours.to_dict()


def test_tiktoken_to_dict_is_haystacks():
    assert TiktokenCounter(encoding="cl100k_base", tokens_per_file=5).to_dict() == {
        "type": "haystack.token_counters.tiktoken_counter.TiktokenCounter",
        "init_parameters": {"encoding": "cl100k_base", "tokens_per_image": 85, "tokens_per_file": 5},
    }


def test_a_pruned_message_keeps_its_name_where_haystack_drops_it():
    # README, "Deviations from the reference": Haystack rebuilds the message with `from_tool`,
    # which takes no name; ours keeps it, and the rest of the message is Haystack's.
    origin = call("n1")
    named = ChatMessage.from_dict({**ChatMessage.from_tool("z" * 4000, origin=origin).to_dict(), "name": "search"})
    messages = [ChatMessage.from_user("go"), ChatMessage.from_assistant(tool_calls=[origin]), named]
    messages += agent_run("newest")[2:]
    ours = ToolResultPruningCompactor().compact(messages, target_tokens=0, token_counter=ApproximateTokenCounter())
    theirs = HaystackPruning().compact(messages, target_tokens=0, token_counter=HaystackApproximate())
    assert ours[2].name == "search" and theirs[2].name is None
    assert {**ours[2].to_dict(), "name": None} == theirs[2].to_dict()


def test_floats_are_written_as_json_dumps_writes_them():
    import math
    import random

    from compaction import _native

    rng = random.Random(7)
    edges = [0.0, -0.0, 1.0, 0.1, 1e15, 1e16, 123456789012345.6, 1e-4, 1e-5, 1.5e-7, 5e-324, 1.7976931348623157e308]
    randoms = [rng.uniform(-1e6, 1e6) for _ in range(2000)]
    randoms += [math.ldexp(rng.random(), rng.randint(-1070, 1020)) for _ in range(2000)]
    for x in edges + [-e for e in edges] + randoms:
        assert _native.float_repr(x) == repr(x)
    assert [_native.float_repr(x) for x in (math.nan, math.inf, -math.inf)] == ["NaN", "Infinity", "-Infinity"]


def test_a_part_of_no_content_class_is_a_type_error_naming_it():
    message = ChatMessage.from_user("hi")
    message._content.append(object())
    with pytest.raises(TypeError, match="Unsupported type in ChatMessage content: `object`"):
        ApproximateTokenCounter().count([message])


class SeeingCounter(CharCounter):
    """CharCounter, keeping every message object it is asked to count and every count it gives."""

    def __init__(self):
        super().__init__()
        self.seen = []
        self.counts = []

    def count(self, messages, tools=None):
        self.seen.extend(messages)
        self.counts.append(super().count(messages, tools))
        return self.counts[-1]


@pytest.mark.parametrize(
    ("compactors", "messages", "target"),
    [
        *[
            ((ToolResultPruningCompactor, HaystackPruning), CONVERSATIONS[name], target)
            for name in PRUNABLE
            for target in (0, 150)
        ],
        *[((SlidingWindowCompactor, HaystackSliding), long_run(), target) for target in (300, 900)],
    ],
)
def test_a_python_counter_is_handed_the_callers_own_messages(compactors, messages, target):
    # As Haystack's compactors do: an unchanged message is counted as the caller's object, not a copy of it.
    ours_class, their_class = compactors
    ours_counter, their_counter = SeeingCounter(), SeeingCounter()
    ours = ours_class().compact(messages, target_tokens=target, token_counter=ours_counter)
    theirs = their_class().compact(messages, target_tokens=target, token_counter=their_counter)
    assert dicts(ours) == dicts(theirs)
    own = {id(message) for message in messages}
    assert {id(message) for message in ours_counter.seen} >= own, "every message is counted as itself"
    for seen in ours_counter.seen:
        if id(seen) not in own:
            # One Rust made (a pruned result, a note) is new, and is not a copy of one of the caller's.
            assert all(seen.to_dict() != message.to_dict() for message in messages)
    # The whole conversation is counted, as Haystack counts it.
    whole = CharCounter().count(messages)
    assert whole in ours_counter.counts and whole in their_counter.counts
