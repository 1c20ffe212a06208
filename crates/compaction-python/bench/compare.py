"""`compaction.haystack` against Haystack 3.4.1 on one conversation: count and prune, side by side.

Run with the package installed (release build, `pip install ./crates/compaction-python[haystack]`);
`cargo xtask bench-vs-reference --only python` runs it (section (l) of BENCHMARKS.md):

    TIKTOKEN_CACHE_DIR=<tiktoken cache> python crates/compaction-python/bench/compare.py \
        target/transcripts/transcript-50MB-seed1-v2.json

The file is Haystack JSON (`[m.to_dict() for m in messages]`); it is loaded into Haystack's own
`ChatMessage` objects once, and each timing starts from those objects and ends with the result
in Python (for `compact`, Haystack `ChatMessage` objects): conversion in and out included. Each
row is the best of `--runs` runs, ours and Haystack's alternating (more, up to 15, for a row whose
runs took under two seconds in all); their results are checked equal. `conversion in` is what reading the objects into Rust costs on its own (the part of every
row of ours that is not the count or the compaction). `--json` prints the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction import ToolResultPruningCompactor as HaystackPruning
from haystack.token_counters import ApproximateTokenCounter as HaystackApproximate
from haystack.token_counters import TiktokenCounter as HaystackTiktoken

from compaction import _native
from compaction.haystack import ApproximateTokenCounter, TiktokenCounter, ToolResultPruningCompactor
from compaction.haystack._common import CLASSES, message_json

warnings.filterwarnings("ignore")


def timed(work):
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


# A row whose runs took under this many seconds in all gets more of them, up to MAX_RUNS: the
# best of three runs of a few milliseconds each is mostly the machine's noise.
ENOUGH_SECONDS = 2.0
MAX_RUNS = 15


def more_runs(runs: int, taken: list, seconds: float) -> bool:
    """Whether to time again: fewer than `runs` so far, or all so far took under `seconds`."""
    return len(taken) < runs or (sum(taken) < seconds and len(taken) < MAX_RUNS)


def side_by_side(runs: int, theirs, ours):
    """The best time of each, their runs alternating (the machine's load falls on both alike):
    `runs` of each, and more while all of them together took under `ENOUGH_SECONDS`."""
    t_theirs, t_ours, r_theirs, r_ours = [], [], None, None
    while more_runs(runs, t_ours, ENOUGH_SECONDS - sum(t_theirs)):
        seconds, r_theirs = timed(theirs)
        t_theirs.append(seconds)
        seconds, r_ours = timed(ours)
        t_ours.append(seconds)
    return min(t_theirs), r_theirs, min(t_ours), r_ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transcript")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--counters", default="approximate,tiktoken")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()

    with open(args.transcript, encoding="utf-8") as f:
        messages = [ChatMessage.from_dict(d) for d in json.load(f)]
    counters = {
        "approximate": (HaystackApproximate(), ApproximateTokenCounter()),
        "tiktoken": (HaystackTiktoken(), TiktokenCounter()),
    }
    # As many runs as the rows get (see side_by_side), so that its best is comparable to theirs.
    conversions = []
    while more_runs(args.runs, conversions, ENOUGH_SECONDS / 2):
        conversions.append(timed(lambda: _native.read_messages(messages, CLASSES, message_json))[0])
    conversion = min(conversions)
    rows = []
    for name in args.counters.split(","):
        theirs, ours = counters[name]
        if hasattr(theirs, "warm_up"):
            theirs.warm_up()
            ours.warm_up()
        t_theirs, n_theirs, t_ours, n_ours = side_by_side(
            args.runs, lambda: theirs.count(messages), lambda: ours.count(messages)
        )
        assert n_theirs == n_ours, (name, n_theirs, n_ours)
        rows.append({"operation": "count", "counter": name, "haystack": t_theirs, "ours": t_ours, "tokens": n_ours})
        # A target that forces pruning: half the conversation.
        target = n_theirs // 2
        t_theirs, out_theirs, t_ours, out_ours = side_by_side(
            args.runs,
            lambda: HaystackPruning().compact(messages, target, theirs),
            lambda: ToolResultPruningCompactor().compact(messages, target, ours),
        )
        assert out_theirs is not None and out_ours is not None, name
        assert [m.to_dict() for m in out_theirs] == [m.to_dict() for m in out_ours], name
        changed = sum(1 for a, b in zip(messages, out_ours) if a is not b)
        rows.append(
            {
                "operation": "prune",
                "counter": name,
                "haystack": t_theirs,
                "ours": t_ours,
                "target": target,
                "changed": changed,
            }
        )
    summary = {
        "transcript": args.transcript,
        "messages": len(messages),
        "runs": args.runs,
        "conversion_in": conversion,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(summary))
        return
    print(f"{args.transcript}: {len(messages)} messages; best of {args.runs} runs, seconds")
    print(f"conversion in (reading the objects into Rust, alone): {conversion:.3f}")
    labels = [
        f"{r['operation']}, {r['counter']}" + (f" (to {r['target']}, {r['changed']} changed)" if "target" in r else "")
        for r in rows
    ]
    width = max(len(label) for label in labels)
    print(f"{'operation':<{width}}  {'Haystack':>9}  {'ours':>9}  {'speed-up':>8}")
    for label, r in zip(labels, rows):
        print(f"{label:<{width}}  {r['haystack']:>9.3f}  {r['ours']:>9.3f}  {r['haystack'] / r['ours']:>7.1f}×")


if __name__ == "__main__":
    main()
