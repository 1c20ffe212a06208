//! The hook's rules stated directly: settings checks and forms, the estimate, chaining, policy
//! resolution, the offload compactor's keys and the read-back tool.

use std::sync::Arc;

use compaction_core::{PruningSettings, ToolResultPruningCompactor};
use compaction_hook::{
    read_offloaded_result, read_tool_spec, run_compaction_hooks, AgentState, AlwaysOffload, CompactionHook,
    CompactionHookSettings, Compactor, Content, Error, InMemoryToolResultStore, NeverOffload,
    OffloadCompactorSettings, OffloadOverChars, OffloadStrategies, PolicyKey, ToolResultOffloadCompactor,
    ToolResultOffloadHook, ToolResultStore,
};
use compaction_model::{Message, ToolCall, ToolResultContent};
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

#[test]
fn invalid_settings_say_why() {
    let bad = |window, at, to| {
        CompactionHook::new(
            pruning(),
            CompactionHookSettings { context_window: window, compact_at: at, compact_to: to },
        )
    };
    assert!(matches!(bad(0, 0.7, 0.4), Err(Error::ContextWindowTooSmall(0))));
    for (at, to) in [(0.4, 0.4), (0.4, 0.7), (1.1, 0.4), (0.7, 0.0), (f64::NAN, 0.4), (0.7, -0.1)] {
        let err = bad(100, at, to).expect_err("fractions");
        assert!(matches!(err, Error::InvalidFractions { .. }), "{at} {to}");
        assert!(err.to_string().contains("0 < compact_to < compact_at <= 1"));
    }
    assert!(bad(1, 1.0, 0.99).is_ok());
}

#[test]
fn settings_read_plain_and_reference_forms() {
    let plain: CompactionHookSettings =
        serde_json::from_value(json!({"context_window": 1000, "compact_at": 0.8})).expect("plain");
    assert_eq!(plain, CompactionHookSettings { context_window: 1000, compact_at: 0.8, compact_to: 0.4 });
    let written = serde_json::to_value(plain).expect("serialize");
    assert_eq!(written, json!({"context_window": 1000, "compact_at": 0.8, "compact_to": 0.4}));
    let again: CompactionHookSettings = serde_json::from_value(written).expect("round trip");
    assert_eq!(again, plain);

    // Haystack's CompactionHook.to_dict(), verbatim.
    let reference = json!({"type": "haystack.hooks.compaction.hooks.CompactionHook", "init_parameters": {
        "compactor": {"type": "haystack.hooks.compaction.tool_result_offloading.ToolResultOffloadCompactor",
            "init_parameters": {"store": {"type": "haystack.hooks.tool_result_offloading.stores.FileSystemToolResultStore",
                "init_parameters": {"root": "tr"}}, "min_keep_steps": 1, "min_tokens": 200, "preview_chars": 200}},
        "context_window": 1000, "compact_at": 0.7, "compact_to": 0.4,
        "token_counter": {"type": "haystack.token_counters.approximate_counter.ApproximateTokenCounter",
            "init_parameters": {"chars_per_token": 3.5, "tokens_per_image": 85, "tokens_per_file": 1000}}}});
    let settings: CompactionHookSettings = serde_json::from_value(reference.clone()).expect("to_dict form");
    assert_eq!(settings, CompactionHookSettings::new(1000));
    let hook = CompactionHook::from_value(&reference).expect("whole hook");
    assert_eq!(hook.compactor().name(), "ToolResultOffloadCompactor");
    assert_eq!(hook.counter().describe(), ApproximateTokenCounter::new(3.5).expect("ratio").describe());

    let bad = json!({"type": "haystack.hooks.compaction.hooks.CompactionHook",
        "init_parameters": {"compactor": {"type": "my.Summarizer", "init_parameters": {}}, "context_window": 10}});
    assert!(matches!(CompactionHook::from_value(&bad), Err(Error::UnsupportedComponent { .. })));
    assert!(serde_json::from_value::<CompactionHookSettings>(json!({"context_window": -5})).is_err());
    assert!(OffloadCompactorSettings::from_value(&json!({"min_keep_steps": 0})).is_err());
}

#[test]
fn estimate_is_anchored_on_the_provider_count() {
    let hook = CompactionHook::new(pruning(), CompactionHookSettings::new(1_000_000)).expect("hook");
    let counter = ApproximateTokenCounter::default();
    let messages = conversation(2, 10);
    let tools = vec![read_tool_spec()];
    let mut state = AgentState::new(messages.clone()).with_tools(tools.clone());
    assert_eq!(hook.estimate(&state), counter.count(&messages, &tools));
    state.context_tokens = 500;
    assert_eq!(hook.estimate(&state), 500 + counter.count(&messages[5..], &[]));
    let only_user = AgentState::new(vec![Message::user("hi")]).with_context_tokens(42);
    assert_eq!(hook.estimate(&only_user), 42);
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
            CompactionHookSettings { context_window: window, compact_at: 0.5, compact_to: 0.45 },
        )
        .expect("first"),
        CompactionHook::new(
            Box::new(offload),
            CompactionHookSettings { context_window: window, compact_at: 0.5, compact_to: 0.1 },
        )
        .expect("second"),
    ];
    let mut state = AgentState::new(messages).with_context_tokens(total);
    let outcomes = run_compaction_hooks(&hooks, &mut state);
    assert!(outcomes[0].compacted && outcomes[0].triggered);
    // The second hook measured the pruned conversation, not the original.
    assert!(outcomes[1].estimated_tokens < outcomes[0].estimated_tokens);
    assert_eq!(outcomes[0].strategy, "ToolResultPruningCompactor");
    assert!(outcomes[0].report.as_ref().is_some_and(|r| !r.results.is_empty()));
    // Pruned results carry the pruning marker, so the offload compactor leaves them; the newest
    // step is protected by both.
    let last = state.messages().last().expect("last");
    assert!(last.meta.is_empty());
}

#[test]
fn not_triggered_leaves_everything() {
    let hook = CompactionHook::new(pruning(), CompactionHookSettings::new(1_000_000)).expect("hook");
    let mut state = AgentState::new(conversation(3, 50)).with_context_tokens(77);
    let before = state.clone();
    let outcome = hook.run(&mut state);
    assert!(!outcome.triggered && !outcome.compacted && outcome.target_tokens.is_none());
    assert_eq!(state, before);
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
    let back = OffloadStrategies::from_haystack_value(&serialized).expect("read back");
    assert_eq!(back.to_haystack_value(), Some(serialized));
}

#[test]
fn a_user_policy_sees_the_state() {
    #[derive(Debug)]
    struct AfterStep(usize);
    impl compaction_hook::OffloadPolicy for AfterStep {
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
    hook.run_with_store(&mut state, &mine);
    assert!(own.is_empty());
    assert_eq!(mine.len(), 1);
}

#[test]
fn offload_compactor_keys_are_random_and_unique() {
    let store = Arc::new(InMemoryToolResultStore::new());
    let compactor = ToolResultOffloadCompactor::new(
        store.clone(),
        OffloadCompactorSettings { min_keep_steps: 1, min_tokens: 0, preview_chars: 20 },
    )
    .expect("valid");
    let messages = conversation(5, 100);
    let counter = ApproximateTokenCounter::default();
    let compaction = compactor.compact(&messages, 0, &counter).expect("offloads");
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
    assert!(compactor.compact(&compaction.messages(&messages), 0, &counter).is_none());
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
