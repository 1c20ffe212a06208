//! The replay: where each call's prompt stops being the previous one's.

use compaction_core::ToolResultPruningCompactor;
use compaction_hook::{CompactionHook, CompactionHookSettings};
use compaction_model::{Message, Role, ToolCall, ToolResultContent};
use compaction_replay::{Call, Recorded, Recording, Replay};

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
    let replayed = Replay::new(&hook).run(Recording::new(&messages), &mut || {}).unwrap();
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

/// A counter that must see the whole conversation (no measure that adds up), as a provider's is.
#[derive(Debug)]
struct Whole;

impl compaction_tokens::TokenCounter for Whole {
    fn try_count(
        &self,
        messages: &[Message],
        _tools: &[compaction_model::ToolSpec],
    ) -> Result<usize, compaction_tokens::Error> {
        let results = messages.iter().flat_map(Message::tool_call_results);
        let chars: usize = results
            .map(|r| match &r.result {
                ToolResultContent::Text(text) => text.len(),
                _ => 0,
            })
            .sum();
        Ok(chars / 4 + 10 * messages.len())
    }

    fn describe(&self) -> String {
        "whole".into()
    }
}

/// Memory (issue 31, item 13): `run_owned` takes the messages and lets each recorded one go once
/// measured, where `run` holds a copy of every message beside the recorded conversation; both
/// give the same steps, with or without the provider's counts (which anchor the estimates, and
/// count a stretch of recorded messages whole), after a provider compaction, and with a counter
/// whose counts do not add up (which keeps every message).
#[test]
fn a_replay_that_takes_the_messages_gives_the_same_steps() {
    let messages = run(30);
    let assistants: Vec<usize> =
        (0..messages.len()).filter(|&i| messages[i].role == Role::Assistant).collect();
    let records: Vec<Recorded> = assistants
        .iter()
        .enumerate()
        .map(|(k, &i)| Recorded::new(i, 2_000 + 1_000 * k as u64, 0, 0, 20))
        .collect();
    let halfway = [assistants[assistants.len() / 2]];
    for whole in [false, true] {
        for (calls, compactions) in [
            (&[][..], &[][..]),
            (&records[..], &[][..]),
            (&records[..], &halfway[..]),
            (&records[..5], &[][..]),
        ] {
            let mut hook = CompactionHook::new(
                Box::new(ToolResultPruningCompactor::default()),
                CompactionHookSettings::new(6_000),
            )
            .unwrap();
            if whole {
                hook = hook.with_counter(Box::new(Whole));
            }
            let replay = Replay::new(&hook);
            let recording =
                Recording::new(&messages).with_calls(calls).with_provider_compactions(compactions);
            let borrowed = replay.run(recording, &mut || {}).unwrap().steps;
            let owned = replay.run_owned(messages.clone(), calls, compactions, &mut || {}).unwrap().steps;
            assert!(
                borrowed.iter().any(|s| s.compacted),
                "the window forces compaction: {whole}, {} records, {compactions:?}",
                calls.len()
            );
            assert_eq!(owned, borrowed, "whole counter: {whole}, {} records", calls.len());
        }
    }
}

/// Memory (issue 31, item 13): a replay holds one step per model call, a million of them for a
/// long run; the log's record of the call, which most logs do not have, is not part of each.
#[test]
fn a_step_is_small() {
    assert!(
        std::mem::size_of::<compaction_replay::Step>() <= 144,
        "{}",
        std::mem::size_of::<compaction_replay::Step>()
    );
}
