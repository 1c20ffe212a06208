//! The options beyond the reference, the report, the dry run and the serde forms.

use compaction_core::{Compactor, Error, PruningSettings, ToolResultPruningCompactor};
use compaction_model::{Message, Part, ToolResultContent, STRATEGY_TOOL_INPUT_CLEARING};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use serde_json::json;

use crate::{call, calling, result, CharCounter};

fn compactor(settings: PruningSettings) -> ToolResultPruningCompactor {
    ToolResultPruningCompactor::new(settings).expect("valid settings")
}

/// user, then steps calling `read`, `search`, `read` and `search` with 500-character results.
fn four_steps() -> Vec<Message> {
    let calls = [call("read", "r1"), call("search", "s1"), call("read", "r2"), call("search", "s2")];
    let mut messages = vec![Message::user("go")];
    for c in &calls {
        messages.push(calling(std::slice::from_ref(c)));
        messages.push(result(c, 500));
    }
    messages
}

#[test]
fn every_option_is_off_by_default() {
    let settings = PruningSettings::default();
    assert!(settings.exclude_tools.is_empty());
    assert_eq!(settings.clear_at_least, None);
    assert!(!settings.clear_tool_inputs);
    assert_eq!(settings.keep_tool_results, None);
    // The plain form leaves options that are off out.
    assert_eq!(
        serde_json::to_value(&settings).expect("serializes"),
        json!({"min_keep_steps": 1, "min_tokens": 200,
               "placeholder": compaction_core::DEFAULT_PLACEHOLDER, "skip_meta_keys": ["tool_result_offloaded"]})
    );
}

#[test]
fn excluded_tools_are_never_pruned() {
    let messages = four_steps();
    let compactor = compactor(PruningSettings::default().with_exclude_tools(["read"]));
    let compaction = compactor.try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned");
    assert_eq!(compaction.report.changed_indices(), vec![4]);
    assert_eq!(compaction.report.tool_names(), vec!["search"]);
}

#[test]
fn clear_at_least_skips_small_savings() {
    let messages = four_steps();
    let target = CharCounter.count(&messages, &[]) - 1;
    let freed_by_one = compactor(PruningSettings::default())
        .plan(&messages, target, &CharCounter)
        .unwrap()
        .expect("something to prune")
        .tokens_freed();
    let enough = compactor(PruningSettings::default().with_clear_at_least(Some(freed_by_one)));
    assert!(enough.try_compact(&messages, target, &CharCounter).unwrap().is_some());
    let too_little = compactor(PruningSettings::default().with_clear_at_least(Some(freed_by_one + 1)));
    assert_eq!(too_little.try_compact(&messages, target, &CharCounter).unwrap(), None);
    assert_eq!(too_little.plan(&messages, target, &CharCounter).unwrap(), None);
}

#[test]
fn clear_tool_inputs_empties_the_pruned_calls_and_marks_them() {
    let (a, b, c) = (call("read", "a"), call("search", "b"), call("read", "c"));
    let messages = vec![
        Message::user("go"),
        calling(&[a.clone(), b.clone()]),
        result(&a, 500),
        result(&b, 50),
        calling(std::slice::from_ref(&c)),
        result(&c, 500),
    ];
    let compactor = compactor(PruningSettings::default().with_clear_tool_inputs(true));
    let compaction = compactor.try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned");
    // Only `a`'s result was big enough to prune, so only `a`'s arguments go.
    assert_eq!(compaction.report.changed_indices(), vec![2]);
    let assistant = &compaction.messages(&messages)[1];
    let calls: Vec<_> = assistant.tool_calls().collect();
    assert_eq!((calls[0].id.as_deref(), calls[0].tool_name.as_str()), (Some("a"), "read"));
    assert!(calls[0].arguments.is_empty());
    assert_eq!(calls[1], &b);
    let original = CharCounter.count(&messages[1..2], &[]);
    assert_eq!(
        assistant.meta["context_compaction"],
        json!({"strategy": STRATEGY_TOOL_INPUT_CLEARING, "original_tokens": original, "cleared_call_ids": ["a"]})
    );
    // The pruned result's copy of the call is cleared too, so call and result still agree.
    assert!(compaction.messages(&messages)[2]
        .tool_call_result()
        .expect("result")
        .origin
        .arguments
        .is_empty());
    let inputs = &compaction.report.inputs_cleared;
    assert_eq!(inputs.len(), 1);
    assert_eq!((inputs[0].index, inputs[0].call_ids.clone()), (1, vec![Some("a".to_owned())]));
    assert_eq!(
        inputs[0].tokens_freed,
        original - CharCounter.count(&compaction.messages(&messages)[1..2], &[])
    );
    let report = &compaction.report;
    assert_eq!(report.tokens_before - report.tokens_after, report.tokens_freed());
    // The newest step is untouched.
    assert_eq!(&compaction.messages(&messages)[4..], &messages[4..]);
}

#[test]
fn clear_tool_inputs_drops_raw_arguments_too() {
    // Arguments a model sent that are not a JSON object are kept as their text; clearing the
    // inputs of a pruned call removes that text as well.
    let raw =
        compaction_model::ToolCall::with_raw_arguments("read", "{\"path\": \"/etc/".repeat(40)).with_id("a");
    let c = call("read", "c");
    let messages = vec![
        Message::user("go"),
        calling(std::slice::from_ref(&raw)),
        result(&raw, 500),
        calling(std::slice::from_ref(&c)),
        result(&c, 500),
    ];
    let compactor = compactor(PruningSettings::default().with_clear_tool_inputs(true));
    let compaction = compactor.try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned");
    let out = compaction.messages(&messages);
    let cleared = out[1].tool_calls().next().expect("call");
    assert!(cleared.has_no_arguments(), "{cleared:?}");
    assert_eq!(cleared.id.as_deref(), Some("a"));
    assert!(out[2].tool_call_result().expect("result").origin.has_no_arguments());
    assert_eq!(compaction.report.inputs_cleared[0].call_ids, vec![Some("a".to_owned())]);
}

#[test]
fn clear_tool_inputs_clears_every_pruned_result_of_a_batch() {
    let (a, b, c) = (call("read", "a"), call("search", "b"), call("read", "c"));
    let mut batch = result(&a, 500);
    batch.parts.extend(result(&b, 500).parts);
    let messages = vec![
        Message::user("go"),
        calling(&[a.clone(), b.clone()]),
        batch,
        calling(std::slice::from_ref(&c)),
        result(&c, 500),
    ];
    let compactor = compactor(PruningSettings::default().with_clear_tool_inputs(true));
    let compaction = compactor.try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned");
    let out = compaction.messages(&messages);
    assert!(out[1].tool_calls().all(|call| call.arguments.is_empty()));
    assert!(out[2].tool_call_results().all(|r| r.origin.arguments.is_empty()));
    let ids: Vec<_> = out[2].tool_call_results().map(|r| r.origin.id.clone()).collect();
    assert_eq!(ids, vec![Some("a".to_owned()), Some("b".to_owned())]);
    assert_eq!(
        compaction.report.inputs_cleared[0].call_ids,
        vec![Some("a".to_owned()), Some("b".to_owned())]
    );
}

#[test]
fn a_preview_keeps_both_ends_around_the_placeholder() {
    let (a, c) = (call("read", "a"), call("read", "c"));
    // 300 characters: an astral head, plain middle, a distinct tail.
    let text = format!("{}{}{}", "\u{1F600}".repeat(20), "m".repeat(260), "end of log");
    let messages = vec![
        Message::user("go"),
        calling(std::slice::from_ref(&a)),
        Message::tool(text.clone(), a.clone(), false),
        calling(std::slice::from_ref(&c)),
        result(&c, 500),
    ];
    let settings = PruningSettings::default().with_preview_chars(20).with_min_tokens(0);
    let compaction =
        compactor(settings.clone()).try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned");
    let out = compaction.messages(&messages);
    let pruned = out[2].tool_call_result().expect("result");
    let placeholder = compaction_core::DEFAULT_PLACEHOLDER.replace("{tool_name}", "read");
    let expected = format!("{}...\n{placeholder}\n...{}", "\u{1F600}".repeat(20), &text[text.len() - 20..]);
    assert!(
        matches!(&pruned.result, ToolResultContent::Text(t) if t.as_str() == expected),
        "{:?}",
        pruned.result
    );
    assert_eq!(*pruned.origin, a);
    // The report counts what the model will see, preview included.
    assert_eq!(compaction.report.results[0].replacement_tokens, CharCounter.count(&out[2..3], &[]));
    let mut applied = messages.clone();
    compaction.apply(&mut applied).expect("fits the conversation it was made from");
    assert_eq!(applied, out);

    // A result no longer than both ends together would not get smaller, so it stays.
    let short = vec![
        Message::user("go"),
        calling(std::slice::from_ref(&a)),
        Message::tool("x".repeat(40), a.clone(), false),
        calling(std::slice::from_ref(&c)),
        result(&c, 500),
    ];
    assert_eq!(compactor(settings).try_compact(&short, 0, &CharCounter).unwrap(), None);
}

#[test]
fn a_preview_reads_the_texts_of_a_result_made_of_parts() {
    use compaction_model::{ResultPart, TextPart, ToolCallResult};
    let a = call("read", "a");
    let parts = vec![
        ResultPart::Text(TextPart::new("first part ".repeat(10))),
        ResultPart::Text(TextPart::new("last part".repeat(10))),
    ];
    let result = ToolCallResult::new(ToolResultContent::Parts(parts), a, false);
    let pruned =
        compaction_core::PrunedResult { preview_chars: 5, ..compaction_core::PrunedResult::new("[gone]", 1) };
    assert_eq!(pruned.replacement_text(&result), "first...\n[gone]\n... part");
    let blank = compaction_core::PrunedResult::new("[gone {tool_name}]", 1);
    assert_eq!(blank.replacement_text(&result), "[gone read]");
}

#[test]
fn preview_chars_is_a_setting_beyond_the_reference() {
    let settings = PruningSettings::from_value(&json!({"preview_chars": 80})).expect("reads");
    assert_eq!(settings.preview_chars, 80);
    assert_eq!(serde_json::to_value(&settings).expect("writes")["preview_chars"], json!(80));
    assert_eq!(settings.to_haystack_value(), Err(Error::NotInReference("preview_chars")));
    assert!(PruningSettings::from_value(&json!({"preview_chars": -1})).is_err());
    // Off by default, and then absent from the plain form.
    assert_eq!(PruningSettings::default().preview_chars, 0);
}

#[test]
fn clearing_again_extends_the_marker() {
    let messages = four_steps();
    let compactor =
        compactor(PruningSettings::default().with_clear_tool_inputs(true).with_keep_tool_results(Some(1)));
    let target = CharCounter.count(&messages, &[]) - 1;
    let first = compactor.try_compact(&messages, target, &CharCounter).unwrap().expect("pruned");
    assert_eq!(first.report.changed_indices(), vec![2]);
    let first_messages = first.messages(&messages);
    let second = compactor.try_compact(&first_messages, target - 500, &CharCounter).unwrap().expect("pruned");
    let second_messages = second.messages(&first_messages);
    assert_eq!(second.report.changed_indices(), vec![4]);
    assert_eq!(second_messages[1], first_messages[1]);
    assert_eq!(second_messages[3].meta["context_compaction"]["cleared_call_ids"], json!(["s1"]));
}

#[test]
fn keep_tool_results_protects_results_one_by_one() {
    let (a, b, c) = (call("read", "a"), call("read", "b"), call("read", "c"));
    let messages = vec![
        Message::user("go"),
        calling(&[a.clone(), b.clone(), c.clone()]),
        result(&a, 500),
        result(&b, 500),
        result(&c, 500),
    ];
    // By steps the one step is protected whole; by results only the newest one or two are.
    assert_eq!(ToolResultPruningCompactor::default().try_compact(&messages, 0, &CharCounter).unwrap(), None);
    for (keep, changed) in [(1, vec![2, 3]), (2, vec![2]), (3, vec![])] {
        let compactor = compactor(PruningSettings::default().with_keep_tool_results(Some(keep)));
        let got = compactor.try_compact(&messages, 0, &CharCounter).unwrap();
        assert_eq!(got.map(|c| c.report.changed_indices()).unwrap_or_default(), changed, "keep {keep}");
    }
    let zero = PruningSettings::default().with_keep_tool_results(Some(0));
    assert_eq!(ToolResultPruningCompactor::new(zero), Err(Error::KeepToolResultsTooSmall(0)));
}

#[test]
fn the_report_tells_what_changed() {
    let messages = four_steps();
    let counter = ApproximateTokenCounter::default();
    let before = counter.count(&messages, &[]);
    let compactor = compactor(PruningSettings::default().with_min_tokens(0));
    let compaction = compactor.try_compact(&messages, before - 150, &counter).unwrap().expect("pruned");
    let report = &compaction.report;
    assert_eq!(report.strategy, "tool_result_pruning");
    assert_eq!(report.tokens_before, before);
    assert_eq!(report.target_tokens, before - 150);
    assert_eq!(report.changed_indices(), vec![2, 4]);
    assert_eq!(report.tool_names(), vec!["read", "search"]);
    assert_eq!(report.results[0].call_id.as_deref(), Some("r1"));
    for r in &report.results {
        assert_eq!(r.original_tokens, counter.count(&messages[r.index..=r.index], &[]));
        assert_eq!(
            r.replacement_tokens,
            counter.count(&compaction.messages(&messages)[r.index..=r.index], &[])
        );
        assert_eq!(r.tokens_freed, r.original_tokens - r.replacement_tokens);
    }
    assert_eq!(report.estimated_tokens_after, before - report.tokens_freed());
    assert_eq!(report.tokens_after, counter.count(&compaction.messages(&messages), &[]));
    assert!(report.target_reached);
    let written = serde_json::to_value(report).expect("serializes");
    assert_eq!(written["results"][1]["tool_name"], json!("search"));
}

#[test]
fn plan_is_the_report_without_the_messages() {
    let messages = four_steps();
    let settings = PruningSettings::default().with_clear_tool_inputs(true);
    let compactor = compactor(settings);
    let planned = compactor.plan(&messages, 0, &CharCounter).unwrap().expect("a plan");
    let compaction = compactor.try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned");
    assert_eq!(planned, compaction.report);
    assert_eq!(compactor.plan(&messages, usize::MAX, &CharCounter).unwrap(), None);
}

#[test]
fn settings_read_both_forms_with_the_new_options() {
    let plain = json!({"min_keep_steps": 2, "exclude_tools": ["read"], "clear_at_least": 1000,
                       "clear_tool_inputs": true, "keep_tool_results": 3});
    let settings = PruningSettings::from_value(&plain).expect("reads");
    assert_eq!(settings.min_keep_steps, 2);
    assert_eq!(settings.min_tokens, 200);
    assert_eq!(settings.exclude_tools, vec!["read".to_owned()]);
    assert_eq!(settings.clear_at_least, Some(1000));
    assert!(settings.clear_tool_inputs);
    assert_eq!(settings.keep_tool_results, Some(3));
    // Plain form round trip through serde.
    let written = serde_json::to_string(&settings).expect("serializes");
    let read: PruningSettings = serde_json::from_str(&written).expect("reads back");
    assert_eq!(read, settings);
    // Such settings have no Haystack form.
    assert_eq!(settings.to_haystack_value(), Err(Error::NotInReference("exclude_tools")));
    // The Haystack form may carry them too.
    let dict = json!({"type": compaction_core::HAYSTACK_PRUNING_TYPE, "init_parameters": plain});
    assert_eq!(PruningSettings::from_value(&dict), Ok(settings));
}

#[test]
fn bad_settings_are_typed_errors() {
    let cases = [
        (json!([]), Error::NotAnObject("an array")),
        (
            json!({"min_tokens": "5"}),
            Error::InvalidSetting { key: "min_tokens".into(), reason: "expected an integer".into() },
        ),
        (
            json!({"min_tokens": 2.5}),
            Error::InvalidSetting { key: "min_tokens".into(), reason: "expected an integer".into() },
        ),
        (
            json!({"placeholder": null}),
            Error::InvalidSetting { key: "placeholder".into(), reason: "expected a string".into() },
        ),
        (json!({"keep_tool_results": -1}), Error::KeepToolResultsTooSmall(-1)),
        (
            json!({"clear_at_least": -1}),
            Error::InvalidSetting { key: "clear_at_least".into(), reason: "must be at least 0".into() },
        ),
        (
            json!({"surprise": 1}),
            Error::UnknownSetting { key: "surprise".into(), of: "ToolResultPruningCompactor" },
        ),
    ];
    for (value, error) in cases {
        assert_eq!(PruningSettings::from_value(&value), Err(error), "{value}");
    }
    // Python integers have no size limit; a huge `min_tokens` just prunes nothing.
    let huge: serde_json::Value =
        serde_json::from_str(r#"{"min_tokens": 100000000000000000000000}"#).expect("json");
    assert_eq!(PruningSettings::from_value(&huge).map(|s| s.min_tokens), Ok(usize::MAX));
    // Through serde the message survives.
    let error = serde_json::from_str::<ToolResultPruningCompactor>(r#"{"min_keep_steps": 0}"#).unwrap_err();
    assert!(error.to_string().contains("`min_keep_steps` must be at least 1"), "{error}");
}

#[test]
fn a_compactor_is_a_trait_object() {
    let boxed: Box<dyn Compactor> = Box::new(ToolResultPruningCompactor::default());
    let messages = four_steps();
    let compaction = boxed.try_compact(&messages, 0, &CharCounter).unwrap().expect("pruned");
    assert!(compaction.messages(&messages).iter().zip(&messages).any(|(a, b)| a != b));
    assert!(matches!(compaction.messages(&messages)[2].parts[0], Part::ToolCallResult(_)));
}

#[test]
fn messages_and_apply_agree_on_any_edits() {
    use compaction_core::{Compaction, CompactionReport, PrunedResult, Rewrite};
    let (a, b) = (call("search", "a"), call("fetch", "b"));
    let messages = vec![calling(&[a.clone(), b.clone()]), result(&a, 500), result(&b, 700)];
    let pruned = |clear_arguments| {
        Rewrite::Pruned(PrunedResult { clear_arguments, ..PrunedResult::new("[gone: {tool_name}]", 9) })
    };
    let report = || CompactionReport::new("test", 0, 0, 0, Vec::new());
    // Unsorted, with two rewrites of one index (applied one after the other) and a replacement
    // of a message without a result.
    let edits = vec![
        (2, Rewrite::Message(result(&a, 3))),
        (1, pruned(true)),
        (2, pruned(false)),
        (0, Rewrite::Message(messages[0].clone())),
    ];
    let compaction = Compaction::rewriting(edits, report());
    let built = compaction.messages(&messages);
    let mut applied = messages.clone();
    compaction.apply(&mut applied).expect("every edit fits");
    assert_eq!(built, applied);
    assert_eq!(built[0], messages[0]);
    assert_eq!(built[2].tool_call_result().map(|r| r.origin.tool_name.as_str()), Some("search"));
    assert_eq!(built[1].tool_call_result().map(|r| r.origin.arguments.is_empty()), Some(true));
}

/// An edit `apply` cannot place is refused, naming it, and the conversation is left as it was:
/// past the end, pruning a message without tool results, or a result the message lacks.
#[test]
fn apply_refuses_an_edit_it_cannot_place() {
    use compaction_core::{Compaction, CompactionReport, Error, PrunedResult, Rewrite};
    let a = call("search", "a");
    let messages = vec![calling(std::slice::from_ref(&a)), result(&a, 500)];
    let report = || CompactionReport::new("test", 0, 0, 0, Vec::new());
    let prune =
        |results: Vec<usize>| Rewrite::Pruned(PrunedResult { results, ..PrunedResult::new("[gone]", 9) });
    let cases = [
        (
            vec![(1, prune(vec![])), (5, Rewrite::Message(result(&a, 1)))],
            5,
            "the conversation has 2 messages",
        ),
        (vec![(0, prune(vec![]))], 0, "holds no tool result"),
        (vec![(1, prune(vec![0, 1]))], 1, "tool result 1 is to be pruned, but the message holds 1"),
    ];
    for (edits, at, reason) in cases {
        let compaction = Compaction::rewriting(edits, report());
        let mut applied = messages.clone();
        let error = compaction.clone().apply(&mut applied).expect_err("misplaced");
        assert!(matches!(&error, Error::MisplacedEdit { index, .. } if *index == at), "{error:?}");
        assert!(error.to_string().contains(reason), "{error}");
        assert_eq!(applied, messages, "nothing applied");
        assert!(compaction.check(&messages).is_err());
    }
    // The same edits fit the conversation they were made for.
    let fits = Compaction::rewriting(vec![(1, prune(vec![0]))], report());
    fits.check(&messages).expect("fits");
}

/// Two replacements of one message are refused when the compaction is built: one would be lost.
#[test]
fn replacing_one_message_twice_is_refused() {
    use compaction_core::{Compaction, CompactionReport, Error};
    let a = call("search", "a");
    let report = || CompactionReport::new("test", 0, 0, 0, Vec::new());
    let twice = vec![(1, result(&a, 1)), (0, result(&a, 2)), (1, result(&a, 3))];
    let error = Compaction::replacing(twice, report()).expect_err("index 1 twice");
    assert!(matches!(error, Error::DuplicateEdit { index: 1 }), "{error:?}");
    let once = vec![(1, result(&a, 1)), (0, result(&a, 2))];
    let compaction = Compaction::replacing(once, report()).expect("distinct");
    assert_eq!(compaction.changes(&[]).changed(), Some(&[0, 1][..]));
}
