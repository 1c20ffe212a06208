//! Refetches: a later call with the same tool name and arguments as one whose result a
//! compaction or an offload had taken out of the context before it.

use std::sync::Arc;

use compaction_core::{
    Compactor, MaskingSettings, ObservationMaskingCompactor, PruningSettings, SlidingWindowCompactor,
    SlidingWindowSettings, ToolResultPruningCompactor,
};
use compaction_hook::{CompactionHook, CompactionHookSettings};
use compaction_model::{Message, ToolCall};
use compaction_offload::{
    InMemoryToolResultStore, OffloadOverChars, OffloadStrategies, ToolResultOffloadHook,
};
use compaction_replay::{Recording, Replay, Step};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};

/// An agent run: the task, then one call per `(tool, path, words)`, each answered by a result of
/// `words` words, then the answer.
fn run(calls: &[(&str, &str, usize)]) -> Vec<Message> {
    let mut messages = vec![Message::system("You are a coding agent."), Message::user("Fix the bug.")];
    for (i, (tool, path, words)) in calls.iter().enumerate() {
        let mut arguments = serde_json::Map::new();
        arguments.insert("path".into(), (*path).into());
        let call = ToolCall::new(*tool, arguments).with_id(format!("call_{i}"));
        messages.push(Message::assistant_with_calls(None, vec![call.clone()]));
        messages.push(Message::tool(format!("{path} line\n").repeat(*words), call, false));
    }
    messages.push(Message::assistant("Done."));
    messages
}

/// The tokens of the result answering call `i` of [`run`].
fn result_tokens(messages: &[Message], i: usize) -> usize {
    ApproximateTokenCounter::default().count(std::slice::from_ref(&messages[3 + 2 * i]), &[])
}

enum Strategy {
    Pruning,
    Masking(usize),
    Offload(usize),
    SlidingWindow,
}

struct Case {
    name: &'static str,
    strategy: Strategy,
    window: usize,
    calls: &'static [(&'static str, &'static str, usize)],
    /// The calls (by position in `calls`) that are refetches.
    refetches: &'static [usize],
}

const CASES: &[Case] = &[
    Case {
        name: "a read of a.rs pruned and read again is a refetch; b.rs, never pruned, is not",
        strategy: Strategy::Pruning,
        window: 6_000,
        calls: &[
            ("read", "b.rs", 10),
            ("read", "a.rs", 1_400),
            ("read", "c.rs", 500),
            ("read", "a.rs", 1_400),
            ("read", "b.rs", 10),
        ],
        refetches: &[3],
    },
    Case {
        name: "nothing compacted, nothing refetched",
        strategy: Strategy::Pruning,
        window: 100_000,
        calls: &[("read", "a.rs", 1_000), ("read", "c.rs", 500), ("read", "a.rs", 1_000)],
        refetches: &[],
    },
    Case {
        name: "the same path with another tool is no refetch",
        strategy: Strategy::Pruning,
        window: 6_000,
        calls: &[("read", "a.rs", 1_400), ("read", "c.rs", 500), ("grep", "a.rs", 1_400)],
        refetches: &[],
    },
    Case {
        name: "a masked observation read again is a refetch",
        strategy: Strategy::Masking(1),
        window: 1_000,
        calls: &[("read", "a.rs", 100), ("read", "c.rs", 100), ("read", "d.rs", 100), ("read", "a.rs", 100)],
        refetches: &[3],
    },
    Case {
        name: "a result a sliding window dropped, read again, is a refetch",
        strategy: Strategy::SlidingWindow,
        window: 6_000,
        calls: &[("read", "a.rs", 1_400), ("read", "c.rs", 500), ("read", "a.rs", 1_400)],
        refetches: &[2],
    },
    Case {
        name: "an offloaded result read again is a refetch; one left in context is not",
        strategy: Strategy::Offload(2_000),
        window: 100_000,
        calls: &[
            ("read", "a.rs", 1_000),
            ("read", "b.rs", 10),
            ("read", "a.rs", 1_000),
            ("read", "b.rs", 10),
        ],
        refetches: &[2],
    },
];

fn replay(case: &Case, messages: &[Message]) -> Vec<Step> {
    let compactor: Box<dyn Compactor> = match case.strategy {
        Strategy::Masking(n) => Box::new(ObservationMaskingCompactor::new(MaskingSettings::new(n)).unwrap()),
        Strategy::SlidingWindow => Box::new(SlidingWindowCompactor::new(SlidingWindowSettings::default())),
        _ => {
            Box::new(ToolResultPruningCompactor::new(PruningSettings::default().with_min_tokens(50)).unwrap())
        }
    };
    let hook = CompactionHook::new(compactor, CompactionHookSettings::new(case.window)).unwrap();
    let offload = match case.strategy {
        Strategy::Offload(chars) => Some(ToolResultOffloadHook::new(
            Arc::new(InMemoryToolResultStore::new()),
            OffloadStrategies::new().with("*", OffloadOverChars::new(chars)),
        )),
        _ => None,
    };
    let mut replay = Replay::new(&hook);
    if let Some(offload) = &offload {
        replay = replay.with_offload(offload);
    }
    replay.run(Recording::new(messages), &mut || {}).unwrap().steps
}

#[test]
fn refetches_are_counted_with_their_results_tokens() {
    for case in CASES {
        let messages = run(case.calls);
        let steps = replay(case, &messages);
        let last = steps.last().unwrap();
        let rewritten = match case.strategy {
            Strategy::Pruning => last.pruned,
            Strategy::Masking(_) => last.masked,
            Strategy::Offload(_) => last.offloaded,
            Strategy::SlidingWindow => steps.iter().filter(|s| s.compacted).count(),
        };
        // Every case but the one with room to spare takes something out.
        let room = matches!(case.strategy, Strategy::Pruning) && case.window == 100_000;
        assert_eq!(rewritten > 0, !room, "{}: {steps:#?}", case.name);
        let tokens: usize = case.refetches.iter().map(|&i| result_tokens(&messages, i)).sum();
        assert_eq!(
            (last.refetches, last.refetch_tokens),
            (case.refetches.len(), tokens),
            "{}: {steps:#?}",
            case.name
        );
        // Each is counted at the step whose reply made the call (call i is step i + 1).
        for &i in case.refetches {
            let (before, at) = (&steps[i - 1], &steps[i]);
            assert!(at.refetches > before.refetches, "{}: call {i}", case.name);
        }
    }
}
