"""`CompactionHook`, `TokenBudgetHook`, `SummarizationCompactor` and `OpenAITokenCounter` against Haystack 3.4.1's.

Each test runs our class and Haystack's on the same inputs (agent states, conversations, a chat
generator that is a small Python class, an OpenAI client that records what it is asked) and
compares what they do: the state each leaves, the prompts each sends, the errors each raises, the
dictionaries each writes. Nothing here uses the network.
"""

import asyncio
import logging
from typing import Annotated, Any

import pytest
from haystack.components.agents.state.state import State
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ImageContent, TextContent, ToolCall
from haystack.hooks.budget import TokenBudgetHook as HaystackBudget
from haystack.hooks.compaction import CompactionHook as HaystackHook
from haystack.hooks.compaction import SlidingWindowCompactor as HaystackSliding
from haystack.hooks.compaction import SummarizationCompactor as HaystackSummarization
from haystack.hooks.compaction import ToolResultPruningCompactor as HaystackPruning
from haystack.token_counters import ApproximateTokenCounter as HaystackApproximate
from haystack.token_counters import OpenAITokenCounter as HaystackOpenAI
from haystack.token_counters.utils import _rendered_conversation, _rendered_tools
from haystack.tools import tool
from haystack.utils import Secret

from compaction.haystack import (
    ApproximateTokenCounter,
    CompactionHook,
    OpenAITokenCounter,
    SlidingWindowCompactor,
    SummarizationCompactor,
    TiktokenCounter,
    TokenBudgetHook,
    ToolResultPruningCompactor,
)

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")


@tool
def search(query: Annotated[str, "the search query"]) -> str:
    """Search the web for a query and return the top results."""
    return "result"


class CharCounter:
    """A Python counter of Haystack's protocol (not ours): one token per `ratio` characters of the rendering."""

    def __init__(self, ratio: int = 4) -> None:
        self.ratio = ratio
        self.calls = 0

    def count(self, messages: list[ChatMessage], tools=None) -> int:
        self.calls += 1
        if not messages and not tools:
            return 0
        return len(_rendered_conversation(messages) + _rendered_tools(tools)) // self.ratio


class Recording:
    """A compactor of Haystack's protocol that records the targets it is given and returns a preset result."""

    def __init__(self, result=None) -> None:
        self.result = result
        self.targets: list[int] = []

    def compact(self, messages, target_tokens, token_counter):
        self.targets.append(target_tokens)
        return self.result

    async def compact_async(self, messages, target_tokens, token_counter):
        self.targets.append(target_tokens)
        return self.result


class Summarizer:
    """A chat generator of Haystack's protocol: answers with the queued texts (or raises an exception queued)."""

    def __init__(self, *replies) -> None:
        self.replies = list(replies)
        self.prompts: list[list[dict]] = []

    def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
        self.prompts.append([m.to_dict() for m in messages])
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return {"replies": [] if reply is None else [ChatMessage.from_assistant(reply)]}

    async def run_async(self, messages: list[ChatMessage]) -> dict[str, Any]:
        return self.run(messages)


def call(call_id, name="search"):
    return ToolCall(tool_name=name, arguments={"query": call_id}, id=call_id)


def steps(count, size=300, task="Find the bug."):
    """A system prompt, a task, and `count` tool-calling steps with results of `size` characters."""
    messages = [ChatMessage.from_system("You are terse."), ChatMessage.from_user(task)]
    for index in range(count):
        origin = call(f"c{index}")
        messages.append(ChatMessage.from_assistant(f"step {index}", tool_calls=[origin]))
        messages.append(ChatMessage.from_tool(f"result {index} " * (size // 9), origin=origin))
    return messages


def turns(count, size=300):
    """`count` finished question-and-answer turns, then a task with two steps."""
    messages = [ChatMessage.from_system("rules")]
    for index in range(count):
        messages.append(ChatMessage.from_user(f"question {index} " * (size // 12)))
        messages.append(ChatMessage.from_assistant(f"answer {index} " * (size // 10)))
    return messages + steps(2, size)[1:]


SCHEMA = {
    "messages": {"type": list[ChatMessage]},
    "step_count": {"type": int},
    "context_tokens": {"type": int},
    "token_usage": {"type": dict},
    "tools": {"type": list},
    "stop_run": {"type": str},
}


def state(messages, **data) -> State:
    return State(schema=SCHEMA, data={"messages": list(messages), "step_count": 3, "context_tokens": 0, **data})


def dicts(messages):
    return None if messages is None else [m.to_dict() for m in messages]


COUNTERS = {
    "approximate": (ApproximateTokenCounter, HaystackApproximate),
    "python": (CharCounter, CharCounter),
}

# (messages, context_tokens, tools): under and over the trigger, anchored or counted whole, with tools.
STATES = {
    "fresh, counted whole": (steps(4, 900), 0, None),
    "fresh with tools": (steps(4, 900), 0, [search]),
    "anchored, results after": (steps(4, 900), 700, None),
    "anchored, ends on the assistant": (steps(4, 900)[:-1], 750, [search]),
    "anchored, no assistant": ([ChatMessage.from_user("x" * 3000)], 900, None),
    "under the trigger": (steps(1), 0, None),
    "overhead below zero": ([ChatMessage.from_assistant("x" * 4000)], 800, None),
    "empty": ([], 0, None),
}


@pytest.mark.parametrize("name", STATES)
@pytest.mark.parametrize("counter", COUNTERS)
@pytest.mark.parametrize("window", [1000, 2500])
def test_the_hook_hands_down_haystacks_target(name, counter, window):
    messages, context_tokens, tools = STATES[name]
    ours, theirs = Recording(), Recording()
    ours_counter, theirs_counter = (make() for make in COUNTERS[counter])
    CompactionHook(ours, context_window=window, token_counter=ours_counter).run(
        state(messages, context_tokens=context_tokens, tools=tools)
    )
    HaystackHook(theirs, context_window=window, token_counter=theirs_counter).run(
        state(messages, context_tokens=context_tokens, tools=tools)
    )
    assert ours.targets == theirs.targets


@pytest.mark.parametrize("name", STATES)
@pytest.mark.parametrize("counter", COUNTERS)
@pytest.mark.parametrize("strategy", ["sliding", "pruning"])
def test_the_hook_leaves_the_state_haystacks_leaves(name, counter, strategy):
    messages, context_tokens, tools = STATES[name]
    ours_counter, theirs_counter = (make() for make in COUNTERS[counter])
    ours_compactor, theirs_compactor = {
        "sliding": (SlidingWindowCompactor(), HaystackSliding()),
        "pruning": (ToolResultPruningCompactor(min_tokens=0), HaystackPruning(min_tokens=0)),
    }[strategy]
    ours_state = state(messages, context_tokens=context_tokens, tools=tools)
    theirs_state = state(messages, context_tokens=context_tokens, tools=tools)
    CompactionHook(ours_compactor, context_window=1000, token_counter=ours_counter).run(ours_state)
    HaystackHook(theirs_compactor, context_window=1000, token_counter=theirs_counter).run(theirs_state)
    assert dicts(ours_state.data["messages"]) == dicts(theirs_state.data["messages"])
    assert ours_state.data["context_tokens"] == theirs_state.data["context_tokens"]


def test_the_hook_with_tiktoken_counts_as_our_counter_does():
    # The decision in Rust with our TiktokenCounter equals the same decision made from that counter's own counts.
    messages = steps(6, 900)
    ours, reference = Recording(), Recording()
    CompactionHook(ours, context_window=1500, token_counter=TiktokenCounter()).run(state(messages, tools=[search]))

    class Through:
        """Our counter called from Python, so the decision is Haystack's arithmetic on our counts."""

        def count(self, messages, tools=None):
            return TiktokenCounter().count(messages=messages, tools=tools)

    HaystackHook(reference, context_window=1500, token_counter=Through()).run(state(messages, tools=[search]))
    assert ours.targets == reference.targets and ours.targets


@pytest.mark.parametrize("counter", COUNTERS)
@pytest.mark.parametrize("appended", [200, 4000])
def test_a_negative_anchor_is_decided_as_haystack_decides_it(counter, appended):
    # A counter that measures the messages above the provider's count leaves a negative overhead, and Haystack's hook
    # then stores a negative `context_tokens`; the next step decides on it as on any other anchor.
    runs = []
    for hook_class, make_counter in zip((CompactionHook, HaystackHook), COUNTERS[counter]):
        compactor = Recording(result=[ChatMessage.from_user("task"), ChatMessage.from_assistant("kept")])
        hook = hook_class(compactor, context_window=1000, token_counter=make_counter())
        agent_state = state([ChatMessage.from_assistant("x" * 4000)], context_tokens=800)
        hook.run(agent_state)
        anchors = [agent_state.data["context_tokens"]]
        origin = call("late")
        agent_state.data["messages"] = [
            *agent_state.data["messages"],
            ChatMessage.from_assistant(tool_calls=[origin]),
            ChatMessage.from_tool("y" * appended, origin=origin),
        ]
        hook.run(agent_state)
        anchors.append(agent_state.data["context_tokens"])
        runs.append((compactor.targets, anchors, dicts(agent_state.data["messages"])))
    assert runs[0] == runs[1]
    assert runs[0][1][0] < 0


def test_the_hook_runs_async_as_haystacks():
    messages = steps(4)
    ours_state, theirs_state = state(messages, context_tokens=700), state(messages, context_tokens=700)
    asyncio.run(CompactionHook(SlidingWindowCompactor(), context_window=1000).run_async(ours_state))
    asyncio.run(HaystackHook(HaystackSliding(), context_window=1000).run_async(theirs_state))
    assert dicts(ours_state.data["messages"]) == dicts(theirs_state.data["messages"])
    assert ours_state.data["context_tokens"] == theirs_state.data["context_tokens"]


def test_a_python_counters_exception_reaches_the_hooks_caller():
    class Broken(Exception):
        pass

    class Failing:
        def count(self, messages, tools=None):
            raise Broken("no count")

    with pytest.raises(Broken, match="no count"):
        CompactionHook(Recording(), context_window=1000, token_counter=Failing()).run(state(steps(2)))


def test_the_hook_warns_as_haystacks_when_the_counter_overestimates(caplog):
    warnings = []
    for cls in (CompactionHook, HaystackHook):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            messages = [ChatMessage.from_assistant("x" * 4000)]
            cls(Recording(), context_window=1000).run(state(messages, context_tokens=800))
        warnings.append([record.getMessage() for record in caplog.records])
    assert warnings[0] == warnings[1]
    assert "estimated more tokens for the messages (1003) than the estimated total context size (800)" in warnings[0][0]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"context_window": 0}, "`context_window` must be a positive number of tokens, got 0."),
        ({"compact_at": 0.4, "compact_to": 0.4}, "0 < compact_to < compact_at <= 1"),
        ({"compact_at": 1.5}, "0 < compact_to < compact_at <= 1"),
        ({"compact_to": 0.0}, "0 < compact_to < compact_at <= 1"),
    ],
)
def test_the_hooks_bad_settings_raise_haystacks_errors(settings, message):
    arguments = {"context_window": 1000, **settings}
    with pytest.raises(ValueError) as theirs:
        HaystackHook(HaystackSliding(), **arguments)
    with pytest.raises(ValueError) as ours:
        CompactionHook(SlidingWindowCompactor(), **arguments)
    assert str(ours.value) == str(theirs.value)
    assert message in str(ours.value)


def test_the_hooks_to_dict_is_haystacks_and_each_loads_the_other():
    ours = CompactionHook(
        SlidingWindowCompactor(min_keep_steps=3),
        context_window=200_000,
        compact_at=0.6,
        token_counter=ApproximateTokenCounter(chars_per_token=3.0),
    )
    theirs = HaystackHook(
        HaystackSliding(min_keep_steps=3),
        context_window=200_000,
        compact_at=0.6,
        token_counter=HaystackApproximate(chars_per_token=3.0),
    )
    assert ours.to_dict() == theirs.to_dict()
    # Haystack's dictionary loads with our classes all the way down, and ours with Haystack's.
    loaded = CompactionHook.from_dict(theirs.to_dict())
    assert type(loaded) is CompactionHook
    assert type(loaded.compactor) is SlidingWindowCompactor and loaded.compactor.min_keep_steps == 3
    assert type(loaded.token_counter) is ApproximateTokenCounter and loaded.token_counter.chars_per_token == 3.0
    assert loaded.to_dict() == theirs.to_dict()
    back = HaystackHook.from_dict(ours.to_dict())
    assert type(back) is HaystackHook and type(back.compactor) is HaystackSliding
    assert back.to_dict() == ours.to_dict()


def test_the_hook_loads_a_summarizer_with_its_generator():
    data = HaystackHook(HaystackSummarization(MockChatGenerator("s"), min_keep_steps=2), context_window=9).to_dict()
    loaded = CompactionHook.from_dict(data)
    assert type(loaded.compactor) is SummarizationCompactor
    assert isinstance(loaded.compactor.chat_generator, MockChatGenerator)
    # All but the generator's own settings, which MockChatGenerator does not write as it reads them.
    written = loaded.to_dict()
    written["init_parameters"]["compactor"]["init_parameters"].pop("chat_generator")
    data["init_parameters"]["compactor"]["init_parameters"].pop("chat_generator")
    assert written == data


USAGES = [
    {"total_tokens": 100},
    {"total_tokens": 99},
    {"total_tokens": 0, "prompt_tokens": 60, "completion_tokens": 40},
    {"input_tokens": 60.9, "output_tokens": 39.9},
    {"prompt_tokens": True, "input_tokens": 70, "completion_tokens": 30},
    {"total_tokens": "100", "prompt_tokens": 20},
    {},
]


@pytest.mark.parametrize("usage", USAGES)
@pytest.mark.parametrize("final", [False, True])
def test_the_budget_stops_where_haystacks_stops(usage, final):
    ours_state, theirs_state = state([], token_usage=usage), state([], token_usage=usage)
    TokenBudgetHook(max_total_tokens=100, add_final_message=final).run(ours_state)
    HaystackBudget(max_total_tokens=100, add_final_message=final).run(theirs_state)
    assert ours_state.data.get("stop_run") == theirs_state.data.get("stop_run")
    assert dicts(ours_state.data["messages"]) == dicts(theirs_state.data["messages"])


def test_the_budgets_errors_and_dictionaries_are_haystacks():
    with pytest.raises(ValueError) as theirs:
        HaystackBudget(max_total_tokens=0)
    with pytest.raises(ValueError) as ours:
        TokenBudgetHook(max_total_tokens=0)
    assert str(ours.value) == str(theirs.value)
    data = TokenBudgetHook(max_total_tokens=5000, add_final_message=True).to_dict()
    assert data == HaystackBudget(max_total_tokens=5000, add_final_message=True).to_dict()
    assert HaystackBudget.from_dict(data).max_total_tokens == 5000
    loaded = TokenBudgetHook.from_dict(data)
    assert type(loaded) is TokenBudgetHook and loaded.add_final_message is True


SUMMARIZED = {
    "history": turns(3),
    "current task": steps(5),
    "long history": turns(8, size=600),
    "attachments": [
        ChatMessage.from_system("rules"),
        ChatMessage.from_user(
            content_parts=["look at this " * 40, ImageContent(base64_image="Zm9v", mime_type="image/png")]
        ),
        ChatMessage.from_assistant("seen " * 80),
        *steps(3)[1:],
    ],
}


def summarize_both(messages, target, counter, replies, asynchronous=False, **settings):
    """Our compactor and Haystack's on the same conversation, each with its own generator answering `replies`."""
    results = []
    for cls in (SummarizationCompactor, HaystackSummarization):
        generator = Summarizer(*replies)
        compactor = cls(generator, **settings)
        if counter == "python":
            token_counter = CharCounter()
        else:
            token_counter = ApproximateTokenCounter() if cls is SummarizationCompactor else HaystackApproximate()
        run = compactor.compact_async if asynchronous else compactor.compact
        try:
            compacted = run(messages=messages, target_tokens=target, token_counter=token_counter)
            if asynchronous:
                compacted = asyncio.run(compacted)
            outcome = dicts(compacted)
        except Exception as error:
            outcome = (type(error), str(error))
        results.append((outcome, generator.prompts))
    return results


@pytest.mark.parametrize("name", SUMMARIZED)
@pytest.mark.parametrize("target", [0, 150, 400, 10_000])
@pytest.mark.parametrize("counter", ["approximate", "python"])
@pytest.mark.parametrize(
    "settings", [{"approximate_summary_tokens": 20}, {"min_keep_steps": 0, "approximate_summary_tokens": 1}, {}]
)
def test_summarization_equals_haystacks(name, target, counter, settings):
    ours, theirs = summarize_both(SUMMARIZED[name], target, counter, ["short summary"], **settings)
    assert ours == theirs


@pytest.mark.parametrize(
    "replies",
    [
        ["first", RuntimeError("provider unavailable")],
        ["much longer summary " * 300],
        [""],
        [None],
        ["  \n "],
    ],
    ids=["fails-midway", "not-smaller", "empty", "no-replies", "blank"],
)
@pytest.mark.parametrize("raise_on_failure", [False, True])
def test_summarization_failures_are_haystacks(replies, raise_on_failure):
    ours, theirs = summarize_both(
        turns(4), 0, "approximate", replies, approximate_summary_tokens=1, raise_on_failure=raise_on_failure
    )
    assert ours == theirs


def test_a_python_counter_counts_the_callers_own_messages_while_summarizing():
    # As with Haystack's compactor: planning asks about the caller's `ChatMessage` objects, not copies of them.
    class Seeing(CharCounter):
        def count(self, messages, tools=None):
            seen.update(id(message) for message in messages)
            return super().count(messages, tools)

    seen: set[int] = set()
    messages = turns(4)
    compacted = SummarizationCompactor(Summarizer("short"), approximate_summary_tokens=1).compact(
        messages=messages, target_tokens=500, token_counter=Seeing()
    )
    assert compacted is not None and len(seen) > len(messages) / 2
    assert seen <= {id(message) for message in [*messages, *compacted]}


def test_summarization_async_equals_haystacks():
    ours, theirs = summarize_both(turns(3), 100, "approximate", ["async summary"], asynchronous=True)
    assert ours == theirs and ours[0] is not None


def test_the_summarizers_plan_and_prompt_are_haystacks():
    messages = SUMMARIZED["attachments"]
    ours = SummarizationCompactor(Summarizer("x"), approximate_summary_tokens=1)
    theirs = HaystackSummarization(Summarizer("x"), approximate_summary_tokens=1)
    counter = CharCounter(1)
    plan = ours._next_summary(messages=messages, target_tokens=1, token_counter=counter)
    assert plan == theirs._next_summary(messages=messages, target_tokens=1, token_counter=counter)
    indices = list(range(len(messages)))
    assert dicts(ours._prompt(messages, indices)) == dicts(theirs._prompt(messages, indices))
    with pytest.raises(IndexError, match="message index 99"):
        ours._prompt(messages, [99])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"min_keep_steps": -1}, "`min_keep_steps` must be at least 0, got -1."),
        ({"approximate_summary_tokens": 0}, "`approximate_summary_tokens` must be a positive number of tokens, got 0."),
    ],
)
def test_the_summarizers_bad_settings_raise_haystacks_errors(settings, message):
    with pytest.raises(ValueError, match=message):
        HaystackSummarization(MockChatGenerator("s"), **settings)
    with pytest.raises(ValueError, match=message):
        SummarizationCompactor(MockChatGenerator("s"), **settings)


def test_the_summarizers_to_dict_is_haystacks_and_each_loads_the_other():
    settings = {
        "min_keep_steps": 2,
        "approximate_summary_tokens": 321,
        "summary_instruction": "c",
        "raise_on_failure": True,
    }
    ours = SummarizationCompactor(MockChatGenerator("summary"), **settings)
    theirs = HaystackSummarization(MockChatGenerator("summary"), **settings)
    assert ours.to_dict() == theirs.to_dict()
    defaults = SummarizationCompactor(MockChatGenerator("s")).to_dict()
    assert defaults == HaystackSummarization(MockChatGenerator("s")).to_dict()
    loaded = SummarizationCompactor.from_dict(theirs.to_dict())
    assert type(loaded) is SummarizationCompactor and isinstance(loaded.chat_generator, MockChatGenerator)
    assert loaded.to_dict() == theirs.to_dict()
    assert HaystackSummarization.from_dict(ours.to_dict()).to_dict() == ours.to_dict()


class Client:
    """Stands in for `openai.OpenAI`: records each input-token count request and answers 42."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.closed = False
        outer = self

        class InputTokens:
            def count(self, **request):
                outer.requests.append(request)
                return type("Response", (), {"input_tokens": 42})()

        self.responses = type("Responses", (), {"input_tokens": InputTokens()})()

    def close(self) -> None:
        self.closed = True


OPENAI_CONVERSATIONS = {
    "text": [ChatMessage.from_system("Be concise."), ChatMessage.from_user("Hello")],
    "image": [ChatMessage.from_user(content_parts=["Look:", ImageContent(base64_image="Zm9v", mime_type="image/png")])],
    "tool round": [
        ChatMessage.from_user("find it"),
        ChatMessage.from_assistant("searching", tool_calls=[call("c1")]),
        ChatMessage.from_tool("found it", origin=call("c1")),
        ChatMessage.from_tool(tool_result=[TextContent(text="and a picture")], origin=call("c1")),
        ChatMessage.from_assistant("done"),
    ],
}


@pytest.mark.parametrize("name", OPENAI_CONVERSATIONS)
@pytest.mark.parametrize("tools", [None, [search]])
def test_the_openai_counter_sends_haystacks_request(name, tools):
    sent = []
    for cls in (OpenAITokenCounter, HaystackOpenAI):
        counter = cls("gpt-5-mini", api_key=Secret.from_token("k"))
        counter.client = Client()
        assert counter.count(OPENAI_CONVERSATIONS[name], tools=tools) == 42
        sent.append(counter.client.requests)
        counter.close()
        assert counter.client is None
    assert sent[0] == sent[1]


def test_the_openai_counter_counts_nothing_without_a_client():
    counter = OpenAITokenCounter("gpt-5-mini")
    assert counter.count([]) == 0
    assert counter.client is None


def test_the_openai_counters_to_dict_is_haystacks_and_each_loads_the_other(monkeypatch):
    monkeypatch.setenv("MY_KEY", "secret")
    settings = {
        "api_key": Secret.from_env_var("MY_KEY"),
        "api_base_url": "https://example.com/v1",
        "organization": "org",
        "timeout": 20.0,
        "max_retries": 2,
        "http_client_kwargs": {"proxy": "http://example.com:8080"},
    }
    ours, theirs = OpenAITokenCounter("gpt-5-mini", **settings), HaystackOpenAI("gpt-5-mini", **settings)
    assert ours.to_dict() == theirs.to_dict()
    assert OpenAITokenCounter("m").to_dict() == HaystackOpenAI("m").to_dict()
    loaded = OpenAITokenCounter.from_dict(theirs.to_dict())
    assert type(loaded) is OpenAITokenCounter and loaded.api_key == Secret.from_env_var("MY_KEY")
    assert loaded.to_dict() == theirs.to_dict()
    assert HaystackOpenAI.from_dict(ours.to_dict()).to_dict() == ours.to_dict()
