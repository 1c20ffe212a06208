"""`compaction.haystack` against Haystack 3.4.1 on one conversation: count and prune, side by side.

Run with the package installed (release build, `pip install ./crates/compaction-python[haystack]`):

    TIKTOKEN_CACHE_DIR=<tiktoken cache> python crates/compaction-python/bench/compare.py \
        target/transcripts/transcript-50MB-seed1-v2.json

The file is Haystack JSON (`[m.to_dict() for m in messages]`); it is loaded into Haystack's own
`ChatMessage` objects once, and each timing starts from those objects and ends with the result
in Python (for `compact`, Haystack `ChatMessage` objects): conversion in and out included. Each
row is the best of `--runs` runs; ours and Haystack's results are checked equal.
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

from compaction.haystack import ApproximateTokenCounter, TiktokenCounter, ToolResultPruningCompactor

warnings.filterwarnings("ignore")


def best(runs: int, work):
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transcript")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--counters", default="approximate,tiktoken")
    args = parser.parse_args()

    with open(args.transcript, encoding="utf-8") as f:
        messages = [ChatMessage.from_dict(d) for d in json.load(f)]
    print(f"{args.transcript}: {len(messages)} messages; best of {args.runs} runs, seconds")
    counters = {
        "approximate": (HaystackApproximate(), ApproximateTokenCounter()),
        "tiktoken": (HaystackTiktoken(), TiktokenCounter()),
    }
    rows = []
    for name in args.counters.split(","):
        theirs, ours = counters[name]
        if hasattr(theirs, "warm_up"):
            theirs.warm_up()
            ours.warm_up()
        t_theirs, n_theirs = best(args.runs, lambda: theirs.count(messages))
        t_ours, n_ours = best(args.runs, lambda: ours.count(messages))
        assert n_theirs == n_ours, (name, n_theirs, n_ours)
        rows.append((f"count, {name}", t_theirs, t_ours))
        # A target that forces pruning: half the conversation.
        target = n_theirs // 2
        t_theirs, out_theirs = best(args.runs, lambda: HaystackPruning().compact(messages, target, theirs))
        t_ours, out_ours = best(args.runs, lambda: ToolResultPruningCompactor().compact(messages, target, ours))
        assert out_theirs is not None and out_ours is not None, name
        assert [m.to_dict() for m in out_theirs] == [m.to_dict() for m in out_ours], name
        changed = sum(1 for a, b in zip(messages, out_ours) if a is not b)
        rows.append((f"prune to {target} ({changed} changed), {name}", t_theirs, t_ours))

    width = max(len(r[0]) for r in rows)
    print(f"{'operation':<{width}}  {'Haystack':>9}  {'ours':>9}  {'speed-up':>8}")
    for label, t_theirs, t_ours in rows:
        print(f"{label:<{width}}  {t_theirs:>9.3f}  {t_ours:>9.3f}  {t_theirs / t_ours:>7.1f}×")


if __name__ == "__main__":
    main()
