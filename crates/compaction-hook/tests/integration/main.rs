//! Integration tests of compaction-hook: the reference's hook fixtures, offloading exactness
//! against pointer texts and store contents the reference produced, store safety, and the
//! hook's own rules.

mod conformance;
mod family;
mod hook_rules;
mod incremental;
mod offload_reference;
mod safety;

use std::path::Path;

use compaction_tokens::TokenCounter;
use serde_json::Value;

/// Reads a JSON file.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    serde_json::from_str(&text).expect("fixture is JSON")
}

/// Builds the counter a fixture's `counter` object describes.
pub fn counter_from_fixture(spec: &Value) -> Box<dyn TokenCounter> {
    let image = spec["tokens_per_image"].as_u64().unwrap_or(85) as usize;
    let file = spec["tokens_per_file"].as_u64().unwrap_or(1000) as usize;
    match spec["kind"].as_str() {
        Some("approximate") | None => {
            let ratio = spec["chars_per_token"].as_f64().unwrap_or(4.0);
            Box::new(
                compaction_tokens::ApproximateTokenCounter::with_charges(ratio, image, file)
                    .expect("valid ratio"),
            )
        }
        Some("tiktoken") => {
            let encoding =
                compaction_tokens::Encoding::from_name_or_model(spec["encoding"].as_str().unwrap_or(""))
                    .expect("known encoding");
            Box::new(compaction_tokens::TiktokenCounter::with_charges(encoding, image, file))
        }
        other => panic!("counter kind {other:?} not supported by these tests"),
    }
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

pub use compaction_testkit::python_equal;

/// Every fixture of one kind: the committed ones, plus a differential run's.
pub fn fixture_files(kind: &str) -> Vec<std::path::PathBuf> {
    compaction_testkit::fixture_files(env!("CARGO_MANIFEST_DIR"), kind)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

/// Runs a future that never waits on anything outside it (the tests' stand-in models answer at
/// once) to completion on this thread.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}
