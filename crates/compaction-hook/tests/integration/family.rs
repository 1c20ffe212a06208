//! The budget hook and the compaction hook with the sliding window and summarization, against
//! the reference's fixtures; and the hook's counting and compacting failures, which the
//! reference cannot show.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use compaction_core::{
    AsyncChatGenerator, ChatGenerator, Compactor, GenerateFuture, GeneratorError, SlidingWindowCompactor,
    SlidingWindowSettings, SummarizationCompactor, SummarizationSettings, ToolResultPruningCompactor,
};
use compaction_hook::{
    AgentState, CompactionHook, CompactionHookSettings, CompactionOutcome, Error, TokenBudgetHook,
    BUDGET_FINAL_MESSAGE, TOKEN_BUDGET_EXCEEDED,
};
use compaction_model::{messages_from_value, messages_to_value, JsonObject, Message, ToolCall, ToolSpec};
use compaction_tokens::{ApproximateTokenCounter, Counts, TokenCounter};
use serde_json::{json, Value};

use crate::{block_on, counter_from_fixture, fixture_files, python_equal, read_json};

#[test]
fn conformance_budget_matches_reference() {
    let files = fixture_files("budget");
    assert!(!files.is_empty(), "no budget fixtures found");
    let mut failures = Vec::new();
    for path in &files {
        let fixture = read_json(path);
        let hook = TokenBudgetHook::new(fixture["max_total_tokens"].as_u64().expect("budget") as usize)
            .expect("valid budget")
            .with_final_message(fixture["add_final_message"].as_bool().expect("flag"));
        let mut state = AgentState::new(vec![Message::user("go")]);
        state.token_usage = fixture["token_usage"].as_object().cloned().expect("usage object");
        let mut contexts = Vec::new();
        for call in fixture["calls"].as_array().expect("calls") {
            let replies: Vec<Message> = call
                .as_array()
                .expect("replies")
                .iter()
                .map(|meta| Message::assistant("reply").with_meta(meta.as_object().cloned().expect("meta")))
                .collect();
            state.record_usage(&replies);
            contexts.push(Value::from(state.context_tokens as u64));
        }
        let outcome = hook.run(&mut state);
        let expected = &fixture["expected"];
        let mut wrong = Vec::new();
        if !python_equal(&Value::Object(state.token_usage.clone()), &expected["token_usage"]) {
            wrong.push("token_usage");
        }
        // A count beyond the machine's word (the reference's integers have no bound) stops at it.
        let saturated: Vec<Value> = expected["context_tokens"]
            .as_array()
            .expect("counts")
            .iter()
            .map(|v| {
                v.as_u64().map_or(Value::from(usize::MAX as u64), |n| Value::from(n.min(usize::MAX as u64)))
            })
            .collect();
        if contexts != saturated {
            wrong.push("context_tokens");
        }
        if state.stop_run.as_deref() != expected["stop_run"].as_str()
            || outcome.exceeded != state.stop_run.is_some()
        {
            wrong.push("stop_run");
        }
        if !python_equal(&messages_to_value(&state.messages()[1..]), &expected["messages_added"]) {
            wrong.push("messages_added");
        }
        if !wrong.is_empty() {
            failures.push(format!("{}: {wrong:?}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{} of {} fixtures differ: {failures:#?}", failures.len(), files.len());
    eprintln!("{} budget fixtures match the reference", files.len());
}

#[test]
fn budget_hook_reads_and_writes_haystack_form() {
    let dict = json!({"type": "haystack.hooks.budget.hooks.TokenBudgetHook",
                      "init_parameters": {"max_total_tokens": 5000, "add_final_message": true}});
    let hook = TokenBudgetHook::from_value(&dict).expect("reads");
    assert_eq!((hook.max_total_tokens(), hook.add_final_message()), (5000, true));
    assert_eq!(hook.to_haystack_value(), dict);
    assert!(matches!(TokenBudgetHook::new(0), Err(Error::BudgetTooSmall(0))));
    assert!(matches!(
        TokenBudgetHook::from_value(&json!({"max_total_tokens": -3})),
        Err(Error::BudgetTooSmall(-3))
    ));
    assert!(TokenBudgetHook::from_value(&json!({"max_total_tokens": 1, "surprise": 1})).is_err());
    assert!(TokenBudgetHook::from_value(&json!({"add_final_message": true})).is_err());
}

#[test]
fn budget_hook_stops_once_and_says_why() {
    let hook = TokenBudgetHook::new(100).expect("valid").with_final_message(true);
    let mut state = AgentState::new(vec![Message::user("go")]);
    let usage =
        |n: u64| json!({"usage": {"input_tokens": n, "output_tokens": 10}}).as_object().cloned().unwrap();
    state.record_usage(&[Message::assistant("a").with_meta(usage(50))]);
    let outcome = hook.run(&mut state);
    assert_eq!((outcome.total_tokens, outcome.exceeded), (60, false));
    assert_eq!(state.stop_run, None);
    state.record_usage(&[Message::assistant("b").with_meta(usage(30))]);
    let outcome = hook.run(&mut state);
    assert_eq!((outcome.total_tokens, outcome.exceeded, outcome.final_message_added), (100, true, true));
    assert_eq!(state.stop_run.as_deref(), Some(TOKEN_BUDGET_EXCEEDED));
    assert_eq!(state.messages().last().and_then(Message::text), Some(BUDGET_FINAL_MESSAGE));
    // The last call's input plus output is the provider's count of the context.
    assert_eq!(state.context_tokens, 40);
}

/// The fixture generator's stand-in model: see `StandIn` in `xtask/reference/generate_family.py`.
#[derive(Debug)]
struct StandIn {
    spec: Value,
    requests: Mutex<usize>,
}

impl StandIn {
    fn new(spec: &Value) -> Self {
        StandIn { spec: spec.clone(), requests: Mutex::new(0) }
    }

    fn answer(&self, messages: &[Message]) -> Result<Message, GeneratorError> {
        let mut requests = self.requests.lock().expect("not poisoned");
        let round = *requests;
        *requests += 1;
        let prompt = messages.last().and_then(Message::text).unwrap_or_default();
        let transcript = &prompt["<conversation_to_summarize>\n".len()..];
        if self.spec["fail_round"].as_u64() == Some(round as u64) {
            return match self.spec["failure"].as_str().unwrap_or_default() {
                "raise" => Err("the stand-in was told to fail".into()),
                "empty" => Ok(Message::assistant("")),
                "blank" => Ok(Message::assistant(" \n\t\u{1c}\u{3000} ")),
                "no_text" => {
                    Ok(Message::assistant_with_calls(None, vec![ToolCall::new("x", JsonObject::new())]))
                }
                "bloat" => Ok(Message::assistant(format!("{transcript}{transcript}"))),
                other => panic!("unknown stand-in failure {other:?}"),
            };
        }
        let keep = self.spec["keep_chars"].as_u64().expect("keep_chars") as usize;
        let kept: String = transcript.chars().take(keep).collect();
        Ok(Message::assistant(format!(" \u{1f} Summary {round}: {kept} \n")))
    }
}

impl ChatGenerator for StandIn {
    fn generate(&self, messages: &[Message]) -> Result<Message, GeneratorError> {
        self.answer(messages)
    }
}

impl AsyncChatGenerator for StandIn {
    fn generate<'a>(&'a self, messages: &'a [Message]) -> GenerateFuture<'a> {
        Box::pin(async move { self.answer(messages) })
    }
}

/// The fixture's hook, its compactor built by `kind` with a fresh stand-in where it needs one.
fn family_hook(fixture: &Value) -> (CompactionHook, Option<Arc<StandIn>>) {
    let spec = &fixture["compactor"];
    let (compactor, stand_in): (Box<dyn Compactor>, _) = match spec["kind"].as_str() {
        Some("sliding_window") => {
            let settings = SlidingWindowSettings::from_value(&spec["settings"]).expect("settings parse");
            (Box::new(SlidingWindowCompactor::new(settings)), None)
        }
        Some("summarization") => {
            let settings = SummarizationSettings::from_value(&spec["settings"]).expect("settings parse");
            let stand_in = Arc::new(StandIn::new(&spec["stand_in"]));
            let compactor = SummarizationCompactor::new(settings)
                .expect("valid settings")
                .with_generator(stand_in.clone())
                .with_async_generator(stand_in.clone());
            (Box::new(compactor), Some(stand_in))
        }
        other => panic!("compactor kind {other:?} not in these fixtures"),
    };
    let settings = CompactionHookSettings::new(fixture["context_window"].as_u64().expect("window") as usize)
        .with_compact_at(fixture["compact_at"].as_f64().expect("compact_at"))
        .with_compact_to(fixture["compact_to"].as_f64().expect("compact_to"));
    let hook = CompactionHook::new(compactor, settings)
        .expect("valid hook settings")
        .with_counter(counter_from_fixture(&fixture["counter"]));
    (hook, stand_in)
}

fn fixture_state(fixture: &Value) -> AgentState {
    let messages = messages_from_value(fixture["messages"].clone()).expect("messages parse");
    let tools: Vec<ToolSpec> = serde_json::from_value(fixture["tools"].clone()).expect("tools parse");
    AgentState::new(messages)
        .with_tools(tools)
        .with_context_tokens(fixture["context_tokens"].as_u64().expect("context_tokens") as usize)
}

/// What differs between a run's result and the fixture's `expected`.
fn differences(
    state: &AgentState,
    result: &Result<CompactionOutcome, Error>,
    requests: Option<usize>,
    expected: &Value,
) -> Vec<&'static str> {
    let mut wrong = Vec::new();
    if !python_equal(&messages_to_value(state.messages()), &expected["messages"]) {
        wrong.push("messages");
    }
    if Some(state.context_tokens as u64) != expected["context_tokens"].as_u64() {
        wrong.push("context_tokens");
    }
    if requests.map(|n| n as u64) != expected["requests"].as_u64() {
        wrong.push("requests");
    }
    match (result, expected["error"].as_str()) {
        (Ok(outcome), None) => {
            if Value::Bool(outcome.compacted) != expected["compacted"]
                || Some(outcome.estimated_tokens as u64) != expected["estimated_tokens"].as_u64()
                || Value::Bool(outcome.triggered) != expected["triggered"]
                || outcome.target_tokens.map(|t| t as u64) != expected["target_tokens"].as_u64()
            {
                wrong.push("outcome");
            }
        }
        (Err(Error::Compaction(_)), Some(_)) => {}
        _ => wrong.push("error"),
    }
    wrong
}

/// The fixture's `expected`, except where the reference's sliding window grew the conversation:
/// there this project's declines (a deviation), and the hook leaves the state as it was.
fn expected_here(fixture: &Value) -> Value {
    let mut expected = fixture["expected"].clone();
    if fixture["compactor"]["kind"] != "sliding_window" || expected["compacted"] != true {
        return expected;
    }
    let counter = counter_from_fixture(&fixture["counter"]);
    let before = messages_from_value(fixture["messages"].clone()).expect("messages parse");
    let after = messages_from_value(expected["messages"].clone()).expect("messages parse");
    if counter.count(&after, &[]) >= counter.count(&before, &[]) {
        expected["messages"] = fixture["messages"].clone();
        expected["context_tokens"] = fixture["context_tokens"].clone();
        expected["compacted"] = Value::Bool(false);
    }
    expected
}

#[test]
fn conformance_hook_family_matches_reference() {
    let files = fixture_files("hook_family");
    assert!(!files.is_empty(), "no hook_family fixtures found");
    let mut failures = Vec::new();
    for path in &files {
        let fixture = read_json(path);
        let expected = &expected_here(&fixture);

        let (hook, stand_in) = family_hook(&fixture);
        let mut state = fixture_state(&fixture);
        let result = hook.try_run(&mut state);
        let requests = stand_in.map(|s| *s.requests.lock().expect("not poisoned"));
        let wrong = differences(&state, &result, requests, expected);
        if !wrong.is_empty() {
            failures.push(format!("{} (sync): {wrong:?}", path.display()));
        }

        let (hook, stand_in) = family_hook(&fixture);
        let mut state = fixture_state(&fixture);
        let result = block_on(hook.run_async(&mut state));
        let requests = stand_in.map(|s| *s.requests.lock().expect("not poisoned"));
        let wrong = differences(&state, &result, requests, expected);
        if !wrong.is_empty() {
            failures.push(format!("{} (async): {wrong:?}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{} of {} fixtures differ: {failures:#?}", failures.len(), files.len());
    eprintln!("{} hook_family fixtures match the reference", files.len());
}

/// A counter that counts as the approximate one but fails from its `fail_from`-th fallible
/// count on, as a provider's counter does when the network goes.
#[derive(Debug)]
struct FailingCounter {
    inner: ApproximateTokenCounter,
    /// How many fallible counts it was asked for, shared with the test.
    calls: Arc<AtomicUsize>,
    fail_from: usize,
}

impl FailingCounter {
    fn new(fail_from: usize) -> Self {
        FailingCounter { inner: ApproximateTokenCounter::default(), calls: Arc::default(), fail_from }
    }

    fn check(&self) -> Result<(), compaction_tokens::Error> {
        if self.calls.fetch_add(1, Ordering::SeqCst) >= self.fail_from {
            return Err(compaction_tokens::Error::Provider {
                counter: self.describe(),
                source: "connection refused".into(),
            });
        }
        Ok(())
    }
}

impl TokenCounter for FailingCounter {
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        self.inner.count(messages, tools)
    }

    fn describe(&self) -> String {
        "failing".into()
    }

    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, compaction_tokens::Error> {
        self.check()?;
        Ok(self.inner.count(messages, tools))
    }

    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, compaction_tokens::Error> {
        self.check()?;
        Ok(self.inner.count_each(messages))
    }
}

fn long_conversation() -> Vec<Message> {
    let mut messages = vec![Message::system("sys")];
    for turn in 0..4 {
        messages.push(Message::user(format!("turn {turn} ") + &"words ".repeat(200)));
        messages.push(Message::assistant("answer ".repeat(200)));
    }
    messages.push(Message::user("now"));
    messages
}

fn window_hook(counter: FailingCounter) -> CompactionHook {
    CompactionHook::new(Box::new(SlidingWindowCompactor::default()), CompactionHookSettings::new(2_000))
        .expect("valid")
        .with_counter(Box::new(counter))
}

#[test]
fn a_counter_that_cannot_count_is_an_error_not_a_guess() {
    let messages = long_conversation();

    // The estimate itself fails.
    let hook = window_hook(FailingCounter::new(0));
    let mut state = AgentState::new(messages.clone());
    let error = hook.try_run(&mut state).expect_err("cannot count");
    assert!(matches!(&error, Error::Count(compaction_tokens::Error::Provider { .. })), "{error}");
    let cause =
        std::error::Error::source(&error).and_then(std::error::Error::source).map(ToString::to_string);
    assert!(cause.is_some_and(|c| c.contains("connection refused")), "{error:?}");
    assert_eq!(state.messages(), messages.as_slice());
    let outcome = hook.run(&mut state);
    assert!(outcome.failure.as_deref().is_some_and(|f| f.contains("connection refused")), "{outcome:?}");
    assert!(!outcome.compacted);
    assert_eq!(state.messages(), messages.as_slice());

    // The estimate and the target are counted, then the compactor's own counting fails.
    let hook = window_hook(FailingCounter::new(2));
    let mut state = AgentState::new(messages.clone());
    let error = hook.try_run(&mut state).expect_err("the compactor cannot count");
    assert!(matches!(error, Error::Compaction(compaction_core::Error::Count(_))), "{error}");
    assert_eq!(state.messages(), messages.as_slice());
    let hook = window_hook(FailingCounter::new(2));
    let outcome = hook.run(&mut state);
    assert!(outcome.triggered && !outcome.compacted && outcome.failure.is_some(), "{outcome:?}");
    assert_eq!(state.messages(), messages.as_slice());
}

#[test]
fn a_failed_recount_after_compacting_keeps_the_compaction_and_forgets_the_anchor() {
    let messages = long_conversation();
    // With a provider count, a run ends by counting the compacted conversation to re-anchor
    // the estimate; a counter that fails exactly there.
    let counter = FailingCounter::new(usize::MAX);
    let calls = Arc::clone(&counter.calls);
    let state = AgentState::new(messages.clone()).with_context_tokens(1_900);
    assert!(window_hook(counter).try_run(&mut state.clone()).expect("counts").compacted);
    let total = calls.load(Ordering::SeqCst);
    let hook = window_hook(FailingCounter::new(total - 1));
    let mut state = state;
    let outcome = hook.try_run(&mut state).expect("the compaction itself worked");
    assert!(outcome.compacted, "{outcome:?}");
    assert!(state.messages().len() < messages.len());
    assert_eq!(state.context_tokens, 0);
    assert!(outcome.failure.as_deref().is_some_and(|f| f.contains("connection refused")), "{outcome:?}");
}

#[test]
fn the_async_hook_is_send_and_matches_the_sync_one() {
    fn assert_send<T: Send>(_: &T) {}
    let hook = CompactionHook::new(
        Box::new(ToolResultPruningCompactor::default()),
        CompactionHookSettings::new(500),
    )
    .expect("valid");
    let mut state = AgentState::new(long_conversation());
    let future = hook.run_async(&mut state);
    assert_send(&future);
    let outcome = block_on(future).expect("local counting never fails");
    assert!(outcome.triggered && !outcome.compacted, "nothing to prune: {outcome:?}");

    let hook = window_hook(FailingCounter::new(usize::MAX));
    let mut sync_state = AgentState::new(long_conversation());
    let mut async_state = sync_state.clone();
    let sync = hook.try_run(&mut sync_state).expect("counts");
    let asynchronous = block_on(hook.run_async(&mut async_state)).expect("counts");
    assert_eq!(sync, asynchronous);
    assert_eq!(sync_state, async_state);
    assert!(sync.compacted);
}

#[test]
fn decide_then_complete_is_the_same_as_run() {
    let hook = window_hook(FailingCounter::new(usize::MAX));
    let mut driven = AgentState::new(long_conversation()).with_context_tokens(1_900);
    let mut ran = driven.clone();

    let decision = hook.decide(&driven).expect("counts");
    let target = decision.target_tokens.expect("over the threshold");
    // The caller compacts however it likes: here, the same compactor, synchronously.
    let compaction =
        SlidingWindowCompactor::default().try_compact(driven.messages(), target, hook.counter()).unwrap();
    let outcome = hook.complete(&mut driven, decision, compaction);

    assert_eq!(outcome, hook.run(&mut ran));
    assert_eq!(driven, ran);
}

#[test]
fn a_summarizer_without_an_async_generator_refuses_to_block() {
    let sync_only = SummarizationCompactor::new(SummarizationSettings::default())
        .expect("valid")
        .with_generator(Arc::new(StandIn::new(&json!({"keep_chars": 10}))));
    let hook = CompactionHook::new(Box::new(sync_only), CompactionHookSettings::new(2_000)).expect("valid");
    let mut state = AgentState::new(long_conversation());
    let error = block_on(hook.run_async(&mut state)).expect_err("no async generator");
    assert!(matches!(error, Error::Compaction(compaction_core::Error::NoGenerator("async"))), "{error}");
    assert_eq!(state.messages(), long_conversation().as_slice());
    // The sync path has its generator.
    let outcome = hook.try_run(&mut state).expect("summarizes");
    assert!(outcome.compacted);
}

#[test]
fn sliding_window_reads_from_haystack_hook_dict() {
    let hook = CompactionHook::from_value(&json!({
        "type": "haystack.hooks.compaction.hooks.CompactionHook",
        "init_parameters": {
            "compactor": {"type": "haystack.hooks.compaction.sliding_window.SlidingWindowCompactor",
                          "init_parameters": {"min_keep_steps": 0, "omission_note": null}},
            "context_window": 1000
        }
    }))
    .expect("reads");
    assert_eq!(hook.compactor().name(), "SlidingWindowCompactor");
}
