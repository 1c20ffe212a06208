//! Concurrent offloaders on one store: threads whose results share keys, and async writes, lose
//! nothing. (Processes sharing a store are tested through the command, in compaction-cli.)

use std::sync::Arc;

use compaction_hook::AgentState;
use compaction_model::{offloaded_references, Message, ToolCall};
use compaction_offload::{
    AlwaysOffload, FileSystemToolResultStore, OffloadStrategies, StoredContent, ToolResultOffloadHook,
    ToolResultStore,
};

use crate::leftover_scratch_files;

#[test]
fn eight_threads_with_the_same_keys_lose_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = FileSystemToolResultStore::new(dir.path().join("shared")).expect("store");
    let hook = Arc::new(ToolResultOffloadHook::new(
        Arc::new(store.clone()),
        OffloadStrategies::new().with("*", AlwaysOffload),
    ));
    let handles: Vec<_> = (0..8)
        .map(|thread| {
            let hook = hook.clone();
            std::thread::spawn(move || {
                let mut state = AgentState::new(vec![Message::user("go")]);
                let mut references = Vec::new();
                for i in 0..25 {
                    // Every thread runs the same steps with the same call ids, as agents
                    // sharing a store do: every key is asked for eight times.
                    let call = ToolCall::new("fetch", serde_json::Map::new()).with_id(format!("call_{i}"));
                    let text = format!("thread {thread} result {i} ").repeat(50);
                    state.push(Message::assistant_with_calls(None, vec![call.clone()]));
                    state.push(Message::tool(text.clone(), call, false));
                    state.step_count = i + 1;
                    let outcome = hook.run(&mut state);
                    assert!(outcome.failures.is_empty(), "{:?}", outcome.failures);
                    let meta = &state.messages().last().expect("result").meta;
                    let refs = offloaded_references(meta).expect("offloaded");
                    references.push((refs[0].clone(), text));
                }
                references
            })
        })
        .collect();
    let mut all = Vec::new();
    for handle in handles {
        for (reference, text) in handle.join().expect("thread") {
            assert_eq!(store.read(&reference).expect("read back"), StoredContent::Text(text));
            all.push(reference);
        }
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 200, "every pointer names its own file");
    assert_eq!(std::fs::read_dir(dir.path().join("shared")).expect("dir").count(), 200);
    assert!(leftover_scratch_files(dir.path()).is_empty());
}

#[test]
fn concurrent_async_writes_of_one_key_each_get_their_own_file() {
    use compaction_offload::{AsyncToolResultStore, Content};
    let dir = tempfile::tempdir().expect("temp dir");
    let store = FileSystemToolResultStore::new(dir.path()).expect("store");
    let texts: Vec<String> = (0..16).map(|i| format!("result {i}")).collect();
    let futures: Vec<_> =
        texts.iter().map(|t| AsyncToolResultStore::write(&store, "same.txt", Content::Text(t))).collect();
    let references: Vec<String> = crate::block_on(async {
        let mut out = Vec::new();
        for future in futures {
            out.push(future.await.expect("written"));
        }
        out
    });
    let mut unique = references.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 16);
    for (reference, text) in references.iter().zip(&texts) {
        assert_eq!(
            ToolResultStore::read(&store, reference).expect("read"),
            StoredContent::Text(text.clone())
        );
    }
}
