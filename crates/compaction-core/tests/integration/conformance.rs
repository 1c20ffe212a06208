//! The committed golden fixtures: Haystack's own output for each conversation and settings.
//!
//! Where the reference loses data (a message holding several results, or a result beside other
//! parts), the fixture is checked against the documented deviation instead.

use compaction_core::{Compactor, PruningSettings, ToolResultPruningCompactor};
use compaction_model::{messages_from_value, messages_to_value};
use serde_json::Value;

use compaction_testkit::{check_pruning_deviation, holds_result_beside_other_parts};

use crate::{counter_from_fixture, fixture_files, python_equal};

#[test]
fn conformance_prune_matches_reference() {
    let files = fixture_files("prune");
    assert!(!files.is_empty(), "no prune fixtures found");
    let mut failures = Vec::new();
    let mut deviations = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("fixture readable");
        let fixture: Value = serde_json::from_str(&text).expect("fixture is JSON");
        let messages = messages_from_value(fixture["messages"].clone()).expect("messages parse");
        let before = messages.clone();
        let counter = counter_from_fixture(&fixture["counter"]);
        let settings = PruningSettings::from_value(&fixture["settings"]).expect("settings parse");
        let compactor = ToolResultPruningCompactor::new(settings).expect("valid settings");
        let target = fixture["target_tokens"].as_u64().expect("target") as usize;
        let got = compactor.try_compact(&messages, target, counter.as_ref()).unwrap();
        assert_eq!(messages, before, "{}: input changed", path.display());
        let planned = compactor.plan(&messages, target, counter.as_ref()).unwrap();
        assert_eq!(planned.as_ref(), got.as_ref().map(|c| &c.report), "{}: plan differs", path.display());
        let input = fixture["messages"].as_array().cloned().unwrap_or_default();
        if input.iter().any(holds_result_beside_other_parts) {
            // The reference drops a message's other results and parts; this project keeps them
            // (README, "Deviations from the reference"), so such a fixture is checked against
            // the deviation instead of byte for byte.
            deviations += 1;
            let ours = got.as_ref().map_or_else(|| messages.clone(), |c| c.messages(&messages));
            let theirs = match &fixture["output"] {
                Value::Null => messages.clone(),
                output => messages_from_value(output.clone()).expect("output parses"),
            };
            let reached = counter.count(&theirs, &[]) <= target;
            let problems = check_pruning_deviation(
                &input,
                messages_to_value(&ours).as_array().expect("array"),
                messages_to_value(&theirs).as_array().expect("array"),
                &compactor.settings().placeholder,
                reached,
            );
            if !problems.is_empty() {
                failures.push(format!("{}: {problems:?}", path.display()));
            }
            continue;
        }
        let matches = match (&fixture["output"], &got) {
            (Value::Null, None) => true,
            (expected, Some(compaction)) if !expected.is_null() => {
                let mut applied = messages.clone();
                compaction.clone().apply(&mut applied).expect("fits the conversation it was made from");
                let built = messages_to_value(&compaction.messages(&messages));
                python_equal(&built, expected) && python_equal(&messages_to_value(&applied), expected)
            }
            _ => false,
        };
        if !matches {
            failures.push(path.display().to_string());
        }
    }
    assert!(failures.is_empty(), "{} of {} fixtures differ: {failures:#?}", failures.len(), files.len());
    eprintln!(
        "{} prune fixtures match the reference, {deviations} of them as the documented deviation",
        files.len()
    );
}
