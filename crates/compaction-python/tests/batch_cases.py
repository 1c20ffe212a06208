"""The cases `compaction.batch.compact` is checked on against `compaction prune` and `count`.

The rows are the example transcripts of the repository (one file a row, every format the
readers know); the configurations are `compact`'s keywords, each turned into the CLI's options.
`data/batch_expected.json` holds what the CLI made of each row with each configuration: the
SHA-256 of the conversation it wrote, the report's `tokens_before`, `tokens_after` and
`target_reached`, and `count` of what it wrote; or that it refused the row.
`data/bench_expected.json` holds `compaction bench --json`'s figures for the grid `BENCH`.
Regenerate both with

    cargo build -p compaction-cli && python tests/batch_cases.py target/debug/compaction

(the test suite also compares with the binary itself when `COMPACTION_BIN` names it, as
`cargo xtask test` does).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXPECTED = Path(__file__).resolve().parent / "data" / "batch_expected.json"
BENCH_EXPECTED = Path(__file__).resolve().parent / "data" / "bench_expected.json"

#: Every example transcript, a row each, as paths from the repository's root.
FILES = sorted(
    str(path.relative_to(ROOT))
    for path in (ROOT / "examples" / "transcripts").rglob("*")
    if path.suffix in (".json", ".jsonl", ".traj")
)

#: Named configurations: `compact`'s keywords.
CONFIGS = {
    "pruning": {"target_tokens": 1000, "min_tokens": 50},
    "hook": {"context_window": 3000},
    "hook-settings": {"context_window": 6000, "compact_at": 0.5, "compact_to": 0.2, "min_keep_steps": 2},
    "tiktoken": {
        "target_tokens": 1500,
        "counter": "tiktoken",
        "exclude_tools": "bash",
        "clear_tool_inputs": True,
        "preview_ends": 20,
    },
    "window-chain": {"strategy": "chain:tool-result-pruning,sliding-window", "target_tokens": 800, "to": "haystack"},
    # Event logs cannot take a window's note back: their rows get the CLI's refusal as error.
    "window": {"strategy": "sliding-window", "target_tokens": 800, "omission_note": "[{num_removed} dropped]"},
    "masking": {"strategy": "observation-masking", "target_tokens": 500, "keep_observations": 2},
}


#: `bench`'s keywords for the grid checked against `compaction bench --json`.
BENCH = {
    "context_window": 3000,
    "strategy": "tool-result-pruning,chain:tool-result-pruning+sliding-window,observation-masking",
    "grid": {"min_tokens": [0, 200], "cache_aware": [False, True], "keep_observations": [1, 3]},
    "min_keep_steps": 1,
}


def bench_cli_options(config: dict) -> list[str]:
    """The `compaction bench` options `bench`'s keywords stand for."""
    options = []
    for name, value in config.items():
        if name == "grid":
            for key, values in value.items():
                spelled = ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
                options += ["--set", f"{key}={spelled}"]
        else:
            options += ["--" + name.replace("_", "-"), str(value)]
    return options


def bench_from(binary: str) -> dict:
    """`compaction bench --json`'s figures for the first conversation of each file, by file and
    configuration (`path<TAB>configuration`), with the file's format and error."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "bench.json"
        subprocess.run(
            [binary, "bench", *(str(ROOT / path) for path in FILES), "--json", str(report)]
            + bench_cli_options(BENCH),
            capture_output=True,
            check=True,
        )
        document = json.loads(report.read_text())
    figures = {}
    for transcript in document["transcripts"]:
        if transcript["conversation"] not in (0, None):
            continue
        path = str(Path(transcript["path"]).relative_to(ROOT))
        for result in transcript["results"]:
            figures[f"{path}\t{result['configuration']}"] = dict(
                result, format=transcript["format"], error=transcript["error"]
            )
    return figures


def cli_options(config: dict) -> list[str]:
    """The `compaction prune` options a configuration stands for."""
    options = []
    for name, value in config.items():
        option = "--" + name.replace("_", "-")
        if value is True:
            options.append(option)
        elif value is not False:
            options += [option, str(value)]
    return options


def run_cli(binary: str, path: str, config: dict) -> dict:
    """What `compaction prune` makes of the file at `path` with `config`, and `count` of it."""
    with tempfile.TemporaryDirectory() as folder:
        output, report = Path(folder) / "out", Path(folder) / "report.json"
        pruned = subprocess.run(
            [binary, "prune", path, "-q", "-o", str(output), "--report", str(report)] + cli_options(config),
            capture_output=True,
            # The path as given (relative to the repository), so an error names it the same in any clone.
            cwd=ROOT,
        )
        if pruned.returncode != 0:
            return {"error": pruned.stderr.decode().strip()}
        written = output.read_bytes()
        document = json.loads(report.read_text())
        counter = ["--counter", config["counter"]] if "counter" in config else []
        counted = subprocess.run(
            [binary, "count", str(output)] + counter, capture_output=True, check=True, text=True
        )
        return {
            "sha256": hashlib.sha256(written).hexdigest(),
            "tokens_before": document["tokens_before"],
            "tokens_after": document["tokens_after"],
            "reached": document["target_reached"],
            "count": int(counted.stdout),
        }


def expected_from(binary: str) -> dict:
    """Every case, by configuration and file, as the CLI at `binary` says."""
    return {name: {path: run_cli(binary, path, config) for path in FILES} for name, config in CONFIGS.items()}


def load_expected() -> dict:
    return json.loads(EXPECTED.read_text())


def load_bench_expected() -> dict:
    return json.loads(BENCH_EXPECTED.read_text())


if __name__ == "__main__":
    EXPECTED.parent.mkdir(exist_ok=True)
    EXPECTED.write_text(json.dumps(expected_from(sys.argv[1]), indent=1, sort_keys=True) + "\n")
    BENCH_EXPECTED.write_text(json.dumps(bench_from(sys.argv[1]), indent=1, sort_keys=True) + "\n")
