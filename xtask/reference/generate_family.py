#!/usr/bin/env python3
"""Reference fixtures for the rest of the compaction family: sliding window, summarization, the
token budget hook, and the compaction hook driving the first two.

Runs Haystack 3.4.1 (the reference) and writes one JSON file per case; see README.md in this
folder for the formats. Shares the conversations, counters and output helpers of generate.py.
Summarization asks a deterministic stand-in chat generator (`StandIn`), which the Rust tests
re-implement, so every prompt the reference sent and every result it built can be compared.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate as g  # noqa: E402  (sets up the environment and silences logging on import)

from haystack.components.agents.state.state import State  # noqa: E402
from haystack.components.agents.state.state_utils import replace_values  # noqa: E402
from haystack.components.agents.utils import _record_context_tokens, _record_llm_usage  # noqa: E402
from haystack.dataclasses import ChatMessage, ChatRole, FileContent, ImageContent, TextContent  # noqa: E402
from haystack.dataclasses.chat_message import ToolCall  # noqa: E402
from haystack.hooks.budget import TokenBudgetHook  # noqa: E402
from haystack.hooks.compaction import CompactionHook, SlidingWindowCompactor, SummarizationCompactor  # noqa: E402
from haystack.hooks.compaction.hooks import _estimated_context_tokens  # noqa: E402
from haystack.hooks.compaction.sliding_window import _DEFAULT_OMISSION_NOTE  # noqa: E402
from haystack.hooks.compaction.summarization import _DEFAULT_SUMMARY_INSTRUCTION  # noqa: E402

WINDOW_DIR = "crates/compaction-core/tests/data/window"
SUMMARIZE_DIR = "crates/compaction-core/tests/data/summarize"
BUDGET_DIR = "crates/compaction-hook/tests/data/budget"
HOOK_FAMILY_DIR = "crates/compaction-hook/tests/data/hook_family"

OPEN = "<conversation_to_summarize>"


# --------------------------------------------------------------------------------------------
# The stand-in chat generator
# --------------------------------------------------------------------------------------------
class StandInFailure(Exception):
    """What the stand-in raises when told to fail a round."""


class StandIn:
    """A chat generator that answers every prompt the same way, given its spec.

    Round r (from 0) answers ` \\x1f Summary r: ` + the first `keep_chars` characters of the
    transcript (the user message after `<conversation_to_summarize>\\n`) + ` \\n`, so the summary
    shrinks or not depending on `keep_chars` and the compactor has to strip it. On `fail_round`
    it does what `failure` says instead: `raise` an error, answer `empty` text, `blank` text
    (white space only, U+001C included), `no_text` (a tool call only), or `bloat` (the
    transcript twice, which never shrinks the conversation).
    """

    def __init__(self, spec: dict):
        self.spec = spec
        self.requests: list[list[dict]] = []

    def run(self, messages: list[ChatMessage]) -> dict:
        self.requests.append([m.to_dict() for m in messages])
        round_ = len(self.requests) - 1
        transcript = messages[-1].text[len(OPEN) + 1:]
        if round_ == self.spec.get("fail_round"):
            failure = self.spec["failure"]
            if failure == "raise":
                raise StandInFailure("the stand-in was told to fail")
            if failure == "empty":
                return {"replies": [ChatMessage.from_assistant("")]}
            if failure == "blank":
                return {"replies": [ChatMessage.from_assistant(" \n\t\x1c\u3000 ")]}
            if failure == "no_text":
                return {"replies": [ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="x", arguments={})])]}
            if failure == "bloat":
                return {"replies": [ChatMessage.from_assistant(transcript + transcript)]}
            raise ValueError(failure)
        text = f" \x1f Summary {round_}: {transcript[: self.spec['keep_chars']]} \n"
        return {"replies": [ChatMessage.from_assistant(text)]}


def error_kind(error: Exception) -> str:
    if isinstance(error, StandInFailure):
        return "generator"
    text = str(error)
    if "no usable text" in text:
        return "empty"
    if "did not reduce" in text:
        return "not_smaller"
    raise error


# --------------------------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------------------------
def note(n: int, kept: int, text: str | None = None) -> ChatMessage:
    return ChatMessage.from_user(text or _DEFAULT_OMISSION_NOTE.replace("{num_removed}", str(n)),
                                 meta={"context_compaction": {"strategy": "sliding_window", "removed_messages": n,
                                                              "kept_messages": kept}})


def summary(text: str, n: int, role: ChatRole = ChatRole.USER, wrapped: bool = True) -> ChatMessage:
    body = f"<conversation_summary>\n{text}\n</conversation_summary>" if wrapped else text
    meta = {"context_compaction": {"strategy": "summarization", "summarized_messages": n}}
    return ChatMessage(_role=role, _content=[TextContent(body)], _name=None, _meta=meta)


def step(rng: random.Random, name: str, cid: str, size: int, error: bool = False) -> list[ChatMessage]:
    call = g.tc(name, {"q": cid}, cid)
    return [ChatMessage.from_assistant(tool_calls=[call]), g.tr(call, g.rand_text(rng, size), error)]


def family_cases() -> list[tuple[str, list[ChatMessage]]]:
    """Conversations that reach each rule of the two strategies."""
    rng = random.Random(2024)
    S, U, A = ChatMessage.from_system, ChatMessage.from_user, ChatMessage.from_assistant
    cases = []

    turns = [S("You are an agent."), S("Second instructions.")]
    for t in range(4):
        turns.append(U(f"task {t}: " + g.rand_text(rng, 200)))
        for s in range(2):
            turns += step(rng, "search", f"t{t}s{s}", 400 + 100 * s)
        turns.append(A(f"answer {t}: " + g.rand_text(rng, 150)))
    cases.append(("turns_then_task", turns))

    task = [S("sys"), U("one long task")]
    for s in range(6):
        task += step(rng, g.TOOL_NAMES[s % 4], f"k{s}", 300 + 50 * s, error=s == 2)
    task.append(A("thinking aloud, no tools"))
    task += step(rng, "calc", "k9", 200)
    cases.append(("task_steps_only", task))

    marked = [S("sys"), note(4, 3), U("first"), A("a1"), summary("- older work", 5), U("second"),
              *step(rng, "search", "m1", 600), note(2, 9, "[{num_removed} gone]"), A("a2"),
              U("current"), summary("- task summary one", 3), *step(rng, "read_file", "m2", 500),
              summary("- task summary two", 2, wrapped=False), *step(rng, "calc", "m3", 500),
              *step(rng, "search", "m4", 500)]
    cases.append(("notes_and_summaries", marked))

    cases.append(("history_summaries_only", [S("sys"), summary("- first", 4), summary("  - second  ", 6),
                                              summary("- third", 2, ChatRole.ASSISTANT), U("now"),
                                              *step(rng, "search", "h1", 300)]))
    cases.append(("task_summaries_only", [S("sys"), U("task"), summary("- s1 " * 40, 3),
                                           summary("- s2 " * 40, 3, ChatRole.SYSTEM),
                                           summary("\x1c- s3 " * 40, 4), *step(rng, "search", "q1", 200)]))
    cases.append(("only_old_note", [S("sys"), note(7, 2), U("task " * 200), *step(rng, "search", "o1", 900)]))
    cases.append(("no_user", [S("sys"), *step(rng, "search", "n1", 700), A("between"),
                              *step(rng, "search", "n2", 700), *step(rng, "calc", "n3", 100)]))
    cases.append(("orphans", [S("sys", meta={"context_compaction": {"strategy": "other"}}), A("stray before user"),
                               g.tr(g.tc("search", {}, "x0"), "orphan result " * 40), U("task"),
                               g.tr(g.tc("search", {}, "x1"), "orphan in task " * 40),
                               *step(rng, "search", "x2", 500), U("not real", meta={"context_compaction": None}),
                               *step(rng, "search", "x3", 500)]))

    img = ImageContent(base64_image=g.PNG_B64, mime_type="image/png",
                       meta={"path": "/shots/a.png", "n": 3, "f": 1e16, "tiny": 1e-05, "b": True, "none": None,
                             "nested": {"x": 1}, "list": [1], "ünï": "ç", "big": 2**70})
    bare = ImageContent(base64_image="not-base64", mime_type=None, validation=False)
    pdf = FileContent(base64_data=g.PDF_B64, mime_type="application/pdf", filename="report.pdf",
                      extra={"url": "https://x.test/r.pdf", "size": 12345, "ratio": 0.5, "flag": False})
    nameless = FileContent(base64_data="zz", mime_type="", filename="", validation=False)
    c = g.tc("fetch", {"url": "https://x.test"}, "f1")
    cases.append(("attachments", [S("sys"), g.msg(ChatRole.USER, [TextContent("look"), img, pdf]),
                                  A("ok"), U("again"),
                                  ChatMessage.from_assistant(tool_calls=[c, g.tc("fetch", {}, "")]),
                                  g.tr(c, [TextContent("got "), bare, TextContent(" and "), nameless]),
                                  g.tr(g.tc("fetch", {}, ""), "second " * 100, True),
                                  g.msg(ChatRole.ASSISTANT, [bare, pdf]),
                                  U("last"), *step(rng, "search", "f9", 300)]))
    return cases


def sprinkle(rng: random.Random, messages: list[ChatMessage]) -> list[ChatMessage]:
    """Earlier notes and summaries in random places, as a conversation compacted before has."""
    out = list(messages)
    for _ in range(rng.choice([0, 0, 1, 2, 3])):
        r = rng.random()
        if r < 0.4:
            made = note(rng.randint(1, 30), rng.randint(1, 30),
                        rng.choice([None, None, "[{num_removed} earlier messages gone]"]))
        else:
            role = rng.choice([ChatRole.USER] * 4 + [ChatRole.SYSTEM, ChatRole.ASSISTANT])
            made = summary(g.rand_text(rng, rng.randint(0, 400)), rng.randint(1, 20), role, rng.random() < 0.8)
        if rng.random() < 0.7:
            # Where a compactor leaves them: before a real user message, or right after the system block.
            spots = [i for i, m in enumerate(out) if m.is_from(ChatRole.USER)] or [0]
            at = rng.choice(spots)
        else:
            at = rng.randint(0, len(out))
        out.insert(at, made)
    return out


def rand_family_conversation(rng: random.Random) -> list[ChatMessage]:
    return sprinkle(rng, g.rand_conversation(rng, scale=rng.choice([0.3, 0.6, 1.0]), max_turns=4, max_steps=5))


# --------------------------------------------------------------------------------------------
# WINDOW
# --------------------------------------------------------------------------------------------
NOTES = [_DEFAULT_OMISSION_NOTE, None, "", "[{num_removed} removed] {x} {{num_removed}}", "{num_removed}{num_removed}",
         "Ünïcødé 😀 note without count"]


def window_settings(rng: random.Random) -> dict:
    return {"min_keep_steps": rng.choice([0, 1, 1, 1, 2, 3]),
            "omission_note": _DEFAULT_OMISSION_NOTE if rng.random() < 0.55 else rng.choice(NOTES)}


def gen_window(root: Path, seed: int, k: int) -> int:
    out = root / WINDOW_DIR
    g.prepare_dir(out)
    rng = random.Random(f"window-{seed}")
    jobs = []
    default = {"min_keep_steps": 1, "omission_note": _DEFAULT_OMISSION_NOTE}
    for name, messages, _tools in g.named_cases():
        jobs.append((f"{name}__half", messages, g.APPROX_DEFAULT, default, "half"))
        jobs.append((f"{name}__zero", messages, rng.choice(g.COMPACT_COUNTERS), window_settings(rng), 0))
    for name, messages in family_cases():
        for i, fraction in enumerate([0.0, 0.3, 0.6, 0.9]):
            jobs.append((f"{name}__{i}", messages, rng.choice(g.COMPACT_COUNTERS), window_settings(rng), fraction))
    for i in range(k):
        jobs.append((f"random_{i:03d}", rand_family_conversation(rng), rng.choice(g.COMPACT_COUNTERS),
                     window_settings(rng), "random"))
    for name, messages, cspec, settings, target in jobs:
        counter = g.make_counter(cspec)
        total = counter.count(messages=messages)
        if target == "half":
            target = total // 2
        elif target == "random":
            target = g.rand_target(rng, total)
        elif isinstance(target, float):
            target = int(total * target)
        result = SlidingWindowCompactor(**settings).compact(messages=messages, target_tokens=target,
                                                            token_counter=counter)
        g.write(out / f"{name}.json", {"name": name, "messages": g.to_dicts(messages), "target_tokens": target,
                                       "counter": cspec, "settings": settings,
                                       "output": None if result is None else g.to_dicts(result)})
    return len(jobs)


# --------------------------------------------------------------------------------------------
# SUMMARIZE
# --------------------------------------------------------------------------------------------
INSTRUCTIONS = ["Summarize tersely.", "Résumé: {braces} stay ✂️\nsecond line", ""]
FAILURES = ["raise", "empty", "blank", "no_text", "bloat"]


def summarize_settings(rng: random.Random) -> dict:
    return {"min_keep_steps": rng.choice([0, 1, 1, 2, 3]),
            "approximate_summary_tokens": rng.choice([1, 16, 64, 256, 1024, rng.randint(1, 2000)]),
            "summary_instruction": _DEFAULT_SUMMARY_INSTRUCTION if rng.random() < 0.7 else rng.choice(INSTRUCTIONS),
            "raise_on_failure": rng.random() < 0.3}


def stand_in_spec(rng: random.Random) -> dict:
    spec: dict = {"keep_chars": rng.choice([0, 20, 80, 80, 300, 2000])}
    if rng.random() < 0.35:
        spec["fail_round"] = rng.choice([0, 0, 1, 2])
        spec["failure"] = rng.choice(FAILURES)
    return spec


def run_summarize(messages, target, counter, settings, spec):
    stand_in = StandIn(spec)
    compactor = SummarizationCompactor(chat_generator=stand_in, **settings)
    try:
        result = compactor.compact(messages=messages, target_tokens=target, token_counter=counter)
        error = None
    except Exception as e:  # noqa: BLE001
        result, error = None, error_kind(e)
    return result, error, stand_in.requests


def gen_summarize(root: Path, seed: int, k: int) -> int:
    out = root / SUMMARIZE_DIR
    g.prepare_dir(out)
    rng = random.Random(f"summarize-{seed}")
    default = {"min_keep_steps": 1, "approximate_summary_tokens": 1024,
               "summary_instruction": _DEFAULT_SUMMARY_INSTRUCTION, "raise_on_failure": False}
    jobs = []
    for name, messages, _tools in g.named_cases():
        small = {**default, "approximate_summary_tokens": 16}
        jobs.append((f"{name}__half", messages, g.APPROX_DEFAULT, small, {"keep_chars": 40}, "half"))
    for name, messages in family_cases():
        for i, fraction in enumerate([0.0, 0.3, 0.6]):
            jobs.append((f"{name}__{i}", messages, rng.choice(g.COMPACT_COUNTERS), summarize_settings(rng),
                         stand_in_spec(rng), fraction))
        for failure in FAILURES:
            for raise_on_failure in (False, True):
                settings = {**default, "approximate_summary_tokens": 16, "raise_on_failure": raise_on_failure}
                spec = {"keep_chars": 30, "fail_round": 1, "failure": failure}
                jobs.append((f"{name}__{failure}_{'raise' if raise_on_failure else 'keep'}", messages,
                             g.APPROX_DEFAULT, settings, spec, 0.1))
    for i in range(k):
        jobs.append((f"random_{i:03d}", rand_family_conversation(rng), rng.choice(g.COMPACT_COUNTERS),
                     summarize_settings(rng), stand_in_spec(rng), "random"))
    for name, messages, cspec, settings, spec, target in jobs:
        counter = g.make_counter(cspec)
        total = counter.count(messages=messages)
        if target == "half":
            target = total // 2
        elif target == "random":
            target = g.rand_target(rng, total)
        else:
            target = int(total * target)
        result, error, requests = run_summarize(messages, target, counter, settings, spec)
        g.write(out / f"{name}.json", {"name": name, "messages": g.to_dicts(messages), "target_tokens": target,
                                       "counter": cspec, "settings": settings, "stand_in": spec,
                                       "requests": requests, "error": error,
                                       "output": None if result is None else g.to_dicts(result)})
    return len(jobs)


# --------------------------------------------------------------------------------------------
# BUDGET
# --------------------------------------------------------------------------------------------
KEYS = ["total_tokens", "prompt_tokens", "input_tokens", "completion_tokens", "output_tokens", "cached_tokens",
        "details"]


def rand_count(rng: random.Random, signed: bool):
    r = rng.random()
    if r < 0.55:
        return rng.randint(0, 5000)
    if r < 0.65:
        return rng.choice([0.0, 0.5, 1.9, 1234.99, 2500.0, 1e-05, 7e3])
    if r < 0.72:
        return rng.choice([True, False])
    if r < 0.78:
        return rng.choice(["100", None, [1, 2], {"x": 1}])
    if r < 0.84:
        return rng.choice([2**64, 10**30, 2**63 - 1])
    if signed and r < 0.92:
        return rng.choice([-1, -500, -0.5, -(2**70)])
    return 0


def rand_usage(rng: random.Random, signed: bool) -> dict:
    usage = {}
    for key in rng.sample(KEYS, rng.randint(0, len(KEYS))):
        if key == "details":
            usage[key] = {"reasoning_tokens": rand_count(rng, False), "audio": rng.randint(0, 9)}
        else:
            usage[key] = rand_count(rng, signed)
    return usage


def budget_state(token_usage: dict, context_tokens: int) -> State:
    schema = {"token_usage": {"type": dict, "handler": replace_values},
              "context_tokens": {"type": int, "handler": replace_values},
              "stop_run": {"type": str, "handler": replace_values}}
    return State(schema=schema, data={"messages": [ChatMessage.from_user("go")], "token_usage": token_usage,
                                      "context_tokens": context_tokens})


def gen_budget(root: Path, seed: int, k: int) -> int:
    out = root / BUDGET_DIR
    g.prepare_dir(out)
    rng = random.Random(f"budget-{seed}")
    jobs = []
    # Reading: a usage as the Agent accumulated it, and a budget.
    for i in range(max(k, 20)):
        usage = rand_usage(rng, signed=True)
        jobs.append((f"read_{i:03d}", usage, [], rng.choice([1, 10, 1000, 4000, 5000, 9000, 10**6]),
                     rng.random() < 0.5))
    # Accumulating: the usage of each model call, recorded as the Agent records it, then the budget.
    for i in range(max(k, 20)):
        calls = []
        for _ in range(rng.randint(0, 4)):
            replies = []
            for _ in range(rng.choice([1, 1, 1, 2])):
                meta = {} if rng.random() < 0.15 else {"usage": rand_usage(rng, signed=False)}
                if rng.random() < 0.05:
                    meta = {"usage": "not a dict"}
                replies.append(meta)
            calls.append(replies)
        jobs.append((f"accumulate_{i:03d}", {}, calls, rng.choice([1, 100, 3000, 8000, 20000]), rng.random() < 0.5))
    for name, usage, calls, budget, final in jobs:
        state = budget_state(copy.deepcopy(usage), 0)
        context_after = []
        for replies in calls:
            messages = [ChatMessage.from_assistant("reply", meta=copy.deepcopy(meta)) for meta in replies]
            _record_llm_usage(state=state, llm_messages=messages)
            _record_context_tokens(state=state, llm_messages=messages)
            context_after.append(state.data.get("context_tokens"))
        token_usage = copy.deepcopy(state.data.get("token_usage"))
        before = len(state.data["messages"])
        TokenBudgetHook(max_total_tokens=budget, add_final_message=final).run(state)
        g.write(out / f"{name}.json", {
            "name": name, "token_usage": usage, "calls": calls, "max_total_tokens": budget, "add_final_message": final,
            "expected": {"token_usage": token_usage, "context_tokens": context_after,
                         "stop_run": state.data.get("stop_run"),
                         "messages_added": g.to_dicts(state.data["messages"][before:])}})
    return len(jobs)


# --------------------------------------------------------------------------------------------
# HOOK with the sliding window and summarization
# --------------------------------------------------------------------------------------------
def gen_hook_family(root: Path, seed: int, k: int) -> int:
    out = root / HOOK_FAMILY_DIR
    g.prepare_dir(out)
    rng = random.Random(f"hook-family-{seed}")
    count = 0
    for i in range(max(k // 2, 10)):
        messages = rand_family_conversation(rng)
        tool_specs = g.rand_tools(rng)
        cspec = rng.choice(g.COMPACT_COUNTERS)
        counter = g.make_counter(cspec)
        tools = g.make_tools(tool_specs)
        full = counter.count(messages=messages, tools=tools or None)
        if rng.random() < 0.5:
            context_tokens = 0
        else:
            last = max((j for j, m in enumerate(messages) if m.is_from(ChatRole.ASSISTANT)), default=-1)
            accounted = messages if last < 0 else messages[: last + 1]
            context_tokens = max(0, counter.count(messages=accounted) + rng.randint(-50, 600))
        compact_at, compact_to = rng.choice([(0.7, 0.4), (0.9, 0.3), (0.5, 0.25), (0.613, 0.097)])
        window = max(1, int(max(full, 1) / rng.uniform(0.4, 1.3)))
        if i % 2 == 0:
            compactor_spec = {"kind": "sliding_window", "settings": window_settings(rng)}
            compactor = SlidingWindowCompactor(**compactor_spec["settings"])
            stand_in = None
        else:
            compactor_spec = {"kind": "summarization", "settings": summarize_settings(rng),
                              "stand_in": stand_in_spec(rng)}
            stand_in = StandIn(compactor_spec["stand_in"])
            compactor = SummarizationCompactor(chat_generator=stand_in, **compactor_spec["settings"])
        hook = CompactionHook(compactor=compactor, context_window=window, compact_at=compact_at,
                              compact_to=compact_to, token_counter=counter)
        estimated = _estimated_context_tokens(messages=messages, context_tokens=context_tokens, token_counter=counter,
                                              tools=tools or None)
        target = hook._target_tokens(messages=messages, context_tokens=context_tokens, tools=tools or None)
        state = g.make_state(messages, context_tokens, tools)
        original = state.data["messages"]
        try:
            hook.run(state)
            error = None
        except Exception as e:  # noqa: BLE001
            error = error_kind(e)
        after = state.data["messages"]
        name = f"random_{i:03d}"
        g.write(out / f"{name}.json", {
            "name": name, "messages": g.to_dicts(messages), "tools": tool_specs, "context_tokens": context_tokens,
            "context_window": window, "compact_at": compact_at, "compact_to": compact_to, "counter": cspec,
            "compactor": compactor_spec,
            "expected": {"messages": g.to_dicts(after), "context_tokens": state.data["context_tokens"],
                         "compacted": after is not original, "estimated_tokens": estimated,
                         "triggered": target is not None, "target_tokens": None if target is None else target[0],
                         "error": error,
                         "requests": None if stand_in is None else len(stand_in.requests)},
        })
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out-root", required=True, type=Path)
    ap.add_argument("--seed", required=True, type=int)
    ap.add_argument("--random-cases", type=int, default=60)
    ap.add_argument("--only", default="window,summarize,budget,hook_family")
    args = ap.parse_args(argv)
    gens = {"window": gen_window, "summarize": gen_summarize, "budget": gen_budget, "hook_family": gen_hook_family}
    kinds = [x.strip() for x in args.only.split(",") if x.strip()]
    for kind in kinds:
        if kind not in gens:
            ap.error(f"unknown kind {kind!r}; expected some of {sorted(gens)}")
    root = args.out_root.resolve()
    for kind in kinds:
        n = gens[kind](root, args.seed, args.random_cases)
        print(f"{kind}: {n} fixtures", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
