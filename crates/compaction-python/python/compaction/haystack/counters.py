"""Haystack's token counters, counted in Rust."""

from __future__ import annotations

from typing import Any

from haystack.dataclasses import ChatMessage
from haystack.token_counters.types import TokenCounter
from haystack.tools import ToolsType

from compaction import _native
from compaction.haystack._common import CLASSES, HAYSTACK_TYPES, deserialize, message_json, serialize, tools_json

HAYSTACK_TYPES.update(
    {
        "ApproximateTokenCounter": "haystack.token_counters.approximate_counter.ApproximateTokenCounter",
        "TiktokenCounter": "haystack.token_counters.tiktoken_counter.TiktokenCounter",
    }
)


def counter_spec(counter: Any) -> tuple[str, Any, int, int] | None:
    """Our counters' settings, as `_native` takes them; None for any other counter."""
    if type(counter) is ApproximateTokenCounter:
        return ("approximate", counter.chars_per_token, counter.tokens_per_image, counter.tokens_per_file)
    if type(counter) is TiktokenCounter:
        return ("tiktoken", counter.encoding, counter.tokens_per_image, counter.tokens_per_file)
    return None


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
            CLASSES,
            message_json,
            tools_json(tools),
            "approximate",
            float(self.chars_per_token),
            self.tokens_per_image,
            self.tokens_per_file,
        )

    def to_dict(self) -> dict[str, Any]:
        """Serialize the counter, as Haystack's does."""
        return serialize(
            self,
            chars_per_token=self.chars_per_token,
            tokens_per_image=self.tokens_per_image,
            tokens_per_file=self.tokens_per_file,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApproximateTokenCounter:
        """Deserialize the counter from Haystack's dictionary or ours."""
        return deserialize(cls, data)


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
        _native.count([], CLASSES, message_json, None, "tiktoken", self.encoding, self.tokens_per_image, self.tokens_per_file)
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
            CLASSES,
            message_json,
            tools_json(tools),
            "tiktoken",
            self.encoding,
            self.tokens_per_image,
            self.tokens_per_file,
        )

    def to_dict(self) -> dict[str, Any]:
        """Serialize the counter, as Haystack's does."""
        return serialize(
            self, encoding=self.encoding, tokens_per_image=self.tokens_per_image, tokens_per_file=self.tokens_per_file
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TiktokenCounter:
        """Deserialize the counter from Haystack's dictionary or ours."""
        return deserialize(cls, data)
