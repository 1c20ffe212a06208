//! Random unique parts for store keys, from the standard library alone.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 32 lowercase hex digits, like a UUID's `hex`: unique within the process (a counter) and, with
/// overwhelming likelihood, across processes (randomly keyed hashes of the time, process id and
/// counter). Not for cryptographic use.
pub(crate) fn unique_hex() -> String {
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let half = |salt: u64| {
        // Every `RandomState` is seeded afresh, so two hashes of the same input differ.
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.write_u128(nanos);
        hasher.write_u32(std::process::id());
        hasher.write_u64(count);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(0), half(1) ^ count)
}
