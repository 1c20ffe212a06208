"""What the drop-in classes share: the content classes Rust reads, Haystack's type strings, (de)serialization."""

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
from haystack.tools import ToolsType, flatten_tools_or_toolsets

# The class paths Haystack writes as `type` for the classes ours stand in for; each module of
# this package adds its own classes.
HAYSTACK_TYPES: dict[str, str] = {}

# The content classes Rust tells parts apart by (by identity, as `ChatMessage.to_dict` does),
# then the classes it builds changed messages with.
CLASSES = (TextContent, ToolCall, ToolCallResult, ReasoningContent, ImageContent, FileContent, ChatMessage, ChatRole)


def message_json(message: ChatMessage) -> str:
    """One message's JSON, for what Rust does not read from the object itself (lone surrogates)."""
    return json.dumps(message.to_dict())


def tools_json(tools: ToolsType | None) -> str | None:
    if not tools:
        return None
    return json.dumps([tool.tool_spec for tool in flatten_tools_or_toolsets(tools)], default=str)


def serialize(obj: Any, **init_parameters: Any) -> dict[str, Any]:
    """Haystack's `default_to_dict`, with Haystack's class path as the type."""
    return {"type": HAYSTACK_TYPES[type(obj).__name__], "init_parameters": init_parameters}


def deserialize(cls: type, data: dict[str, Any]) -> Any:
    """Haystack's `default_from_dict`, taking Haystack's class path or ours as the type."""
    if "type" not in data:
        raise DeserializationError("Missing 'type' in serialization data")
    # Ours by the module that defines the class, or by the package that exports it.
    ours = (f"{cls.__module__}.{cls.__name__}", f"compaction.haystack.{cls.__name__}")
    if data["type"] != HAYSTACK_TYPES[cls.__name__] and data["type"] not in ours:
        raise DeserializationError(f"Class '{data['type']}' can't be deserialized as '{cls.__name__}'")
    return cls(**dict(data.get("init_parameters", {})))

