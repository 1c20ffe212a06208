//! The offloaders' rules stated directly: policy resolution, keys, per-result handling, the
//! offload compactor in a hook chain, Haystack forms, and the read-back tool.

use std::sync::Arc;

use compaction_core::{PruningSettings, ToolResultPruningCompactor};
use compaction_hook::{run_compaction_hooks, AgentState, CompactionHook, CompactionHookSettings, Compactor};
use compaction_model::{offloaded_references, Message, Part, TextPart, ToolCall, ToolResultContent};
use compaction_offload::{
    compaction_hook_from_value, read_offloaded_result, read_tool_spec, AlwaysOffload, Content, Error,
    InMemoryToolResultStore, NeverOffload, OffloadCompactorSettings, OffloadOverChars, OffloadStrategies,
    PolicyKey, StoredContent, ToolResultOffloadCompactor, ToolResultOffloadHook, ToolResultStore,
};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use serde_json::json;

fn call(tool: &str, id: &str) -> ToolCall {
    ToolCall::new(tool, serde_json::Map::new()).with_id(id)
}

fn conversation(steps: usize, size: usize) -> Vec<Message> {
    let mut messages = vec![Message::system("sys"), Message::user("work")];
    for i in 0..steps {
        let origin = call("search", &format!("c{i}"));
        messages.push(Message::assistant_with_calls(None, vec![origin.clone()]));
        messages.push(Message::tool(format!("result {i} ").repeat(size), origin, false));
    }
    messages
}

fn pruning() -> Box<dyn Compactor> {
    Box::new(ToolResultPruningCompactor::new(PruningSettings::default()).expect("defaults"))
}

fn text_of(message: &Message, position: usize) -> String {
    match &message.tool_call_results().nth(position).expect("result").result {
        ToolResultContent::Text(t) => t.to_string(),
        other => panic!("not text: {other:?}"),
    }
}

#[test]
fn hooks_chain_and_each_sees_what_the_previous_left() {
    let messages = conversation(6, 200);
    let counter = ApproximateTokenCounter::default();
    let total = counter.count(&messages, &[]);
    let window = total + 10;
    let store = Arc::new(InMemoryToolResultStore::new());
    let offload =
        ToolResultOffloadCompactor::new(store.clone(), OffloadCompactorSettings::default()).expect("valid");
    let hooks = vec![
        CompactionHook::new(
            pruning(),
            CompactionHookSettings::new(window).with_compact_at(0.5).with_compact_to(0.45),
        )
        .expect("first"),
        CompactionHook::new(
            Box::new(offload),
            CompactionHookSettings::new(window).with_compact_at(0.5).with_compact_to(0.1),
        )
        .expect("second"),
    ];
    let mut state = AgentState::new(messages).with_context_tokens(total);
    let outcomes = run_compaction_hooks(&hooks, &mut state);
    assert!(outcomes[0].compacted && outcomes[0].triggered);
    // The second hook measured the pruned conversation, not the original.
    assert!(outcomes[1].estimated_tokens < outcomes[0].estimated_tokens);
    assert_eq!(outcomes[0].compactor, "ToolResultPruningCompactor");
    assert!(outcomes[0].report.as_ref().is_some_and(|r| !r.results.is_empty()));
    // Pruned results carry the pruning marker, so the offload compactor leaves them; the newest
    // step is protected by both.
    let last = state.messages().last().expect("last");
    assert!(last.meta.is_empty());
}

#[test]
fn policies_resolve_exact_then_set_then_wildcard() {
    let strategies = OffloadStrategies::new()
        .with("*", OffloadOverChars::new(10))
        .with(PolicyKey::tools(["read", "list"]), NeverOffload)
        .with("read", AlwaysOffload);
    let state = AgentState::default();
    let decide =
        |tool: &str, text: &str| strategies.policy_for(tool).map(|p| p.should_offload(tool, text, &state));
    assert_eq!(decide("read", ""), Some(true));
    assert_eq!(decide("list", "long enough text"), Some(false));
    assert_eq!(decide("other", "0123456789"), Some(false));
    assert_eq!(decide("other", "0123456789ü"), Some(true));
    assert!(OffloadStrategies::new().with("a", AlwaysOffload).policy_for("b").is_none());
    let serialized = strategies.to_haystack_value().expect("built-ins serialize");
    let keys: Vec<&String> = serialized.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["*", "[\"read\", \"list\"]", "read"]);
    let back = OffloadStrategies::from_value(&serialized).expect("read back");
    assert_eq!(back.to_haystack_value(), Some(serialized));
}

#[test]
fn a_user_policy_sees_the_state() {
    #[derive(Debug)]
    struct AfterStep(usize);
    impl compaction_offload::OffloadPolicy for AfterStep {
        fn should_offload(&self, _tool: &str, _result: &str, state: &AgentState) -> bool {
            state.step_count > self.0
        }
    }
    let store = Arc::new(InMemoryToolResultStore::new());
    let hook = ToolResultOffloadHook::new(store.clone(), OffloadStrategies::new().with("*", AfterStep(1)));
    let mut state = AgentState::new(conversation(1, 5));
    state.step_count = 1;
    assert!(hook.run(&mut state).offloaded.is_empty());
    state.step_count = 2;
    assert_eq!(hook.run(&mut state).offloaded, vec![3]);
    assert_eq!(store.references(), vec!["2_search_c0.txt".to_string()]);
}

#[test]
fn per_run_store_replaces_the_hooks_own() {
    let own = Arc::new(InMemoryToolResultStore::new());
    let hook = ToolResultOffloadHook::new(own.clone(), OffloadStrategies::new().with("*", AlwaysOffload));
    let mine = InMemoryToolResultStore::new();
    let mut state = AgentState::new(conversation(1, 5));
    assert_eq!(hook.run_with_store(&mut state, &mine).offloaded, vec![3]);
    assert!(own.is_empty());
    assert_eq!(mine.len(), 1);
}

#[test]
fn offload_compactor_keys_are_random_and_unique() {
    let store = Arc::new(InMemoryToolResultStore::new());
    let compactor = ToolResultOffloadCompactor::new(
        store.clone(),
        OffloadCompactorSettings::default().with_min_keep_steps(1).with_min_tokens(0).with_preview_chars(20),
    )
    .expect("valid");
    let messages = conversation(5, 100);
    let counter = ApproximateTokenCounter::default();
    let compaction = compactor.try_compact(&messages, 0, &counter).unwrap().expect("offloads");
    assert_eq!(compaction.report.strategy, "tool_result_offloading");
    assert_eq!(compaction.report.changed_indices(), vec![3, 5, 7, 9]);
    let references = store.references();
    assert_eq!(references.len(), 4);
    for reference in &references {
        let hex =
            reference.strip_prefix("compacted_search_").and_then(|r| r.strip_suffix(".txt")).expect("shape");
        assert_eq!(hex.len(), 32);
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }
    let marker =
        compaction_model::CompactionMarker::read(&compaction.messages(&messages)[3].meta).expect("marker");
    assert_eq!(marker.strategy, "tool_result_offloading");
    assert_eq!(marker.original_tokens as usize, counter.count(&messages[3..4], &[]));
    // Offloaded pointers are not offloaded again.
    assert!(compactor.try_compact(&compaction.messages(&messages), 0, &counter).unwrap().is_none());
}

#[test]
fn read_back_tool_serves_whole_ranges_and_explains_binary() {
    let spec = read_tool_spec();
    assert_eq!(spec.name, "read_offloaded_result");
    assert_eq!(spec.parameters["required"], json!(["reference"]));
    let store = InMemoryToolResultStore::new();
    let text = store.write("r.txt", Content::Text("one\ntwo\nthree\nfour")).expect("write");
    let bin = store.write("i.png", Content::Bytes(&[0xff, 0x00, 0x01])).expect("write");
    let args = |v: serde_json::Value| v.as_object().cloned().expect("object");
    let whole = read_offloaded_result(&store, &args(json!({"reference": text})));
    assert_eq!((whole.text.as_str(), whole.error), ("one\ntwo\nthree\nfour", false));
    let part =
        read_offloaded_result(&store, &args(json!({"reference": text, "start_line": 2, "end_line": 3})));
    assert_eq!(part.text, "two\nthree");
    let tail =
        read_offloaded_result(&store, &args(json!({"reference": text, "start_line": 4, "end_line": 99})));
    assert_eq!(tail.text, "four");
    let past = read_offloaded_result(&store, &args(json!({"reference": text, "start_line": 9})));
    assert!(past.error);
    let binary = read_offloaded_result(&store, &args(json!({"reference": bin})));
    assert!(binary.error && binary.text.contains("3 bytes of binary content"), "{}", binary.text);
    let missing = read_offloaded_result(&store, &args(json!({"reference": "nope"})));
    assert!(missing.error);
    let message = part.into_message(call(&spec.name, "r1"));
    assert!(
        matches!(&message.tool_call_result().expect("result").result, ToolResultContent::Text(t) if t == "two\nthree")
    );
}

#[test]
fn colliding_keys_in_one_step_keep_both_results() {
    // `read_file` with call id `x` and `read` with call id `file_x` both make the reference's key
    // `1_read_file_x.txt`; the second result gets its own file and its pointer names it.
    let store = Arc::new(InMemoryToolResultStore::new());
    let hook = ToolResultOffloadHook::new(store.clone(), OffloadStrategies::new().with("*", AlwaysOffload));
    let (a, b) = (call("read_file", "x"), call("read", "file_x"));
    let mut state = AgentState::new(vec![Message::user("go")]);
    state.push(Message::assistant_with_calls(None, vec![a.clone(), b.clone()]));
    state.push(Message::tool("first result", a, false));
    state.push(Message::tool("second result", b, false));
    state.step_count = 1;
    let outcome = hook.run(&mut state);
    assert!(outcome.failures.is_empty());
    assert_eq!(store.references(), vec!["1_read_file_x.txt".to_string(), "1_read_file_x_2.txt".to_string()]);
    for (index, text) in [(2, "first result"), (3, "second result")] {
        let refs = offloaded_references(&state.messages()[index].meta).expect("references");
        assert!(text_of(&state.messages()[index], 0).contains(&format!("'{}'", refs[0])));
        assert_eq!(store.read(&refs[0]).expect("read"), StoredContent::Text(text.into()));
    }
}

#[test]
fn every_result_of_a_message_is_offloaded_on_its_own() {
    let store = Arc::new(InMemoryToolResultStore::new());
    let strategies = OffloadStrategies::new().with("*", OffloadOverChars::new(10)).with("memo", NeverOffload);
    let hook = ToolResultOffloadHook::new(store.clone(), strategies);
    let (a, b, m, e) = (call("fetch", "a"), call("fetch", "b"), call("memo", "m"), call("fetch", "e"));
    let mut batch = Message::tool("a long first result", a.clone(), false);
    batch.parts.push(Part::Text(TextPart::new("a note beside the results")));
    batch.parts.extend(Message::tool("a long second result", b.clone(), false).parts);
    batch.parts.extend(Message::tool("a long memo that stays", m.clone(), false).parts);
    batch.parts.extend(Message::tool("a long failure that stays", e.clone(), true).parts);
    let mut state = AgentState::new(vec![Message::user("go")]);
    state.push(Message::assistant_with_calls(None, vec![a.clone(), b.clone(), m.clone(), e.clone()]));
    state.push(batch.clone());
    state.step_count = 3;
    let outcome = hook.run(&mut state);
    assert_eq!(outcome.offloaded, vec![2]);
    assert_eq!(outcome.results.iter().map(|r| r.at.position).collect::<Vec<_>>(), vec![0, 1]);
    let out = &state.messages()[2];
    // Every part in place, every call id kept, the text and the role too.
    assert_eq!(out.parts.len(), batch.parts.len());
    assert_eq!(out.parts[1], batch.parts[1]);
    assert_eq!(out.role, batch.role);
    let ids: Vec<_> = out.tool_call_results().map(|r| r.origin.id.clone().unwrap_or_default()).collect();
    assert_eq!(ids, ["a", "b", "m", "e"]);
    assert!(text_of(out, 0).starts_with("Tool result offloaded to text (19 characters) at '3_fetch_a.txt'"));
    assert!(text_of(out, 1).starts_with("Tool result offloaded to text (20 characters) at '3_fetch_b.txt'"));
    assert_eq!(text_of(out, 2), "a long memo that stays");
    assert_eq!(text_of(out, 3), "a long failure that stays");
    assert_eq!(offloaded_references(&out.meta), Some(vec!["3_fetch_a.txt".into(), "3_fetch_b.txt".into()]));
    // Already offloaded: a second run leaves the message alone.
    assert!(hook.run(&mut state).offloaded.is_empty());
}

#[test]
fn the_compactor_offloads_each_result_of_a_batch() {
    let store = Arc::new(InMemoryToolResultStore::new());
    let settings =
        OffloadCompactorSettings::default().with_min_keep_steps(1).with_min_tokens(20).with_preview_chars(10);
    let compactor = ToolResultOffloadCompactor::new(store.clone(), settings).expect("valid");
    let (a, b, c, d) = (call("fetch", "a"), call("fetch", "b"), call("fetch", "c"), call("fetch", "d"));
    let mut batch = Message::tool("x".repeat(400), a.clone(), false);
    batch.parts.extend(Message::tool("small", b.clone(), false).parts);
    batch.parts.extend(Message::tool("y".repeat(400), c.clone(), false).parts);
    let messages = vec![
        Message::user("go"),
        Message::assistant_with_calls(None, vec![a, b, c]),
        batch,
        Message::assistant_with_calls(None, vec![d.clone()]),
        Message::tool("z".repeat(400), d, false),
    ];
    let counter = ApproximateTokenCounter::default();
    let compaction = compactor.try_compact(&messages, 0, &counter).unwrap().expect("offloads");
    assert!(compactor.take_failures().is_empty());
    let out = compaction.messages(&messages);
    let entries: Vec<_> = compaction.report.results.iter().map(|r| (r.index, r.position)).collect();
    assert_eq!(entries, vec![(2, 0), (2, 2)]);
    assert_eq!(text_of(&out[2], 1), "small");
    assert_eq!(store.len(), 2);
    assert_eq!(
        compaction.report.results.last().expect("entry").replacement_tokens,
        counter.count(&out[2..3], &[])
    );
    let marker = compaction_model::CompactionMarker::read(&out[2].meta).expect("marker");
    assert_eq!(marker.original_tokens as usize, counter.count(&messages[2..3], &[]));
    assert_eq!(out[4], messages[4], "the newest step stays");
}

#[test]
fn haystack_forms_build_an_offloading_compaction_hook() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("tr");
    // Haystack's CompactionHook.to_dict(), verbatim but for the root.
    let reference = json!({"type": "haystack.hooks.compaction.hooks.CompactionHook", "init_parameters": {
        "compactor": {"type": "haystack.hooks.compaction.tool_result_offloading.ToolResultOffloadCompactor",
            "init_parameters": {"store": {"type": "haystack.hooks.tool_result_offloading.stores.FileSystemToolResultStore",
                "init_parameters": {"root": root.to_string_lossy()}}, "min_keep_steps": 1, "min_tokens": 200, "preview_chars": 200}},
        "context_window": 1000, "compact_at": 0.7, "compact_to": 0.4,
        "token_counter": {"type": "haystack.token_counters.approximate_counter.ApproximateTokenCounter",
            "init_parameters": {"chars_per_token": 3.5, "tokens_per_image": 85, "tokens_per_file": 1000}}}});
    let built = compaction_hook_from_value(&reference).expect("whole hook");
    assert_eq!(built.hook.compactor().name(), "ToolResultOffloadCompactor");
    assert_eq!(built.hook.settings().context_window, 1000);
    assert_eq!(built.hook.counter().describe(), ApproximateTokenCounter::new(3.5).expect("ratio").describe());
    assert!(root.is_dir(), "the store is opened when the hook is built");
    let compactor = built.offload_compactor.expect("shared with the caller");
    // Run it: the compactor the hook holds is the one the caller can take failures from.
    let mut state = AgentState::new(conversation(4, 200));
    let outcome = built.hook.run(&mut state);
    assert!(outcome.compacted);
    assert!(compactor.take_failures().is_empty());
    assert!(std::fs::read_dir(&root).expect("root").count() > 0);
    // A pruning hook reads as compaction-hook reads it.
    let pruning = json!({"type": "haystack.hooks.compaction.hooks.CompactionHook", "init_parameters": {
        "compactor": {"type": "haystack.hooks.compaction.tool_result_pruning.ToolResultPruningCompactor",
            "init_parameters": {}}, "context_window": 10}});
    let built = compaction_hook_from_value(&pruning).expect("pruning hook");
    assert!(built.offload_compactor.is_none());
    assert!(OffloadCompactorSettings::from_value(&json!({"min_keep_steps": 0})).is_err());
    // A store root that cannot be made is an error when the form is read.
    std::fs::write(dir.path().join("afile"), "").expect("file");
    let bad = json!({"type": "haystack.hooks.tool_result_offloading.stores.FileSystemToolResultStore",
        "init_parameters": {"root": dir.path().join("afile").join("x").to_string_lossy()}});
    assert!(matches!(compaction_offload::FileSystemToolResultStore::from_value(&bad), Err(Error::Io { .. })));
}

#[test]
fn failures_of_the_compactor_in_a_hook_come_back_to_the_caller() {
    #[derive(Debug)]
    struct Broken;
    impl ToolResultStore for Broken {
        fn write(&self, key: &str, _: Content<'_>) -> Result<String, Error> {
            Err(Error::Store { key: key.into(), source: "quota exceeded".into() })
        }
        fn read(&self, reference: &str) -> Result<StoredContent, Error> {
            Err(Error::NotFound(reference.into()))
        }
    }
    let compactor = Arc::new(
        ToolResultOffloadCompactor::new(Arc::new(Broken), OffloadCompactorSettings::default())
            .expect("valid"),
    );
    let hook = CompactionHook::new(Box::new(Arc::clone(&compactor)), CompactionHookSettings::new(1_000))
        .expect("hook");
    let mut state = AgentState::new(conversation(4, 200));
    let before = state.clone();
    let outcome = hook.run(&mut state);
    assert!(outcome.triggered && !outcome.compacted);
    assert_eq!(state, before, "every result stays");
    let failures = compactor.take_failures();
    assert_eq!(failures.iter().map(|f| f.at.index).collect::<Vec<_>>(), vec![3, 5, 7]);
    assert!(failures.iter().all(|f| f.key.as_deref().is_some_and(|k| k.starts_with("compacted_search_"))));
    assert!(compaction_core::error_chain(&failures[0].error).contains("quota exceeded"));
    assert!(compactor.take_failures().is_empty(), "taken once");
}

#[test]
fn an_offloader_without_a_store_says_so() {
    let hook = ToolResultOffloadHook::without_store(OffloadStrategies::new().with("*", AlwaysOffload));
    let mut state = AgentState::new(conversation(1, 5));
    let before = state.clone();
    let outcome = hook.run(&mut state);
    assert_eq!(state, before);
    assert!(matches!(outcome.failures[0].error, Error::NoStore { .. }));
    let compactor =
        ToolResultOffloadCompactor::without_store(OffloadCompactorSettings::default()).expect("valid");
    let messages = conversation(3, 200);
    let done = compactor.offload(&messages, 0, &ApproximateTokenCounter::default()).expect("counted");
    assert!(done.compaction.is_none());
    assert!(
        done.failures.iter().all(|f| matches!(f.error, Error::NoStore { .. })) && !done.failures.is_empty()
    );
}
