//! The file-system store's safety: nothing outside its root, nothing replaced, nothing read that
//! it did not write (planted links, hard links, FIFOs, devices), a symbolic-link swap raced
//! against writes, and failures that come first or come back to the caller.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use compaction_hook::AgentState;
use compaction_model::{ImagePart, Message, ResultPart, TextPart, ToolCall, ToolResultContent};
use compaction_offload::{
    AlwaysOffload, Content, Error, FileSystemToolResultStore, InMemoryToolResultStore, OffloadStrategies,
    StoreProfile, StoredContent, ToolResultOffloadHook, ToolResultStore,
};

use crate::leftover_scratch_files;

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

/// Runs `f` on a thread and fails the test if it does not finish within `seconds`: a read that
/// blocks on a FIFO must not hang the suite.
fn within<T: Send + 'static>(seconds: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(seconds)).expect("finished in time instead of blocking")
}

#[test]
fn keys_and_references_outside_the_root_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("store");
    let store = FileSystemToolResultStore::new(&root).expect("store");
    for key in ["../escape.txt", "a/../../escape.txt", "/etc/passwd-copy.txt"] {
        let err = store.write(key, Content::Text("x")).expect_err(key);
        assert!(matches!(err, Error::KeyOutsideRoot { .. }), "{key}: {err}");
    }
    for key in ["", ".", "a/..", "nul\0byte"] {
        let err = store.write(key, Content::Text("x")).expect_err(key);
        assert!(matches!(err, Error::InvalidKey { .. }), "{key:?}: {err}");
    }
    assert!(!dir.path().join("escape.txt").exists());

    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "secret").expect("secret");
    let err = store.read(&secret.to_string_lossy()).expect_err("read outside");
    assert!(matches!(err, Error::ReferenceOutsideRoot { .. }), "{err}");
    let err = store.read("../outside/secret.txt").expect_err("relative read outside");
    assert!(matches!(err, Error::ReferenceOutsideRoot { .. }), "{err}");

    // Inside the root, `..` that stays inside and nested keys are fine; the reference is absolute.
    let reference = store.write("a/b/../c.txt", Content::Text("ok")).expect("inside");
    assert!(Path::new(&reference).is_absolute());
    assert!(reference.ends_with("/store/a/c.txt"), "{reference}");
    assert_eq!(store.read(&reference).expect("read"), StoredContent::Text("ok".into()));
    assert_eq!(store.read("a/c.txt").expect("relative"), StoredContent::Text("ok".into()));
    assert!(matches!(store.read("missing.txt"), Err(Error::NotFound(_))));
    assert!(matches!(store.read("no/such/dir.txt"), Err(Error::NotFound(_))));
}

#[test]
fn the_root_is_made_at_once_and_nothing_is_ever_replaced() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("deep/nested/root");
    let store = FileSystemToolResultStore::new(&root).expect("store");
    assert!(root.is_dir(), "created before any write");
    assert_eq!(std::fs::read_dir(&root).expect("dir").count(), 0, "the probe left nothing");
    let first = store.write("image.png", Content::Bytes(&[0x89, b'P', b'N', b'G', 0xff])).expect("write");
    // The same key again: a numbered sibling, and the first file is untouched.
    let second = store.write("image.png", Content::Text("now text")).expect("second");
    let third = store.write("image.png", Content::Text("third")).expect("third");
    assert!(
        first.ends_with("/image.png") && second.ends_with("/image_2.png") && third.ends_with("/image_3.png")
    );
    assert_eq!(store.read(&first).expect("read"), StoredContent::Bytes(vec![0x89, b'P', b'N', b'G', 0xff]));
    assert_eq!(store.read(&second).expect("read"), StoredContent::Text("now text".into()));
    assert_eq!(store.read(&third).expect("read"), StoredContent::Text("third".into()));
    // A file another program left under a key is not replaced either.
    std::fs::write(root.join("taken.txt"), "theirs").expect("plant");
    let mine = store.write("taken.txt", Content::Text("mine")).expect("write");
    assert!(mine.ends_with("/taken_2.txt"), "{mine}");
    assert_eq!(std::fs::read_to_string(root.join("taken.txt")).expect("theirs"), "theirs");
    assert!(leftover_scratch_files(dir.path()).is_empty());
    // The in-memory store keeps the same rule.
    let memory = InMemoryToolResultStore::new();
    assert_eq!(memory.write("k.txt", Content::Text("a")).expect("a"), "k.txt");
    assert_eq!(memory.write("k.txt", Content::Text("b")).expect("b"), "k_2.txt");
    assert_eq!(memory.read("k.txt").expect("a"), StoredContent::Text("a".into()));
}

#[test]
fn a_root_that_cannot_be_made_fails_before_any_work() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("afile");
    std::fs::write(&file, "I am a file").expect("file");
    for root in [file.clone(), file.join("x")] {
        let err = FileSystemToolResultStore::new(&root).expect_err("a file is no root");
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert!(err.to_string().contains("afile"), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&file).expect("file"), "I am a file");
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
            return Err(Error::Store { key: key.into(), source: "disk full".into() });
        }
        self.inner.write(key, content)
    }
    fn read(&self, reference: &str) -> Result<StoredContent, Error> {
        self.inner.read(reference)
    }
    fn profile(&self) -> StoreProfile {
        StoreProfile::new().with_binary_content(true)
    }
}

#[test]
fn a_write_failing_midway_leaves_that_result_and_says_which_key() {
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
    let failure = &outcome.failures[0];
    assert_eq!((failure.at.index, failure.at.position), (3, 0));
    assert_eq!(failure.key.as_deref(), Some("0_fetch_b_1.txt"));
    assert!(compaction_core::error_chain(&failure.error).contains("disk full"));
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
    assert_eq!(outcome.binary_unsupported.iter().map(|r| r.index).collect::<Vec<_>>(), vec![2]);
    assert!(store.0.is_empty());
}

#[cfg(unix)]
mod unix {
    use std::os::unix::fs::symlink;

    use super::*;

    fn mkfifo(path: &Path) {
        let parent = std::fs::File::open(path.parent().expect("parent")).expect("open parent");
        let name = path.file_name().expect("name");
        rustix::fs::mknodat(
            &parent,
            name,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
    }

    #[test]
    fn a_planted_directory_link_steers_no_write() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let store = FileSystemToolResultStore::new(&root).expect("store");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).expect("outside");
        symlink(&outside, root.join("link")).expect("symlink");
        let err = store.write("link/evil.txt", Content::Text("x")).expect_err("through symlink");
        assert!(matches!(&err, Error::Refused { what, .. } if what == "a symbolic link"), "{err}");
        // A link to a directory inside the root is not followed either.
        std::fs::create_dir_all(root.join("real")).expect("real");
        symlink(root.join("real"), root.join("alias")).expect("alias");
        assert!(matches!(store.write("alias/x.txt", Content::Text("x")), Err(Error::Refused { .. })));
        // A file where a directory belongs.
        std::fs::write(root.join("plain"), "").expect("plain");
        let err = store.write("plain/x.txt", Content::Text("x")).expect_err("file as dir");
        assert!(matches!(&err, Error::Refused { what, .. } if what == "a regular file"), "{err}");
        assert_eq!(std::fs::read_dir(&outside).expect("outside").count(), 0);
        assert!(std::fs::read_dir(root.join("real")).expect("real").next().is_none());
    }

    #[test]
    fn a_planted_file_link_is_neither_replaced_nor_followed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let store = FileSystemToolResultStore::new(&root).expect("store");
        let target = dir.path().join("target.txt");
        std::fs::write(&target, "precious").expect("target");
        // A dangling and a live link where the next results would go.
        symlink(dir.path().join("nowhere.txt"), root.join("1_t_a.txt")).expect("dangling");
        symlink(&target, root.join("1_t_b.txt")).expect("live");
        let a = store.write("1_t_a.txt", Content::Text("result a")).expect("a");
        let b = store.write("1_t_b.txt", Content::Text("result b")).expect("b");
        assert!(a.ends_with("1_t_a_2.txt") && b.ends_with("1_t_b_2.txt"), "{a} {b}");
        assert!(!dir.path().join("nowhere.txt").exists());
        assert_eq!(std::fs::read_to_string(&target).expect("target"), "precious");
        // Reading the links is refused: they are not what the store wrote.
        let err = store.read("1_t_b.txt").expect_err("link");
        assert!(matches!(&err, Error::Refused { what, .. } if what == "a symbolic link"), "{err}");
        assert!(matches!(store.read("1_t_a.txt"), Err(Error::Refused { .. })));
        assert_eq!(store.read(&b).expect("b"), StoredContent::Text("result b".into()));
    }

    #[test]
    fn hard_links_fifos_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let store = FileSystemToolResultStore::new(&root).expect("store");
        // A hard link to a file outside the root, planted under a key.
        let outside = dir.path().join("secret.txt");
        std::fs::write(&outside, "secret").expect("secret");
        std::fs::hard_link(&outside, root.join("linked.txt")).expect("hard link");
        let err = store.read("linked.txt").expect_err("hard link");
        assert!(matches!(&err, Error::Refused { what, .. } if what == "a file with 2 links"), "{err}");
        // A result the store wrote, hard-linked afterwards, is refused as well.
        let mine = store.write("mine.txt", Content::Text("mine")).expect("write");
        std::fs::hard_link(&mine, dir.path().join("copy.txt")).expect("link mine");
        assert!(matches!(store.read(&mine), Err(Error::Refused { .. })));

        // A FIFO: reading must not block waiting for a writer.
        mkfifo(&root.join("pipe.txt"));
        let reader = store.clone();
        let err = within(10, move || reader.read("pipe.txt")).expect_err("fifo");
        assert!(matches!(&err, Error::Refused { what, .. } if what == "a FIFO"), "{err}");
        // The read-back tool answers the model in words instead of hanging.
        let args = serde_json::json!({"reference": "pipe.txt"}).as_object().cloned().expect("object");
        let tool_store = store.clone();
        let answer = within(10, move || compaction_offload::read_offloaded_result(&tool_store, &args));
        assert!(answer.error && answer.text.contains("FIFO"), "{}", answer.text);
        // A write under the FIFO's key goes elsewhere; the FIFO is not opened.
        let writer = store.clone();
        let written = within(10, move || writer.write("pipe.txt", Content::Text("x"))).expect("write");
        assert!(written.ends_with("pipe_2.txt"), "{written}");

        // A character device (where the system lets us make one).
        let parent = std::fs::File::open(&root).expect("root");
        let dev = rustix::fs::makedev(1, 5);
        match rustix::fs::mknodat(
            &parent,
            "zero.txt",
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o600),
            dev,
        ) {
            Ok(()) => {
                let reader = store.clone();
                let err = within(10, move || reader.read("zero.txt")).expect_err("device");
                assert!(matches!(&err, Error::Refused { what, .. } if what == "a device"), "{err}");
            }
            Err(errno) => eprintln!("no device node test here: mknod says {errno}"),
        }
        // A directory where a result should be.
        std::fs::create_dir(root.join("dir.txt")).expect("dir");
        assert!(matches!(store.read("dir.txt"), Err(Error::Refused { .. })));
    }

    /// A directory under the root is swapped for a link to the outside and back (atomically,
    /// with `renameat2(RENAME_EXCHANGE)`, so the name always exists), as fast as possible, while
    /// threads write into it. No write may land outside; every write that succeeded must read
    /// back as written once the directory is back.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_link_swap_raced_against_writes_never_lands_outside() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("store");
        let store = FileSystemToolResultStore::new(&root).expect("store");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).expect("outside");
        std::fs::create_dir_all(root.join("sub")).expect("sub");
        symlink(&outside, root.join("swap")).expect("the link to swap in");
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicUsize::new(0));
        let swapper = {
            let (root, stop, swaps) = (root.clone(), stop.clone(), swaps.clone());
            std::thread::spawn(move || {
                let fd = std::fs::File::open(&root).expect("root");
                let exchange = || {
                    rustix::fs::renameat_with(&fd, "sub", &fd, "swap", rustix::fs::RenameFlags::EXCHANGE)
                        .expect("exchange")
                };
                while !stop.load(Ordering::Relaxed) {
                    exchange();
                    std::thread::yield_now();
                    exchange();
                    std::thread::yield_now();
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut written = Vec::new();
                    let mut refused = 0;
                    for i in 0..40 {
                        let text = format!("writer {w} result {i}");
                        // Retried until it lands: each attempt either lands under the root or
                        // meets the link and is refused.
                        for _ in 0..100_000 {
                            match store.write(&format!("sub/{w}_{i}.txt"), Content::Text(&text)) {
                                Ok(reference) => {
                                    written.push((reference, text));
                                    break;
                                }
                                // The link (or what was there when the directory was opened) is
                                // refused, never followed.
                                Err(Error::Refused { .. }) => refused += 1,
                                Err(other) => panic!("unexpected error: {other}"),
                            }
                        }
                    }
                    (written, refused)
                })
            })
            .collect();
        // Stop the swapper before looking at the writers, so a failing writer fails the test
        // rather than the swapper.
        let results: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
        stop.store(true, Ordering::Relaxed);
        swapper.join().expect("swapper");
        let results: Vec<_> = results.into_iter().map(|r| r.expect("writer")).collect();
        assert!(swaps.load(Ordering::Relaxed) > 0, "the race ran");
        assert_eq!(
            std::fs::read_dir(&outside).expect("outside").count(),
            0,
            "a write landed outside the root"
        );
        let (mut ok, mut refused) = (0, 0);
        for (written, r) in results {
            refused += r;
            for (reference, text) in written {
                assert_eq!(store.read(&reference).expect("read back"), StoredContent::Text(text));
                ok += 1;
            }
        }
        eprintln!("{ok} writes landed, {refused} refused during {} swaps", swaps.load(Ordering::Relaxed));
        assert_eq!(ok, 160, "every write landed in the end");
        assert!(leftover_scratch_files(dir.path()).is_empty());
    }
}
