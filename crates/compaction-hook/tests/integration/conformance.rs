//! The committed hook fixtures: Haystack's `CompactionHook.run` on each conversation and settings.

use compaction_core::{PruningSettings, ToolResultPruningCompactor};
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
use compaction_model::{messages_from_value, messages_to_value, ToolSpec};
use compaction_testkit::{check_pruning_deviation, holds_result_beside_other_parts};
use serde_json::Value;

use crate::{counter_from_fixture, fixture_files, python_equal, read_json};

#[test]
fn conformance_hook_matches_reference() {
    let files = fixture_files("hook");
    assert!(!files.is_empty(), "no hook fixtures found");
    let mut failures = Vec::new();
    let mut deviations = 0;
    for path in &files {
        let fixture = read_json(path);
        let messages = messages_from_value(fixture["messages"].clone()).expect("messages parse");
        let tools: Vec<ToolSpec> = serde_json::from_value(fixture["tools"].clone()).expect("tools parse");
        assert_eq!(fixture["compactor"]["kind"], "pruning", "{}", path.display());
        let settings =
            PruningSettings::from_value(&fixture["compactor"]["settings"]).expect("settings parse");
        let compactor = ToolResultPruningCompactor::new(settings).expect("valid settings");
        let hook_settings =
            CompactionHookSettings::new(fixture["context_window"].as_u64().expect("window") as usize)
                .with_compact_at(fixture["compact_at"].as_f64().expect("compact_at"))
                .with_compact_to(fixture["compact_to"].as_f64().expect("compact_to"));
        let hook = CompactionHook::new(Box::new(compactor), hook_settings)
            .expect("valid hook settings")
            .with_counter(counter_from_fixture(&fixture["counter"]));
        let mut state = AgentState::new(messages)
            .with_tools(tools)
            .with_context_tokens(fixture["context_tokens"].as_u64().expect("context_tokens") as usize);
        let outcome = hook.run(&mut state);

        let expected = &fixture["expected"];
        let mut wrong = Vec::new();
        let input = fixture["messages"].as_array().cloned().unwrap_or_default();
        if input.iter().any(holds_result_beside_other_parts) {
            // The reference drops a message's other results and parts; this project keeps them
            // (README, "Deviations from the reference"), so the messages are checked against
            // the deviation, and the provider count that follows from them is not compared.
            deviations += 1;
            let theirs = messages_from_value(expected["messages"].clone()).expect("expected messages");
            let target = expected["target_tokens"].as_u64().unwrap_or(0) as usize;
            let reached = hook.counter().count(&theirs, &[]) <= target;
            let problems = check_pruning_deviation(
                &input,
                messages_to_value(state.messages()).as_array().expect("array"),
                expected["messages"].as_array().expect("array"),
                fixture["compactor"]["settings"]["placeholder"]
                    .as_str()
                    .unwrap_or(compaction_core::DEFAULT_PLACEHOLDER),
                reached,
            );
            if !problems.is_empty() {
                failures.push(format!("{}: {problems:?}", path.display()));
            }
        } else {
            if !python_equal(&messages_to_value(state.messages()), &expected["messages"]) {
                wrong.push("messages");
            }
            if Some(state.context_tokens as u64) != expected["context_tokens"].as_u64() {
                wrong.push("context_tokens");
            }
        }
        if Value::Bool(outcome.compacted) != expected["compacted"] {
            wrong.push("compacted");
        }
        if Some(outcome.estimated_tokens as u64) != expected["estimated_tokens"].as_u64() {
            wrong.push("estimated_tokens");
        }
        if Value::Bool(outcome.triggered) != expected["triggered"] {
            wrong.push("triggered");
        }
        if outcome.target_tokens.map(|t| t as u64) != expected["target_tokens"].as_u64() {
            wrong.push("target_tokens");
        }
        if !wrong.is_empty() {
            failures.push(format!("{}: {wrong:?}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{} of {} fixtures differ: {failures:#?}", failures.len(), files.len());
    eprintln!(
        "{} hook fixtures match the reference, {deviations} of them as the documented deviation",
        files.len()
    );
}
