//! Properties over random agent runs: whatever the conversation (batches of results, results
//! beside text, repeated and colliding call ids, runs sharing a store, failing writes) and the
//! settings, every tool call keeps its result with the same id, and every result that left the
//! context is in the store, word for word, or was pruned by request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use compaction_core::{Compactor, PruningSettings, ToolResultPruningCompactor};
use compaction_hook::AgentState;
use compaction_model::{Message, Part, ResultPart, TextPart, ToolCall, ToolResultContent};
use compaction_offload::{
    Content, Error, InMemoryToolResultStore, OffloadCompactorSettings, OffloadOverChars, OffloadStrategies,
    StoreProfile, StoredContent, ToolResultOffloadCompactor, ToolResultOffloadHook, ToolResultStore,
};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use proptest::prelude::*;

/// Tools and ids chosen so that keys collide: `read_file`+`x` and `read`+`file_x` make the same
/// key, ids repeat between steps and runs, and some calls have none.
const TOOLS: [&str; 3] = ["read_file", "read", "search"];
const IDS: [Option<&str>; 4] = [Some("x"), Some("file_x"), Some("call_0"), None];

#[derive(Debug, Clone)]
struct ResultSpec {
    size: usize,
    parts: bool,
    error: bool,
}

#[derive(Debug, Clone)]
struct StepSpec {
    calls: Vec<(usize, usize, ResultSpec)>,
    batched: bool,
    text_beside: bool,
}

fn step_spec() -> impl Strategy<Value = StepSpec> {
    let result =
        (prop_oneof![0usize..30, 30usize..400, 400usize..2000], any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(size, parts, error)| ResultSpec { size, parts, error });
    (prop::collection::vec((0usize..3, 0usize..4, result), 1..4), any::<bool>(), any::<bool>())
        .prop_map(|(calls, batched, text_beside)| StepSpec { calls, batched, text_beside })
}

/// A text of `size` characters with no quote in it (pointers quote references).
fn text(seed: usize, size: usize) -> String {
    const ALPHABET: &[char] = &['a', 'b', 'c', ' ', '\n', 'é', '😀', '{', '}', 'x'];
    (0..size).map(|i| ALPHABET[(seed * 31 + i * 7 + i / 3) % ALPHABET.len()]).collect()
}

fn content(seed: usize, spec: &ResultSpec) -> ToolResultContent {
    if spec.parts && spec.size >= 2 {
        let half = spec.size / 2;
        ToolResultContent::Parts(vec![
            ResultPart::Text(TextPart::new(text(seed, half))),
            ResultPart::Text(TextPart::new(text(seed + 1, spec.size - half))),
        ])
    } else {
        ToolResultContent::Text(text(seed, spec.size).into())
    }
}

/// One step's messages: the assistant's calls, then the results, one message each or batched.
fn step_messages(step: &StepSpec, seed: usize) -> Vec<Message> {
    let calls: Vec<ToolCall> = step
        .calls
        .iter()
        .map(|&(tool, id, _)| {
            let call = ToolCall::new(TOOLS[tool], serde_json::Map::new());
            match IDS[id] {
                Some(id) => call.with_id(id),
                None => call,
            }
        })
        .collect();
    let mut messages = vec![Message::assistant_with_calls(None, calls.clone())];
    let results: Vec<Message> = calls
        .iter()
        .zip(&step.calls)
        .enumerate()
        .map(|(i, (call, (_, _, spec)))| Message::tool(content(seed + i, spec), call.clone(), spec.error))
        .collect();
    if step.batched {
        let mut batch = results[0].clone();
        batch.parts = results.iter().flat_map(|m| m.parts.clone()).collect();
        if step.text_beside {
            batch.parts.insert(0, Part::Text(TextPart::new("here is what came back")));
        }
        messages.push(batch);
    } else {
        messages.extend(results);
    }
    messages
}

/// A store that fails every write whose number is a multiple of `every` (0: never).
#[derive(Debug)]
struct Flaky {
    inner: InMemoryToolResultStore,
    every: usize,
    writes: AtomicUsize,
}

impl ToolResultStore for Flaky {
    fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if self.every > 0 && n % self.every == 0 {
            return Err(Error::Store { key: key.into(), source: "flaky".into() });
        }
        self.inner.write(key, content)
    }
    fn read(&self, reference: &str) -> Result<StoredContent, Error> {
        self.inner.read(reference)
    }
    fn profile(&self) -> StoreProfile {
        self.inner.profile()
    }
}

/// The texts a result holds, in order.
fn texts(content: &ToolResultContent) -> Vec<String> {
    match content {
        ToolResultContent::Text(t) => vec![t.to_string()],
        ToolResultContent::Parts(parts) => parts
            .iter()
            .filter_map(|p| match p {
                ResultPart::Text(t) => Some(t.text.to_string()),
                _ => None,
            })
            .collect(),
    }
}

/// The references a pointer quotes, in order.
fn quoted_references(pointer: &str) -> Vec<String> {
    pointer.split(" at '").skip(1).filter_map(|rest| rest.split('\'').next()).map(str::to_owned).collect()
}

/// Every call id of the conversation, each with how many results answer it.
fn pairs(messages: &[Message]) -> Vec<(Option<String>, usize)> {
    let results: Vec<Option<String>> =
        messages.iter().flat_map(|m| m.tool_call_results().map(|r| r.origin.id.clone())).collect();
    messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| (c.id.clone(), results.iter().filter(|id| **id == c.id).count()))
        .collect()
}

/// Checks `after` against `before`: same messages, same parts in place, every result as it was,
/// in `store` word for word behind its pointer, or pruned to `placeholder` (when given).
fn nothing_lost(
    before: &[Message],
    after: &[Message],
    store: &dyn ToolResultStore,
    placeholder: Option<&str>,
) {
    assert_eq!(before.len(), after.len());
    assert_eq!(pairs(before), pairs(after), "a call lost its result");
    for (index, (old, new)) in before.iter().zip(after).enumerate() {
        assert_eq!(old.parts.len(), new.parts.len(), "{index}: parts dropped");
        for (a, b) in old.parts.iter().zip(&new.parts) {
            match (a, b) {
                (Part::ToolCallResult(a), Part::ToolCallResult(b)) => {
                    assert_eq!(
                        (&a.origin.id, &a.origin.tool_name, a.error),
                        (&b.origin.id, &b.origin.tool_name, b.error)
                    );
                    if a == b {
                        continue;
                    }
                    let ToolResultContent::Text(pointer) = &b.result else {
                        panic!("{index}: neither kept nor a pointer")
                    };
                    if pointer.starts_with("Tool result offloaded to ") {
                        let stored: Vec<String> = quoted_references(pointer)
                            .iter()
                            .map(|r| match store.read(r).expect("the pointer's reference reads back") {
                                StoredContent::Text(t) => t,
                                StoredContent::Bytes(b) => panic!("bytes {b:?}"),
                            })
                            .collect();
                        assert_eq!(stored, texts(&a.result), "{index}: the store holds another result");
                    } else {
                        let name = &a.origin.tool_name;
                        let expected = placeholder.map(|p| p.replace("{tool_name}", name));
                        assert_eq!(
                            Some(pointer.to_string()),
                            expected,
                            "{index}: a result left the context unaccounted"
                        );
                    }
                }
                (a, b) => assert_eq!(a, b, "{index}: a part other than a result changed"),
            }
        }
    }
}

fn run_agent(
    steps: &[StepSpec],
    hook: &ToolResultOffloadHook,
    store: &dyn ToolResultStore,
    seed: usize,
) -> (Vec<Message>, AgentState) {
    let mut original = vec![Message::user("go")];
    let mut state = AgentState::new(original.clone());
    for (i, step) in steps.iter().enumerate() {
        let messages = step_messages(step, seed + i * 10);
        original.extend(messages.clone());
        state.extend(messages);
        state.step_count += 1;
        let outcome = hook.run_with_store(&mut state, store);
        for failure in &outcome.failures {
            assert!(matches!(failure.error, Error::Store { .. }), "{}", failure.error);
        }
    }
    (original, state)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn offloading_and_pruning_lose_nothing(
        runs in prop::collection::vec(prop::collection::vec(step_spec(), 1..6), 1..3),
        threshold in prop_oneof![Just(0usize), 10usize..500],
        every in prop_oneof![Just(0usize), 2usize..6],
        min_tokens in prop_oneof![Just(0usize), Just(50), Just(200)],
        min_keep_steps in 1usize..3,
        percent in 0usize..100,
        preview_chars in prop_oneof![Just(0usize), Just(20), Just(200)],
    ) {
        // Several runs share one store, with the same steps and ids: their keys collide.
        let store = Arc::new(Flaky { inner: InMemoryToolResultStore::new(), every, writes: AtomicUsize::new(0) });
        let hook = ToolResultOffloadHook::new(store.clone(), OffloadStrategies::new().with("*", OffloadOverChars::new(threshold)))
            .with_preview_chars(preview_chars);
        let counter = ApproximateTokenCounter::default();
        for (run, steps) in runs.iter().enumerate() {
            let (original, state) = run_agent(steps, &hook, store.as_ref(), run * 1000);
            nothing_lost(&original, state.messages(), store.as_ref(), None);

            // The compactor on what the hook left, then pruning on what that left.
            let settings = OffloadCompactorSettings::default().with_min_keep_steps(min_keep_steps).with_min_tokens(min_tokens).with_preview_chars(preview_chars);
            let compactor = ToolResultOffloadCompactor::new(store.clone(), settings).expect("valid");
            let messages = state.into_messages();
            let target = counter.count(&messages, &[]) * percent / 100;
            let done = compactor.offload(&messages, target, &counter).expect("counted");
            let offloaded = match &done.compaction {
                Some(c) => {
                    let built = c.messages(&messages);
                    for r in &c.report.results {
                        prop_assert!(r.tokens_freed > 0);
                    }
                    // The figure after is the conversation built, counted; reached means reached.
                    prop_assert_eq!(c.report.tokens_after, counter.count(&built, &[]));
                    prop_assert_eq!(c.report.target_reached, c.report.tokens_after <= target);
                    built
                }
                None => messages.clone(),
            };
            nothing_lost(&original, &offloaded, store.as_ref(), None);
            for failure in &done.failures {
                // A result whose write failed is still there, as it was.
                let at = failure.at;
                let result = |m: &Message| m.tool_call_results().nth(at.position).cloned();
                prop_assert_eq!(result(&offloaded[at.index]), result(&messages[at.index]));
            }
            let pruning = PruningSettings::default().with_min_tokens(min_tokens);
            let placeholder = pruning.placeholder.clone();
            let pruned = match ToolResultPruningCompactor::new(pruning).expect("valid").try_compact(&offloaded, target, &counter).unwrap() {
                Some(c) => c.messages(&offloaded),
                None => offloaded,
            };
            nothing_lost(&original, &pruned, store.as_ref(), Some(&placeholder));
        }
    }
}
