"""`compaction.batch.compact` against `compaction prune` and `compaction count` on the same rows.

The rows are the repository's example transcripts, one file a row; `batch_cases.py` says which
configurations, and `data/batch_expected.json` what the CLI made of each (regenerated from the
binary, and compared with it when `COMPACTION_BIN` names it).
"""

import hashlib
import json
import os

import pyarrow as pa
import pytest

from batch_cases import BENCH, CONFIGS, FILES, ROOT, bench_from, expected_from, load_bench_expected, load_expected
from compaction.batch import GRID_SETTINGS, SETTINGS, bench, compact


def table_of(files=FILES, kind=pa.string()):
    rows = [(ROOT / path).read_bytes() for path in files]
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        rows = [row.decode() for row in rows]
    return pa.table({"id": list(range(len(files))), "messages": pa.array(rows, type=kind)})


def compact_with(table, config):
    return compact(table, **config)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_each_row_is_what_the_cli_makes_of_it(name):
    expected = load_expected()[name]
    out = compact_with(table_of(), CONFIGS[name])
    assert out.column_names == ["id", "messages", "tokens_before", "tokens_after", "reached", "error"]
    for path, row in zip(FILES, out.to_pylist()):
        want = expected[path]
        if "error" in want:
            assert row["error"] and row["error"].startswith(f"row {row['id']}: "), (path, row["error"])
            assert row["messages"] == (ROOT / path).read_text(), "a failed row keeps its value"
            assert row["tokens_before"] is None and row["reached"] is None
            continue
        assert row["error"] is None, (path, row["error"])
        got = {
            "sha256": hashlib.sha256(row["messages"].encode()).hexdigest(),
            "tokens_before": row["tokens_before"],
            "tokens_after": row["tokens_after"],
            "reached": row["reached"],
        }
        assert got == {key: want[key] for key in got}, path
        if "to" not in CONFIGS[name]:
            # Converted, a file's tools are not in what is written, so `count` cannot see them.
            assert row["tokens_after"] == want["count"], path


@pytest.mark.skipif(not os.environ.get("COMPACTION_BIN"), reason="COMPACTION_BIN names no compaction binary")
def test_the_expected_rows_are_what_the_cli_says_today():
    assert expected_from(os.environ["COMPACTION_BIN"]) == load_expected()
    assert bench_from(os.environ["COMPACTION_BIN"]) == load_bench_expected()


def test_bench_gives_the_figures_compaction_bench_gives():
    table = pa.table({"path": FILES, "messages": [(ROOT / path).read_text() for path in FILES]})
    out = bench(table, **BENCH)
    # Every file with `none` and each strategy crossed with the settings it takes.
    assert out.num_rows == len(FILES) * (1 + 4 + 4 + 4)
    assert out.column_names[:3] == ["path", "configuration", "format"]
    got = {f"{row.pop('path')}\t{row['configuration']}": row for row in out.to_pylist()}
    assert got == load_bench_expected()
    assert [row["configuration"] for row in out.to_pylist()[:3]] == [
        "none",
        "tool-result-pruning min_tokens=0 cache_aware=false",
        "tool-result-pruning min_tokens=0 cache_aware=true",
    ]


def test_bench_gives_a_bad_row_one_row_with_its_error():
    good = (ROOT / FILES[0]).read_text()
    out = bench(pa.table({"n": [1, 2, 3], "messages": [good, "{", None]}), context_window=1000).to_pylist()
    assert [row["n"] for row in out] == [1, 1, 2, 3]
    assert [row["configuration"] for row in out] == ["none", "tool-result-pruning", None, None]
    assert out[2]["error"].startswith("row 1: ") and out[3]["error"] == "row 2: no conversation (null)"
    assert out[0]["error"] is None and out[0]["calls"] > 0 and out[2]["calls"] is None


def test_bench_settings_are_checked_before_any_row_is_read():
    table = table_of()
    with pytest.raises(ValueError, match="unknown setting target_tokens"):
        bench(table, context_window=1000, target_tokens=5)
    with pytest.raises(ValueError, match="unknown grid setting placeholder"):
        bench(table, context_window=1000, grid={"placeholder": ["x"]})
    with pytest.raises(ValueError, match="not available in a batch"):
        bench(table, context_window=1000, strategy="summarization")
    with pytest.raises(ValueError, match="cache"):
        bench(table, context_window=1000, cache="redis")
    with pytest.raises(ValueError, match="needs a list"):
        bench(table, context_window=1000, grid={"min_tokens": 5})
    assert "compact_at" in GRID_SETTINGS


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()])
def test_text_columns_keep_their_type(kind):
    out = compact(table_of(kind=kind), target_tokens=1000, min_tokens=50)
    assert out.schema.field("messages").type == kind
    text = compact(table_of(), target_tokens=1000, min_tokens=50)
    as_text = [v if isinstance(v, str) or v is None else v.decode() for v in out.column("messages").to_pylist()]
    assert as_text == text.column("messages").to_pylist()
    assert out.column("tokens_after").to_pylist() == text.column("tokens_after").to_pylist()


def test_a_bad_row_gets_its_error_and_the_others_go_on():
    good = (ROOT / FILES[0]).read_text()
    table = pa.table({"messages": ["{not json", None, good, "[]", '{"messages": 3}', good]})
    out = compact(table, target_tokens=10).to_pylist()
    for index in (0, 1, 3, 4):
        assert out[index]["error"].startswith(f"row {index}: "), out[index]
        assert out[index]["tokens_before"] is None and out[index]["tokens_after"] is None
    assert out[0]["messages"] == "{not json" and out[1]["messages"] is None
    assert "null" in out[1]["error"]
    for index in (2, 5):
        assert out[index]["error"] is None and out[index]["tokens_before"] > 0
    assert out[2] == out[5]


def test_a_record_batch_and_a_chunked_table_give_the_same_table():
    table = table_of()
    whole = compact(table, target_tokens=1000, min_tokens=50)
    batch = compact(table.to_batches()[0], target_tokens=1000, min_tokens=50)
    chunked = pa.concat_tables([table.slice(0, 3), table.slice(3)])
    assert chunked.column("messages").num_chunks == 2
    assert batch.equals(whole)
    assert compact(chunked, target_tokens=1000, min_tokens=50).equals(whole)


def test_each_chunk_is_read_in_place_with_its_bad_rows_and_nulls():
    good = (ROOT / FILES[0]).read_text()
    rows = [good, None, "{not json", good, None, good, "[]"]
    table = pa.table({"messages": rows})
    whole = compact(table, target_tokens=10)
    # Three chunks, one empty, each with a null or a bad row; and bench's rows alike.
    chunked = pa.concat_tables([table.slice(0, 3), table.slice(3, 0), table.slice(3)])
    assert chunked.column("messages").num_chunks == 3
    assert compact(chunked, target_tokens=10).equals(whole)
    errors = whole.column("error").to_pylist()
    assert [error is None for error in errors] == [True, False, False, True, False, True, False]
    assert whole.column("messages").to_pylist()[1:3] == rows[1:3], "a failed row keeps its value"
    assert bench(chunked, context_window=3000).equals(bench(table, context_window=3000))


def test_slices_and_empty_tables_are_read_in_place():
    table = table_of()
    whole = compact(table, target_tokens=1000, min_tokens=50)
    # A slice keeps its parent's buffers, with an offset into them (as Ray's batches do).
    for start, length in ((0, 1), (2, 4), (len(FILES) - 1, 1)):
        part = compact(table.slice(start, length), target_tokens=1000, min_tokens=50)
        assert part.equals(whole.slice(start, length))
        shown = bench(table.slice(start, length), context_window=3000)
        assert shown.column("path" if "path" in shown.column_names else "id").to_pylist()[0] == start
    empty = compact(table.slice(0, 0), target_tokens=1000)
    assert empty.num_rows == 0 and empty.schema == whole.schema
    assert bench(table.slice(0, 0), context_window=1000).num_rows == 0


def test_columns_of_the_same_names_are_replaced_and_the_rest_kept():
    first = compact(table_of(), target_tokens=1000, min_tokens=50)
    again = compact(first, target_tokens=1000, min_tokens=50)
    assert again.column_names == first.column_names
    assert again.column("messages").equals(first.column("messages"))
    # Compacted already: nothing is left to take out.
    assert again.column("tokens_before").equals(first.column("tokens_after"))


def openai_messages(steps, size):
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Look around."}]
    for step in range(steps):
        call = {"id": f"call_{step}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{step}", "content": f"file{step} " * size})
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def test_a_list_of_structs_column_is_read_as_the_json_it_spells():
    conversations = [openai_messages(3, 400), openai_messages(1, 10), openai_messages(5, 200)]
    structs = pa.table({"messages": pa.array(conversations)})
    assert pa.types.is_struct(structs.schema.field("messages").type.value_type)
    out = compact(structs, target_tokens=600)
    assert out.schema.field("messages").type == structs.schema.field("messages").type
    text = compact(pa.table({"messages": [json.dumps(c) for c in conversations]}), target_tokens=600)
    assert out.column("tokens_after").equals(text.column("tokens_after"))
    assert out.column("tokens_before").to_pylist()[0] > out.column("tokens_after").to_pylist()[0]
    for got, written in zip(out.column("messages").to_pylist(), text.column("messages").to_pylist()):
        # Absent fields are null in a struct: the same messages otherwise.
        strip = [{k: v for k, v in m.items() if v is not None} for m in got]
        assert strip == [{k: v for k, v in m.items() if v is not None} for m in json.loads(written)]
    pruned = out.column("messages").to_pylist()[0]
    assert "file0" not in pruned[3]["content"] and "file2" in pruned[7]["content"]


def test_settings_are_checked_before_any_row_is_read():
    table = table_of()
    with pytest.raises(ValueError, match="unknown setting min_token;"):
        compact(table, target_tokens=100, min_token=5)
    with pytest.raises(ValueError, match="not both"):
        compact(table, target_tokens=100, context_window=1000)
    with pytest.raises(ValueError, match="context_window"):
        compact(table, target_tokens=100, compact_at=0.5)
    with pytest.raises(ValueError, match="not available in a batch"):
        compact(table, strategy="summarization", target_tokens=100)
    with pytest.raises(ValueError, match="unknown strategy"):
        compact(table, strategy="prune", target_tokens=100)
    with pytest.raises(ValueError, match="sliding-window setting"):
        compact(table, target_tokens=100, omission_note="x")
    with pytest.raises(ValueError, match="counter"):
        compact(table, target_tokens=100, counter="words")
    with pytest.raises(ValueError, match="min_keep_steps"):
        compact(table, target_tokens=100, min_keep_steps=0)
    with pytest.raises(KeyError, match="no column 'conversation'"):
        compact(table, "conversation", target_tokens=100)
    with pytest.raises(TypeError, match="expected JSON text"):
        compact(table, "id", target_tokens=100)
    assert "exclude_tools" in SETTINGS and "compact_at" in SETTINGS


def test_list_settings_take_a_list_or_the_clis_comma_separated_text():
    table = table_of()
    listed = compact(table, target_tokens=500, min_tokens=0, exclude_tools=["bash", "read_file"])
    text = compact(table, target_tokens=500, min_tokens=0, exclude_tools="bash, read_file")
    assert listed.equals(text)
    assert not listed.equals(compact(table, target_tokens=500, min_tokens=0))


def test_reading_settings_and_tools_reach_every_row():
    tau = next(path for path in FILES if "tau-bench" in path)
    table = pa.table({"messages": [(ROOT / tau).read_text()]})
    first = compact(table, target_tokens=10**9).to_pylist()[0]
    second = compact(table, target_tokens=10**9, conversation=1).to_pylist()[0]
    assert first["tokens_before"] != second["tokens_before"]
    wrong = compact(table, target_tokens=10**9, format="claude-code").to_pylist()[0]
    assert wrong["error"].startswith("row 0: ") and wrong["tokens_before"] is None
    tools = [{"name": "search", "description": "Search the web.", "parameters": {"type": "object"}}]
    with_tools = compact(table, target_tokens=10**9, tools=tools).to_pylist()[0]
    assert with_tools["tokens_before"] > 0 and with_tools["tokens_before"] != first["tokens_before"]
    with pytest.raises(ValueError, match="format"):
        compact(table, target_tokens=10, format="excel")
