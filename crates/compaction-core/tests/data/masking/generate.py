"""Writes the observation-masking fixtures by running SWE-agent's own `LastNObservations`.

Nothing of SWE-agent's processor is reimplemented here: its `sweagent/agent/history_processors.py`
(and the `sweagent/types.py` it imports) are taken from a SWE-agent git directory at a given
commit into a temporary folder, imported, and run on the trajectory's history. Not run by
`cargo test`; see README.md for how to run it.

    python generate.py SWE_AGENT_GIT_DIR COMMIT TRAJ_FILE

needs pydantic and typing_extensions (SWE-agent's own imports of those two files).
"""

import copy
import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = [(n, polling) for n in (1, 3, 5) for polling in (1, 2)]


def load_processors(git_dir: str, commit: str):
    """SWE-agent's history_processors module, imported from `commit` of `git_dir`."""
    root = Path(tempfile.mkdtemp(prefix="sweagent-"))
    for path in ("sweagent/types.py", "sweagent/agent/history_processors.py"):
        text = subprocess.run(
            ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
        ).stdout
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    # Empty packages: the real `sweagent/__init__.py` pulls in the whole agent's dependencies.
    (root / "sweagent/__init__.py").write_text("")
    (root / "sweagent/agent/__init__.py").write_text("")
    sys.path.insert(0, str(root))
    return importlib.import_module("sweagent.agent.history_processors")


def text_action(history):
    """The same run as SWE-agent 1.x logs it with a text-action parser: each tool observation a
    user message, no tool calls; a demonstration put in after the system prompt, as
    `DefaultAgent.setup` adds one (`is_demo`, message type `demonstration`)."""
    out = []
    for entry in copy.deepcopy(history):
        entry.pop("tool_calls", None)
        entry.pop("tool_call_ids", None)
        entry.pop("cache_control", None)
        if entry["role"] == "tool":
            entry["role"] = "user"
        out.append(entry)
        if entry.get("message_type") == "system_prompt":
            out.append(
                {
                    "role": "user",
                    "content": "Here is a demonstration of how to correctly accomplish this task.\n"
                    "It is included to show you how to correctly use the interface.\n",
                    "agent": "main",
                    "is_demo": True,
                    "message_type": "demonstration",
                }
            )
    return out


def without_message_types(history):
    """The text-action run as SWE-agent 0.x logs its history: no `message_type` at all."""
    out = copy.deepcopy(history)
    for entry in out:
        entry.pop("message_type", None)
    return out


def masked(processors, history, n, polling, tags):
    """The indices SWE-agent's processor masks in `history` (with `tags` on the entries they
    name), and the text each gets."""
    history = copy.deepcopy(history)
    for index, names in tags.items():
        history[index]["tags"] = names
    processed = processors.LastNObservations(n=n, polling=polling)(copy.deepcopy(history))
    assert len(processed) == len(history)
    return {index: new["content"] for index, (old, new) in enumerate(zip(history, processed)) if new != old}


def query_points(history):
    """The lengths of the history at which the agent asks the model: after each observation."""
    return [k + 1 for k, entry in enumerate(history) if entry["role"] in ("user", "tool") and not entry.get("is_demo")]


def write_json(name, value):
    with open(HERE / name, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    git_dir, commit, traj = sys.argv[1:4]
    processors = load_processors(git_dir, commit)
    with open(traj, encoding="utf-8") as f:
        trajectory = json.load(f)
    # The excerpt: the history (what the processor reads) and the environment's name; the steps
    # (`trajectory`, 1.6 MB of repeated queries) and `info` are left out.
    excerpt = {"environment": trajectory["environment"], "history": trajectory["history"]}
    texts = text_action(trajectory["history"])
    inputs = {
        "pandas.tool-calls.traj": excerpt,
        "pandas.text-action.traj": {"environment": trajectory["environment"], "history": texts},
        "pandas.text-action-0x.traj": {
            "environment": trajectory["environment"],
            "history": without_message_types(texts),
        },
    }
    for name, value in inputs.items():
        write_json(name, value)
    # SWE-agent 0.x's history has no message types, for which the 1.x processor masks nothing:
    # its expected output is the one SWE-agent gives the same run with its message types.
    runs = {
        "pandas.tool-calls.traj": trajectory["history"],
        "pandas.text-action.traj": texts,
        "pandas.text-action-0x.traj": texts,
    }
    # Tags as SWE-agent's `TagToolCallObservations` or a user would set them: one observation
    # kept whatever its age, one masked whatever its age (the observation before the last).
    tagged = {5: ["keep_output"], 73: ["remove_output"]}
    cases = []
    replaced = {}
    for name, history in runs.items():
        texts = replaced.setdefault(name, {})
        for n, polling in CASES:
            for tags in ({}, tagged) if name == "pandas.tool-calls.traj" else ({},):
                for length in query_points(history):
                    tags_here = {k: v for k, v in tags.items() if k < length}
                    got = masked(processors, history[:length], n, polling, tags_here)
                    for index, text in got.items():
                        assert texts.setdefault(index, text) == text, "a masked text depends only on its entry"
                    case = {"input": name, "n": n, "polling": polling, "length": length, "masked": sorted(got)}
                    if tags:  # the tagged run, even before its first tagged entry
                        case["tags"] = {str(k): v for k, v in tags_here.items()}
                    cases.append(case)
    # One case a line, so that a diff of a regenerated file reads case by case.
    head = {
        "source": f"SWE-agent/SWE-agent@{commit} sweagent/agent/history_processors.py LastNObservations",
        "replaced": {name: {str(k): v for k, v in sorted(texts.items())} for name, texts in replaced.items()},
    }
    with open(HERE / "expected.json", "w", encoding="utf-8") as f:
        f.write(json.dumps(head, ensure_ascii=False, indent=1)[:-2])
        f.write(',\n "cases": [\n')
        f.write(",\n".join("  " + json.dumps(case, ensure_ascii=False) for case in cases))
        f.write("\n ]\n}\n")


if __name__ == "__main__":
    main()
