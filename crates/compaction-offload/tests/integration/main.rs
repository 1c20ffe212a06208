//! Integration tests of compaction-offload: exactness against pointer texts and store contents
//! the reference produced, the rules beyond it (nothing replaced, every result handled, every
//! failure returned), the stores' safety against planted links, FIFOs and races, concurrent
//! offloaders, and the sans-IO seam, blocking and async.

mod concurrency;
mod offload_reference;
mod properties;
mod rules;
mod safety;
mod sans_io;
mod settings;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use serde_json::Value;

pub use compaction_testkit::python_equal;

/// Reads a JSON file.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    serde_json::from_str(&text).expect("fixture is JSON")
}

/// `value` with every occurrence of `from` inside its strings replaced by `to`.
pub fn replace_in_strings(value: &Value, from: &str, to: &str) -> Value {
    match value {
        Value::String(s) => Value::String(s.replace(from, to)),
        Value::Array(items) => Value::Array(items.iter().map(|v| replace_in_strings(v, from, to)).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), replace_in_strings(v, from, to))).collect())
        }
        other => other.clone(),
    }
}

/// Every file under `root`, by relative path, as `{"text": ...}` or `{"base64": ...}`, sorted.
pub fn store_contents(root: &Path) -> Value {
    let mut files = Vec::new();
    collect(root, root, &mut files);
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = serde_json::Map::new();
    for (rel, bytes) in files {
        let entry = match String::from_utf8(bytes) {
            Ok(text) => serde_json::json!({"text": text}),
            Err(e) => serde_json::json!({"base64": base64(e.as_bytes())}),
        };
        out.insert(rel, entry);
    }
    Value::Object(out)
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, out);
        } else {
            let rel = path.strip_prefix(root).expect("under root").to_string_lossy().into_owned();
            out.push((rel, std::fs::read(&path).expect("readable")));
        }
    }
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Every fixture of one kind: the committed ones, plus a differential run's.
pub fn fixture_files(kind: &str) -> Vec<std::path::PathBuf> {
    compaction_testkit::fixture_files(env!("CARGO_MANIFEST_DIR"), kind)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

/// Runs a future to completion on this thread, parking between polls: the crate's async paths
/// need no runtime, and the tests show it.
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

/// Every file under `dir` whose name marks an unfinished write.
pub fn leftover_scratch_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(leftover_scratch_files(&path));
        } else if path.to_string_lossy().ends_with(".partial") {
            found.push(path.display().to_string());
        }
    }
    found
}
