//! The seam between deciding and writing: plans return their writes and do no I/O, the caller
//! commits them anywhere, blocking or async, and finishing builds each pointer from the
//! reference the store gave back.

use std::sync::Arc;

use compaction_hook::AgentState;
use compaction_model::{offloaded_references, Message, ToolCall, ToolResultContent};
use compaction_offload::{
    commit, commit_async, AlwaysOffload, AsyncToolResultStore, Content, Error, FileSystemToolResultStore,
    InMemoryToolResultStore, OffloadCompactorSettings, OffloadStrategies, StoreFuture, StoreProfile,
    StoredContent, ToolResultOffloadCompactor, ToolResultOffloadHook, ToolResultStore,
};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};

use crate::block_on;

fn call(tool: &str, id: &str) -> ToolCall {
    ToolCall::new(tool, serde_json::Map::new()).with_id(id)
}

fn one_step(texts: &[&str]) -> AgentState {
    let calls: Vec<ToolCall> = (0..texts.len()).map(|i| call("fetch", &format!("c{i}"))).collect();
    let mut state =
        AgentState::new(vec![Message::user("go"), Message::assistant_with_calls(None, calls.clone())]);
    for (text, call) in texts.iter().zip(calls) {
        state.push(Message::tool(*text, call, false));
    }
    state.step_count = 4;
    state
}

fn pointer(message: &Message) -> String {
    match &message.tool_call_result().expect("result").result {
        ToolResultContent::Text(t) => t.to_string(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_hook_plans_without_writing_and_finishes_with_what_the_store_gave() {
    let hook = ToolResultOffloadHook::without_store(OffloadStrategies::new().with("*", AlwaysOffload));
    let mut state = one_step(&["first result", "second result", "third result"]);
    let edits = {
        let plan = hook.plan(&state, &StoreProfile::new());
        let keys: Vec<&str> = plan.writes().iter().map(|w| w.key()).collect();
        assert_eq!(keys, ["4_fetch_c0.txt", "4_fetch_c1.txt", "4_fetch_c2.txt"]);
        assert_eq!(plan.writes()[1].content(), Content::Text("second result"));
        // The caller's own commit: a remote store's references, a failure, and one outcome
        // missing altogether.
        let outcomes = vec![
            Ok("s3://bucket/run-7/4_fetch_c0.txt".to_owned()),
            Err(Error::Store { key: "4_fetch_c1.txt".into(), source: "throttled".into() }),
        ];
        plan.finish(outcomes)
    };
    let outcome = edits.apply(&mut state);
    assert_eq!(outcome.offloaded, vec![2]);
    assert!(pointer(&state.messages()[2]).contains("at 's3://bucket/run-7/4_fetch_c0.txt'"));
    assert_eq!(
        offloaded_references(&state.messages()[2].meta),
        Some(vec!["s3://bucket/run-7/4_fetch_c0.txt".into()])
    );
    // The failed and the unanswered write leave their results where they were, and say so.
    assert_eq!(pointer(&state.messages()[3]), "second result");
    assert_eq!(pointer(&state.messages()[4]), "third result");
    let failed: Vec<(usize, Option<&str>)> =
        outcome.failures.iter().map(|f| (f.at.index, f.key.as_deref())).collect();
    assert_eq!(failed, vec![(3, Some("4_fetch_c1.txt")), (4, Some("4_fetch_c2.txt"))]);
}

#[test]
fn the_compactor_counts_the_pointer_it_will_hold() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = FileSystemToolResultStore::new(dir.path()).expect("store");
    let next = std::sync::atomic::AtomicUsize::new(0);
    let settings =
        OffloadCompactorSettings::default().with_min_keep_steps(1).with_min_tokens(0).with_preview_chars(10);
    let compactor = ToolResultOffloadCompactor::without_store(settings)
        .expect("valid")
        .with_key_source(move || format!("k{}", next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    let state = {
        let mut s = one_step(&["x".repeat(800).as_str()]);
        s.push(Message::assistant_with_calls(None, vec![call("fetch", "late")]));
        s.push(Message::tool("recent", call("fetch", "late"), false));
        s
    };
    let messages = state.messages();
    let counter = ApproximateTokenCounter::default();
    // A file already holds the key the compactor asks for: the store picks the next one, and the
    // pointer names it.
    std::fs::write(dir.path().join("compacted_fetch_k0.txt"), "someone else's").expect("plant");
    let plan = compactor
        .plan(messages, 0, &counter, &ToolResultStore::profile(&store))
        .expect("a local counter cannot fail")
        .expect("something to offload");
    assert_eq!(plan.writes().len(), 1);
    assert!(std::fs::read_dir(dir.path()).expect("dir").count() == 1, "planning wrote nothing");
    let outcomes = commit(plan.writes(), &store);
    let done = plan.finish(outcomes).expect("a local counter cannot fail");
    assert!(done.failures.is_empty());
    let compaction = done.compaction.expect("offloaded");
    let out = compaction.messages(messages);
    let text = pointer(&out[2]);
    let expected = format!("'{}/compacted_fetch_k0_2.txt'", store.canonical_root().display());
    assert!(text.contains(&expected), "{text}");
    assert_eq!(compaction.report.results[0].replacement_tokens, counter.count(&out[2..3], &[]));
    let report = &compaction.report;
    assert_eq!(report.tokens_before - report.tokens_after, report.tokens_freed());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("compacted_fetch_k0.txt")).expect("theirs"),
        "someone else's"
    );
}

/// An async-only store whose writes finish on another thread, later: no runtime, no blocking.
#[derive(Debug, Default)]
struct Remote {
    inner: Arc<InMemoryToolResultStore>,
}

impl AsyncToolResultStore for Remote {
    fn write<'a>(&'a self, key: &'a str, content: Content<'a>) -> StoreFuture<'a, String> {
        let (inner, key, text) =
            (self.inner.clone(), key.to_owned(), String::from_utf8_lossy(content.as_bytes()).into_owned());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(5));
            let _ = tx.send(
                ToolResultStore::write(inner.as_ref(), &key, Content::Text(&text))
                    .map(|r| format!("remote:{r}")),
            );
        });
        Box::pin(Later { rx })
    }
    fn read<'a>(&'a self, reference: &'a str) -> StoreFuture<'a, StoredContent> {
        let key = reference.trim_start_matches("remote:");
        Box::pin(std::future::ready(ToolResultStore::read(self.inner.as_ref(), key)))
    }
}

struct Later {
    rx: std::sync::mpsc::Receiver<Result<String, Error>>,
}

impl std::future::Future for Later {
    type Output = Result<String, Error>;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.rx.try_recv() {
            Ok(answer) => std::task::Poll::Ready(answer),
            Err(_) => {
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        }
    }
}

#[test]
fn async_stores_serve_the_hook_the_compactor_and_the_read_back_tool() {
    let remote = Remote::default();
    let hook = ToolResultOffloadHook::without_store(OffloadStrategies::new().with("*", AlwaysOffload));
    let mut state = one_step(&["alpha result", "beta result"]);
    let outcome = block_on(hook.run_async(&mut state, &remote));
    assert!(outcome.failures.is_empty());
    assert_eq!(outcome.offloaded, vec![2, 3]);
    let reference = &outcome.results[1].references[0];
    assert_eq!(reference, "remote:4_fetch_c1.txt");
    let args = serde_json::json!({"reference": reference}).as_object().cloned().expect("object");
    let answer = block_on(compaction_offload::read_offloaded_result_async(&remote, &args));
    assert_eq!((answer.text.as_str(), answer.error), ("beta result", false));

    // commit_async answers in the order of the writes, whatever order they finish in.
    let fs_dir = tempfile::tempdir().expect("temp dir");
    let fs = FileSystemToolResultStore::new(fs_dir.path()).expect("store");
    let state = one_step(&["one", "two", "three", "four"]);
    let plan = hook.plan(&state, &AsyncToolResultStore::profile(&fs));
    let outcomes = block_on(commit_async(plan.writes(), &fs));
    let names: Vec<String> = outcomes
        .iter()
        .map(|o| o.as_ref().expect("written").rsplit('/').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(names, ["4_fetch_c0.txt", "4_fetch_c1.txt", "4_fetch_c2.txt", "4_fetch_c3.txt"]);
    drop(plan);

    // The compactor, async, into the file-system store.
    let compactor =
        ToolResultOffloadCompactor::without_store(OffloadCompactorSettings::default().with_min_tokens(0))
            .expect("valid");
    let mut messages = one_step(&["x".repeat(900).as_str()]).into_messages();
    messages.push(Message::assistant_with_calls(None, vec![call("fetch", "late")]));
    messages.push(Message::tool("recent", call("fetch", "late"), false));
    let done = block_on(compactor.offload_async(&messages, 0, &ApproximateTokenCounter::default(), &fs))
        .expect("a local counter cannot fail");
    assert!(done.failures.is_empty());
    assert_eq!(done.compaction.expect("offloaded").report.changed_indices(), vec![2]);
}
