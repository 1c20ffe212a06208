"""Context compaction for LLM agents, in Rust.

`compaction.haystack` holds drop-in replacements for Haystack 3.4.1's token counters and
compactors (install the `haystack` extra). The Rust half is `compaction._native`.
"""

from compaction import _native

__all__ = ["_native"]
