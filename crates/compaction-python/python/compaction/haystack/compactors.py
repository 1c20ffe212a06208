"""Haystack's compactors, run in Rust."""

from __future__ import annotations

import json
from typing import Any

from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction.types import Compactor
from haystack.token_counters.types import TokenCounter
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
        count_json = None
    else:
        kind, setting, per_image, per_file = None, None, 0, 0

        def count_json(text: str) -> int:
            return token_counter.count(messages=[ChatMessage.from_dict(d) for d in json.loads(text)])

    entries = _native.compact(
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
        count_json,
    )
    if entries is None:
        return None
    # An int names the caller's own message; a str is the JSON of a message Rust left to from_dict.
    return [
        messages[e] if isinstance(e, int) else ChatMessage.from_dict(json.loads(e)[0]) if isinstance(e, str) else e
        for e in entries
    ]



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
