//! The replay: where each call's prompt stops being the previous one's.

use compaction_core::ToolResultPruningCompactor;
use compaction_hook::{CompactionHook, CompactionHookSettings};
use compaction_model::{Message, ToolCall};
use compaction_replay::{Call, Recording, Replay};

/// An agent run: a question, then `steps` searches with large results.
fn run(steps: usize) -> Vec<Message> {
    let mut messages = vec![Message::system("You are a research agent."), Message::user("Compare them.")];
    for i in 0..steps {
        let call = ToolCall::new("search", serde_json::Map::new()).with_id(format!("call_{i}"));
        messages.push(Message::assistant_with_calls(None, vec![call.clone()]));
        messages.push(Message::tool(format!("result {i} ").repeat(300), call, false));
    }
    messages.push(Message::assistant("Done."));
    messages
}

#[test]
fn a_compaction_breaks_the_shared_prefix_at_its_first_change() {
    let messages = run(12);
    let hook = CompactionHook::new(
        Box::new(ToolResultPruningCompactor::default()),
        CompactionHookSettings::new(6_000),
    )
    .unwrap();
    let replayed = Replay::new(&hook).run(Recording::new(&messages), &mut || {});
    let steps = &replayed.steps;
    assert_eq!(steps.len(), 13);
    let compacted: Vec<_> = steps.iter().filter(|s| s.compacted).collect();
    assert!(!compacted.is_empty(), "the window forces compaction");
    for pair in steps.windows(2) {
        let (before, step) = (&pair[0], &pair[1]);
        if step.compacted {
            // Pruning starts with the oldest result, the message after the first call.
            let first = step.first_changed.expect("a compaction changes a message");
            assert!(first >= 3, "{first}");
            assert!(step.shared < before.with.min(step.with), "{step:?}");
            assert!(step.shared > 0);
        } else {
            assert_eq!((step.first_changed, step.shared), (None, before.with), "{step:?}");
        }
    }
    // Without compaction every call shares the whole previous prompt.
    let without = Call::without_compaction(steps);
    assert!(without.windows(2).all(|p| p[1].shared == p[0].prompt));
}
