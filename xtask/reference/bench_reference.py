#!/usr/bin/env python3
"""Reference side of `cargo xtask bench-vs-reference`: times Haystack 3.4.1 on one transcript.

Each mode prints one JSON object on standard output.

* `compact INPUT --counter C --target N [--output FILE]`: json load and `from_dict` outside the
  timer, then times only `ToolResultPruningCompactor().compact(messages, N, counter)`.
* `prune INPUT --counter C --target N --output FILE`: times json load, `from_dict`, compact,
  `to_dict` and json dump to FILE, as `compaction prune` does them; reports VmHWM too.
* `spawn -- CMD ...`: runs CMD and reports its wall time, peak RSS (`ru_maxrss` of the
  children) and the JSON it printed (`child`), for machines without `/usr/bin/time`.

C is `approximate` or `tiktoken:ENCODING`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings
import logging
from pathlib import Path

_HERE = Path(__file__).resolve().parent
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_HERE.parent.parent / ".venv-ref" / "tiktoken-cache"))
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)


def counter_for(spec: str):
    from haystack.token_counters import ApproximateTokenCounter, TiktokenCounter

    kind, _, argument = spec.partition(":")
    if kind == "approximate":
        return ApproximateTokenCounter(chars_per_token=float(argument)) if argument else ApproximateTokenCounter()
    if kind == "tiktoken":
        return TiktokenCounter(encoding=argument or "o200k_base")
    raise SystemExit(f"unknown counter {spec!r}")


def vm_hwm_kib() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def pruned_count(before, after) -> int:
    if after is None:
        return 0
    return sum(1 for a, b in zip(before, after) if a.to_dict() != b.to_dict())


def compact(args) -> dict:
    from haystack.dataclasses import ChatMessage
    from haystack.hooks.compaction import ToolResultPruningCompactor

    started = time.perf_counter()
    with open(args.input, encoding="utf-8") as f:
        data = json.load(f)
    messages = [ChatMessage.from_dict(d) for d in data]
    load_seconds = time.perf_counter() - started
    counter = counter_for(args.counter)
    compactor = ToolResultPruningCompactor()
    started = time.perf_counter()
    result = compactor.compact(messages, args.target, counter)
    seconds = time.perf_counter() - started
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(None if result is None else [m.to_dict() for m in result], f, ensure_ascii=False, separators=(",", ":"))
    return {
        "messages": len(messages),
        "load_seconds": load_seconds,
        "compact_seconds": seconds,
        "pruned": pruned_count(messages, result),
    }


def prune(args) -> dict:
    from haystack.dataclasses import ChatMessage
    from haystack.hooks.compaction import ToolResultPruningCompactor

    counter = counter_for(args.counter)
    compactor = ToolResultPruningCompactor()
    started = time.perf_counter()
    with open(args.input, encoding="utf-8") as f:
        data = json.load(f)
    messages = [ChatMessage.from_dict(d) for d in data]
    result = compactor.compact(messages, args.target, counter)
    written = [m.to_dict() for m in (messages if result is None else result)]
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(written, f, ensure_ascii=False)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "vm_hwm_kib": vm_hwm_kib()}


def spawn(command: list[str]) -> dict:
    started = time.perf_counter()
    completed = subprocess.run(command, stdout=subprocess.PIPE)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{command} failed with {completed.returncode}")
    try:
        child = json.loads(completed.stdout)
    except ValueError:
        child = None
    # ru_maxrss is in KiB on Linux.
    return {"seconds": seconds, "max_rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "child": child}


def hf_count(path: str, tokenizer_path: str, runs: int) -> dict:
    from tokenizers import Tokenizer

    with open(path, encoding="utf-8") as f:
        text = f.read()
    started = time.perf_counter()
    tokenizer = Tokenizer.from_file(tokenizer_path)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    load_seconds = time.perf_counter() - started
    seconds = []
    tokens = 0
    for _ in range(max(runs, 1)):
        started = time.perf_counter()
        tokens = len(tokenizer.encode(text, add_special_tokens=False).ids)
        seconds.append(time.perf_counter() - started)
    return {"bytes": len(text.encode("utf-8")), "tokens": tokens, "load_seconds": load_seconds, "seconds": seconds}


def write_forms(path: str, python: str, python_ascii: str) -> dict:
    from haystack.dataclasses import ChatMessage

    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    written = [ChatMessage.from_dict(d).to_dict() for d in data]
    with open(python, "w", encoding="utf-8") as f:
        json.dump(written, f, ensure_ascii=False)
    with open(python_ascii, "w", encoding="utf-8") as f:
        json.dump(written, f)
    return {"messages": len(written)}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "hf-count":
        parser = argparse.ArgumentParser()
        parser.add_argument("mode")
        parser.add_argument("text")
        parser.add_argument("--tokenizer", required=True)
        parser.add_argument("--runs", type=int, default=1)
        args = parser.parse_args()
        print(json.dumps(hf_count(args.text, args.tokenizer, args.runs)))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "write-forms":
        parser = argparse.ArgumentParser()
        parser.add_argument("mode")
        parser.add_argument("input")
        parser.add_argument("--python", required=True)
        parser.add_argument("--python-ascii", required=True)
        args = parser.parse_args()
        print(json.dumps(write_forms(args.input, args.python, args.python_ascii)))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "spawn":
        command = sys.argv[2:]
        if command[:1] == ["--"]:
            command = command[1:]
        print(json.dumps(spawn(command)))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["compact", "prune"])
    parser.add_argument("input")
    parser.add_argument("--counter", default="approximate")
    parser.add_argument("--target", type=int, required=True)
    parser.add_argument("--output")
    args = parser.parse_args()
    if args.mode == "prune" and not args.output:
        parser.error("prune needs --output")
    print(json.dumps(compact(args) if args.mode == "compact" else prune(args)))


if __name__ == "__main__":
    main()
