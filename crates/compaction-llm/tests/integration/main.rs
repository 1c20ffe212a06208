//! Integration tests of compaction-llm: every HTTP path against a real server on 127.0.0.1
//! (`server.rs`), reactive recovery from a context overflow with compaction-hook (`recovery.rs`),
//! and conformance of the conversions with fixtures the reference wrote.

mod conformance;
mod conversions;
mod counters;
mod generators;
mod provider_faults;
mod recovery;
mod server;

use std::time::Duration;

use compaction_llm::ClientSettings;

/// Settings for a test server: a key, short waits, two retries.
pub fn settings(base_url: String) -> ClientSettings {
    ClientSettings::default()
        .with_base_url(base_url)
        .with_api_key("sk-test")
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
        .with_max_retries(2)
        .with_timeout(Duration::from_secs(10))
}
