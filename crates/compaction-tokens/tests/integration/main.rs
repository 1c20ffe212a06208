//! Integration tests of compaction-tokens: counts and renderings against the reference.

mod conformance;
mod counters;

use std::path::{Path, PathBuf};

use compaction_tokens::TokenCounter;
use serde_json::Value;

/// Builds the counter a fixture's `counter` object describes.
pub fn counter_from_fixture(spec: &Value, data_root: &Path) -> Box<dyn TokenCounter> {
    let image = spec["tokens_per_image"].as_u64().unwrap_or(85) as usize;
    let file = spec["tokens_per_file"].as_u64().unwrap_or(1000) as usize;
    match spec["kind"].as_str() {
        Some("approximate") => {
            let ratio = spec["chars_per_token"].as_f64().unwrap_or(4.0);
            Box::new(
                compaction_tokens::ApproximateTokenCounter::new(ratio)
                    .expect("valid ratio")
                    .with_charges(image, file),
            )
        }
        #[cfg(feature = "tiktoken")]
        Some("tiktoken") => {
            let encoding =
                compaction_tokens::Encoding::from_name_or_model(spec["encoding"].as_str().unwrap_or(""))
                    .expect("known encoding");
            Box::new(compaction_tokens::TiktokenCounter::from_encoding(encoding).with_charges(image, file))
        }
        #[cfg(feature = "huggingface")]
        Some("huggingface") => {
            let path = data_root.join(spec["tokenizer"].as_str().unwrap_or(""));
            Box::new(
                compaction_tokens::HuggingFaceTokenCounter::from_file(path)
                    .expect("tokenizer")
                    .with_charges(image, file),
            )
        }
        other => panic!("counter kind {other:?} not compiled in (data root {})", data_root.display()),
    }
}

/// Whether this build can run a fixture counter.
#[allow(clippy::match_like_matches_macro)] // one arm per backend reads better
pub fn supported(spec: &Value) -> bool {
    match spec["kind"].as_str() {
        Some("approximate") => true,
        Some("tiktoken") => cfg!(feature = "tiktoken"),
        Some("huggingface") => cfg!(feature = "huggingface"),
        _ => false,
    }
}

/// Every fixture of one kind, with the data folder it lives in: committed, plus a differential run's.
pub fn fixture_files(kind: &str) -> Vec<(PathBuf, PathBuf)> {
    compaction_testkit::fixture_files(env!("CARGO_MANIFEST_DIR"), kind)
}
