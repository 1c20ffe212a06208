"""Haystack's token counters, counted in Rust."""

from __future__ import annotations

import json
import os
from typing import Any

from haystack.dataclasses import ChatMessage
from haystack.token_counters.types import TokenCounter
from haystack.tools import ToolsType, flatten_tools_or_toolsets
from haystack.utils import Secret

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


HAYSTACK_TYPES.update({"OpenAITokenCounter": "haystack.token_counters.openai_counter.OpenAITokenCounter"})


class OpenAITokenCounter(TokenCounter):
    """
    Counts tokens with OpenAI's input token counting API (Haystack's `OpenAITokenCounter`).

    Each count sends the messages and tool schemas to `POST /v1/responses/input_tokens`; the request's `input` is built
    in Rust (compaction-llm's conversion, the one Haystack's counter makes) and sent with the `openai` client.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: Secret = Secret.from_env_var("OPENAI_API_KEY"),
        api_base_url: str | None = None,
        organization: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        http_client_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """
        Initialize the counter.

        :param model: The model whose tokenization should be used.
        :param api_key: The OpenAI API key, by default from the `OPENAI_API_KEY` environment variable.
        :param api_base_url: An optional base URL for the OpenAI API.
        :param organization: Your OpenAI organization ID.
        :param timeout: Timeout for OpenAI client calls. If unset, uses `OPENAI_TIMEOUT` or 30 seconds.
        :param max_retries: Maximum retries for OpenAI client calls. If unset, uses `OPENAI_MAX_RETRIES` or 5.
        :param http_client_kwargs: Keyword arguments used to configure the underlying HTTPX client.
        """
        self.api_key = api_key
        self.model = model
        self.api_base_url = api_base_url
        self.organization = organization
        self.timeout = timeout
        self.max_retries = max_retries
        self.http_client_kwargs = http_client_kwargs
        self.client: Any = None

    def warm_up(self) -> None:
        """Initialize the OpenAI client."""
        if self.client is not None:
            return
        # The client class through Haystack's module, so that whatever stands in for it there (a test's mock, a
        # patched client) stands in for it here too.
        from haystack.token_counters import openai_counter as haystack_openai
        from haystack.utils.http_client import init_http_client

        timeout = self.timeout if self.timeout is not None else float(os.environ.get("OPENAI_TIMEOUT", "30.0"))
        max_retries = (
            self.max_retries if self.max_retries is not None else int(os.environ.get("OPENAI_MAX_RETRIES", "5"))
        )
        self.client = haystack_openai.OpenAI(
            api_key=self.api_key.resolve_value(),
            organization=self.organization,
            base_url=self.api_base_url,
            timeout=timeout,
            max_retries=max_retries,
            http_client=init_http_client(self.http_client_kwargs, async_client=False),
        )

    def count(self, messages: list[ChatMessage], tools: ToolsType | None = None) -> int:
        """
        Return the exact number of input tokens OpenAI will use for the given messages and tools.

        :param messages: The messages to measure.
        :param tools: Tools whose schemas are sent alongside the messages, and so consume tokens too.
        :returns: The token count, or `0` when there is nothing to measure.
        """
        if not messages and not tools:
            return 0
        self.warm_up()
        if self.client is None:
            raise RuntimeError("The OpenAI client was not initialized.")
        request: dict[str, Any] = {
            "model": self.model,
            "input": json.loads(_native.responses_input(messages, CLASSES, message_json)),
        }
        if tools:
            request["tools"] = [{"type": "function", **tool.tool_spec} for tool in flatten_tools_or_toolsets(tools)]
        return self.client.responses.input_tokens.count(**request).input_tokens

    def close(self) -> None:
        """Close the OpenAI client and its underlying HTTP resources."""
        if self.client is not None:
            self.client.close()
            self.client = None

    def to_dict(self) -> dict[str, Any]:
        """Serialize the counter, as Haystack's does (the API key as a `Secret`, never its value)."""
        return serialize(
            self,
            api_key=self.api_key.to_dict(),
            model=self.model,
            api_base_url=self.api_base_url,
            organization=self.organization,
            timeout=self.timeout,
            max_retries=self.max_retries,
            http_client_kwargs=self.http_client_kwargs,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OpenAITokenCounter:
        """Deserialize the counter from Haystack's dictionary or ours."""
        init_parameters = dict(data.get("init_parameters", {}))
        if isinstance(init_parameters.get("api_key"), dict):
            init_parameters["api_key"] = Secret.from_dict(init_parameters["api_key"])
        return deserialize(cls, {**data, "init_parameters": init_parameters})
