//! Integration tests of compaction-hook: the reference's hook fixtures and the hook's own rules.

mod conformance;
mod family;
mod hook_rules;
mod incremental;
mod settings;

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
                compaction_tokens::ApproximateTokenCounter::new(ratio)
                    .expect("valid ratio")
                    .with_charges(image, file),
            )
        }
        Some("tiktoken") => {
            let encoding =
                compaction_tokens::Encoding::from_name_or_model(spec["encoding"].as_str().unwrap_or(""))
                    .expect("known encoding");
            Box::new(compaction_tokens::TiktokenCounter::from_encoding(encoding).with_charges(image, file))
        }
        other => panic!("counter kind {other:?} not supported by these tests"),
    }
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
