//! The committed golden fixtures: Haystack's own output for each conversation and settings.

use compaction_core::{Compactor, PruningSettings, ToolResultPruningCompactor};
use compaction_model::{messages_from_value, messages_to_value};
use serde_json::Value;

use crate::{counter_from_fixture, fixture_files, python_equal};

#[test]
fn conformance_prune_matches_reference() {
    let files = fixture_files("prune");
    assert!(!files.is_empty(), "no prune fixtures found");
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("fixture readable");
        let fixture: Value = serde_json::from_str(&text).expect("fixture is JSON");
        let messages = messages_from_value(fixture["messages"].clone()).expect("messages parse");
        let before = messages.clone();
        let counter = counter_from_fixture(&fixture["counter"]);
        let settings = PruningSettings::from_value(&fixture["settings"]).expect("settings parse");
        let compactor = ToolResultPruningCompactor::new(settings).expect("valid settings");
        let target = fixture["target_tokens"].as_u64().expect("target") as usize;
        let got = compactor.compact(&messages, target, counter.as_ref());
        assert_eq!(messages, before, "{}: input changed", path.display());
        let planned = compactor.plan(&messages, target, counter.as_ref());
        assert_eq!(planned.as_ref(), got.as_ref().map(|c| &c.report), "{}: plan differs", path.display());
        let matches = match (&fixture["output"], &got) {
            (Value::Null, None) => true,
            (expected, Some(compaction)) if !expected.is_null() => {
                let mut applied = messages.clone();
                compaction.clone().apply(&mut applied);
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
    eprintln!("{} prune fixtures match the reference", files.len());
}
