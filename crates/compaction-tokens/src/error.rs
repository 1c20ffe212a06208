//! The one error type of this crate.

use thiserror::Error;

/// Why a counter could not be built, or could not count.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// `chars_per_token` must be a positive number.
    #[error("chars_per_token must be greater than 0, got {0}")]
    InvalidCharsPerToken(f64),
    /// No tiktoken encoding has this name, and no model maps to one.
    #[error("unknown tiktoken encoding or model {0:?}; encodings are o200k_base, cl100k_base, p50k_base, r50k_base")]
    UnknownEncoding(String),
    /// A `tokenizer.json` could not be read or is not a valid tokenizer.
    #[error("tokenizer {source_name}: {what}")]
    Tokenizer {
        /// The file's path, or `<bytes>` when read from memory.
        source_name: String,
        /// What failed, such as `cannot be read`.
        what: &'static str,
        /// The file system's or the `tokenizers` crate's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A counter spec string could not be understood.
    #[error("invalid counter spec {spec:?}: {reason}")]
    InvalidSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The spec asks for a backend this build does not include.
    #[error("the {backend} counter is not compiled in; enable the `{backend}` feature of compaction-tokens")]
    BackendNotEnabled {
        /// The feature to enable.
        backend: &'static str,
    },
    /// A counter that asks a provider for its count (over the network) could not get one.
    #[error("counter {counter} could not count")]
    Provider {
        /// The counter, as [`TokenCounter::describe`](crate::TokenCounter::describe) names it.
        counter: String,
        /// Why the count failed: the transport's or the provider's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}
