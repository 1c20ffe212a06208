//! The cache-aware rule: compact only when it pays for itself under a provider's prompt cache.
//!
//! A provider that caches the prompt's prefix (Anthropic's cache breakpoints, OpenAI's automatic
//! prefix caching) bills a cached token at a fraction of the input price, and (Anthropic) a token
//! written to the cache at more than the input price. A compaction changes the conversation from
//! its first changed message on, so the next call writes everything after that point again:
//! freeing tokens can cost more than it saves. The rule weighs the two, in units of the input
//! price:
//!
//! - not compacting, the next `expected_calls` calls each read the whole prompt `P` from the
//!   cache: `k·P·read`;
//! - compacting to `P'`, the next call reads the kept prefix `c` and writes the rest, and the
//!   calls after it read `P'`: `c·read + (P' − c)·write + (k − 1)·P'·read`.
//!
//! It compacts when the second is smaller. It always compacts when the cache has gone cold (the
//! time since the previous call, [`AgentState::idle`](crate::AgentState::idle), is at least the
//! cache's lifetime: the whole prompt is written again anyway, so the smaller one costs less), and
//! when the request would not fit the window otherwise.

use std::time::Duration;

use compaction_core::InitParameters;
use serde::Serialize;
use serde_json::Value;

use crate::error::Error;

/// The cache-aware rule's prices and horizon (see the module's docs). Prices are multiples of
/// the input price; the defaults are Anthropic's five-minute cache: reads at 0.1, writes at 1.25,
/// a lifetime of five minutes, and ten calls to come.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CacheRule {
    /// The price of a token read from the cache, as a multiple of the input price.
    pub read: f64,
    /// The price of a token written to the cache, as a multiple of the input price (1.0 for
    /// OpenAI, which charges no more for writing).
    pub write: f64,
    /// How long the cache keeps a prefix after its last use.
    pub lifetime: Duration,
    /// How many calls the freed tokens are expected to be saved on, this one included.
    pub expected_calls: usize,
}

impl Default for CacheRule {
    fn default() -> Self {
        CacheRule { read: 0.1, write: 1.25, lifetime: Duration::from_secs(300), expected_calls: 10 }
    }
}

impl CacheRule {
    /// The same rule with cache reads at `read` times the input price.
    #[must_use]
    pub fn with_read(mut self, read: f64) -> Self {
        self.read = read;
        self
    }

    /// The same rule with cache writes at `write` times the input price.
    #[must_use]
    pub fn with_write(mut self, write: f64) -> Self {
        self.write = write;
        self
    }

    /// The same rule with a cache that keeps a prefix for `lifetime`.
    #[must_use]
    pub fn with_lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = lifetime;
        self
    }

    /// The same rule expecting `calls` more calls, this one included.
    #[must_use]
    pub fn with_expected_calls(mut self, calls: usize) -> Self {
        self.expected_calls = calls;
        self
    }

    /// Reads a rule in the form it serializes to, `{"read", "write", "lifetime": {"secs",
    /// "nanos"}, "expected_calls"}`; missing keys take their defaults.
    ///
    /// # Errors
    ///
    /// For an unknown key or a value of the wrong kind; the values are checked by
    /// [`CacheRule::validate`] where the rule is used.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        const KEYS: &[&str] = &["read", "write", "lifetime", "expected_calls"];
        let params = InitParameters::read_plain(value, "CacheRule", KEYS)?;
        let mut rule = CacheRule::default();
        rule.read = params.float("read")?.unwrap_or(rule.read);
        rule.write = params.float("write")?.unwrap_or(rule.write);
        if let Some(lifetime) = params.get("lifetime") {
            let time = InitParameters::read_plain(lifetime, "Duration", &["secs", "nanos"])?;
            let secs = Duration::from_secs(time.count("secs")?.unwrap_or(0) as u64);
            let nanos = Duration::from_nanos(time.count("nanos")?.unwrap_or(0) as u64);
            rule.lifetime = secs.checked_add(nanos).ok_or_else(|| {
                Error::InvalidCacheRule("lifetime is longer than a duration can hold".into())
            })?;
        }
        rule.expected_calls = params.count("expected_calls")?.unwrap_or(rule.expected_calls);
        Ok(rule)
    }

    /// Checks that the prices are finite and not negative and that at least one call is
    /// expected.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidCacheRule`] naming what is wrong.
    pub fn validate(&self) -> Result<(), Error> {
        let price = |name: &'static str, value: f64| match value.is_finite() && value >= 0.0 {
            true => Ok(()),
            false => {
                Err(Error::InvalidCacheRule(format!("{name} must be a price of 0 or more, found {value}")))
            }
        };
        price("read", self.read)?;
        price("write", self.write)?;
        if self.expected_calls == 0 {
            return Err(Error::InvalidCacheRule("expected_calls must be at least 1".into()));
        }
        Ok(())
    }

    /// What the next `expected_calls` calls cost, in input-price tokens, without compacting (a
    /// prompt of `before` tokens, all read from the cache) and with (`after` tokens, of which the
    /// first `kept` are read and the rest written, then read), as `(without, with)`.
    pub fn costs(&self, before: usize, after: usize, kept: usize) -> (f64, f64) {
        let k = self.expected_calls as f64;
        let (before, after, kept) = (before as f64, after as f64, kept.min(after) as f64);
        let without = k * before * self.read;
        let with = kept * self.read + (after - kept) * self.write + (k - 1.0) * after * self.read;
        (without, with)
    }

    /// Why a compaction from `before` to `after` tokens keeping the first `kept` should not be
    /// applied, or `None` when it pays for itself, the cache being warm after `idle` (unknown:
    /// taken as warm).
    pub fn declines(
        &self,
        before: usize,
        after: usize,
        kept: usize,
        idle: Option<Duration>,
    ) -> Option<String> {
        if idle.is_some_and(|idle| idle >= self.lifetime) {
            return None;
        }
        let (without, with) = self.costs(before, after, kept);
        (with >= without).then(|| {
            format!(
                "compacting {before} to {after} tokens rewrites the {} tokens after the first change at the \
                 cache-write price: over the next {} it would cost {with:.0} input-price tokens against \
                 {without:.0} without",
                after.saturating_sub(kept),
                match self.expected_calls {
                    1 => "call".to_owned(),
                    n => format!("{n} calls"),
                }
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compaction_pays_when_it_frees_enough_for_the_calls_to_come() {
        let rule = CacheRule::default();
        // 70k down to 40k, the first 20k kept: writing 20k at 1.25 (25k) against 30k freed at
        // 0.1 on each call.
        let (without, with) = rule.costs(70_000, 40_000, 20_000);
        assert_eq!(without, 70_000.0);
        assert_eq!(with, 2_000.0 + 25_000.0 + 9.0 * 4_000.0);
        assert!(rule.declines(70_000, 40_000, 20_000, None).is_none());
        // Two calls to come: the rewrite does not pay.
        let short = rule.with_expected_calls(2);
        let why = short.declines(70_000, 40_000, 20_000, None).expect("declined");
        assert!(why.contains("rewrites the 20000 tokens"), "{why}");
        // Unless the cache is cold.
        assert!(short.declines(70_000, 40_000, 20_000, Some(Duration::from_secs(301))).is_none());
        assert!(short.declines(70_000, 40_000, 20_000, Some(Duration::from_secs(299))).is_some());
        // A compaction that changes only the newest messages rewrites little: it pays.
        assert!(short.declines(70_000, 69_000, 69_000, None).is_none());
    }

    #[test]
    fn a_rule_out_of_range_is_refused() {
        assert!(CacheRule::default().validate().is_ok());
        assert!(CacheRule::default().with_read(f64::NAN).validate().is_err());
        assert!(CacheRule::default().with_write(-1.0).validate().is_err());
        assert!(CacheRule::default().with_expected_calls(0).validate().is_err());
    }
}
