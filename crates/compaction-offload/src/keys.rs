//! Store keys: random unique parts for the compactor's keys, and the distinct keys a store
//! falls back to when the one asked for is taken.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// How many numbered keys a store tries after the one asked for, before random ones.
const NUMBERED: usize = 999;
/// How many random keys a store tries after the numbered ones, before giving up.
const RANDOM: usize = 64;

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

/// The keys a store tries for a write under `key`, in order, so that it never replaces an entry:
/// `key` itself (the reference's key, in the ordinary case), then `key` numbered before its
/// extension (`1_read_x.txt`, `1_read_x_2.txt`, `1_read_x_3.txt`, …), then a few with a random
/// suffix. A store takes the first that is free, creating it exclusively.
///
/// ```
/// let keys: Vec<String> = compaction_offload::candidate_keys("7_read_c1.txt").take(3).collect();
/// assert_eq!(keys, ["7_read_c1.txt", "7_read_c1_2.txt", "7_read_c1_3.txt"]);
/// ```
pub fn candidate_keys(key: &str) -> impl Iterator<Item = String> + '_ {
    let (stem, extension) = split_extension(key);
    let numbered = (2..=NUMBERED + 1).map(move |n| format!("{stem}_{n}{extension}"));
    let random = (0..RANDOM).map(move |_| format!("{stem}_{}{extension}", &unique_hex()[..16]));
    std::iter::once(key.to_owned()).chain(numbered).chain(random)
}

/// `key` cut before the extension of its last path component: `("a/b", ".txt")` for `a/b.txt`;
/// a leading dot is no extension.
fn split_extension(key: &str) -> (&str, &str) {
    let name_start = key.rfind('/').map_or(0, |slash| slash + 1);
    match key[name_start..].rfind('.') {
        Some(dot) if dot > 0 => key.split_at(name_start + dot),
        _ => (key, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_keys_go_before_the_extension() {
        let keys: Vec<String> = candidate_keys("dir.d/name.tar.gz").take(3).collect();
        assert_eq!(keys, ["dir.d/name.tar.gz", "dir.d/name.tar_2.gz", "dir.d/name.tar_3.gz"]);
        let keys: Vec<String> = candidate_keys(".hidden").take(2).collect();
        assert_eq!(keys, [".hidden", ".hidden_2"]);
        let keys: Vec<String> = candidate_keys("dir.d/noext").take(2).collect();
        assert_eq!(keys, ["dir.d/noext", "dir.d/noext_2"]);
    }

    #[test]
    fn candidates_are_distinct_and_bounded() {
        let keys: Vec<String> = candidate_keys("k.txt").collect();
        assert_eq!(keys.len(), 1 + NUMBERED + RANDOM);
        let unique: std::collections::HashSet<&String> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len());
    }
}
