"""Drop-in replacements for Haystack 3.4.1's token counters and compactors, backed by Rust.

Each class has the name, constructor arguments and defaults, methods, return values and errors
of Haystack's, works on Haystack's own `ChatMessage` objects, and writes and reads Haystack's
`to_dict` form (type strings included), so a pipeline saved with these classes loads with
Haystack's and the other way round.

Messages cross into Rust as the `ChatMessage` objects themselves, one call per conversation:
Rust reads their attributes, as reading the JSON of `[m.to_dict() for m in messages]` would.
A counter of ours is passed to Rust by its settings, so no Python runs per message; any other object with Haystack's `count(messages=..., tools=...)` is called back from Rust.
"""

from compaction.haystack.budget import TokenBudgetHook
from compaction.haystack.compactors import SlidingWindowCompactor, SummarizationCompactor, ToolResultPruningCompactor
from compaction.haystack.counters import ApproximateTokenCounter, OpenAITokenCounter, TiktokenCounter
from compaction.haystack.hooks import CompactionHook
from compaction.haystack.offload import (
    AlwaysOffload,
    FileSystemToolResultStore,
    NeverOffload,
    OffloadOverChars,
    ToolResultOffloadCompactor,
    ToolResultOffloadHook,
)

__all__ = [
    "AlwaysOffload",
    "ApproximateTokenCounter",
    "CompactionHook",
    "FileSystemToolResultStore",
    "NeverOffload",
    "OffloadOverChars",
    "OpenAITokenCounter",
    "SlidingWindowCompactor",
    "SummarizationCompactor",
    "TiktokenCounter",
    "TokenBudgetHook",
    "ToolResultOffloadCompactor",
    "ToolResultOffloadHook",
    "ToolResultPruningCompactor",
]
