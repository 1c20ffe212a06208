//! The hook's rules stated directly: settings checks and forms, the estimate and chaining.

use compaction_core::{PruningSettings, ToolResultPruningCompactor};
use compaction_hook::{
    run_compaction_hooks, AgentState, CompactionHook, CompactionHookSettings, Compactor, Error,
};
use compaction_model::{Changes, Message, ToolCall, ToolSpec};
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
            CompactionHookSettings::new(window).with_compact_at(at).with_compact_to(to),
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
    assert_eq!(plain, CompactionHookSettings::new(1000).with_compact_at(0.8).with_compact_to(0.4));
    let written = serde_json::to_value(plain).expect("serialize");
    assert_eq!(written, json!({"context_window": 1000, "compact_at": 0.8, "compact_to": 0.4}));
    let again: CompactionHookSettings = serde_json::from_value(written).expect("round trip");
    assert_eq!(again, plain);

    // Haystack's CompactionHook.to_dict(), verbatim.
    let reference = json!({"type": "haystack.hooks.compaction.hooks.CompactionHook", "init_parameters": {
        "compactor": {"type": "haystack.hooks.compaction.tool_result_pruning.ToolResultPruningCompactor",
            "init_parameters": {"min_keep_steps": 2, "min_tokens": 200,
                "placeholder": "[gone]", "skip_meta_keys": ["tool_result_offloaded"]}},
        "context_window": 1000, "compact_at": 0.7, "compact_to": 0.4,
        "token_counter": {"type": "haystack.token_counters.approximate_counter.ApproximateTokenCounter",
            "init_parameters": {"chars_per_token": 3.5, "tokens_per_image": 85, "tokens_per_file": 1000}}}});
    let settings: CompactionHookSettings = serde_json::from_value(reference.clone()).expect("to_dict form");
    assert_eq!(settings, CompactionHookSettings::new(1000));
    let hook = CompactionHook::from_value(&reference).expect("whole hook");
    assert_eq!(hook.compactor().name(), "ToolResultPruningCompactor");
    assert_eq!(hook.counter().describe(), ApproximateTokenCounter::new(3.5).expect("ratio").describe());

    // An offload compactor needs a store, which this crate does not build.
    let offload = json!({"type": "haystack.hooks.compaction.hooks.CompactionHook", "init_parameters": {
        "compactor": {"type": "haystack.hooks.compaction.tool_result_offloading.ToolResultOffloadCompactor",
            "init_parameters": {}}, "context_window": 1000}});
    assert!(matches!(CompactionHook::from_value(&offload), Err(Error::UnsupportedComponent { .. })));
    // Any compactor can take the named one's place.
    let hook = CompactionHook::from_value_with_compactor(&offload, pruning()).expect("with a compactor");
    assert_eq!(hook.settings().context_window, 1000);

    let bad = json!({"type": "haystack.hooks.compaction.hooks.CompactionHook",
        "init_parameters": {"compactor": {"type": "my.Summarizer", "init_parameters": {}}, "context_window": 10}});
    assert!(matches!(CompactionHook::from_value(&bad), Err(Error::UnsupportedComponent { .. })));
    assert!(serde_json::from_value::<CompactionHookSettings>(json!({"context_window": -5})).is_err());
}

#[test]
fn estimate_is_anchored_on_the_provider_count() {
    let hook = CompactionHook::new(pruning(), CompactionHookSettings::new(1_000_000)).expect("hook");
    let counter = ApproximateTokenCounter::default();
    let messages = conversation(2, 10);
    let tools = vec![ToolSpec::new("search", "Search.", json!({"type": "object"}))];
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
    let gentle =
        ToolResultPruningCompactor::new(PruningSettings::default().with_min_keep_steps(4)).expect("valid");
    let hooks = vec![
        CompactionHook::new(
            Box::new(gentle),
            CompactionHookSettings::new(window).with_compact_at(0.5).with_compact_to(0.1),
        )
        .expect("first"),
        CompactionHook::new(
            pruning(),
            CompactionHookSettings::new(window).with_compact_at(0.3).with_compact_to(0.1),
        )
        .expect("second"),
    ];
    let mut state = AgentState::new(messages).with_context_tokens(total);
    let outcomes = run_compaction_hooks(&hooks, &mut state);
    assert!(outcomes[0].compacted && outcomes[0].triggered);
    assert_eq!(outcomes[0].report.as_ref().map(|r| r.changed_indices()), Some(vec![3, 5]));
    // The second hook measured what the first left, and pruned further.
    assert!(outcomes[1].estimated_tokens < outcomes[0].estimated_tokens);
    assert_eq!(outcomes[1].report.as_ref().map(|r| r.changed_indices()), Some(vec![7, 9, 11]));
    // What each changed, as a write-back takes it: those messages, in place.
    assert_eq!(outcomes[0].changes, Some(Changes::in_place(vec![3, 5])));
    assert_eq!(outcomes[1].changes, Some(Changes::in_place(vec![7, 9, 11])));
    assert!(state.messages().last().expect("last").meta.is_empty());
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

/// The cache-aware rule: a compaction that rewrites more at the cache-write price than the
/// calls to come save at the cache-read price is not applied, and the outcome says why; a cold
/// cache (a pause past its lifetime) or a request over the window compacts anyway; off, the
/// hook is the reference's.
#[test]
fn the_cache_aware_rule_compacts_only_when_it_pays() {
    use compaction_hook::CacheRule;
    use std::time::Duration;
    let messages = conversation(6, 400);
    let counter = ApproximateTokenCounter::default();
    let size = counter.count(&messages, &[]);
    let window = size * 11 / 10;
    let hook = |rule: Option<CacheRule>| {
        let mut settings = CompactionHookSettings::new(window);
        if let Some(rule) = rule {
            settings = settings.with_cache(rule);
        }
        CompactionHook::new(pruning(), settings).expect("valid")
    };

    // Off: the reference's hook compacts.
    let mut state = AgentState::new(messages.clone());
    let outcome = hook(None).run(&mut state);
    assert!(outcome.compacted && outcome.declined.is_none());
    let compacted = state.messages().to_vec();

    // One call to come: rewriting the tail after the first pruned result costs more.
    let short = CacheRule::default().with_expected_calls(1);
    let mut state = AgentState::new(messages.clone());
    let outcome = hook(Some(short)).run(&mut state);
    assert!(outcome.triggered && !outcome.compacted, "{outcome:?}");
    let why = outcome.declined.expect("said why");
    assert!(why.contains("cache-write price"), "{why}");
    assert_eq!(state.messages(), &messages[..], "the conversation is as it was");

    // The same after a pause past the cache's lifetime: written again anyway, so it compacts.
    let mut state = AgentState::new(messages.clone());
    state.idle = Some(Duration::from_secs(600));
    let outcome = hook(Some(short)).run(&mut state);
    assert!(outcome.compacted && outcome.declined.is_none(), "{outcome:?}");
    assert_eq!(state.messages(), &compacted[..]);

    // Many calls to come: the freed tokens pay for the rewrite.
    let mut state = AgentState::new(messages.clone());
    let outcome = hook(Some(CacheRule::default().with_expected_calls(50))).run(&mut state);
    assert!(outcome.compacted, "{outcome:?}");

    // Over the window, it compacts whatever it costs.
    let mut state = AgentState::new(messages.clone()).with_context_tokens(window * 2);
    let outcome = hook(Some(short)).run(&mut state);
    assert!(outcome.compacted && outcome.declined.is_none(), "{outcome:?}");

    // The rule is checked with the settings, and stays out of Haystack's form.
    let bad = CompactionHookSettings::new(100).with_cache(CacheRule::default().with_expected_calls(0));
    assert!(matches!(CompactionHook::new(pruning(), bad), Err(Error::InvalidCacheRule(_))));
    let written = serde_json::to_value(CompactionHookSettings::new(1000)).expect("serialize");
    assert_eq!(written, json!({"context_window": 1000, "compact_at": 0.7, "compact_to": 0.4}));
}
