//! A hook step that does not compact measures only what was added since the last step.

use std::sync::atomic::{AtomicUsize, Ordering};

use compaction_core::ToolResultPruningCompactor;
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
use compaction_model::{Message, ToolCall, ToolSpec};
use compaction_tokens::{Additive, ApproximateTokenCounter, Measure, TokenCounter};

/// The approximate counter, recording how many messages it was asked to measure.
#[derive(Debug, Default)]
struct Recording {
    inner: ApproximateTokenCounter,
    measured: AtomicUsize,
}

impl TokenCounter for Recording {
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, compaction_tokens::Error> {
        self.measured.fetch_add(messages.len(), Ordering::Relaxed);
        self.inner.try_count(messages, tools)
    }
    fn describe(&self) -> String {
        "recording".into()
    }
    fn additive(&self) -> Option<&dyn Additive> {
        Some(self)
    }
}

impl Additive for Recording {
    fn measure_joined(&self, message: &Message) -> Measure {
        self.measured.fetch_add(1, Ordering::Relaxed);
        self.inner.measure_joined(message)
    }
    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        self.measured.fetch_add(1, Ordering::Relaxed);
        self.inner.count_after(before, last, tools)
    }
}

fn step(i: usize) -> [Message; 2] {
    let call = ToolCall::new("search", serde_json::Map::new()).with_id(format!("c{i}"));
    [
        Message::assistant_with_calls(None, vec![call.clone()]),
        Message::tool(format!("result {i} ").repeat(20), call, false),
    ]
}

#[test]
fn untriggered_steps_measure_only_new_messages() {
    let counter = std::sync::Arc::new(Recording::default());
    let hook = CompactionHook::new(
        Box::new(ToolResultPruningCompactor::default()),
        CompactionHookSettings::new(100_000_000),
    )
    .expect("valid")
    .with_counter(Box::new(counter.clone()));
    let tools = vec![ToolSpec::new("search", "Search the web.", serde_json::json!({"type": "object"}))];
    let mut state = AgentState::new(vec![Message::user("go")]).with_tools(tools.clone());
    let exact = ApproximateTokenCounter::default();
    for i in 0..300 {
        let before = counter.measured.load(Ordering::Relaxed);
        let outcome = hook.run(&mut state);
        assert!(!outcome.triggered);
        assert_eq!(outcome.estimated_tokens, exact.count(state.messages(), &tools), "step {i}");
        let measured = counter.measured.load(Ordering::Relaxed) - before;
        assert!(measured <= 4, "step {i} measured {measured} messages");
        state.extend(step(i));
    }
}

#[test]
fn rewriting_messages_resets_the_running_count() {
    let counter = ApproximateTokenCounter::default();
    let mut state = AgentState::new(vec![Message::user("go")]);
    for i in 0..5 {
        state.extend(step(i));
    }
    assert_eq!(state.count_with_tools(&counter), counter.count(state.messages(), &[]));
    state.messages_mut()[2] = Message::tool("short", ToolCall::new("search", Default::default()), false);
    assert_eq!(state.count_with_tools(&counter), counter.count(state.messages(), &[]));
    state.set_messages(vec![Message::user("fresh")]);
    assert_eq!(state.count_with_tools(&counter), counter.count(state.messages(), &[]));
}

/// A run long past its window compacts at nearly every step. Each step measures only what was
/// appended or rewritten, and ends exactly where the same hook ends on a fresh state holding
/// the same conversation (no running count, no memo).
#[test]
fn triggered_steps_measure_only_what_changed_and_agree_with_a_fresh_state() {
    let counter = std::sync::Arc::new(Recording::default());
    let hook = |counter: Box<dyn TokenCounter>| {
        CompactionHook::new(
            Box::new(ToolResultPruningCompactor::default()),
            CompactionHookSettings::new(3_000),
        )
        .expect("valid")
        .with_counter(counter)
    };
    let remembering = hook(Box::new(counter.clone()));
    let fresh = hook(Box::<ApproximateTokenCounter>::default());
    let mut state = AgentState::new(vec![Message::user("go")]);
    let mut compacted = 0;
    let before = counter.measured.load(Ordering::Relaxed);
    for i in 0..400 {
        let mut alone = AgentState::new(state.messages().to_vec());
        let outcome = remembering.run(&mut state);
        let expected = fresh.run(&mut alone);
        assert_eq!(outcome.report, expected.report, "step {i}");
        assert_eq!(outcome.estimated_tokens, expected.estimated_tokens, "step {i}");
        assert_eq!(state.messages(), alone.messages(), "step {i}");
        if let Some(report) = &outcome.report {
            // Counted from the running measures, yet what a count of the result says.
            let exact = ApproximateTokenCounter::default().count(state.messages(), &[]);
            assert_eq!(report.tokens_after, exact, "step {i}");
            assert_eq!(report.target_reached, exact <= report.target_tokens, "step {i}");
        }
        compacted += usize::from(outcome.compacted);
        let [call, result] = step(i);
        let mut result = result;
        result.parts = Message::tool(
            format!("long result {i} ").repeat(150),
            ToolCall::new("search", Default::default()).with_id(format!("c{i}")),
            false,
        )
        .parts;
        state.extend([call, result]);
    }
    assert!(compacted > 300, "compacted {compacted} times");
    let measured = counter.measured.load(Ordering::Relaxed) - before;
    // About two new messages a step, one pruned, and a few counts each: far from the 400
    // messages a step that counted the whole conversation would measure by the end.
    assert!(measured < 400 * 30, "measured {measured} messages over 400 steps");
}
