"""Compaction of Arrow datasets of conversations: a row per trajectory, every core, no Python per row.

`compact` takes a `pyarrow.Table` or `RecordBatch` whose column holds one conversation a row,
either as JSON text in any format `compaction` reads (Haystack, OpenAI, Anthropic, Claude Code,
Codex, SWE-agent, OpenHands, ...) or as an OpenAI-style list of structs (`role`, `content`,
`tool_calls`, ...), and compacts each row as `compaction prune` compacts a file holding it: the
same strategies, counters and settings (the CLI's options, with underscores), the same output in
the format read, the same `tokens_before`, `tokens_after` (what `compaction count` says of the
output) and `reached`. The rows are compacted in Rust on every core with the GIL released, so a
Ray or Spark worker calling it uses its whole machine. A row that cannot be read or compacted
keeps its value and gets its error in the `error` column; the others go on.

    import pyarrow.parquet as pq
    from compaction.batch import compact

    table = pq.read_table("trajectories.parquet")
    compacted = compact(table, "messages", target_tokens=30_000, min_tokens=100)

On Ray Data, `dataset.map_batches(lambda b: compact(b, target_tokens=30_000),
batch_format="pyarrow")`; on Spark, `df.mapInArrow(lambda batches: (compact(b, ...).to_batches()
... for b in batches), schema)`: see the README's "From Python".
"""

from __future__ import annotations

import json

import pyarrow as pa

from compaction import _native

__all__ = ["compact", "compact_batches", "SETTINGS"]

#: The settings `compact` takes as keywords: `compaction prune`'s options with underscores (the
#: strategies that ask a model or write files are not available in a batch).
SETTINGS = (
    # Reading each row: its format (detected when absent), which conversation of a row holding
    # several, everything a log holds instead of what the model saw at its last call.
    "format",
    "conversation",
    "full_history",
    # Writing it: another format than the one read (haystack, openai or anthropic).
    "to",
    # The tool schemas sent with each conversation (a list of {name, description, parameters});
    # each row's own when absent.
    "tools",
    # With context_window: the compaction hook's settings.
    "compact_at",
    "compact_to",
    "context_tokens",
    "cache_aware",
    "expected_calls",
    # Pruning (min_keep_steps also for the sliding window).
    "min_keep_steps",
    "min_tokens",
    "placeholder",
    "skip_meta_keys",
    "exclude_tools",
    "clear_at_least",
    "clear_tool_inputs",
    "keep_tool_results",
    "preview_ends",
    # The sliding window's note; observation masking's settings.
    "omission_note",
    "keep_observations",
    "polling",
)

#: The columns `compact` adds (an input column of the same name is replaced).
ADDED = ("tokens_before", "tokens_after", "reached", "error")


def compact(
    table,
    column: str = "messages",
    *,
    strategy: str = "tool-result-pruning",
    target_tokens: int | None = None,
    context_window: int | None = None,
    counter: str = "approximate",
    **settings,
) -> pa.Table:
    """Compacts each row's conversation in `column` of `table` (a Table or RecordBatch).

    `strategy` is `tool-result-pruning`, `sliding-window`, `observation-masking` or
    `chain:A,B,...` of those; the goal is `target_tokens=N` (the request's tokens, tools
    included) or `context_window=N` (the compaction hook: compact once a row reaches
    `compact_at` of the window, down to `compact_to`); `counter` a counter spec as the CLI takes
    it (`approximate`, `approximate:3.5`, `tiktoken`, `tiktoken:o200k_base`, ...). Other
    settings are those of `SETTINGS`; an unknown one, or settings that do not fit together, are
    a `ValueError` before any row is read.

    Returns the input's columns with `column` replaced by the compacted conversations (of the
    same Arrow type, in the format read; a failed row keeps its value), and `tokens_before`,
    `tokens_after` (int64), `reached` (bool; null with `context_window` when the hook did not
    trigger) and `error` (string, null when the row went through) added.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    elif not isinstance(table, pa.Table):
        raise TypeError(f"compact takes a pyarrow Table or RecordBatch, not {type(table).__name__}")
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise ValueError(
            f"compaction.batch.compact: unknown setting{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}; expected {', '.join(SETTINGS)}"
        )
    if column not in table.column_names:
        raise KeyError(f"compaction.batch.compact: no column {column!r}; the table has {table.column_names}")
    values = table.column(column)
    structs = _is_list_of_structs(values.type)
    if not structs and not _is_text(values.type):
        raise TypeError(
            f"compaction.batch.compact: column {column!r} is {values.type}: expected JSON text "
            "(string or binary) or a list of structs"
        )
    given = {name: value for name, value in settings.items() if value is not None}
    # Rows that cannot even be handed over (a list of structs with values JSON has no word for).
    unreadable = {}
    if structs:
        originals = values.to_pylist()
        rows = []
        for index, value in enumerate(originals):
            try:
                rows.append(None if value is None else json.dumps(value, ensure_ascii=False))
            except (TypeError, ValueError) as error:
                rows.append(None)
                unreadable[index] = f"row {index}: the list of structs is not JSON: {error}"
    else:
        rows = values.cast(pa.large_binary()).to_pylist()
    outputs, before, after, reached, errors = _native.batch_compact(
        rows, strategy, target_tokens, context_window, counter, json.dumps(given)
    )
    for index, error in unreadable.items():
        errors[index] = error
    if structs:
        compacted, unfit = _struct_column(values.type, originals, outputs)
        for index, error in unfit.items():
            before[index] = after[index] = reached[index] = None
            errors[index] = error
    else:
        kept = [out if out is not None else row for out, row in zip(outputs, rows)]
        compacted = pa.array(kept, type=pa.large_binary()).cast(values.type)
    at = table.column_names.index(column)
    table = table.set_column(at, table.schema.field(at).with_type(compacted.type), compacted)
    for name in ADDED:
        if name in table.column_names:
            table = table.drop_columns([name])
    table = table.append_column("tokens_before", pa.array(before, type=pa.int64()))
    table = table.append_column("tokens_after", pa.array(after, type=pa.int64()))
    table = table.append_column("reached", pa.array(reached, type=pa.bool_()))
    return table.append_column("error", pa.array(errors, type=pa.string()))


def _is_text(kind: pa.DataType) -> bool:
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def _is_list_of_structs(kind: pa.DataType) -> bool:
    return (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and pa.types.is_struct(kind.value_type)


def _struct_column(kind: pa.DataType, originals: list, outputs: list) -> tuple[pa.Array, dict]:
    """The compacted conversations as lists of structs of the input's type, and the errors of
    the rows whose output does not fit that type (a message with a field the type lacks), which
    keep their value."""
    values = []
    for original, output in zip(originals, outputs):
        if output is None:
            values.append(original)
            continue
        messages = json.loads(output)
        if isinstance(messages, dict):
            # Written back as a request ({"messages": [...]}) when read as one.
            messages = messages.get("messages", messages)
        values.append(messages)
    try:
        return pa.array(values, type=kind), {}
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, KeyError):
        pass
    fitted, unfit = [], {}
    for index, value in enumerate(values):
        try:
            pa.array([value], type=kind)
            fitted.append(value)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, KeyError) as error:
            fitted.append(originals[index])
            unfit[index] = f"row {index}: the compacted conversation does not fit the column's type {kind}: {error}"
    return pa.array(fitted, type=kind), unfit


def compact_batches(batches, column: str = "messages", **settings):
    """`compact` on each of `batches` (an iterator of RecordBatches), yielding the compacted
    RecordBatches: the function Spark's `DataFrame.mapInArrow` takes, with the settings bound
    (`functools.partial(compact_batches, target_tokens=30_000)`)."""
    for batch in batches:
        yield from compact(batch, column, **settings).to_batches()
