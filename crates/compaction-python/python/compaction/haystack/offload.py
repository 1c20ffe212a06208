"""Haystack's tool-result offloading (the hook, its policies, the file-system store, the compactor), run in Rust.

A store of ours (`FileSystemToolResultStore`) and the three policies are handed to Rust as they are, so
with them no Python runs per message. Any other object with Haystack's `ToolResultStore` protocol
(`write(key=..., content=...)`, `supports_binary_content`) or `OffloadPolicy` protocol
(`should_offload(tool_name=..., result=..., state=...)`) is called back from Rust.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from haystack import logging
from haystack.components.agents.state.state import State
from haystack.components.agents.state.state_utils import replace_values
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction.types import Compactor
from haystack.hooks.tool_result_offloading.types import OffloadPolicy, ToolResultStore
from haystack.token_counters.types import TokenCounter
from haystack.utils.deserialization import deserialize_component_inplace
from haystack.utils.experimental import _experimental

from compaction import _native
from compaction.haystack._common import CLASSES, HAYSTACK_TYPES, deserialize, message_json, serialize
from compaction.haystack.counters import counter_spec

logger = logging.getLogger(__name__)

HAYSTACK_TYPES.update(
    {
        "ToolResultOffloadCompactor": "haystack.hooks.compaction.tool_result_offloading.ToolResultOffloadCompactor",
        "ToolResultOffloadHook": "haystack.hooks.tool_result_offloading.hooks.ToolResultOffloadHook",
        "AlwaysOffload": "haystack.hooks.tool_result_offloading.policies.AlwaysOffload",
        "NeverOffload": "haystack.hooks.tool_result_offloading.policies.NeverOffload",
        "OffloadOverChars": "haystack.hooks.tool_result_offloading.policies.OffloadOverChars",
        "FileSystemToolResultStore": "haystack.hooks.tool_result_offloading.stores.FileSystemToolResultStore",
    }
)

# Key under which a per-run store may be given in the Agent's `hook_context`, as Haystack's.
RESULT_STORE_CONTEXT_KEY = "tool_result_store"


class FileSystemToolResultStore(ToolResultStore):
    """
    Writes offloaded tool results to files under a root directory (Haystack's, in Rust).

    `write` returns the file's absolute path and `read` gives the content back (text when it is UTF-8, else
    bytes). A key or reference outside the root is a `ValueError`, as in Haystack. Unlike Haystack's, the root is
    created and checked when the store is made, an existing file is never replaced (a taken key gets the next free
    name, which the returned path names), and no link is followed (see the README's deviations).
    """

    supports_binary_content = True

    def __init__(self, root: str | Path) -> None:
        """
        Initialize the store with the root directory results are written under.

        :param root: Directory under which result files are written; created if it does not exist.
        :raises OSError: If the root cannot be created or written.
        """
        self.root = root

    @property
    def root(self) -> Path:
        """The root directory results are written under."""
        return self._root

    @root.setter
    def root(self, root: str | Path) -> None:
        self._root = Path(root)
        self._rust = _native.FileSystemStore(self._root)

    def __getstate__(self) -> dict[str, Any]:
        # The Rust half holds the open root; a copy (or an unpickled store) opens its own.
        return {name: value for name, value in self.__dict__.items() if name != "_rust"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.root = self._root

    def write(self, *, key: str, content: str | bytes) -> str:
        """
        Write `content` under `key` within the root and return the file's absolute path.

        :param key: Relative file name for the result within the store root.
        :param content: The tool result to persist, as text or as raw bytes.
        :returns: The absolute path the content was written to, for use with `read`.
        :raises ValueError: If `key` resolves to a location outside the store root.
        """
        if not isinstance(content, (str, bytes)):
            raise TypeError(f"content must be str or bytes, not {type(content).__name__}")
        return self._rust.write(os.fspath(key), content)

    def read(self, reference: str) -> str | bytes:
        """
        Read back the content previously written to `reference`.

        :param reference: A store reference returned by `write`.
        :returns: The stored content, as text when it decodes as UTF-8 and as bytes otherwise.
        :raises ValueError: If `reference` resolves to a location outside the store root.
        """
        return self._rust.read(os.fspath(reference))

    def to_dict(self) -> dict[str, Any]:
        """Serialize the store, as Haystack's does."""
        return serialize(self, root=str(self.root))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileSystemToolResultStore:
        """Deserialize the store from Haystack's dictionary or ours."""
        return deserialize(cls, data)


class AlwaysOffload(OffloadPolicy):
    """Offload every result of the tool it is assigned to."""

    def should_offload(self, tool_name: str, result: str, state: State) -> bool:  # noqa: ARG002
        """Always True."""
        return True

    def to_dict(self) -> dict[str, Any]:
        """Serialize the policy, as Haystack's does."""
        return serialize(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AlwaysOffload:
        """Deserialize the policy from Haystack's dictionary or ours."""
        return deserialize(cls, data)


class NeverOffload(OffloadPolicy):
    """Never offload; keep the tool's full result in context. Use to opt a tool out of a wildcard default."""

    def should_offload(self, tool_name: str, result: str, state: State) -> bool:  # noqa: ARG002
        """Always False."""
        return False

    def to_dict(self) -> dict[str, Any]:
        """Serialize the policy, as Haystack's does."""
        return serialize(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NeverOffload:
        """Deserialize the policy from Haystack's dictionary or ours."""
        return deserialize(cls, data)


class OffloadOverChars(OffloadPolicy):
    """Offload a result only when its string length exceeds `threshold` characters."""

    def __init__(self, threshold: int) -> None:
        """
        Initialize the policy with its character threshold.

        :param threshold: Offload the result when its length in characters is strictly greater than this value.
        """
        self.threshold = threshold

    def should_offload(self, tool_name: str, result: str, state: State) -> bool:  # noqa: ARG002
        """True when `result` is longer than `threshold` characters."""
        return len(result) > self.threshold

    def to_dict(self) -> dict[str, Any]:
        """Serialize the policy, including its threshold."""
        return serialize(self, threshold=self.threshold)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OffloadOverChars:
        """Deserialize the policy from Haystack's dictionary or ours."""
        return deserialize(cls, data)


def _store_arg(store: Any) -> Any:
    """Our store's Rust half, or the object itself, called back."""
    return store._rust if type(store) is FileSystemToolResultStore else store


def _policy_arg(policy: Any) -> tuple[str, int, Any]:
    """One of our policies as data for Rust (kind, threshold), or the object, called back."""
    kind = type(policy)
    if kind is AlwaysOffload:
        return ("always", 0, None)
    if kind is NeverOffload:
        return ("never", 0, None)
    if kind is OffloadOverChars and type(policy.threshold) is int:
        # Any length is more than a negative threshold.
        return ("over", policy.threshold, None) if policy.threshold >= 0 else ("always", 0, None)
    return ("python", 0, policy)


def _strategies_arg(strategies: dict[Any, Any]) -> list[tuple[Any, str, int, Any]]:
    """The strategies for Rust: keys that can name a tool (a name, `*`, or a tuple's names), in order."""
    entries = []
    for key, policy in strategies.items():
        if policy is None:
            continue
        if isinstance(key, tuple):
            key = [name for name in key if isinstance(name, str)]
        elif not isinstance(key, str):
            continue
        entries.append((key, *_policy_arg(policy)))
    return entries


def _message(entry: Any, messages: list[ChatMessage]) -> ChatMessage:
    """A message Rust returned: the caller's own (an index), built, or JSON for `from_dict`."""
    if isinstance(entry, int):
        return messages[entry]
    if isinstance(entry, str):
        return ChatMessage.from_dict(json.loads(entry)[0])
    return entry


def _log_failures(failures: list[tuple[str, str]], store: Any) -> None:
    for tool, error in failures:
        logger.warning(
            "Failed to offload the result of tool '{tool}' to {store}; leaving the result in context. Error: {error}",
            tool=tool,
            store=type(store).__name__,
            error=error,
        )


def _our_class(type_name: Any) -> type | None:
    """Our class a serialized `type` names: by Haystack's class path or ours."""
    for cls in (FileSystemToolResultStore, AlwaysOffload, NeverOffload, OffloadOverChars):
        name = cls.__name__
        if type_name in (HAYSTACK_TYPES[name], f"{cls.__module__}.{name}", f"compaction.haystack.{name}"):
            return cls
    return None


def _component(value: Any, key: str) -> Any:
    """A serialized store or policy: ours when its type names one of ours, else as Haystack loads it."""
    cls = _our_class(value.get("type")) if isinstance(value, dict) else None
    if cls is not None:
        return cls.from_dict(value)
    holder = {key: value}
    deserialize_component_inplace(holder, key=key)
    return holder[key]


class ToolResultOffloadHook:
    """
    Offload tool results to a `ToolResultStore`, replacing them in the conversation with a compact pointer.

    Haystack's `after_tool` Agent hook, in Rust: the same keys (a tool name, a tuple of names, `"*"`), pointers and
    store keys. With our store and policies no Python runs per message; any other store or policy is called back.
    A per-run store given in the Agent's `hook_context` under `RESULT_STORE_CONTEXT_KEY` overrides the constructor's.
    """

    allowed_hook_points = ("after_tool",)

    def __init__(
        self,
        store: ToolResultStore,
        offload_strategies: dict[str | tuple[str, ...], OffloadPolicy],
        *,
        preview_chars: int = 200,
    ) -> None:
        """
        Initialize the hook with a store and per-tool offload strategies.

        :param store: Where offloaded results are written. Can be overridden per run via `hook_context`.
        :param offload_strategies: Mapping of tool name (or a tuple of tool names, or the wildcard `"*"`) to the
            `OffloadPolicy` that decides whether that tool's results are offloaded.
        :param preview_chars: Number of leading characters of each offloaded text to include in the pointer.
        """
        self.store = store
        self.offload_strategies = offload_strategies
        self.preview_chars = preview_chars

    def run(self, state: State) -> None:
        """
        Offload the freshly produced tool results in `state.data["messages"]` according to `offload_strategies`.

        :param state: The Agent's live `State`. Reads the per-run store from `hook_context` and rewrites the offloaded
            tool-result messages back into `messages`.
        :returns: None. The hook mutates `state` in place.
        :raises ValueError: If `preview_chars` is negative.
        """
        messages = state.data.get("messages") or []
        start = len(messages)
        while start > 0 and messages[start - 1].tool_call_result is not None:
            start -= 1
        if start == len(messages):
            return
        if self.preview_chars < 0:
            raise ValueError(f"`preview_chars` must be at least 0, got {self.preview_chars}.")

        hook_context = state.data.get("hook_context") or {}
        store = hook_context.get(RESULT_STORE_CONTEXT_KEY, self.store)
        fresh = list(messages[start:])
        edits, failures, unsupported = _native.offload_hook_run(
            fresh,
            CLASSES,
            message_json,
            state.data.get("step_count", 0),
            _strategies_arg(self.offload_strategies),
            self.preview_chars,
            _store_arg(store),
            state,
        )
        for tool in unsupported:
            logger.warning(
                "Tool '{tool}' produced a result with image or file content, but {store} does not support binary "
                "content; leaving the result in context.",
                tool=tool,
                store=type(store).__name__,
            )
        _log_failures(failures, store)
        if not edits:
            return
        rewritten = list(messages[:start]) + fresh
        for index, entry in edits:
            rewritten[start + index] = _message(entry, fresh)
        state.set(key="messages", value=rewritten, handler_override=replace_values)

    def to_dict(self) -> dict[str, Any]:
        """Serialize the hook, including its store and per-tool offload strategies, as Haystack's does."""
        return serialize(
            self,
            store=self.store.to_dict(),
            offload_strategies={
                (json.dumps(list(key)) if isinstance(key, tuple) else key): policy.to_dict()
                for key, policy in self.offload_strategies.items()
            },
            preview_chars=self.preview_chars,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResultOffloadHook:
        """Deserialize the hook from Haystack's dictionary or ours, reconstructing its store and policies."""
        params = dict(data.get("init_parameters", {}))
        if params.get("store") is not None:
            params["store"] = _component(params["store"], "store")
        if params.get("offload_strategies") is not None:
            params["offload_strategies"] = {
                (tuple(json.loads(key)) if isinstance(key, str) and key.startswith("[") else key): _component(
                    policy, key
                )
                for key, policy in params["offload_strategies"].items()
            }
        return deserialize(cls, {**data, "init_parameters": params})


@_experimental
class ToolResultOffloadCompactor(Compactor):
    """
    Writes older tool results to a `ToolResultStore` and leaves a reference in their place (Haystack's, in Rust).

    Results are offloaded oldest first until the conversation fits `target_tokens`; those of the newest
    `min_keep_steps` tool-calling steps never are. With our store and counter no Python runs per message.
    """

    def __init__(
        self, store: ToolResultStore, *, min_keep_steps: int = 1, min_tokens: int = 200, preview_chars: int = 200
    ) -> None:
        """
        Initialize the compactor.

        :param store: Where offloaded results are written.
        :param min_keep_steps: Number of most recent tool-calling Agent steps whose results are never offloaded.
        :param min_tokens: Only offload tool-result messages larger than this many tokens.
        :param preview_chars: Number of leading characters of each offloaded text kept in its reference.
        :raises ValueError: If `min_keep_steps` is less than 1, or `min_tokens` or `preview_chars` is negative.
        """
        if min_keep_steps < 1:
            raise ValueError(
                f"`min_keep_steps` must be at least 1, got {min_keep_steps}. The most recent tool-calling step "
                f"contains results the model may still need."
            )
        if min_tokens < 0:
            raise ValueError(f"`min_tokens` must be at least 0, got {min_tokens}.")
        if preview_chars < 0:
            raise ValueError(f"`preview_chars` must be at least 0, got {preview_chars}.")
        self.store = store
        self.min_keep_steps = min_keep_steps
        self.min_tokens = min_tokens
        self.preview_chars = preview_chars

    def compact(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Offload tool results to the store, oldest first, until the conversation fits within `target_tokens`.

        :param messages: The conversation to compact, oldest to newest.
        :param target_tokens: The token count the compacted conversation should fit within.
        :param token_counter: The `TokenCounter` used to measure the conversation.
        :returns: The conversation with older tool results replaced by references, or None when nothing was offloaded.
        """
        spec = counter_spec(token_counter)
        if spec is not None:
            kind, setting, per_image, per_file = spec
            count_json = None
        else:
            kind, setting, per_image, per_file = None, None, 0, 0

            def count_json(text: str) -> int:
                return token_counter.count(messages=[ChatMessage.from_dict(d) for d in json.loads(text)])

        entries, failures = _native.offload_compact(
            messages,
            CLASSES,
            message_json,
            max(int(target_tokens), 0),
            int(self.min_keep_steps),
            int(self.min_tokens),
            int(self.preview_chars),
            _store_arg(self.store),
            kind,
            setting,
            per_image,
            per_file,
            count_json,
        )
        _log_failures(failures, self.store)
        if entries is None:
            return None
        return [_message(entry, messages) for entry in entries]

    async def compact_async(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Run `compact` in a thread so store writes and token counting do not block the event loop.

        :param messages: The conversation to compact, oldest to newest.
        :param target_tokens: The token count the compacted conversation should fit within.
        :param token_counter: The `TokenCounter` used to measure the conversation.
        :returns: The conversation with older tool results replaced by references, or None when nothing was offloaded.
        """
        return await asyncio.to_thread(
            self.compact, messages=messages, target_tokens=target_tokens, token_counter=token_counter
        )

    def to_dict(self) -> dict[str, Any]:
        """Serialize the compactor, including its store, as Haystack's does."""
        return serialize(
            self,
            store=self.store.to_dict(),
            min_keep_steps=self.min_keep_steps,
            min_tokens=self.min_tokens,
            preview_chars=self.preview_chars,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResultOffloadCompactor:
        """Deserialize the compactor from Haystack's dictionary or ours, reconstructing its store."""
        params = dict(data.get("init_parameters", {}))
        if params.get("store") is not None:
            params["store"] = _component(params["store"], "store")
        return deserialize(cls, {**data, "init_parameters": params})


__all__ = [
    "RESULT_STORE_CONTEXT_KEY",
    "AlwaysOffload",
    "FileSystemToolResultStore",
    "NeverOffload",
    "OffloadOverChars",
    "ToolResultOffloadCompactor",
    "ToolResultOffloadHook",
]

