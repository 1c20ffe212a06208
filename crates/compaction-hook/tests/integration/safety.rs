//! The file-system store's safety: nothing outside its root, atomic writes, concurrent writers,
//! and failed writes that leave the conversation as it was.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use compaction_hook::{
    AgentState, AlwaysOffload, Content, Error, FileSystemToolResultStore, InMemoryToolResultStore,
    OffloadStrategies, StoredContent, ToolResultOffloadHook, ToolResultStore,
};
use compaction_model::{ImagePart, Message, ResultPart, TextPart, ToolCall, ToolResultContent};

fn call(tool: &str, id: &str) -> ToolCall {
    ToolCall::new(tool, serde_json::Map::new()).with_id(id)
}

fn step(state: &mut AgentState, tool: &str, id: &str, result: impl Into<ToolResultContent>) {
    let origin = call(tool, id);
    state.push(Message::assistant_with_calls(None, vec![origin.clone()]));
    state.push(Message::tool(result, origin, false));
    state.step_count += 1;
}

fn always(store: Arc<dyn ToolResultStore>) -> ToolResultOffloadHook {
    ToolResultOffloadHook::new(store, OffloadStrategies::new().with("*", AlwaysOffload))
}

fn leftover_temp_files(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(leftover_temp_files(&path));
        } else if path.to_string_lossy().ends_with(".tmp") {
            found.push(path.display().to_string());
        }
    }
    found
}

#[test]
fn keys_and_references_outside_the_root_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("store");
    let store = FileSystemToolResultStore::new(&root);
    for key in ["../escape.txt", "a/../../escape.txt", "/etc/passwd-copy.txt"] {
        let err = store.write(key, Content::Text("x")).expect_err(key);
        assert!(matches!(err, Error::KeyOutsideRoot { .. }), "{key}: {err}");
    }
    assert!(!dir.path().join("escape.txt").exists());

    // A symbolic link inside the root that points out of it.
    std::fs::create_dir_all(&root).expect("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::os::unix::fs::symlink(&outside, root.join("link")).expect("symlink");
    let err = store.write("link/evil.txt", Content::Text("x")).expect_err("through symlink");
    assert!(matches!(err, Error::KeyOutsideRoot { .. }), "{err}");
    assert!(!outside.join("evil.txt").exists());

    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "secret").expect("secret");
    let err = store.read(&secret.to_string_lossy()).expect_err("read outside");
    assert!(matches!(err, Error::ReferenceOutsideRoot { .. }), "{err}");
    let err = store.read("../outside/secret.txt").expect_err("relative read outside");
    assert!(matches!(err, Error::ReferenceOutsideRoot { .. }), "{err}");

    // Inside the root, `..` that stays inside and nested keys are fine; the reference is absolute.
    let reference = store.write("a/b/../c.txt", Content::Text("ok")).expect("inside");
    assert!(std::path::Path::new(&reference).is_absolute());
    assert!(reference.ends_with("/store/a/c.txt"), "{reference}");
    assert_eq!(store.read(&reference).expect("read"), StoredContent::Text("ok".into()));
}

#[test]
fn root_is_created_on_first_write_and_bytes_round_trip() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("deep/nested/root");
    let store = FileSystemToolResultStore::new(&root);
    assert!(!root.exists());
    let reference = store.write("image.png", Content::Bytes(&[0x89, b'P', b'N', b'G', 0xff])).expect("write");
    assert!(root.is_dir());
    assert_eq!(
        store.read(&reference).expect("read"),
        StoredContent::Bytes(vec![0x89, b'P', b'N', b'G', 0xff])
    );
    // Overwrites replace the whole entry atomically.
    store.write("image.png", Content::Text("now text")).expect("overwrite");
    assert_eq!(store.read(&reference).expect("read"), StoredContent::Text("now text".into()));
    assert!(leftover_temp_files(dir.path()).is_empty());
    assert!(matches!(store.read("missing.txt"), Err(Error::NotFound(_))));
}

#[test]
fn eight_threads_offloading_into_one_store_lose_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn ToolResultStore> = Arc::new(FileSystemToolResultStore::new(dir.path().join("shared")));
    let hook = Arc::new(always(store.clone()));
    let handles: Vec<_> = (0..8)
        .map(|thread| {
            let hook = hook.clone();
            std::thread::spawn(move || {
                let mut state = AgentState::new(vec![Message::user("go")]);
                let mut references = Vec::new();
                for i in 0..25 {
                    let text = format!("thread {thread} result {i} ").repeat(50);
                    step(&mut state, "fetch", &format!("t{thread}c{i}"), text.clone());
                    let outcome = hook.run(&mut state);
                    assert!(outcome.failures.is_empty(), "{:?}", outcome.failures);
                    let meta = &state.messages().last().expect("result").meta;
                    let refs = compaction_model::offloaded_references(meta).expect("offloaded");
                    references.push((refs[0].clone(), text));
                }
                references
            })
        })
        .collect();
    let mut total = 0;
    for handle in handles {
        for (reference, text) in handle.join().expect("thread") {
            assert_eq!(store.read(&reference).expect("read back"), StoredContent::Text(text));
            total += 1;
        }
    }
    assert_eq!(total, 200);
    assert_eq!(std::fs::read_dir(dir.path().join("shared")).expect("dir").count(), 200);
    assert!(leftover_temp_files(dir.path()).is_empty());
}

#[test]
fn a_store_root_that_is_a_file_fails_the_write_and_keeps_the_result() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("not-a-dir");
    std::fs::write(&root, "I am a file").expect("file");
    let hook = always(Arc::new(FileSystemToolResultStore::new(&root)));
    let mut state = AgentState::new(vec![Message::user("go")]);
    step(&mut state, "fetch", "c1", "big result ".repeat(100));
    let before = state.clone();
    let outcome = hook.run(&mut state);
    assert_eq!(state, before, "the message must stay as it was");
    assert!(outcome.offloaded.is_empty());
    assert_eq!(outcome.failures.len(), 1);
    assert_eq!(outcome.failures[0].0, 2);
    assert!(matches!(outcome.failures[0].1, Error::Io { .. }), "{}", outcome.failures[0].1);
    assert_eq!(std::fs::read_to_string(&root).expect("file"), "I am a file");
    assert!(leftover_temp_files(dir.path()).is_empty());
}

/// A store whose every write after the first `allowed` fails.
#[derive(Debug)]
struct FailingStore {
    inner: InMemoryToolResultStore,
    allowed: usize,
    writes: AtomicUsize,
}

impl ToolResultStore for FailingStore {
    fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error> {
        if self.writes.fetch_add(1, Ordering::SeqCst) >= self.allowed {
            return Err(Error::Store { key: key.into(), reason: "disk full".into() });
        }
        self.inner.write(key, content)
    }
    fn read(&self, reference: &str) -> Result<StoredContent, Error> {
        self.inner.read(reference)
    }
    fn supports_binary_content(&self) -> bool {
        true
    }
}

#[test]
fn a_write_failing_midway_leaves_that_message_and_offloads_the_others() {
    let store = Arc::new(FailingStore {
        inner: InMemoryToolResultStore::new(),
        allowed: 2,
        writes: AtomicUsize::new(0),
    });
    let hook = always(store.clone());
    let mut state = AgentState::new(vec![Message::user("go")]);
    let (a, b) = (call("fetch", "a"), call("fetch", "b"));
    state.push(Message::assistant_with_calls(None, vec![a.clone(), b.clone()]));
    state.push(Message::tool("first", a, false));
    let parts = vec![ResultPart::Text(TextPart::new("second")), ResultPart::Text(TextPart::new("third"))];
    state.push(Message::tool(ToolResultContent::Parts(parts), b, false));
    let untouched = state.messages()[3].clone();
    let outcome = hook.run(&mut state);
    assert_eq!(outcome.offloaded, vec![2]);
    assert_eq!(outcome.failures.len(), 1);
    assert_eq!(outcome.failures[0].0, 3);
    assert!(outcome.failures[0].1.to_string().contains("disk full"));
    assert_eq!(state.messages()[3], untouched);
}

#[test]
fn binary_parts_stay_with_a_text_only_store() {
    #[derive(Debug, Default)]
    struct TextOnly(InMemoryToolResultStore);
    impl ToolResultStore for TextOnly {
        fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error> {
            match content {
                Content::Bytes(_) => Err(Error::BinaryNotSupported { key: key.into() }),
                text => self.0.write(key, text),
            }
        }
        fn read(&self, reference: &str) -> Result<StoredContent, Error> {
            self.0.read(reference)
        }
    }
    let store = Arc::new(TextOnly::default());
    let hook = always(store.clone());
    let mut state = AgentState::new(vec![Message::user("go")]);
    let image = ResultPart::Image(ImagePart::new("iVBORw0KGgo=", Some("image/png".into())));
    step(&mut state, "shot", "s1", ToolResultContent::Parts(vec![image]));
    let before = state.clone();
    let outcome = hook.run(&mut state);
    assert_eq!(state, before);
    assert_eq!(outcome.binary_unsupported, vec![2]);
    assert!(store.0.is_empty());
}
