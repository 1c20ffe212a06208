"""Drop-in replacements for Haystack 3.4.1's token counters and compactors, backed by Rust.

Each class has the name, constructor arguments and defaults, methods, return values and errors
of Haystack's, works on Haystack's own `ChatMessage` objects, and writes and reads Haystack's
`to_dict` form (type strings included), so a pipeline saved with these classes loads with
Haystack's and the other way round.

Messages cross into Rust as the `ChatMessage` objects themselves, one call per conversation:
Rust reads their attributes, as reading the JSON of `[m.to_dict() for m in messages]` would. A counter of ours is passed to Rust by its settings, so no Python runs per message;
any other object with Haystack's `count(messages=..., tools=...)` is called back from Rust.
"""

from __future__ import annotations

import json
from typing import Any

from haystack.core.errors import DeserializationError
from haystack.dataclasses import (
    ChatMessage,
    ChatRole,
    FileContent,
    ImageContent,
    ReasoningContent,
    TextContent,
    ToolCall,
    ToolCallResult,
)
from haystack.hooks.compaction.types import Compactor
from haystack.token_counters.types import TokenCounter
from haystack.tools import ToolsType, flatten_tools_or_toolsets
from haystack.utils.experimental import _experimental

from compaction import _native

__all__ = ["ApproximateTokenCounter", "SlidingWindowCompactor", "TiktokenCounter", "ToolResultPruningCompactor"]

_DEFAULT_PLACEHOLDER = "[Tool result removed to free up context. Call `{tool_name}` again if you need it.]"
_DEFAULT_OMISSION_NOTE = (
    "[{num_removed} earlier messages were removed from this conversation to free up context and cannot be recovered.]"
)

# The class paths Haystack writes as `type` for the classes these stand in for.
_HAYSTACK_TYPES = {
    "ApproximateTokenCounter": "haystack.token_counters.approximate_counter.ApproximateTokenCounter",
    "TiktokenCounter": "haystack.token_counters.tiktoken_counter.TiktokenCounter",
    "ToolResultPruningCompactor": "haystack.hooks.compaction.tool_result_pruning.ToolResultPruningCompactor",
    "SlidingWindowCompactor": "haystack.hooks.compaction.sliding_window.SlidingWindowCompactor",
}


# The content classes Rust tells parts apart by (by identity, as `ChatMessage.to_dict` does),
# then the classes it builds changed messages with.
_CLASSES = (TextContent, ToolCall, ToolCallResult, ReasoningContent, ImageContent, FileContent, ChatMessage, ChatRole)


def _message_json(message: ChatMessage) -> str:
    """One message's JSON, for what Rust does not read from the object itself (lone surrogates)."""
    return json.dumps(message.to_dict())


def _tools_json(tools: ToolsType | None) -> str | None:
    if not tools:
        return None
    return json.dumps([tool.tool_spec for tool in flatten_tools_or_toolsets(tools)], default=str)


def _to_dict(obj: Any, **init_parameters: Any) -> dict[str, Any]:
    """Haystack's `default_to_dict`, with Haystack's class path as the type."""
    return {"type": _HAYSTACK_TYPES[type(obj).__name__], "init_parameters": init_parameters}


def _from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Haystack's `default_from_dict`, taking Haystack's class path or ours as the type."""
    if "type" not in data:
        raise DeserializationError("Missing 'type' in serialization data")
    ours = f"{cls.__module__}.{cls.__name__}"
    if data["type"] not in (_HAYSTACK_TYPES[cls.__name__], ours):
        raise DeserializationError(f"Class '{data['type']}' can't be deserialized as '{cls.__name__}'")
    return cls(**dict(data.get("init_parameters", {})))


def _counter_spec(counter: Any) -> tuple[str, Any, int, int] | None:
    """Our counters' settings, as `_native` takes them; None for any other counter."""
    if type(counter) is ApproximateTokenCounter:
        return ("approximate", counter.chars_per_token, counter.tokens_per_image, counter.tokens_per_file)
    if type(counter) is TiktokenCounter:
        return ("tiktoken", counter.encoding, counter.tokens_per_image, counter.tokens_per_file)
    return None


def _compact(
    compactor: Any, messages: list[ChatMessage], target_tokens: int, token_counter: Any
) -> list[ChatMessage] | None:
    """Runs `compactor`'s strategy in Rust; messages that come back unchanged are the caller's own objects."""
    settings = json.dumps(compactor.to_dict()["init_parameters"])
    spec = _counter_spec(token_counter)
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
        _CLASSES,
        _message_json,
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


class ApproximateTokenCounter(TokenCounter):
    """Estimates tokens from text length using a flat ratio of characters to tokens (Haystack's, in Rust)."""

    def __init__(self, chars_per_token: float = 4.0, tokens_per_image: int = 85, tokens_per_file: int = 1000) -> None:
        """
        Initialize the counter.

        :param chars_per_token: How many characters to treat as one token.
        :param tokens_per_image: Tokens to charge per image, which has no text to measure.
        :param tokens_per_file: Tokens to charge per file.
        :raises ValueError: If `chars_per_token` is not positive.
        """
        if chars_per_token <= 0:
            raise ValueError(f"`chars_per_token` must be greater than 0, got {chars_per_token}.")
        self.chars_per_token = chars_per_token
        self.tokens_per_image = tokens_per_image
        self.tokens_per_file = tokens_per_file

    def count(self, messages: list[ChatMessage], tools: ToolsType | None = None) -> int:
        """
        Return the estimated number of tokens the given messages occupy.

        :param messages: The messages to measure.
        :param tools: Tools whose schemas are sent alongside the messages, and so consume tokens too.
        :returns: The estimated token count, or `0` when there is nothing to measure.
        """
        if not messages and not tools:
            return 0
        return _native.count(
            messages,
            _CLASSES,
            _message_json,
            _tools_json(tools),
            "approximate",
            float(self.chars_per_token),
            self.tokens_per_image,
            self.tokens_per_file,
        )

    def to_dict(self) -> dict[str, Any]:
        """Serialize the counter, as Haystack's does."""
        return _to_dict(
            self,
            chars_per_token=self.chars_per_token,
            tokens_per_image=self.tokens_per_image,
            tokens_per_file=self.tokens_per_file,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApproximateTokenCounter:
        """Deserialize the counter from Haystack's dictionary or ours."""
        return _from_dict(cls, data)


class TiktokenCounter(TokenCounter):
    """
    Counts tokens with OpenAI's byte-pair encodings (Haystack's `TiktokenCounter`, in Rust).

    The encodings are built into the package: nothing is downloaded and `tiktoken` is not needed.
    """

    def __init__(self, encoding: str = "o200k_base", tokens_per_image: int = 85, tokens_per_file: int = 1000) -> None:
        """
        Initialize the counter.

        :param encoding: The encoding to count with (o200k_base, cl100k_base, p50k_base or r50k_base).
        :param tokens_per_image: Tokens to charge per image, which the tokenizer cannot measure.
        :param tokens_per_file: Tokens to charge per file.
        """
        self.encoding = encoding
        self.tokens_per_image = tokens_per_image
        self.tokens_per_file = tokens_per_file
        # What `warm_up` loaded: the encoding's name once it is known to be one we have.
        self._encoder: str | None = None

    def warm_up(self) -> None:
        """Check the encoding: it is part of the package, so nothing is downloaded."""
        if self._encoder is not None:
            return
        _native.count([], _CLASSES, _message_json, None, "tiktoken", self.encoding, self.tokens_per_image, self.tokens_per_file)
        self._encoder = self.encoding

    def count(self, messages: list[ChatMessage], tools: ToolsType | None = None) -> int:
        """
        Return the estimated number of tokens used by the given messages.

        :param messages: The messages to measure.
        :param tools: Tools whose schemas are sent alongside the messages, and so consume tokens too.
        :returns: The estimated token count, or `0` when there is nothing to measure.
        """
        if not messages and not tools:
            return 0
        self.warm_up()
        return _native.count(
            messages,
            _CLASSES,
            _message_json,
            _tools_json(tools),
            "tiktoken",
            self.encoding,
            self.tokens_per_image,
            self.tokens_per_file,
        )

    def to_dict(self) -> dict[str, Any]:
        """Serialize the counter, as Haystack's does."""
        return _to_dict(
            self, encoding=self.encoding, tokens_per_image=self.tokens_per_image, tokens_per_file=self.tokens_per_file
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TiktokenCounter:
        """Deserialize the counter from Haystack's dictionary or ours."""
        return _from_dict(cls, data)


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
        return _to_dict(
            self,
            min_keep_steps=self.min_keep_steps,
            min_tokens=self.min_tokens,
            placeholder=self.placeholder,
            skip_meta_keys=list(self.skip_meta_keys),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResultPruningCompactor:
        """Deserialize the compactor from Haystack's dictionary or ours."""
        return _from_dict(cls, data)


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
        return _to_dict(self, min_keep_steps=self.min_keep_steps, omission_note=self.omission_note)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SlidingWindowCompactor:
        """Deserialize the compactor from Haystack's dictionary or ours."""
        return _from_dict(cls, data)
