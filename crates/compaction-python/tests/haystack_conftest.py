"""A pytest plugin that puts `compaction.haystack`'s classes in place of Haystack's.

Haystack's own tests of the token counters and compactors are the specification of
`compaction.haystack`. This plugin runs them against our classes: load it before the tests are
imported, from a checkout of Haystack's tests at the version installed (never copied here):

    PYTHONPATH=crates/compaction-python/tests python -m pytest -p haystack_conftest \
        <haystack checkout>/test/token_counters <haystack checkout>/test/hooks/compaction

Every module a test imports a substituted class from gets ours: the package (`haystack.token_counters`)
and the module that defines it (`haystack.token_counters.approximate_counter`). Set
`COMPACTION_SUBSTITUTE=0` to run the same tests against Haystack's own classes (the baseline).
"""

import importlib
import os

# (Haystack module, class name) for each class of ours that stands in for Haystack's.
SUBSTITUTED = [
    ("haystack.token_counters", "approximate_counter", "ApproximateTokenCounter"),
    ("haystack.token_counters", "tiktoken_counter", "TiktokenCounter"),
    ("haystack.hooks.compaction", "tool_result_pruning", "ToolResultPruningCompactor"),
    ("haystack.hooks.compaction", "sliding_window", "SlidingWindowCompactor"),
    ("haystack.hooks.compaction", "summarization", "SummarizationCompactor"),
    ("haystack.hooks.compaction", "hooks", "CompactionHook"),
    ("haystack.hooks.budget", "hooks", "TokenBudgetHook"),
    ("haystack.token_counters", "openai_counter", "OpenAITokenCounter"),
    ("haystack.hooks.compaction", "tool_result_offloading", "ToolResultOffloadCompactor"),
    ("haystack.hooks.tool_result_offloading", "hooks", "ToolResultOffloadHook"),
    ("haystack.hooks.tool_result_offloading", "policies", "AlwaysOffload"),
    ("haystack.hooks.tool_result_offloading", "policies", "NeverOffload"),
    ("haystack.hooks.tool_result_offloading", "policies", "OffloadOverChars"),
    ("haystack.hooks.tool_result_offloading", "stores", "FileSystemToolResultStore"),
]


def substitute() -> list[str]:
    """Sets our classes on Haystack's modules; returns what was replaced, as `module.Class`."""
    import compaction.haystack as ours
    from haystack.core.serialization import allow_deserialization_module

    # Haystack's loader resolves Haystack's type strings to whatever class the module now holds,
    # ours, and then checks that class's module against its allowlist.
    allow_deserialization_module("compaction.haystack")
    replaced = []
    for package, module, name in SUBSTITUTED:
        cls = getattr(ours, name)
        defining = importlib.import_module(f"{package}.{module}")
        setattr(defining, name, cls)
        setattr(importlib.import_module(package), name, cls)
        replaced.append(f"{package}.{module}.{name}")
    return replaced


def pytest_configure(config):
    if os.environ.get("COMPACTION_SUBSTITUTE", "1") != "0":
        config._compaction_substituted = substitute()


def pytest_report_header(config):
    replaced = getattr(config, "_compaction_substituted", None)
    if replaced is None:
        return "compaction: Haystack's own classes (baseline)"
    return "compaction: substituted " + ", ".join(replaced)
