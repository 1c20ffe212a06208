"""Haystack's `CompactionHook`: when to compact an Agent's conversation, decided in Rust.

The decision (the size of the next request, whether it reaches the trigger, the target and the
non-message overhead) is compaction-hook's, one Rust call per step. The compactor is any object
with Haystack's `Compactor` protocol, ours or not, called as Haystack's hook calls it; the state
is Haystack's own agent `State`, read and written as Haystack's hook does.

A counter of ours counts in Rust with no Python per message; any other object with Haystack's
`count(messages=..., tools=...)` is called back with slices of the state's own message list.
"""

from __future__ import annotations

from typing import Any

from haystack import logging, tracing
from haystack.components.agents.state.state import State
from haystack.components.agents.state.state_utils import replace_values
from haystack.core.serialization import component_to_dict, generate_qualified_class_name
from haystack.dataclasses import ChatMessage, ChatRole
from haystack.hooks.compaction.types import Compactor
from haystack.token_counters.types import TokenCounter
from haystack.tools import ToolsType
from haystack.utils.deserialization import deserialize_component_inplace
from haystack.utils.experimental import _experimental

from compaction import _native
from compaction.haystack._common import CLASSES, HAYSTACK_TYPES, deserialize, message_json, serialize, tools_json
from compaction.haystack.counters import ApproximateTokenCounter, counter_spec

HAYSTACK_TYPES.update({"CompactionHook": "haystack.hooks.compaction.hooks.CompactionHook"})

logger = logging.getLogger(__name__)


def _last_assistant(messages: list[ChatMessage]) -> int:
    """The position of the last assistant message, or -1."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].is_from(ChatRole.ASSISTANT):
            return index
    return -1


def _ours(data: dict[str, Any]) -> type | None:
    """Our class for a serialized component whose type is Haystack's class that one of ours stands in for."""
    import compaction.haystack as ours

    for name, haystack_type in HAYSTACK_TYPES.items():
        if data.get("type") == haystack_type and hasattr(ours, name):
            return getattr(ours, name)
    return None


def deserialize_nested(init_parameters: dict[str, Any], key: str) -> None:
    """
    Rebuilds the component serialized under `key` in place: ours when its type is Haystack's class one of ours
    stands in for (so a dictionary either side wrote loads with our classes here), else as Haystack loads it.
    """
    value = init_parameters.get(key)
    if value is None:
        return
    cls = _ours(value) if isinstance(value, dict) else None
    if cls is not None:
        init_parameters[key] = cls.from_dict(value)
    else:
        deserialize_component_inplace(data=init_parameters, key=key)


@_experimental
class CompactionHook:
    """
    Compacts an Agent's conversation once it fills too much of the model's context window (Haystack's, decided in Rust).

    A `before_llm` hook: before each chat-generator call it estimates the request, anchored on the `context_tokens`
    state key (the provider's own count of the last request and its reply) plus the messages appended since, and once
    that reaches `compact_at` of `context_window` it hands the conversation to `compactor` with a target of
    `compact_to` of the window less the non-message overhead.
    """

    allowed_hook_points = ("before_llm",)

    def __init__(
        self,
        compactor: Compactor,
        *,
        context_window: int,
        compact_at: float = 0.7,
        compact_to: float = 0.4,
        token_counter: TokenCounter | None = None,
    ) -> None:
        """
        Initialize the hook with a compactor and the window it has to fit in.

        :param compactor: The `Compactor` that rewrites the conversation.
        :param context_window: The model's context window in tokens.
        :param compact_at: The fraction of the window at which compaction starts.
        :param compact_to: The fraction of the window compaction aims to bring the conversation down to.
        :param token_counter: The `TokenCounter` used to size the messages the chat generator has not reported on yet.
            Defaults to `ApproximateTokenCounter`.
        :raises ValueError: If `context_window` is not positive, or the fractions are not
            `0 < compact_to < compact_at <= 1`.
        """
        if context_window < 1:
            raise ValueError(f"`context_window` must be a positive number of tokens, got {context_window}.")
        if not 0 < compact_to < compact_at <= 1:
            raise ValueError(
                f"`compact_at` and `compact_to` must satisfy 0 < compact_to < compact_at <= 1, got "
                f"compact_at={compact_at} and compact_to={compact_to}. A target at or above the trigger would leave "
                f"the conversation over the trigger after compacting, so it would be attempted again every step."
            )
        self.compactor = compactor
        self.context_window = context_window
        self.compact_at = compact_at
        self.compact_to = compact_to
        self.token_counter = token_counter or ApproximateTokenCounter()

    def run(self, state: State) -> None:
        """
        Compact `state.data["messages"]` if the conversation fills too much of the window.

        :param state: The Agent's live `State`, rewritten in place when the compactor returns a compacted conversation.
        """
        messages = state.data.get("messages", [])
        context_tokens = state.data.get("context_tokens", 0)
        target = self._target_tokens(messages=messages, context_tokens=context_tokens, tools=state.data.get("tools"))
        if target is None:
            return
        target_tokens, overhead = target
        compacted = self.compactor.compact(
            messages=messages, target_tokens=target_tokens, token_counter=self.token_counter
        )
        self._apply(state, compacted, len(messages), target_tokens, context_tokens, overhead)

    async def run_async(self, state: State) -> None:
        """
        Asynchronously compact `state.data["messages"]` if the conversation fills too much of the window.

        :param state: The Agent's live `State`, rewritten in place when the compactor returns a compacted conversation.
        """
        messages = state.data.get("messages", [])
        context_tokens = state.data.get("context_tokens", 0)
        target = self._target_tokens(messages=messages, context_tokens=context_tokens, tools=state.data.get("tools"))
        if target is None:
            return
        target_tokens, overhead = target
        compacted = await self.compactor.compact_async(
            messages=messages, target_tokens=target_tokens, token_counter=self.token_counter
        )
        self._apply(state, compacted, len(messages), target_tokens, context_tokens, overhead)

    def _target_tokens(
        self, messages: list[ChatMessage], context_tokens: int, tools: ToolsType | None = None
    ) -> tuple[int, int] | None:
        """
        The size a compactor should bring `messages` down to, and the non-message overhead; None below the trigger.

        :param messages: The conversation, oldest to newest.
        :param context_tokens: The `context_tokens` state key: the provider's count, 0 when unknown.
        :param tools: Tools whose schemas are sent alongside the messages.
        """
        counter = self.token_counter
        spec = counter_spec(counter)
        if spec is not None:
            kind, setting, per_image, per_file = spec
            count_range = None
        else:
            kind, setting, per_image, per_file = None, None, 0, 0

            def count_range(start: int, end: int, with_tools: bool) -> int:
                if with_tools:
                    return counter.count(messages=messages[start:end], tools=tools)
                return counter.count(messages=messages[start:end])

        estimated, triggered, target_tokens, overhead = _native.hook_decide(
            messages,
            CLASSES,
            message_json,
            context_tokens,
            tools_json(tools),
            self.context_window,
            float(self.compact_at),
            float(self.compact_to),
            kind,
            setting,
            per_image,
            per_file,
            count_range,
        )
        span = tracing.tracer.current_span()
        if span is not None:
            span.set_tags(
                tags={
                    "haystack.agent.hook.compaction.strategy": generate_qualified_class_name(cls=type(self.compactor)),
                    "haystack.agent.hook.compaction.estimated_context_tokens": estimated,
                    "haystack.agent.hook.compaction.triggered": triggered,
                }
            )
        if not triggered:
            return None
        if overhead < 0:
            logger.warning(
                "The TokenCounter estimated more tokens for the messages ({message_tokens}) than the estimated total "
                "context size ({estimated}). It may be overestimating; consider configuring a more accurate "
                "TokenCounter.",
                message_tokens=estimated - overhead,
                estimated=estimated,
            )
        if span is not None:
            span.set_tag(key="haystack.agent.hook.compaction.target_tokens", value=target_tokens)
        return target_tokens, overhead

    def _apply(
        self,
        state: State,
        compacted: list[ChatMessage] | None,
        before: int,
        target_tokens: int,
        original_context_tokens: int,
        estimated_overhead: int,
    ) -> None:
        """Writes a compacted conversation back into `state` and re-anchors `context_tokens`; None leaves it alone."""
        span = tracing.tracer.current_span()
        if span is not None:
            span.set_tag(key="haystack.agent.hook.compaction.compacted", value=compacted is not None)
        if compacted is None:
            return
        state.set("messages", compacted, handler_override=replace_values)
        # 0 means the provider reports no usage: it stays 0, so later steps keep counting everything.
        if original_context_tokens != 0:
            # Through the last assistant message only: the trailing tool results are counted by the next estimate.
            last = _last_assistant(compacted)
            accounted = compacted if last < 0 else compacted[: last + 1]
            state.set("context_tokens", self.token_counter.count(messages=accounted) + estimated_overhead)
        logger.debug(
            "Compacted the Agent's conversation at step {step} from {before} to {after} messages, targeting {target} "
            "tokens.",
            step=state.data.get("step_count", 0),
            before=before,
            after=len(compacted),
            target=target_tokens,
        )

    def warm_up(self) -> None:
        """Warm up the token counter and the compactor."""
        for resource in (self.token_counter, self.compactor):
            if hasattr(resource, "warm_up"):
                resource.warm_up()

    async def warm_up_async(self) -> None:
        """Warm up the token counter and the compactor on the serving event loop."""
        if hasattr(self.token_counter, "warm_up"):
            self.token_counter.warm_up()
        if hasattr(self.compactor, "warm_up_async"):
            await self.compactor.warm_up_async()
        elif hasattr(self.compactor, "warm_up"):
            self.compactor.warm_up()

    def close(self) -> None:
        """Release the token counter's and the compactor's resources."""
        for resource in (self.token_counter, self.compactor):
            if hasattr(resource, "close"):
                resource.close()

    async def close_async(self) -> None:
        """Release the token counter's and the compactor's async resources."""
        for resource in (self.token_counter, self.compactor):
            if hasattr(resource, "close_async"):
                await resource.close_async()
            elif hasattr(resource, "close"):
                resource.close()

    def to_dict(self) -> dict[str, Any]:
        """Serialize the hook with its compactor and token counter, as Haystack's does."""
        return serialize(
            self,
            compactor=component_to_dict(obj=self.compactor, name="compactor"),
            context_window=self.context_window,
            compact_at=self.compact_at,
            compact_to=self.compact_to,
            token_counter=component_to_dict(obj=self.token_counter, name="token_counter"),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactionHook:
        """Deserialize the hook from Haystack's dictionary or ours; Haystack's compactor or counter loads as ours."""
        init_parameters = dict(data.get("init_parameters", {}))
        for key in ("compactor", "token_counter"):
            deserialize_nested(init_parameters, key)
        return deserialize(cls, {**data, "init_parameters": init_parameters})
