"""`compaction.batch.compact` over a Parquet dataset of trajectories: throughput, and where it goes.

Run with the package installed (release build, with pyarrow); `cargo xtask bench-vs-reference
--only python` runs it (section (l) of BENCHMARKS.md):

    python crates/compaction-python/bench/batch_throughput.py \
        target/transcripts/dataset-1GB-seed1-v2.1.jsonl target/transcripts/dataset-1GB-seed1-v2.1.parquet

The Parquet file (one `messages` string column, a trajectory a row: the lines of the JSON Lines
dataset `cargo xtask gen-dataset` writes) is written from the dataset when it is missing. Each
run reads the file with `pyarrow.parquet.read_table`, then compacts the table with
`compact(table, "messages", target_tokens=..., counter=...)`; the compaction is timed end to end
(Arrow column in, Arrow table out) and split into the native call (each row read, compacted and
written back in Rust on every core, the GIL released) and the rest, which is conversion: the
column's buffers handed over and the result's columns built, in Python and pyarrow. The run with
the best end-to-end time is reported. `--json` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq

import compaction.batch as batch

# Rows per Parquet row group: about 30 MB of a 1 GB dataset's ~2,000 trajectories each.
ROW_GROUP = 64


def write_parquet(jsonl: str, parquet: str) -> None:
    """The dataset's lines as a one-column Parquet file, written beside and renamed when whole."""
    schema = pa.schema([("messages", pa.string())])
    partial = parquet + ".partial"
    with open(jsonl, "rb") as lines, pq.ParquetWriter(partial, schema) as writer:
        rows = []
        for line in lines:
            line = line.rstrip(b"\n")
            if line:
                rows.append(line.decode("utf-8"))
            if len(rows) == ROW_GROUP:
                writer.write_table(pa.table({"messages": pa.array(rows, pa.string())}, schema=schema))
                rows = []
        if rows:
            writer.write_table(pa.table({"messages": pa.array(rows, pa.string())}, schema=schema))
    os.replace(partial, parquet)


class TimedNative:
    """`compaction._native` with its `batch_compact` calls timed."""

    def __init__(self, native):
        self.native = native
        self.seconds = 0.0

    def __getattr__(self, name):
        return getattr(self.native, name)

    def batch_compact(self, *args):
        start = time.perf_counter()
        try:
            return self.native.batch_compact(*args)
        finally:
            self.seconds += time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jsonl")
    parser.add_argument("parquet")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--target-tokens", type=int, default=30_000)
    parser.add_argument("--counter", default="approximate")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    if not os.path.exists(args.parquet):
        write_parquet(args.jsonl, args.parquet)
    timed = TimedNative(batch._native)
    batch._native = timed
    best = None
    for _ in range(args.runs):
        start = time.perf_counter()
        table = pq.read_table(args.parquet)
        read = time.perf_counter() - start
        timed.seconds = 0.0
        start = time.perf_counter()
        out = batch.compact(table, "messages", target_tokens=args.target_tokens, counter=args.counter)
        seconds = time.perf_counter() - start
        run = {
            "read": read,
            "compact": seconds,
            "native": timed.seconds,
            "conversion": seconds - timed.seconds,
        }
        if best is None or run["compact"] < best["compact"]:
            best = run
            went_through = out.column("error").null_count
            figures = {
                "rows": out.num_rows,
                "failed": out.num_rows - went_through,
                # The column's bytes (offsets included): the dataset's lines, as Arrow holds them.
                "bytes": table.column("messages").nbytes,
                "bytes_out": out.column("messages").nbytes,
                "tokens_before": pa.compute.sum(out.column("tokens_before")).as_py(),
                "tokens_after": pa.compute.sum(out.column("tokens_after")).as_py(),
                "reached": pa.compute.sum(out.column("reached").cast(pa.int64())).as_py(),
            }
        del table, out
    summary = {
        "parquet": args.parquet,
        "parquet_bytes": os.path.getsize(args.parquet),
        "runs": args.runs,
        "target_tokens": args.target_tokens,
        "counter": args.counter,
        "cores": os.cpu_count(),
        **figures,
        **best,
    }
    if args.json:
        print(json.dumps(summary))
        return
    mb = summary["bytes"] / 1e6
    print(
        f"{args.parquet}: {summary['rows']} rows, {mb:.0f} MB of conversations "
        f"({summary['parquet_bytes'] / 1e6:.0f} MB of Parquet); best of {args.runs} runs"
    )
    print(f"read_table {best['read']:.2f} s; compact {best['compact']:.2f} s ({mb / best['compact']:.0f} MB/s)")
    print(
        f"  native call {best['native']:.2f} s; conversion in Python and pyarrow {best['conversion']:.2f} s "
        f"({100 * best['conversion'] / best['compact']:.0f} %)"
    )


if __name__ == "__main__":
    main()
