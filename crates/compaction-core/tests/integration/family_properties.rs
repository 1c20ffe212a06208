//! Properties of the strategies that remove or replace whole messages (sliding window,
//! summarization, a chain), over random multi-turn agent conversations: the input is never
//! changed, a tool call and its results stay or go together, the instructions and the task
//! stay, the report accounts for every message, and repeated runs leave one note at most.

use std::collections::BTreeSet;

use compaction_core::{
    ChainCompactor, ChatGenerator, Compaction, Compactor, GeneratorError, SlidingWindowCompactor,
    SlidingWindowSettings, SummarizationCompactor, SummarizationSettings, ToolResultPruningCompactor,
};
use compaction_model::{is_compacted, Changes, Message, Role, ToolCall};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use proptest::prelude::*;
use serde_json::json;

/// A turn: the user's text size, then steps as (calls, result size, text size).
type Turn = (usize, Vec<(usize, usize, usize)>);

fn turns() -> impl Strategy<Value = Vec<Turn>> {
    let step = (1usize..4, prop_oneof![0usize..50, 50usize..800, 800usize..3000], 0usize..60);
    prop::collection::vec((0usize..300, prop::collection::vec(step, 0..5)), 1..5)
}

fn build(turns: &[Turn], systems: usize) -> Vec<Message> {
    let mut messages: Vec<Message> =
        (0..systems).map(|i| Message::system(format!("instructions {i}"))).collect();
    let mut next = 0;
    for (user, steps) in turns {
        messages.push(Message::user("u".repeat(*user)));
        for &(calls, size, text) in steps {
            let calls: Vec<ToolCall> = (0..calls)
                .map(|_| {
                    next += 1;
                    let args = json!({"q": next}).as_object().cloned().unwrap_or_default();
                    ToolCall::new("search", args).with_id(format!("c{next}"))
                })
                .collect();
            let text = (text > 0).then(|| "t".repeat(text));
            messages.push(Message::assistant_with_calls(text, calls.clone()));
            messages.extend(calls.into_iter().map(|call| Message::tool("r".repeat(size), call, false)));
        }
        messages.push(Message::assistant("done"));
    }
    messages
}

/// Every call id in `messages`, and every result's call id.
fn pairing(messages: &[Message]) -> (BTreeSet<String>, BTreeSet<String>) {
    let calls = messages.iter().flat_map(|m| m.tool_calls().filter_map(|c| c.id.clone())).collect();
    let results =
        messages.iter().flat_map(|m| m.tool_call_results().filter_map(|r| r.origin.id.clone())).collect();
    (calls, results)
}

/// What every strategy here must hold for `compaction` of `messages`.
fn check_common(messages: &[Message], compaction: &Compaction, counter: &dyn TokenCounter, target: usize) {
    let out = compaction.messages(messages);
    let mut applied = messages.to_vec();
    compaction.clone().apply(&mut applied).expect("fits the conversation it was made from");
    assert_eq!(applied, out, "apply and messages differ");

    let (calls, results) = pairing(&out);
    assert_eq!(calls, results, "a call lost its result or a result its call");

    let system_end = messages.iter().position(|m| m.role != Role::System).unwrap_or(messages.len());
    assert_eq!(&out[..system_end], &messages[..system_end], "the instructions changed");
    let task = messages.iter().rposition(|m| m.role == Role::User).expect("a task");
    assert!(out.contains(&messages[task]), "the task was removed");

    let report = &compaction.report;
    assert!(report.tokens_before > target, "compacted a conversation that fits");
    assert_eq!(report.tokens_after, counter.count(&out, &[]), "tokens_after is not the count");
    assert!(report.tokens_after < report.tokens_before, "nothing got smaller");
    assert_eq!(out.len() + report.removed.len(), messages.len() + report.inserted.len());
    for &i in &report.inserted {
        assert!(out[i].meta.contains_key("context_compaction"), "{i} inserted without a marker");
    }

    // The changes a write-back is given, applied to the input, give the output: each message
    // written is the one read it stands for (unless a compaction marked it changed), or one put
    // in, and every message said to be as read is so.
    let changes = compaction.changes(messages);
    assert_ne!(changes, Changes::Unknown, "the report does not account for the output");
    assert!(changes.describes(messages, &out), "{changes:?} does not describe the output");
    let origin = changes.origin(out.len()).expect("an origin for every message written");
    for (written, read) in origin.into_iter().enumerate() {
        match read {
            None => assert!(report.inserted.contains(&written), "{written} put in, not reported"),
            Some(read) => assert!(
                out[written] == messages[read]
                    || (changes.may_differ(written) && is_compacted(&out[written].meta)),
                "{written} is neither message {read} as read nor marked changed"
            ),
        }
    }
}

fn notes(messages: &[Message]) -> usize {
    messages
        .iter()
        .filter(|m| m.meta.get("context_compaction").is_some_and(|c| c["strategy"] == "sliding_window"))
        .count()
}

/// Answers every prompt with a short summary.
#[derive(Debug)]
struct Brief;

impl ChatGenerator for Brief {
    fn generate(&self, _: &[Message]) -> Result<Message, GeneratorError> {
        Ok(Message::assistant("- the work so far, in brief"))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn sliding_window_keeps_pairs_task_and_one_note(
        turns in turns(),
        more in turns(),
        systems in 0usize..3,
        min_keep_steps in 0usize..3,
        note in any::<bool>(),
        percent in 0usize..100,
    ) {
        let messages = build(&turns, systems);
        let counter = ApproximateTokenCounter::default();
        let note_text = note.then(|| compaction_core::DEFAULT_OMISSION_NOTE.to_owned());
        let compactor = SlidingWindowCompactor::new(
            SlidingWindowSettings::default().with_min_keep_steps(min_keep_steps).with_omission_note(note_text),
        );
        let target = counter.count(&messages, &[]) * percent / 100;
        let before = messages.clone();
        let Some(compaction) = compactor.try_compact(&messages, target, &counter).unwrap() else { return Ok(()) };
        prop_assert_eq!(&messages, &before);
        check_common(&messages, &compaction, &counter, target);
        let out = compaction.messages(&messages);
        prop_assert!(notes(&out) <= 1);

        // The run goes on and the window slides again: still one note at most.
        let mut longer = out;
        longer.extend(build(&more, 0));
        let target = counter.count(&longer, &[]) * percent / 100;
        if let Some(again) = compactor.try_compact(&longer, target, &counter).unwrap() {
            check_common(&longer, &again, &counter, target);
            prop_assert!(notes(&again.messages(&longer)) <= 1);
        }
    }

    #[test]
    fn summarization_keeps_pairs_and_task(
        turns in turns(),
        systems in 0usize..3,
        min_keep_steps in 0usize..3,
        summary_tokens in prop_oneof![Just(1usize), Just(20), Just(1024)],
        percent in 0usize..100,
    ) {
        let messages = build(&turns, systems);
        let counter = ApproximateTokenCounter::default();
        let settings = SummarizationSettings::default()
            .with_min_keep_steps(min_keep_steps)
            .with_approximate_summary_tokens(summary_tokens);
        let compactor = SummarizationCompactor::new(settings).expect("valid");
        let target = counter.count(&messages, &[]) * percent / 100;
        let before = messages.clone();
        let summarized = compactor.summarize(&messages, target, &counter, &Brief).expect("never fails");
        prop_assert_eq!(&messages, &before);
        prop_assert!(summarized.failure.is_none() || summarized.compaction.is_some() || summarized.rounds.is_empty());
        let Some(compaction) = summarized.compaction else { return Ok(()) };
        check_common(&messages, &compaction, &counter, target);
        let out = compaction.messages(&messages);
        let summarized_total: u64 = out
            .iter()
            .filter_map(|m| m.meta.get("context_compaction"))
            .map(|c| c["summarized_messages"].as_u64().expect("a count"))
            .sum();
        // Summaries of summaries count those they replaced, so the total is at least the removed.
        prop_assert!(summarized_total as usize >= compaction.report.removed.len());
        prop_assert_eq!(summarized.rounds.len() >= compaction.report.inserted.len(), true);
    }

    #[test]
    fn a_chain_prunes_before_it_slides(turns in turns(), percent in 0usize..100) {
        let messages = build(&turns, 1);
        let counter = ApproximateTokenCounter::default();
        let chain = ChainCompactor::new()
            .then(ToolResultPruningCompactor::default())
            .then(SlidingWindowCompactor::default());
        let target = counter.count(&messages, &[]) * percent / 100;
        let Some(compaction) = chain.try_compact(&messages, target, &counter).unwrap() else { return Ok(()) };
        check_common(&messages, &compaction, &counter, target);
        let stages: Vec<&str> = compaction.report.stages.iter().map(|s| s.strategy.as_str()).collect();
        prop_assert!(!stages.is_empty() && stages.len() <= 2);
        if stages.len() == 2 {
            prop_assert_eq!(&stages, &vec!["tool_result_pruning", "sliding_window"]);
            // Pruning alone did not reach the target, or the window would not have run.
            prop_assert!(compaction.report.stages[0].tokens_after > target);
        }
        if stages == ["tool_result_pruning"] {
            prop_assert!(compaction.changes(&messages).changed().is_some(), "in-place edits stay in place");
        }
    }
}
