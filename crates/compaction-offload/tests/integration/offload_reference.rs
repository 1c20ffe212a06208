//! Offloading against the reference: pointer texts, keys, meta and store contents that Haystack's
//! `ToolResultOffloadHook` and `ToolResultOffloadCompactor` produced (tests/data/offload, made by
//! xtask/reference/generate_offload.py), and the offload-run-prune sequence. The hook's cases run
//! through the blocking and the async paths alike.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use compaction_hook::{AgentState, CompactionHook, Compactor};
use compaction_model::{messages_from_value, messages_to_value};
use compaction_offload::{
    FileSystemToolResultStore, OffloadCompactorSettings, ToolResultOffloadCompactor, ToolResultOffloadHook,
};
use serde_json::Value;

use crate::{fixture_files, python_equal, read_json, replace_in_strings, store_contents};

const ROOT: &str = "{ROOT}";

fn scratch() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().canonicalize().expect("canonical").to_string_lossy().into_owned();
    (dir, root)
}

fn check(name: &str, what: &str, got: &Value, expected: &Value, root: &str, failures: &mut Vec<String>) {
    let got = replace_in_strings(got, root, ROOT);
    if !python_equal(&got, expected) {
        failures.push(format!(
            "{name}: {what} differ\n got: {}\nwant: {}",
            serde_json::to_string(&got).unwrap_or_default(),
            serde_json::to_string(expected).unwrap_or_default()
        ));
    }
}

#[test]
fn offloading_matches_reference() {
    let files = fixture_files("offload");
    assert!(files.len() >= 8, "offload fixtures missing");
    let mut failures = Vec::new();
    for path in &files {
        let fixture = read_json(path);
        let name = fixture["name"].as_str().unwrap_or_default().to_owned();
        let (dir, root) = scratch();
        let expected = &fixture["expected"];
        match fixture["kind"].as_str() {
            Some("hook") => {
                let config = replace_in_strings(&fixture["hook"], ROOT, &root);
                let hook = ToolResultOffloadHook::from_value(&config).expect("hook config");
                let mut state =
                    AgentState::new(messages_from_value(fixture["messages"].clone()).expect("messages"));
                state.step_count = fixture["step_count"].as_u64().expect("step") as usize;
                let original = state.clone();
                let outcome = hook.run(&mut state);
                assert!(outcome.failures.is_empty(), "{name}: {:?}", outcome.failures);
                check(
                    &name,
                    "messages",
                    &messages_to_value(state.messages()),
                    &expected["messages"],
                    &root,
                    &mut failures,
                );
                // The async path, into a fresh store, writes the same files and leaves the same
                // pointers.
                let (async_dir, async_root) = scratch();
                let store = FileSystemToolResultStore::new(&async_root).expect("store");
                let mut again = original;
                let outcome = crate::block_on(hook.run_async(&mut again, &store));
                assert!(outcome.failures.is_empty(), "{name}: {:?}", outcome.failures);
                let got = replace_in_strings(&messages_to_value(again.messages()), &async_root, &root);
                check(&name, "async messages", &got, &expected["messages"], &root, &mut failures);
                check(
                    &name,
                    "async store",
                    &store_contents(async_dir.path()),
                    &expected["store"],
                    &async_root,
                    &mut failures,
                );
            }
            Some("compactor") => {
                let settings = OffloadCompactorSettings::from_value(&fixture["settings"]).expect("settings");
                let store = Arc::new(FileSystemToolResultStore::new(&root).expect("store"));
                let next = AtomicUsize::new(0);
                let compactor = ToolResultOffloadCompactor::new(store, settings)
                    .expect("valid")
                    .with_key_source(move || format!("{:032x}", next.fetch_add(1, Ordering::Relaxed) + 1));
                let ratio = fixture["counter"]["chars_per_token"].as_f64().expect("ratio");
                let counter = compaction_tokens::ApproximateTokenCounter::new(ratio).expect("counter");
                let messages = messages_from_value(fixture["messages"].clone()).expect("messages");
                let target = fixture["target_tokens"].as_u64().expect("target") as usize;
                let got = compactor.try_compact(&messages, target, &counter).unwrap();
                let got = got.map_or(Value::Null, |c| messages_to_value(&c.messages(&messages)));
                check(&name, "messages", &got, &expected["messages"], &root, &mut failures);
            }
            Some("sequence") => {
                let config = replace_in_strings(&fixture["offload_hook"], ROOT, &root);
                let offload = ToolResultOffloadHook::from_value(&config).expect("offload config");
                let prune = CompactionHook::from_value(&fixture["prune_hook"]).expect("prune config");
                let mut state =
                    AgentState::new(messages_from_value(fixture["messages"].clone()).expect("messages"));
                state.step_count = 1;
                assert!(offload.run(&mut state).failures.is_empty(), "{name}");
                check(
                    &name,
                    "offloaded",
                    &messages_to_value(state.messages()),
                    &expected["after_offload"],
                    &root,
                    &mut failures,
                );
                state.extend(messages_from_value(fixture["more"].clone()).expect("more"));
                state.step_count = 4;
                let outcome = prune.run(&mut state);
                assert!(outcome.compacted, "{name}: pruning expected");
                check(
                    &name,
                    "pruned",
                    &messages_to_value(state.messages()),
                    &expected["after_prune"],
                    &root,
                    &mut failures,
                );
                // The pointer survived pruning.
                assert!(compaction_model::is_offloaded(&state.messages()[3].meta));
            }
            other => panic!("unknown fixture kind {other:?}"),
        }
        check(&name, "store", &store_contents(dir.path()), &expected["store"], &root, &mut failures);
    }
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), files.len(), failures.join("\n"));
}
