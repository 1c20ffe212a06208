//! Properties over random agent conversations, with and without the options beyond the reference.

use compaction_core::{Compactor, PruningSettings, ToolResultPruningCompactor};
use compaction_model::{JsonObject, Message, Part, Role, ToolCall};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use proptest::prelude::*;
use serde_json::json;

const TOOLS: [&str; 3] = ["read", "search", "fetch"];

/// One random result: its size, whether it failed, and what its meta holds.
#[derive(Debug, Clone)]
struct ResultSpec {
    size: usize,
    error: bool,
    meta: u8,
}

#[derive(Debug, Clone)]
enum Event {
    User(usize),
    AssistantText(usize),
    /// Calls as (tool, argument size); results for the first `answered` calls; whether all
    /// results share one message.
    Step {
        calls: Vec<(usize, usize)>,
        answered: usize,
        results: Vec<ResultSpec>,
        batched: bool,
    },
    Orphan(usize, ResultSpec),
}

fn result_spec() -> impl Strategy<Value = ResultSpec> {
    (
        prop_oneof![0usize..40, 40usize..400, 400usize..3000],
        any::<bool>(),
        prop_oneof![6 => Just(0u8), 1 => 1u8..4],
    )
        .prop_map(|(size, error, meta)| ResultSpec { size, error: error && size % 5 == 0, meta })
}

fn event(allow_batches: bool) -> impl Strategy<Value = Event> {
    prop_oneof![
        1 => (0usize..80).prop_map(Event::User),
        1 => (0usize..80).prop_map(Event::AssistantText),
        5 => (prop::collection::vec((0usize..3, 0usize..60), 1..4), 0usize..4, prop::collection::vec(result_spec(), 3), any::<bool>())
            .prop_map(move |(calls, answered, results, batched)| {
                let answered = if answered == 0 { 0 } else { calls.len() };
                Event::Step { calls, answered, results, batched: batched && allow_batches }
            }),
        1 => (0usize..3, result_spec()).prop_map(|(tool, spec)| Event::Orphan(tool, spec)),
    ]
}

fn meta_for(kind: u8) -> JsonObject {
    let value = match kind {
        1 => json!({"tool_result_offloaded": ["store://1"]}),
        2 => json!({"context_compaction": {"strategy": "tool_result_pruning", "original_tokens": 9}}),
        3 => json!({"custom_skip": true, "source": "web"}),
        _ => json!({}),
    };
    value.as_object().cloned().unwrap_or_default()
}

fn build(events: &[Event]) -> Vec<Message> {
    let mut messages = vec![Message::system("You are a helpful agent.")];
    let mut next_id = 0;
    let mut new_call = |tool: usize, args: usize| {
        next_id += 1;
        // Some calls carry arguments that are not a JSON object, as models do send.
        if args % 7 == 3 {
            return ToolCall::with_raw_arguments(TOOLS[tool], format!("{{\"q\": \"{}", "a".repeat(args)))
                .with_id(format!("c{next_id}"));
        }
        let arguments = json!({"q": "a".repeat(args)}).as_object().cloned().unwrap_or_default();
        ToolCall::new(TOOLS[tool], arguments).with_id(format!("c{next_id}"))
    };
    for event in events {
        match event {
            Event::User(n) => messages.push(Message::user("u".repeat(*n))),
            Event::AssistantText(n) => messages.push(Message::assistant("t".repeat(*n))),
            Event::Step { calls, answered, results, batched } => {
                let calls: Vec<ToolCall> = calls.iter().map(|&(tool, args)| new_call(tool, args)).collect();
                messages.push(Message::assistant_with_calls(None, calls.clone()));
                let replies: Vec<Message> = calls[..*answered]
                    .iter()
                    .zip(results.iter().cycle())
                    .map(|(c, spec)| {
                        Message::tool("r".repeat(spec.size), c.clone(), spec.error)
                            .with_meta(meta_for(spec.meta))
                    })
                    .collect();
                if *batched && replies.len() > 1 {
                    let mut batch = replies[0].clone();
                    batch.parts = replies.iter().flat_map(|m| m.parts.clone()).collect();
                    messages.push(batch);
                } else if *batched && replies.len() == 1 {
                    // A result beside text, as some transcript formats carry it.
                    let mut with_text = replies[0].clone();
                    with_text.parts.insert(0, Part::Text(compaction_model::TextPart::new("see below")));
                    messages.push(with_text);
                } else {
                    messages.extend(replies);
                }
            }
            Event::Orphan(tool, spec) => {
                let origin = new_call(*tool, 5);
                messages.push(
                    Message::tool("o".repeat(spec.size), origin, spec.error).with_meta(meta_for(spec.meta)),
                );
            }
        }
    }
    messages
}

fn reference_settings() -> impl Strategy<Value = PruningSettings> {
    let placeholders = prop_oneof![
        Just(compaction_core::DEFAULT_PLACEHOLDER.to_owned()),
        Just(r#"{"x": 1} {tool_name} {other}"#.to_owned()),
        Just(String::new()),
        Just("p".repeat(600)),
    ];
    let skips = prop_oneof![
        Just(vec!["tool_result_offloaded".to_owned()]),
        Just(vec![]),
        Just(vec!["custom_skip".to_owned()])
    ];
    (1usize..4, prop_oneof![Just(0usize), Just(10), Just(50), Just(200)], placeholders, skips).prop_map(
        |(min_keep_steps, min_tokens, placeholder, skip_meta_keys)| {
            PruningSettings::default()
                .with_min_keep_steps(min_keep_steps)
                .with_min_tokens(min_tokens)
                .with_placeholder(placeholder)
                .with_skip_meta_keys(skip_meta_keys)
        },
    )
}

fn extended_settings() -> impl Strategy<Value = PruningSettings> {
    (
        reference_settings(),
        prop::collection::vec(0usize..3, 0..2),
        prop::option::of(0usize..400),
        any::<bool>(),
        prop::option::of(1usize..5),
        prop_oneof![3 => Just(0usize), 1 => 1usize..120],
    )
        .prop_map(
            |(base, exclude, clear_at_least, clear_tool_inputs, keep_tool_results, preview_chars)| {
                base.with_exclude_tools(exclude.into_iter().map(|t| TOOLS[t]))
                    .with_clear_at_least(clear_at_least)
                    .with_clear_tool_inputs(clear_tool_inputs)
                    .with_keep_tool_results(keep_tool_results)
                    .with_preview_chars(preview_chars)
            },
        )
}

fn counter() -> impl Strategy<Value = ApproximateTokenCounter> {
    prop_oneof![Just(1.0), Just(2.5), Just(4.0)]
        .prop_map(|ratio| ApproximateTokenCounter::new(ratio).expect("valid ratio"))
}

/// The messages the settings protect, worked out here independently of the crate: whole step
/// spans (assistant message included) for `min_keep_steps`, single messages for `keep_tool_results`.
fn protected(messages: &[Message], settings: &PruningSettings) -> Vec<usize> {
    if let Some(keep) = settings.keep_tool_results {
        let mut with_results: Vec<usize> =
            (0..messages.len()).filter(|&i| messages[i].has_tool_call_result()).collect();
        return with_results.split_off(with_results.len().saturating_sub(keep));
    }
    let mut spans = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role == Role::Assistant {
            let mut end = i + 1;
            while end < messages.len() && messages[end].has_tool_call_result() {
                end += 1;
            }
            if end > i + 1 {
                spans.push((i, end));
            }
            i = end;
        } else {
            i += 1;
        }
    }
    spans.iter().rev().take(settings.min_keep_steps).flat_map(|&(start, end)| start..end).collect()
}

fn ids(message: &Message) -> Vec<Option<String>> {
    let calls = message.tool_calls().map(|c| c.id.clone());
    calls.chain(message.tool_call_results().map(|r| r.origin.id.clone())).collect()
}

/// Every (call id, result id) the conversation pairs: each call id with the number of results
/// answering it.
fn pairs(messages: &[Message]) -> Vec<(Option<String>, usize)> {
    let results: Vec<Option<String>> =
        messages.iter().flat_map(|m| m.tool_call_results().map(|r| r.origin.id.clone())).collect();
    messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| (c.id.clone(), results.iter().filter(|id| **id == c.id).count()))
        .collect()
}

/// `after` is `before` with some tool results replaced by the placeholder (their calls' arguments
/// emptied with `clear_tool_inputs`), every other part in place, and a marker added.
fn only_results_pruned(before: &Message, after: &Message, settings: &PruningSettings) -> bool {
    if before.parts.len() != after.parts.len() {
        return false;
    }
    let only_results = before.parts.iter().all(|p| matches!(p, Part::ToolCallResult(_)));
    let (role, name) = if only_results { (Role::Tool, None) } else { (before.role, before.name.clone()) };
    if after.role != role || after.name != name {
        return false;
    }
    before.parts.iter().zip(&after.parts).all(|(a, b)| match (a, b) {
        (Part::ToolCallResult(a), Part::ToolCallResult(b)) if a != b => {
            let placeholder = settings.placeholder.replace("{tool_name}", &a.origin.tool_name);
            let text_ok = matches!(&b.result, compaction_model::ToolResultContent::Text(t)
                if t.as_str() == placeholder || (settings.preview_chars > 0 && t.contains(&placeholder)));
            let mut origin = a.origin.clone();
            if settings.clear_tool_inputs {
                origin.arguments = Default::default();
                origin.raw_arguments = None;
            }
            text_ok && b.origin == origin && b.error == a.error
        }
        (a, b) => a == b,
    })
}

/// The assistant message `before` with only call arguments emptied and a marker added.
fn only_inputs_cleared(before: &Message, after: &Message) -> bool {
    let mut expected = before.clone();
    for (part, new) in expected.parts.iter_mut().zip(&after.parts) {
        if let (Part::ToolCall(call), Part::ToolCall(new)) = (part, new) {
            if new.has_no_arguments() {
                call.arguments = Default::default();
                call.raw_arguments = None;
            }
        }
    }
    expected.meta.insert("context_compaction".into(), after.meta["context_compaction"].clone());
    before.role == Role::Assistant && expected == *after
}

fn check(messages: &[Message], settings: PruningSettings, percent: usize, counter: &dyn TokenCounter) {
    let compactor = ToolResultPruningCompactor::new(settings.clone()).expect("valid settings");
    let before = messages.to_vec();
    let total = counter.count(messages, &[]);
    let target = total * percent / 100;
    let compaction = compactor.try_compact(messages, target, counter).unwrap();
    assert_eq!(messages, &before[..], "input changed");
    assert_eq!(
        compactor.plan(messages, target, counter).unwrap().as_ref(),
        compaction.as_ref().map(|c| &c.report)
    );
    let Some(compaction) = compaction else {
        return;
    };
    assert!(total > target, "compacted a conversation that fits");
    let (out, report) = (&compaction.messages(messages), &compaction.report);
    assert_eq!(out.len(), messages.len());
    let mut applied = messages.to_vec();
    compaction.clone().apply(&mut applied).expect("fits the conversation it was made from");
    assert_eq!(&applied, out, "rewriting in place and building beside differ");
    // Per message, the entries run from the message's count before to the count of the message
    // built, each starting where the one before ended.
    let mut by_message: std::collections::BTreeMap<usize, Vec<&compaction_core::ResultReport>> =
        std::collections::BTreeMap::new();
    for r in &report.results {
        by_message.entry(r.index).or_default().push(r);
    }
    for (index, entries) in &by_message {
        assert_eq!(
            entries[0].original_tokens,
            counter.count(&messages[*index..=*index], &[]),
            "{index}: before"
        );
        for pair in entries.windows(2) {
            assert_eq!(pair[0].replacement_tokens, pair[1].original_tokens, "{index}: entries chain");
            assert!(pair[0].position < pair[1].position, "{index}: entries in order");
        }
        let last = entries.last().expect("an entry");
        let recount = counter.count(&out[*index..=*index], &[]);
        assert_eq!(recount, last.replacement_tokens, "{index}: reported replacement count");
    }
    assert!(counter.count(out, &[]) <= total, "output larger");
    assert!(report.estimated_tokens_after < report.tokens_before);
    assert_eq!(report.tokens_before - report.estimated_tokens_after, report.tokens_freed());
    // The report's figure after is the output counted, and reached means reached.
    assert_eq!(report.tokens_after, counter.count(out, &[]), "tokens_after is not the count");
    assert_eq!(report.target_reached, report.tokens_after <= report.target_tokens);
    if let Some(least) = settings.clear_at_least {
        assert!(report.tokens_freed() >= least);
    }
    let results = report.changed_indices();
    let inputs: Vec<usize> = report.inputs_cleared.iter().map(|r| r.index).collect();
    for (i, (old, new)) in messages.iter().zip(out).enumerate() {
        if old == new {
            assert!(!results.contains(&i) && !inputs.contains(&i), "{i} reported but unchanged");
            continue;
        }
        if results.contains(&i) {
            assert!(old.has_tool_call_result(), "{i} is no tool-result message");
            assert_eq!(new.meta["context_compaction"]["strategy"], json!("tool_result_pruning"));
            assert!(only_results_pruned(old, new, &settings), "{i}: more than results changed");
            let pruned: Vec<usize> =
                report.results.iter().filter(|r| r.index == i).map(|r| r.position).collect();
            for (position, (a, b)) in old.tool_call_results().zip(new.tool_call_results()).enumerate() {
                assert_eq!(pruned.contains(&position), a != b, "{i}: result {position} reported or changed");
            }
        } else {
            assert!(settings.clear_tool_inputs && inputs.contains(&i), "{i} changed unreported");
            assert!(only_inputs_cleared(old, new), "{i}: more than inputs changed");
        }
    }
    for i in protected(messages, &settings) {
        let (old, new) = (serde_json::to_string(&messages[i]), serde_json::to_string(&out[i]));
        assert_eq!(old.expect("writes"), new.expect("writes"), "protected {i} changed");
    }
    for (old, new) in messages.iter().zip(out) {
        for (a, b) in old.tool_call_results().zip(new.tool_call_results()) {
            if settings.exclude_tools.contains(&a.origin.tool_name) {
                assert_eq!(a, b, "excluded tool's result changed");
            }
        }
        for (c_old, c_new) in old.tool_calls().zip(new.tool_calls()) {
            if settings.exclude_tools.contains(&c_old.tool_name) {
                assert_eq!(c_old, c_new, "excluded tool's call changed");
            }
        }
    }
    // Every call keeps its result, whatever the message holds: no part is dropped or moved.
    for (old, new) in messages.iter().zip(out) {
        assert_eq!(ids(old), ids(new), "a call and its result came apart");
    }
    assert_eq!(pairs(messages), pairs(out), "a call lost its result");
    if counter.count(out, &[]) <= target {
        assert_eq!(compactor.try_compact(out, target, counter).unwrap(), None, "second run compacted again");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn reference_settings_keep_every_rule(
        events in prop::collection::vec(event(false), 0..14),
        settings in reference_settings(),
        percent in 0usize..110,
        counter in counter(),
    ) {
        check(&build(&events), settings, percent, &counter);
    }

    #[test]
    fn new_options_keep_every_rule(
        events in prop::collection::vec(event(false), 0..14),
        settings in extended_settings(),
        percent in 0usize..110,
        counter in counter(),
    ) {
        check(&build(&events), settings, percent, &counter);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Messages holding several results, or a result beside text: each result is pruned on its
    /// own and every part stays.
    #[test]
    fn batched_results_keep_the_other_rules(
        events in prop::collection::vec(event(true), 0..14),
        settings in extended_settings(),
        percent in 0usize..110,
        counter in counter(),
    ) {
        check(&build(&events), settings, percent, &counter);
    }
}

/// Replays `messages` as an agent loop would meet them — one more message each step, compacted
/// whenever over the target, the compaction applied — once with a memo kept from step to step
/// and once from scratch. Both must give the same compaction at every step.
fn memo_agrees(messages: &[Message], compactor: &dyn Compactor, percent: usize, counter: &dyn TokenCounter) {
    let mut with_memo: Vec<Message> = Vec::new();
    let mut memo = compaction_core::Memo::default();
    for message in messages {
        with_memo.push(message.clone());
        let target = counter.count(&with_memo, &[]) * percent / 100;
        let fresh = compactor.try_compact(&with_memo, target, counter).unwrap();
        let remembered =
            compactor.compact_with_memo(&with_memo, target, counter, &mut memo).expect("compacts");
        assert_eq!(fresh, remembered, "the memo changed the answer at message {}", with_memo.len() - 1);
        assert!(memo.settled <= with_memo.len());
        if let Some(compaction) = remembered {
            match compaction.changes(&with_memo).changed() {
                Some(indices) => memo.rewritten(indices.iter().copied()),
                None => memo = compaction_core::Memo::default(),
            }
            compaction.apply(&mut with_memo).expect("fits the conversation it was made from");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// What a compactor remembers between calls never changes what it does.
    #[test]
    fn a_memo_never_changes_the_answer(
        events in prop::collection::vec(event(true), 0..14),
        settings in extended_settings(),
        percent in 20usize..95,
        counter in counter(),
    ) {
        let messages = build(&events);
        let pruning = ToolResultPruningCompactor::new(settings).expect("valid");
        memo_agrees(&messages, &pruning, percent, &counter);
        let chain = compaction_core::ChainCompactor::new()
            .then(pruning)
            .then(ToolResultPruningCompactor::new(PruningSettings::default().with_min_tokens(0)).expect("valid"));
        memo_agrees(&messages, &chain, percent, &counter);
    }
}
