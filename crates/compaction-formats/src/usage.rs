//! The provider's own token counts, as a log records them beside a model's reply.

use std::sync::Arc;

/// What the provider counted for one model call, normalized across providers: the prompt is
/// split into tokens read fresh, read from the cache and written to it, so that their sum is
/// the whole prompt for every provider.
///
/// Anthropic reports the three prompt parts apart (`input_tokens`, `cache_read_input_tokens`,
/// `cache_creation_input_tokens`); OpenAI reports the whole prompt with the cached part inside
/// it (`input_tokens` and `cached_input_tokens`), which is read here as
/// `input_tokens - cached` fresh and `cached` from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Usage {
    /// Prompt tokens neither read from nor written to a cache.
    pub input_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read_input_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_creation_input_tokens: u64,
    /// Of `cache_creation_input_tokens`, those written for five minutes, when the log tells the
    /// cache's lifetimes apart (Anthropic's `cache_creation.ephemeral_5m_input_tokens`).
    pub cache_creation_5m_input_tokens: u64,
    /// Of `cache_creation_input_tokens`, those written for an hour
    /// (`cache_creation.ephemeral_1h_input_tokens`).
    pub cache_creation_1h_input_tokens: u64,
    /// Tokens of the reply (reasoning included where the provider counts it there).
    pub output_tokens: u64,
}

impl Usage {
    /// Usage of a prompt of `input_tokens` tokens and a reply of `output_tokens` tokens, no cache.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage { input_tokens, output_tokens, ..Usage::default() }
    }

    /// The same usage with `read` prompt tokens read from the cache and `created` written to it.
    #[must_use]
    pub fn with_cache(mut self, read: u64, created: u64) -> Self {
        self.cache_read_input_tokens = read;
        self.cache_creation_input_tokens = created;
        self
    }

    /// The same usage with the cache writes split by lifetime: `five_minutes` written for five
    /// minutes and `one_hour` for an hour (together at most the tokens written).
    #[must_use]
    pub fn with_cache_lifetimes(mut self, five_minutes: u64, one_hour: u64) -> Self {
        self.cache_creation_5m_input_tokens = five_minutes;
        self.cache_creation_1h_input_tokens = one_hour;
        self
    }

    /// The whole prompt the provider was sent: fresh, cached and cache-written tokens.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens
    }

    /// The conversation through this reply as the provider counted it: the prompt and the
    /// reply. This is what an agent loop records as its context size after the call (the
    /// reference's `context_tokens`).
    pub fn context_tokens(&self) -> u64 {
        self.prompt_tokens() + self.output_tokens
    }

    /// Whether nothing was counted (logs write zeros for replies no model produced).
    pub fn is_zero(&self) -> bool {
        self.context_tokens() == 0
    }
}

/// The provider's count for the model call that produced message `message` of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageUsage {
    /// The index of the assistant message the call produced.
    pub message: usize,
    /// What the provider counted.
    pub usage: Usage,
    /// When the log says the reply came, in milliseconds since the Unix epoch (UTC).
    pub timestamp_ms: Option<i64>,
    /// The model that answered, as the log names it.
    pub model: Option<Arc<str>>,
}

impl MessageUsage {
    /// The count `usage` for message `message`.
    pub fn new(message: usize, usage: Usage) -> Self {
        MessageUsage { message, usage, timestamp_ms: None, model: None }
    }

    /// The same count, made at `timestamp_ms` by `model`.
    #[must_use]
    pub fn with_call(mut self, timestamp_ms: Option<i64>, model: Option<Arc<str>>) -> Self {
        self.timestamp_ms = timestamp_ms;
        self.model = model;
        self
    }
}

/// An RFC 3339 time (`2026-02-11T20:36:47.925Z`, `…+01:00`) in milliseconds since the Unix
/// epoch; `None` when the text is not one.
pub(crate) fn rfc3339_millis(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if b[13] != b':' || b[16] != b':' || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if b[at] == b'.' {
        let end = at + 1 + b[at + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        let fraction = text.get(at + 1..end)?;
        let padded: String = fraction.chars().chain("000".chars()).take(3).collect();
        millis = padded.parse::<i64>().ok()?;
        at = end;
    }
    let offset = match text.get(at..)? {
        "Z" | "z" => 0,
        zone if zone.len() == 6
            && matches!(zone.as_bytes()[0], b'+' | b'-')
            && zone.as_bytes()[3] == b':' =>
        {
            let minutes = digits(at + 1..at + 3)? * 60 + digits(at + 4..at + 6)?;
            if zone.starts_with('-') {
                -minutes
            } else {
                minutes
            }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset * 60;
    Some(seconds * 1_000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums() {
        let usage = Usage::new(3, 9).with_cache(17_842, 8_216);
        assert_eq!(usage.prompt_tokens(), 26_061);
        assert_eq!(usage.context_tokens(), 26_070);
        assert!(Usage::default().is_zero());
    }

    #[test]
    fn times() {
        assert_eq!(rfc3339_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_millis("2026-02-11T20:36:47.925Z"), Some(1_770_842_207_925));
        assert_eq!(rfc3339_millis("2026-02-11T21:36:47.9+01:00"), Some(1_770_842_207_900));
        assert_eq!(rfc3339_millis("2000-03-01T00:00:00.123456Z"), Some(951_868_800_123));
        for bad in ["", "yesterday", "2026-13-01T00:00:00Z", "2026-02-11T20:36:47", "2026-02-11T20:36:47.5Q"]
        {
            assert_eq!(rfc3339_millis(bad), None, "{bad}");
        }
    }
}
