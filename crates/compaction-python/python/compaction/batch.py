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

`bench` replays each row with a grid of configurations as `compaction bench` does, and gives a
row per trajectory and configuration with its figures in tokens and in cost.

On Ray Data, `dataset.map_batches(lambda b: compact(b, target_tokens=30_000),
batch_format="pyarrow")`; on Spark, `df.mapInArrow(lambda batches: (compact(b, ...).to_batches()
... for b in batches), schema)`: see the README's "From Python".
"""

from __future__ import annotations

import itertools
import json

import pyarrow as pa
import pyarrow.compute as pc

from compaction import _native

__all__ = ["compact", "compact_batches", "bench", "SETTINGS", "BENCH_SETTINGS", "GRID_SETTINGS"]

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
        binary = values.cast(pa.large_binary())
        rows = _chunk_buffers(binary)
    offsets, data, before, after, reached, errors = _native.batch_compact(
        rows, strategy, target_tokens, context_window, counter, json.dumps(given)
    )
    written = pa.Array.from_buffers(pa.large_binary(), len(errors), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    for index, error in unreadable.items():
        errors[index] = error
    if structs:
        outputs = [None if error else output for output, error in zip(written.to_pylist(), errors)]
        compacted, unfit = _struct_column(values.type, originals, outputs)
        for index, error in unfit.items():
            before[index] = after[index] = reached[index] = None
            errors[index] = error
    elif all(error is None for error in errors):
        compacted = written.cast(values.type)
    else:
        # A failed row keeps its value.
        went = pa.array([error is None for error in errors], type=pa.bool_())
        compacted = pc.if_else(went, written, binary.combine_chunks()).cast(values.type)
    at = table.column_names.index(column)
    table = table.set_column(at, table.schema.field(at).with_type(compacted.type), compacted)
    for name in ADDED:
        if name in table.column_names:
            table = table.drop_columns([name])
    table = table.append_column("tokens_before", pa.array(before, type=pa.int64()))
    table = table.append_column("tokens_after", pa.array(after, type=pa.int64()))
    table = table.append_column("reached", pa.array(reached, type=pa.bool_()))
    return table.append_column("error", pa.array(errors, type=pa.string()))


#: The settings `bench` takes as keywords: `compaction bench`'s options with underscores.
BENCH_SETTINGS = (
    "format",
    "full_history",
    "compact_at",
    "compact_to",
    "min_keep_steps",
    "min_tokens",
    "placeholder",
    "skip_meta_keys",
    "exclude_tools",
    "clear_at_least",
    "clear_tool_inputs",
    "keep_tool_results",
    "preview_ends",
    # A price table (the JSON text `--prices` reads), the model to price by where a log names
    # none, and the prompt cache (anthropic, openai or none).
    "prices",
    "price_model",
    "cache",
)

_PRUNING, _WINDOW, _MASKING = "tool-result-pruning", "sliding-window", "observation-masking"

#: The settings a `bench` grid crosses (`--set KEY=V1,V2`), with the strategies each applies to
#: (`None`: all).
GRID_SETTINGS = {
    "min_tokens": (_PRUNING,),
    "clear_at_least": (_PRUNING,),
    "keep_tool_results": (_PRUNING,),
    "min_keep_steps": (_PRUNING, _WINDOW),
    "keep_observations": (_MASKING,),
    "polling": (_MASKING,),
    "compact_at": None,
    "compact_to": None,
    "cache_aware": None,
    "expected_calls": None,
}

#: The figures `bench` gives for each row and configuration, as `compaction bench --json` does.
_FIGURES = pa.schema(
    [
        ("configuration", pa.string()),
        ("format", pa.string()),
        ("calls", pa.int64()),
        ("peak_tokens", pa.int64()),
        ("over_window", pa.int64()),
        ("tokens_sent", pa.int64()),
        ("uncached_tokens", pa.int64()),
        ("cache_read_tokens", pa.int64()),
        ("cache_write_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cost", pa.float64()),
        ("recorded_cost", pa.float64()),
        ("compactions", pa.int64()),
        ("refetches", pa.int64()),
        ("refetch_tokens", pa.int64()),
        ("error", pa.string()),
    ]
)


def bench(
    table,
    column: str = "messages",
    *,
    context_window: int,
    strategy="tool-result-pruning",
    grid: dict | None = None,
    counter: str = "approximate",
    **settings,
) -> pa.Table:
    """Replays each row's conversation with a grid of configurations, as `compaction bench` does.

    `strategy` is a comma list (or a list) of `tool-result-pruning`, `sliding-window`,
    `observation-masking` or `chain:A+B+...`; `grid` maps settings of `GRID_SETTINGS` to the
    values to cross them with (`--set KEY=V1,V2`), each strategy crossed with those it takes.
    The other settings are those of `BENCH_SETTINGS`, for every configuration.

    Returns a row per input row and configuration (`none`, the calls as recorded, first): the
    input's other columns, then `configuration` (named as `bench` names it), `format` and the
    figures `bench --json` gives: the model calls, the peak context, the calls over the window,
    the tokens sent, the uncached, cache-read, cache-write and output tokens, the cost with the
    price table's prompt cache (null when the model is unknown: `price_model`), the cost the log
    records, the compactions and the refetches. A row that cannot be read gives one row with its
    `error`.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    elif not isinstance(table, pa.Table):
        raise TypeError(f"bench takes a pyarrow Table or RecordBatch, not {type(table).__name__}")
    unknown = sorted(set(settings) - set(BENCH_SETTINGS))
    if unknown:
        raise ValueError(
            f"compaction.batch.bench: unknown setting{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}; expected {', '.join(BENCH_SETTINGS)}"
        )
    grid = dict(grid or {})
    unknown = sorted(set(grid) - set(GRID_SETTINGS))
    if unknown:
        raise ValueError(
            f"compaction.batch.bench: unknown grid setting{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}; expected {', '.join(GRID_SETTINGS)}"
        )
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__") or not list(values):
            raise ValueError(f"compaction.batch.bench: grid setting {key} needs a list of values")
    given = {name: value for name, value in settings.items() if value is not None}
    read = {name: given.pop(name) for name in ("format", "full_history") if name in given}
    prices = {name: given.pop(name) for name in ("prices", "price_model", "cache") if name in given}
    configurations = _configurations(strategy, grid, given)
    rows = _rows(table, column)
    figures = _native.batch_bench(
        rows, context_window, json.dumps(configurations), counter, json.dumps(read), json.dumps(prices)
    )
    indices = pa.array([entry.pop("row") for entry in figures], type=pa.int64())
    others = table.drop_columns([column])
    if others.num_columns:
        out = others.take(indices)
    else:
        # `take` of a table without columns gives no rows: a table of as many rows as figures.
        out = pa.table({"row": indices}).drop_columns(["row"])
    for field in _FIGURES:
        out = out.append_column(field, pa.array([entry[field.name] for entry in figures], type=field.type))
    return out


def _configurations(strategy, grid: dict, base: dict) -> list:
    """The grid's configurations as `compaction bench` names and builds them, `none` left out."""
    names = strategy.split(",") if isinstance(strategy, str) else list(strategy)
    configurations = []
    for name in (n.strip() for n in names):
        if not name or name == "none":
            continue
        spelled = name.replace("+", ",")
        stages = spelled[len("chain:"):].split(",") if spelled.startswith("chain:") else [spelled]
        stages = [stage.strip() for stage in stages]
        taken = [
            (key, values)
            for key, values in grid.items()
            if GRID_SETTINGS[key] is None or any(stage in GRID_SETTINGS[key] for stage in stages)
        ]
        label = spelled.replace(",", "+")
        for combination in itertools.product(*[[(key, value) for value in values] for key, values in taken]):
            full = label + "".join(f" {key}={_spelled(value)}" for key, value in combination)
            chosen = dict(base)
            cache_aware, expected_calls = False, None
            for key, value in combination:
                if key == "cache_aware":
                    cache_aware = value in (True, "true")
                elif key == "expected_calls":
                    expected_calls = int(value)
                else:
                    chosen[key] = value
            configurations.append(
                {
                    "name": full,
                    "strategy": spelled,
                    "settings": chosen,
                    "cache_aware": cache_aware,
                    "expected_calls": expected_calls,
                }
            )
    return configurations


def _spelled(value) -> str:
    """A grid value as `--set` spells it in a configuration's name."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _rows(table: pa.Table, column: str):
    """The rows of `column` for the native side: a text column's buffers (`_chunk_buffers`), or the
    JSON text of each list of structs (`None` for a null row or one JSON cannot spell)."""
    if column not in table.column_names:
        raise KeyError(f"compaction.batch: no column {column!r}; the table has {table.column_names}")
    values = table.column(column)
    structs = _is_list_of_structs(values.type)
    if not structs and not _is_text(values.type):
        raise TypeError(
            f"compaction.batch: column {column!r} is {values.type}: expected JSON text "
            "(string or binary) or a list of structs"
        )
    if not structs:
        return _chunk_buffers(values.cast(pa.large_binary()))
    rows = []
    for value in values.to_pylist():
        try:
            rows.append(None if value is None else json.dumps(value, ensure_ascii=False))
        except (TypeError, ValueError):
            rows.append(None)
    return rows


def _chunk_buffers(binary: pa.ChunkedArray) -> tuple:
    """A `large_binary` column as the native side reads it: a tuple of its chunks' `_buffers`,
    each chunk's data copied once (not combined into one array first, which is another copy)."""
    return tuple(_buffers(chunk) for chunk in binary.chunks)


def _buffers(binary: pa.Array) -> tuple:
    """A `large_binary` array as the native side reads it in place: its rows' `int64` offsets
    from 0 and the data they span (copied once), and whether each row is not null (`None` when
    none is)."""
    count = len(binary)
    if count == 0:
        return bytes(8), b"", None
    _, offsets, data = binary.buffers()
    positions = pa.Array.from_buffers(pa.int64(), count + 1, [None, offsets], offset=binary.offset)
    first, last = positions[0].as_py(), positions[count].as_py()
    starts = pc.subtract(positions, pa.scalar(first, pa.int64()))
    spanned = data.slice(first, last - first).to_pybytes() if last > first else b""
    valid = None if binary.null_count == 0 else binary.is_valid().to_pylist()
    return starts.buffers()[1].slice(0, (count + 1) * 8).to_pybytes(), spanned, valid


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
