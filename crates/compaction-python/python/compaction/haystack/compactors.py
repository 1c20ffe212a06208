"""Haystack's compactors, run in Rust."""

from __future__ import annotations

import json
from typing import Any

from haystack import logging
from haystack.core.serialization import component_to_dict
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction.types import Compactor
from haystack.token_counters.types import TokenCounter
from haystack.utils.async_utils import _execute_component_async
from haystack.utils.deserialization import deserialize_component_inplace
from haystack.utils.experimental import _experimental

from compaction import _native
from compaction.haystack._common import CLASSES, HAYSTACK_TYPES, deserialize, message_json, serialize
from compaction.haystack.counters import counter_spec

HAYSTACK_TYPES.update(
    {
        "ToolResultPruningCompactor": "haystack.hooks.compaction.tool_result_pruning.ToolResultPruningCompactor",
        "SlidingWindowCompactor": "haystack.hooks.compaction.sliding_window.SlidingWindowCompactor",
    }
)

_DEFAULT_PLACEHOLDER = "[Tool result removed to free up context. Call `{tool_name}` again if you need it.]"
_DEFAULT_OMISSION_NOTE = (
    "[{num_removed} earlier messages were removed from this conversation to free up context and cannot be recovered.]"
)


def _compact(
    compactor: Any, messages: list[ChatMessage], target_tokens: int, token_counter: Any
) -> list[ChatMessage] | None:
    """Runs `compactor`'s strategy in Rust; messages that come back unchanged are the caller's own objects."""
    settings = json.dumps(compactor.to_dict()["init_parameters"])
    spec = counter_spec(token_counter)
    if spec is not None:
        kind, setting, per_image, per_file = spec
        count_messages = None
    else:
        kind, setting, per_image, per_file = None, None, 0, 0

        # Rust hands it the caller's own messages where they are unchanged, as Haystack's compactors do.
        def count_messages(objects: list[ChatMessage]) -> int:
            return token_counter.count(messages=objects)

    return _native.compact(
        type(compactor).__name__,
        messages,
        CLASSES,
        message_json,
        max(int(target_tokens), 0),
        settings,
        kind,
        setting,
        per_image,
        per_file,
        None,
        count_messages,
    )


@_experimental
class ToolResultPruningCompactor(Compactor):
    """
    Replaces the content of older tool results with a short placeholder (Haystack's, in Rust).

    Results are considered oldest first and pruning stops as soon as the conversation reaches
    `target_tokens`; results of the newest `min_keep_steps` tool-calling steps are never pruned.
    """

    def __init__(
        self,
        *,
        min_keep_steps: int = 1,
        min_tokens: int = 200,
        placeholder: str = _DEFAULT_PLACEHOLDER,
        skip_meta_keys: tuple[str, ...] = ("tool_result_offloaded",),
    ) -> None:
        """
        Initialize the compactor with the rules deciding which results it prunes.

        :param min_keep_steps: The minimum number of recent tool-calling Agent steps whose results remain untouched.
        :param min_tokens: Only prune tool-result messages that use more than this many tokens.
        :param placeholder: The text left in place of a pruned result; `{tool_name}` is filled in.
        :param skip_meta_keys: Results whose `meta` contains any of these keys are left alone.
        :raises ValueError: If `min_keep_steps` is less than 1 or `min_tokens` is negative.
        """
        if min_keep_steps < 1:
            raise ValueError(
                f"`min_keep_steps` must be at least 1, got {min_keep_steps}. The most recent tool-calling step "
                f"contains results the model may still need."
            )
        if min_tokens < 0:
            raise ValueError(f"`min_tokens` must be at least 0, got {min_tokens}.")
        self.min_keep_steps = min_keep_steps
        self.min_tokens = min_tokens
        self.placeholder = placeholder
        self.skip_meta_keys = tuple(skip_meta_keys)

    def compact(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Replace the content of prunable tool results with a placeholder.

        :param messages: The conversation to compact, oldest to newest.
        :param target_tokens: The size the compacted conversation should come in under.
        :param token_counter: The `TokenCounter` used to measure the conversation.
        :returns: The conversation with older tool results replaced, or None when no result was prunable.
        """
        return _compact(self, messages, target_tokens, token_counter)

    def to_dict(self) -> dict[str, Any]:
        """Serialize the compactor, as Haystack's does."""
        return serialize(
            self,
            min_keep_steps=self.min_keep_steps,
            min_tokens=self.min_tokens,
            placeholder=self.placeholder,
            skip_meta_keys=list(self.skip_meta_keys),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResultPruningCompactor:
        """Deserialize the compactor from Haystack's dictionary or ours."""
        return deserialize(cls, data)


@_experimental
class SlidingWindowCompactor(Compactor):
    """
    Drops the oldest history while keeping the task and a complete recent window (Haystack's, in Rust).

    The leading system messages and the current task's user message stay; whole Agent steps are
    removed oldest first until the rest fits `target_tokens`, and an omission note stands where they were.
    """

    def __init__(self, *, min_keep_steps: int = 1, omission_note: str | None = _DEFAULT_OMISSION_NOTE) -> None:
        """
        Initialize the compactor.

        :param min_keep_steps: The fewest complete recent Agent steps to keep even when they exceed the target.
        :param omission_note: The user message left in place of what was removed, or None to remove the messages
            silently. `{num_removed}` is replaced by the number of removed messages.
        :raises ValueError: If `min_keep_steps` is negative.
        """
        if min_keep_steps < 0:
            raise ValueError(f"`min_keep_steps` must be at least 0, got {min_keep_steps}.")
        self.min_keep_steps = min_keep_steps
        self.omission_note = omission_note

    def compact(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Drop older history while preserving the task anchor and a complete recent conversation window.

        :param messages: The conversation to compact, oldest to newest.
        :param target_tokens: The size the kept conversation should come in under.
        :param token_counter: The `TokenCounter` to measure messages with.
        :returns: The conversation that survived, with an omission note if configured; or None when there is nothing
            to remove but an earlier note.
        """
        return _compact(self, messages, target_tokens, token_counter)

    def to_dict(self) -> dict[str, Any]:
        """Serialize the compactor, as Haystack's does."""
        return serialize(self, min_keep_steps=self.min_keep_steps, omission_note=self.omission_note)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SlidingWindowCompactor:
        """Deserialize the compactor from Haystack's dictionary or ours."""
        return deserialize(cls, data)


HAYSTACK_TYPES.update(
    {"SummarizationCompactor": "haystack.hooks.compaction.summarization.SummarizationCompactor"}
)

logger = logging.getLogger(__name__)

# Recorded as the strategy on every summary, so that a later run recognizes its own summaries.
_SUMMARIZATION = "summarization"
# The `meta` key marking a message a compactor wrote.
_COMPACTION_META_KEY = "context_compaction"
# Haystack's default instruction, from compaction-core (which keeps it in sync, byte for byte).
_DEFAULT_SUMMARY_INSTRUCTION: str = _native.DEFAULT_SUMMARY_INSTRUCTION


def _summary_settings(compactor: SummarizationCompactor) -> str:
    """The compactor's settings as Rust's summarization reads them (no chat generator)."""
    return json.dumps(
        {
            "min_keep_steps": compactor.min_keep_steps,
            "approximate_summary_tokens": compactor.approximate_summary_tokens,
            "summary_instruction": compactor.summary_instruction,
            "raise_on_failure": compactor.raise_on_failure,
        }
    )


def _counter_arguments(token_counter: Any, messages: list[ChatMessage]) -> tuple[Any, ...]:
    """
    How `_native.summary_round` takes `token_counter`: ours by its settings; any other is called back with the
    caller's own messages at the positions Rust names (or, for a message that is not one of them, from its JSON).
    """
    spec = counter_spec(token_counter)
    if spec is not None:
        return (*spec, None, None)

    def count_json(text: str) -> int:
        return token_counter.count(messages=[ChatMessage.from_dict(d) for d in json.loads(text)])

    def count_indices(indices: list[int]) -> int:
        return token_counter.count(messages=[messages[index] for index in indices])

    return (None, None, 0, 0, count_json, count_indices)


@_experimental
class SummarizationCompactor(Compactor):
    """
    Progressively summarizes a conversation until it fits a target token budget (Haystack's, planned in Rust).

    Each round replaces the oldest stretch that may go with one summary written by `chat_generator`, in four tiers:
    complete historical turns, then historical summaries, then the current task's steps (keeping the
    `min_keep_steps` newest), then the current task's summaries. What to summarize and the transcript the model is
    shown come from compaction-core, counted in Rust when the counter is ours; the generator is any object with
    Haystack's chat-generator protocol (`run(messages=...)` returning `{"replies": [...]}`), called back each round.
    """

    def __init__(
        self,
        chat_generator: Any,
        *,
        min_keep_steps: int = 1,
        approximate_summary_tokens: int = 1024,
        summary_instruction: str = _DEFAULT_SUMMARY_INSTRUCTION,
        raise_on_failure: bool = False,
    ) -> None:
        """
        Initialize the compactor.

        :param chat_generator: The Chat Generator used to write summaries.
        :param min_keep_steps: The fewest complete recent Agent steps to keep, even when they exceed the target.
        :param approximate_summary_tokens: About how long a summary comes out, used to plan how much to summarize per
            round; not a limit imposed on the model.
        :param summary_instruction: The prompt instructions for how to summarize a portion of the conversation.
        :param raise_on_failure: Whether to raise when the chat generator fails or returns a summary that does not
            shrink the conversation. By default the failure is logged and any partial compaction is returned.
        :raises ValueError: If `min_keep_steps` is negative or `approximate_summary_tokens` is not positive.
        """
        if min_keep_steps < 0:
            raise ValueError(f"`min_keep_steps` must be at least 0, got {min_keep_steps}.")
        if approximate_summary_tokens < 1:
            raise ValueError(
                f"`approximate_summary_tokens` must be a positive number of tokens, got {approximate_summary_tokens}."
            )
        self.chat_generator = chat_generator
        self.min_keep_steps = min_keep_steps
        self.approximate_summary_tokens = approximate_summary_tokens
        self.summary_instruction = summary_instruction
        self.raise_on_failure = raise_on_failure

    def compact(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Return a progressively summarized conversation, or None when no useful reduction is possible.

        :param messages: The conversation to compact, ordered oldest to newest.
        :param target_tokens: The token budget the compacted messages should aim to fit.
        :param token_counter: The counter used both to plan compaction and verify generated summaries.
        :returns: A smaller replacement conversation, or None when nothing was reduced.
        """
        compacted, tokens, summarized = messages, token_counter.count(messages=messages), False
        while tokens > target_tokens:
            round_ = self._round(compacted, target_tokens, token_counter)
            if round_ is None:
                break
            indices, prompt = round_
            try:
                result = self.chat_generator.run(messages=prompt)
                compacted, tokens = self._apply_summary(compacted, indices, result, tokens, token_counter)
                summarized = True
            except Exception as error:
                self._report_failure(error)
                break
        return compacted if summarized else None

    async def compact_async(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Asynchronously return a progressively summarized conversation, awaiting the generator's `run_async`.

        :param messages: The conversation to compact, ordered oldest to newest.
        :param target_tokens: The token budget the compacted messages should aim to fit.
        :param token_counter: The counter used both to plan compaction and verify generated summaries.
        :returns: A smaller replacement conversation, or None when nothing was reduced.
        """
        compacted, tokens, summarized = messages, token_counter.count(messages=messages), False
        while tokens > target_tokens:
            round_ = self._round(compacted, target_tokens, token_counter)
            if round_ is None:
                break
            indices, prompt = round_
            try:
                result = await _execute_component_async(component_instance=self.chat_generator, messages=prompt)
                compacted, tokens = self._apply_summary(compacted, indices, result, tokens, token_counter)
                summarized = True
            except Exception as error:
                self._report_failure(error)
                break
        return compacted if summarized else None

    def _round(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> tuple[list[int], list[ChatMessage]] | None:
        """The next stretch to summarize and the prompt asking for its summary, planned in Rust; None when done."""
        planned = _native.summary_round(
            messages,
            CLASSES,
            message_json,
            max(int(target_tokens), 0),
            _summary_settings(self),
            *_counter_arguments(token_counter, messages),
        )
        if planned is None:
            return None
        indices, request = planned
        return indices, [ChatMessage.from_system(text=self.summary_instruction), ChatMessage.from_user(text=request)]

    def _next_summary(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[int] | None:
        """
        The positions of the next stretch of conversation to replace with a summary, or None when nothing may go.

        :param messages: The whole conversation, ordered oldest to newest.
        :param target_tokens: The token budget the conversation should come in under.
        :param token_counter: The counter used to measure candidate selections.
        """
        planned = self._round(messages, target_tokens, token_counter)
        return None if planned is None else planned[0]

    def _prompt(self, messages: list[ChatMessage], indices: list[int]) -> list[ChatMessage]:
        """The summarization instruction and the transcript of the messages at `indices`."""
        transcript = _native.summary_text(messages, CLASSES, message_json, list(indices))
        return [
            ChatMessage.from_system(text=self.summary_instruction),
            ChatMessage.from_user(text=f"<conversation_to_summarize>\n{transcript}\n</conversation_to_summarize>"),
        ]

    def _apply_summary(
        self,
        messages: list[ChatMessage],
        indices: list[int],
        result: dict[str, Any],
        before_tokens: int,
        token_counter: TokenCounter,
    ) -> tuple[list[ChatMessage], int]:
        """
        Puts the generated summary where the oldest selected message was, in place of all of them.

        :returns: The new conversation and its size.
        :raises RuntimeError: If the generator returned no usable text, or the summary did not make the conversation
            smaller.
        """
        replies = result.get("replies") or []
        text = replies[-1].text if replies else None
        if not text or not text.strip():
            raise RuntimeError(
                "The Chat Generator returned no usable text to use as a conversation summary. "
                f"Generator output: {result}."
            )
        summary = ChatMessage.from_user(
            text=f"<conversation_summary>\n{text.strip()}\n</conversation_summary>",
            meta={_COMPACTION_META_KEY: {"strategy": _SUMMARIZATION, "summarized_messages": len(indices)}},
        )
        selected = set(indices)
        at = min(indices)
        compacted: list[ChatMessage] = []
        for index, message in enumerate(messages):
            if index == at:
                compacted.append(summary)
            if index not in selected:
                compacted.append(message)
        after_tokens = token_counter.count(messages=compacted)
        if after_tokens >= before_tokens:
            raise RuntimeError(
                f"The generated summary did not reduce the conversation size ({before_tokens} tokens before and "
                f"{after_tokens} tokens after)."
            )
        return compacted, after_tokens

    def _report_failure(self, error: Exception) -> None:
        """Raises a failed round with `raise_on_failure`, else logs it (the rounds before it are kept)."""
        if self.raise_on_failure:
            raise error
        logger.warning(
            "Summarizing the conversation for context compaction failed; keeping the last successful result. "
            "Error: {error}",
            error=error,
        )

    def warm_up(self) -> None:
        """Warm up the Chat Generator that writes summaries."""
        if hasattr(self.chat_generator, "warm_up"):
            self.chat_generator.warm_up()

    async def warm_up_async(self) -> None:
        """Warm up the Chat Generator on the serving event loop."""
        warm_up_async = getattr(self.chat_generator, "warm_up_async", None)
        if warm_up_async is not None:
            await warm_up_async()
        elif hasattr(self.chat_generator, "warm_up"):
            self.chat_generator.warm_up()

    def close(self) -> None:
        """Release the Chat Generator's resources."""
        if hasattr(self.chat_generator, "close"):
            self.chat_generator.close()

    async def close_async(self) -> None:
        """Release the Chat Generator's resources."""
        close_async = getattr(self.chat_generator, "close_async", None)
        if close_async is not None:
            await close_async()
        elif hasattr(self.chat_generator, "close"):
            self.chat_generator.close()

    def to_dict(self) -> dict[str, Any]:
        """Serialize the compactor and its Chat Generator, as Haystack's does."""
        return serialize(
            self,
            chat_generator=component_to_dict(obj=self.chat_generator, name="chat_generator"),
            min_keep_steps=self.min_keep_steps,
            approximate_summary_tokens=self.approximate_summary_tokens,
            summary_instruction=self.summary_instruction,
            raise_on_failure=self.raise_on_failure,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SummarizationCompactor:
        """Deserialize the compactor and rebuild its Chat Generator, from Haystack's dictionary or ours."""
        init_parameters = dict(data.get("init_parameters", {}))
        if init_parameters.get("chat_generator") is not None:
            deserialize_component_inplace(data=init_parameters, key="chat_generator")
        return deserialize(cls, {**data, "init_parameters": init_parameters})
