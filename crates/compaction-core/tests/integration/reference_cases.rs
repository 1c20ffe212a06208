//! The reference's behaviour case by case: the situations Haystack's own tests of
//! `ToolResultPruningCompactor` and its walk cover, with the same conversations and settings.
//!
//! Sizes use [`CharCounter`] (one token per character), so every expectation is exact.

use std::sync::atomic::{AtomicUsize, Ordering};

use compaction_core::{
    agent_step_spans, last_assistant_index, replace_tool_results_until_target, Compactor, Error,
    PruningSettings, Replacement, ToolResultPruningCompactor, DEFAULT_PLACEHOLDER, HAYSTACK_PRUNING_TYPE,
};
use compaction_model::{Message, Role, ToolResultContent, ToolSpec, TOOL_RESULT_OFFLOADED};
use compaction_tokens::{Additive, Counts, Measure, TokenCounter};
use serde_json::{json, Value};

use crate::{call, calling, result, CharCounter};

fn compactor(settings: PruningSettings) -> ToolResultPruningCompactor {
    ToolResultPruningCompactor::new(settings).expect("valid settings")
}

fn meta(value: Value) -> compaction_model::JsonObject {
    value.as_object().cloned().expect("an object")
}

/// user, then three steps calling `search` with results of 500 characters.
fn three_steps() -> Vec<Message> {
    let (a, b, c) = (call("search", "a"), call("search", "b"), call("search", "c"));
    vec![
        Message::user("go"),
        calling(std::slice::from_ref(&a)),
        result(&a, 500),
        calling(std::slice::from_ref(&b)),
        result(&b, 500),
        calling(std::slice::from_ref(&c)),
        result(&c, 500),
        Message::assistant("done"),
    ]
}

fn total(messages: &[Message]) -> usize {
    CharCounter.count(messages, &[])
}

#[test]
fn defaults_are_the_references() {
    let settings = PruningSettings::default();
    assert_eq!(settings.min_keep_steps, 1);
    assert_eq!(settings.min_tokens, 200);
    assert_eq!(
        settings.placeholder,
        "[Tool result removed to free up context. Call `{tool_name}` again if you need it.]"
    );
    assert_eq!(settings.placeholder, DEFAULT_PLACEHOLDER);
    assert_eq!(settings.skip_meta_keys, vec![TOOL_RESULT_OFFLOADED.to_owned()]);
    assert_eq!(ToolResultPruningCompactor::default().name(), "ToolResultPruningCompactor");
}

#[test]
fn min_keep_steps_below_one_is_rejected() {
    let settings = PruningSettings::default().with_min_keep_steps(0);
    assert_eq!(ToolResultPruningCompactor::new(settings), Err(Error::MinKeepStepsTooSmall(0)));
    let from_config = ToolResultPruningCompactor::from_value(&json!({"min_keep_steps": -2}));
    assert_eq!(from_config, Err(Error::MinKeepStepsTooSmall(-2)));
}

#[test]
fn negative_min_tokens_is_rejected() {
    let from_config = ToolResultPruningCompactor::from_value(&json!({"min_tokens": -1}));
    assert_eq!(from_config, Err(Error::NegativeMinTokens(-1)));
    assert_eq!(from_config.unwrap_err().to_string(), "`min_tokens` must be at least 0, got -1");
}

#[test]
fn to_dict_and_from_dict_round_trip() {
    let settings = PruningSettings::default()
        .with_min_keep_steps(2)
        .with_min_tokens(50)
        .with_placeholder("[gone: {tool_name}]")
        .with_skip_meta_keys(["a", "b"]);
    let dict = settings.to_haystack_value().expect("reference options only");
    assert_eq!(
        dict,
        json!({"type": HAYSTACK_PRUNING_TYPE, "init_parameters": {
            "min_keep_steps": 2, "min_tokens": 50, "placeholder": "[gone: {tool_name}]", "skip_meta_keys": ["a", "b"]}})
    );
    assert_eq!(PruningSettings::from_value(&dict), Ok(settings));
}

#[test]
fn from_dict_reads_what_haystack_writes() {
    // `ToolResultPruningCompactor().to_dict()` in Haystack 3.4.1.
    let written = r#"{"type": "haystack.hooks.compaction.tool_result_pruning.ToolResultPruningCompactor",
        "init_parameters": {"min_keep_steps": 1, "min_tokens": 200,
        "placeholder": "[Tool result removed to free up context. Call `{tool_name}` again if you need it.]",
        "skip_meta_keys": ["tool_result_offloaded"]}}"#;
    let compactor: ToolResultPruningCompactor = serde_json::from_str(written).expect("reads");
    assert_eq!(compactor, ToolResultPruningCompactor::default());
    // Missing parameters take their defaults, as the constructor's keyword defaults do.
    let sparse = json!({"type": HAYSTACK_PRUNING_TYPE, "init_parameters": {"min_tokens": 7}});
    assert_eq!(PruningSettings::from_value(&sparse).map(|s| s.min_tokens), Ok(7));
    let other = json!({"type": "haystack.Other", "init_parameters": {}});
    assert!(matches!(PruningSettings::from_value(&other), Err(Error::WrongType { .. })));
    let unknown = json!({"type": HAYSTACK_PRUNING_TYPE, "init_parameters": {"min_token": 7}});
    assert_eq!(
        PruningSettings::from_value(&unknown),
        Err(Error::UnknownSetting { key: "min_token".into(), of: "ToolResultPruningCompactor" })
    );
}

#[test]
fn fits_already_returns_none() {
    let messages = three_steps();
    let compactor = ToolResultPruningCompactor::default();
    assert_eq!(compactor.try_compact(&messages, total(&messages), &CharCounter).unwrap(), None);
    assert_eq!(compactor.try_compact(&messages, total(&messages) + 100, &CharCounter).unwrap(), None);
}

#[test]
fn empty_conversation_returns_none() {
    assert_eq!(ToolResultPruningCompactor::default().try_compact(&[], 0, &CharCounter).unwrap(), None);
}

#[test]
fn prunes_oldest_first_and_stops_at_the_target() {
    let messages = three_steps();
    let compactor = compactor(PruningSettings::default().with_min_tokens(0));
    // Pruning one result is enough.
    let compaction =
        compactor.try_compact(&messages, total(&messages) - 100, &CharCounter).unwrap().expect("pruned");
    assert_eq!(compaction.report.changed_indices(), vec![2]);
    assert_eq!(compaction.messages(&messages)[4], messages[4]);
    assert!(compaction.report.target_reached);
    // A tighter target takes the next one too, but never the newest step's.
    let compaction = compactor.try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned");
    assert_eq!(compaction.report.changed_indices(), vec![2, 4]);
    assert_eq!(compaction.messages(&messages)[6], messages[6]);
    assert!(!compaction.report.target_reached);
}

#[test]
fn pruned_message_keeps_origin_error_and_meta() {
    let origin = call("fetch", "x1");
    let failing =
        Message::tool("e".repeat(400), origin.clone(), true).with_meta(meta(json!({"source": "web"})));
    let next = call("fetch", "x2");
    let messages = vec![
        Message::user("go"),
        calling(std::slice::from_ref(&origin)),
        failing,
        calling(std::slice::from_ref(&next)),
        result(&next, 10),
    ];
    let compaction = ToolResultPruningCompactor::default()
        .try_compact(&messages, 0, &CharCounter)
        .unwrap()
        .expect("pruned");
    let pruned = &compaction.messages(&messages)[2];
    assert_eq!(pruned.role, Role::Tool);
    let result = pruned.tool_call_result().expect("a result");
    assert_eq!(*result.origin, origin);
    assert!(result.error);
    assert_eq!(
        result.result,
        "[Tool result removed to free up context. Call `fetch` again if you need it.]".into()
    );
    assert_eq!(
        Value::from(pruned.meta.clone()),
        json!({"source": "web", "context_compaction": {"strategy": "tool_result_pruning", "original_tokens": 400}})
    );
}

#[test]
fn newest_steps_are_protected_even_when_the_target_is_missed() {
    let messages = three_steps();
    for (keep, changed) in [(1, vec![2, 4]), (2, vec![2]), (3, vec![])] {
        let compactor = compactor(PruningSettings::default().with_min_keep_steps(keep));
        let got = compactor.try_compact(&messages, 0, &CharCounter).unwrap();
        assert_eq!(
            got.map(|c| c.report.changed_indices()).unwrap_or_default(),
            changed,
            "min_keep_steps {keep}"
        );
    }
}

#[test]
fn parallel_results_of_one_step_are_protected_together() {
    let (a, b, c) = (call("search", "a"), call("search", "b"), call("read", "c"));
    let messages = vec![
        Message::user("go"),
        calling(std::slice::from_ref(&a)),
        result(&a, 500),
        calling(&[b.clone(), c.clone()]),
        result(&b, 500),
        result(&c, 500),
    ];
    let compaction = ToolResultPruningCompactor::default()
        .try_compact(&messages, 0, &CharCounter)
        .unwrap()
        .expect("pruned");
    assert_eq!(compaction.report.changed_indices(), vec![2]);
    assert_eq!(&compaction.messages(&messages)[3..], &messages[3..]);
}

#[test]
fn steps_without_results_neither_count_nor_are_protected() {
    let (a, b) = (call("search", "a"), call("search", "b"));
    let messages = vec![
        Message::user("go"),
        calling(std::slice::from_ref(&a)),
        result(&a, 500),
        calling(std::slice::from_ref(&b)),
        result(&b, 500),
        Message::assistant("thinking aloud"),
        Message::assistant("still thinking"),
    ];
    // The two text-only steps do not push the step with result 4 out of protection.
    let compaction = ToolResultPruningCompactor::default()
        .try_compact(&messages, 0, &CharCounter)
        .unwrap()
        .expect("pruned");
    assert_eq!(compaction.report.changed_indices(), vec![2]);
}

#[test]
fn small_results_are_left() {
    let (a, b, c) = (call("search", "a"), call("search", "b"), call("search", "c"));
    let messages = vec![
        Message::user("go"),
        calling(std::slice::from_ref(&a)),
        result(&a, 200),
        calling(std::slice::from_ref(&b)),
        result(&b, 201),
        calling(std::slice::from_ref(&c)),
        result(&c, 500),
    ];
    // 200 tokens is not above `min_tokens`; 201 is.
    let compaction = ToolResultPruningCompactor::default()
        .try_compact(&messages, 0, &CharCounter)
        .unwrap()
        .expect("pruned");
    assert_eq!(compaction.report.changed_indices(), vec![4]);
    let none_big_enough = compactor(PruningSettings::default().with_min_tokens(201));
    assert_eq!(none_big_enough.try_compact(&messages, 0, &CharCounter).unwrap(), None);
}

#[test]
fn compacted_results_are_left_whatever_their_marker_holds() {
    let mut messages = three_steps();
    messages[2].meta = meta(json!({"context_compaction": null})).into();
    messages[4].meta = meta(json!({"context_compaction": {"strategy": "something_else"}})).into();
    assert_eq!(ToolResultPruningCompactor::default().try_compact(&messages, 0, &CharCounter).unwrap(), None);
}

#[test]
fn results_with_a_skip_key_are_left() {
    let mut messages = three_steps();
    // Presence counts, not the value.
    messages[2].meta = meta(json!({"tool_result_offloaded": false})).into();
    messages[4].meta = meta(json!({"keep_me": 1})).into();
    let compaction = ToolResultPruningCompactor::default()
        .try_compact(&messages, 0, &CharCounter)
        .unwrap()
        .expect("pruned");
    assert_eq!(compaction.report.changed_indices(), vec![4]);
    let custom = compactor(PruningSettings::default().with_skip_meta_keys(["keep_me"]));
    assert_eq!(
        custom.try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned").report.changed_indices(),
        vec![2]
    );
}

#[test]
fn placeholder_fills_in_only_the_tool_name() {
    let messages = three_steps();
    let placeholder = r#"{"note": "pruned"} {tool_name}/{tool_name} {other} {}"#;
    let compactor = compactor(PruningSettings::default().with_placeholder(placeholder));
    let compaction =
        compactor.try_compact(&messages, total(&messages) - 1, &CharCounter).unwrap().expect("pruned");
    let compacted = compaction.messages(&messages);
    let text = &compacted[2].tool_call_result().expect("result").result;
    assert_eq!(*text, r#"{"note": "pruned"} search/search {other} {}"#.into());
}

#[test]
fn a_placeholder_that_saves_nothing_is_not_used() {
    let messages = three_steps();
    let long = compactor(PruningSettings::default().with_placeholder("p".repeat(500)).with_min_tokens(0));
    assert_eq!(long.try_compact(&messages, 0, &CharCounter).unwrap(), None);
    let one_shorter = compactor(PruningSettings::default().with_placeholder("p".repeat(499)));
    let compaction = one_shorter.try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned");
    assert_eq!(compaction.report.results[0].tokens_freed, 1);
}

#[test]
fn the_input_is_not_changed() {
    let messages = three_steps();
    let before = messages.clone();
    let compaction = ToolResultPruningCompactor::default().try_compact(&messages, 0, &CharCounter).unwrap();
    assert!(compaction.is_some());
    assert_eq!(messages, before);
}

/// Beyond the reference, which keeps only the first result: each result is judged and pruned on
/// its own, and every part of the message stays.
#[test]
fn a_message_with_several_results_has_each_pruned_on_its_own() {
    let (a, b, d, c) = (call("search", "a"), call("read", "b"), call("search", "d"), call("search", "c"));
    let mut batch = result(&a, 300);
    batch.parts.extend(result(&b, 300).parts);
    // Too small to prune on its own.
    batch.parts.extend(result(&d, 150).parts);
    batch.parts.push(compaction_model::Part::Text(compaction_model::TextPart::new("note")));
    let batch = batch.with_name("runner").with_meta(meta(json!({"batch": true})));
    let messages = vec![
        Message::user("go"),
        calling(&[a.clone(), b.clone(), d.clone()]),
        batch,
        calling(std::slice::from_ref(&c)),
        result(&c, 500),
    ];
    let compaction = ToolResultPruningCompactor::default()
        .try_compact(&messages, 0, &CharCounter)
        .unwrap()
        .expect("pruned");
    let pruned = &compaction.messages(&messages)[2];
    // The message keeps its name, its role and its text, since it holds more than results.
    assert_eq!(pruned.name.as_deref(), Some("runner"));
    assert_eq!(pruned.parts.len(), 4);
    assert_eq!(pruned.parts[3], messages[2].parts[3]);
    let results: Vec<_> = pruned.tool_call_results().collect();
    assert_eq!(results.iter().map(|r| (*r.origin).clone()).collect::<Vec<_>>(), vec![a, b, d]);
    let placeholder = |tool: &str| DEFAULT_PLACEHOLDER.replace("{tool_name}", tool);
    assert!(matches!(&results[0].result, ToolResultContent::Text(t) if t.as_str() == placeholder("search")));
    assert!(matches!(&results[1].result, ToolResultContent::Text(t) if t.as_str() == placeholder("read")));
    assert_eq!(results[2], messages[2].tool_call_results().nth(2).expect("third"));
    // The whole message's count, before.
    assert_eq!(pruned.meta["context_compaction"]["original_tokens"], json!(754));
    assert_eq!(pruned.meta["batch"], json!(true));
    // One report entry per pruned result, chained through the message's count.
    let entries: Vec<_> = compaction.report.results.iter().filter(|r| r.index == 2).collect();
    assert_eq!(entries.iter().map(|r| r.position).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(entries[0].original_tokens, 754);
    assert_eq!(entries[0].replacement_tokens, entries[1].original_tokens);
    assert_eq!(entries[1].replacement_tokens, CharCounter.count(std::slice::from_ref(pruned), &[]));
    assert_eq!(entries[1].call_id.as_deref(), Some("b"));
}

/// A message made only of results becomes a tool message, as in the reference, and keeps its
/// name, which the reference drops (README, "Deviations from the reference").
#[test]
fn a_batch_of_results_only_becomes_a_tool_message() {
    let (a, b, c) = (call("search", "a"), call("read", "b"), call("search", "c"));
    let mut batch = result(&a, 300);
    batch.parts.extend(result(&b, 300).parts);
    batch.role = Role::User;
    let batch = batch.with_name("runner");
    let messages = vec![calling(&[a, b]), batch, calling(std::slice::from_ref(&c)), result(&c, 500)];
    let compaction = ToolResultPruningCompactor::default()
        .try_compact(&messages, 0, &CharCounter)
        .unwrap()
        .expect("pruned");
    let pruned = &compaction.messages(&messages)[1];
    assert_eq!((pruned.role, pruned.name.as_deref()), (Role::Tool, Some("runner")));
    assert_eq!(pruned.tool_call_results().count(), 2);
    assert_eq!(compaction.report.changed_indices(), vec![1]);
}

#[test]
fn results_after_no_assistant_message_are_never_protected() {
    let a = call("search", "a");
    let messages = vec![Message::user("go"), result(&a, 500)];
    let compaction = ToolResultPruningCompactor::default()
        .try_compact(&messages, 0, &CharCounter)
        .unwrap()
        .expect("pruned");
    assert_eq!(compaction.report.changed_indices(), vec![1]);
}

#[test]
fn tool_results_of_any_role_extend_a_step() {
    let (a, b) = (call("search", "a"), call("search", "b"));
    let mut user_result = result(&b, 500);
    user_result.role = Role::User;
    let messages = vec![calling(std::slice::from_ref(&a)), result(&a, 500), user_result];
    // Both results belong to the one step, so both are protected.
    assert_eq!(agent_step_spans(&messages, 0), vec![(0, 3)]);
    assert_eq!(ToolResultPruningCompactor::default().try_compact(&messages, 0, &CharCounter).unwrap(), None);
}

#[test]
fn step_spans_and_last_assistant() {
    let (a, b) = (call("search", "a"), call("search", "b"));
    let messages = vec![
        Message::system("be brief"),
        Message::user("go"),
        calling(&[a.clone(), b.clone()]),
        result(&a, 5),
        result(&b, 5),
        Message::assistant("text only"),
        Message::user("more"),
        result(&a, 5),
    ];
    assert_eq!(agent_step_spans(&messages, 0), vec![(2, 5), (5, 6)]);
    assert_eq!(agent_step_spans(&messages, 3), vec![(5, 6)]);
    assert_eq!(agent_step_spans(&messages, 8), vec![]);
    assert_eq!(last_assistant_index(&messages), Some(5));
    assert_eq!(last_assistant_index(&messages[..2]), None);
}

/// Counts `CharCounter`'s way, recording how it was asked.
#[derive(Debug, Default)]
struct Spy {
    count_each_calls: AtomicUsize,
    widest_count: AtomicUsize,
}

impl TokenCounter for Spy {
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, compaction_tokens::Error> {
        self.widest_count.fetch_max(messages.len(), Ordering::Relaxed);
        CharCounter.try_count(messages, tools)
    }

    fn describe(&self) -> String {
        "spy".into()
    }

    // Its counts add up, so the compacted conversation is counted without counting it whole.
    fn additive(&self) -> Option<&dyn Additive> {
        Some(self)
    }
}

impl Additive for Spy {
    fn measure_joined(&self, message: &Message) -> Measure {
        Measure { text: crate::message_chars(message), ..Measure::default() }
    }

    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        before.text + CharCounter.count(std::slice::from_ref(last), tools)
    }

    fn count_each_measured(&self, messages: &[Message]) -> (Counts, Option<Vec<Measure>>) {
        self.count_each_calls.fetch_add(1, Ordering::Relaxed);
        let counts = Counts {
            total: CharCounter.count(messages, &[]),
            each: messages.iter().map(crate::message_chars).collect(),
        };
        let measures = messages.iter().take(messages.len().saturating_sub(1)).map(|m| self.measure_joined(m));
        (counts, Some(measures.collect()))
    }
}

#[test]
fn the_conversation_is_counted_once() {
    let messages = three_steps();
    let spy = Spy::default();
    let compaction =
        ToolResultPruningCompactor::default().try_compact(&messages, 0, &spy).unwrap().expect("pruned");
    assert_eq!(spy.count_each_calls.load(Ordering::Relaxed), 1);
    // Only single replacements are counted afterwards, and the result is measured message by
    // message (the counts add up): the whole conversation is never counted again.
    assert_eq!(spy.widest_count.load(Ordering::Relaxed), 1);
    let placeholder_tokens = DEFAULT_PLACEHOLDER.replace("{tool_name}", "search").len();
    assert_eq!(compaction.report.tokens_after, total(&messages) - 2 * (500 - placeholder_tokens));
}

#[test]
fn the_walk_offers_unprotected_results_with_index_and_own_count() {
    let messages = three_steps();
    let mut offered = Vec::new();
    let mut replace = |index: usize, message: &Message, own: usize| {
        offered.push((index, own));
        let Some(result) = message.tool_call_result() else { return Ok(None) };
        Ok(Some(Replacement::new(Message::tool("gone", result.origin.clone(), false), own, 4)))
    };
    let compaction =
        replace_tool_results_until_target(&messages, 0, &CharCounter, 1, "test_strategy", &mut replace)
            .unwrap()
            .expect("replaced");
    assert_eq!(offered, vec![(2, 500), (4, 500)]);
    assert_eq!(compaction.report.strategy, "test_strategy");
    assert_eq!(compaction.report.tokens_freed(), 2 * 496);
    assert_eq!(compaction.report.tokens_before - compaction.report.tokens_after, 2 * 496);
}

#[test]
fn the_walk_returns_none_when_nothing_is_replaced() {
    let messages = three_steps();
    let mut never = |_: usize, _: &Message, _: usize| Ok(None);
    assert_eq!(
        replace_tool_results_until_target(&messages, 0, &CharCounter, 1, "s", &mut never).unwrap(),
        None
    );
    // A replacement that frees nothing is not kept either.
    let mut same =
        |_: usize, message: &Message, own: usize| Ok(Some(Replacement::new(message.clone(), own, own)));
    assert_eq!(
        replace_tool_results_until_target(&messages, 0, &CharCounter, 1, "s", &mut same).unwrap(),
        None
    );
}

/// Counts `CharCounter`'s way for a whole conversation, and fails for one message alone: a
/// provider's counter that fails partway through a compaction.
#[derive(Debug)]
struct FailsAlone;

impl TokenCounter for FailsAlone {
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, compaction_tokens::Error> {
        match messages.len() {
            1 => Err(compaction_tokens::Error::Provider {
                counter: "fails-alone".into(),
                source: "HTTP 503".into(),
            }),
            _ => CharCounter.try_count(messages, tools),
        }
    }

    fn describe(&self) -> String {
        "fails-alone".into()
    }

    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, compaction_tokens::Error> {
        Ok(Counts {
            total: CharCounter.count(messages, &[]),
            each: messages.iter().map(crate::message_chars).collect(),
        })
    }
}

/// A count that fails partway is the compaction's error, never an estimate taken for a size, for
/// every strategy that counts messages one by one.
#[test]
fn a_count_that_fails_partway_is_the_compactions_error() {
    let messages = three_steps();
    let pruning = ToolResultPruningCompactor::default().try_compact(&messages, 0, &FailsAlone);
    assert!(matches!(pruning, Err(Error::Count(_))), "{pruning:?}");
    let plan = ToolResultPruningCompactor::default().plan(&messages, 0, &FailsAlone);
    assert!(matches!(plan, Err(Error::Count(_))), "{plan:?}");
    let masking = compaction_core::ObservationMaskingCompactor::new(compaction_core::MaskingSettings::new(1))
        .expect("valid")
        .try_compact(&messages, 0, &FailsAlone);
    assert!(matches!(masking, Err(Error::Count(_))), "{masking:?}");
    // The cause is the error's source, said once.
    let error = pruning.unwrap_err();
    assert_eq!(
        compaction_core::error_chain(&error),
        "counting tokens failed: counter fails-alone could not count: HTTP 503"
    );
}
