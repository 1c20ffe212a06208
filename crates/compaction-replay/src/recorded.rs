//! What a log records of one model call: the provider's usage, its time and its model.

/// What a log records of the model call that produced one assistant message: the provider's
/// usage (the prompt split into tokens read fresh, read from the cache and written to it), when
/// the call was made and which model answered. The caller converts its log's records into these
/// (the `compaction` command does it from compaction-formats' `MessageUsage`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Recorded {
    /// The index of the assistant message the call produced.
    pub message: usize,
    /// Prompt tokens neither read from nor written to a cache.
    pub input_tokens: u64,
    /// Prompt tokens read from the cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the cache, whatever their lifetime.
    pub cache_write_tokens: u64,
    /// Of `cache_write_tokens`, those the log says were written for five minutes.
    pub cache_write_5m_tokens: u64,
    /// Of `cache_write_tokens`, those the log says were written for an hour.
    pub cache_write_1h_tokens: u64,
    /// Tokens of the reply.
    pub output_tokens: u64,
    /// When the call was made (or its reply logged), in milliseconds since the Unix epoch.
    pub timestamp_ms: Option<i64>,
    /// The model that answered, as the log names it.
    pub model: Option<String>,
}

impl Recorded {
    /// The call that produced message `message`: `input` fresh prompt tokens, `cache_read` read
    /// from the cache, `cache_write` written to it, and `output` tokens of reply.
    pub fn new(message: usize, input: u64, cache_read: u64, cache_write: u64, output: u64) -> Self {
        Recorded {
            message,
            input_tokens: input,
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
            output_tokens: output,
            ..Recorded::default()
        }
    }

    /// The same call, its cache writes split by lifetime as the log tells them apart.
    #[must_use]
    pub fn with_write_lifetimes(mut self, five_minutes: u64, one_hour: u64) -> Self {
        self.cache_write_5m_tokens = five_minutes;
        self.cache_write_1h_tokens = one_hour;
        self
    }

    /// The same call, made at `timestamp_ms` by `model`.
    #[must_use]
    pub fn with_call(mut self, timestamp_ms: Option<i64>, model: Option<String>) -> Self {
        self.timestamp_ms = timestamp_ms;
        self.model = model;
        self
    }

    /// The whole prompt: fresh, read and written tokens.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    /// The conversation through the reply, as the provider counted it: prompt and reply.
    pub fn context_tokens(&self) -> u64 {
        self.prompt_tokens() + self.output_tokens
    }

    /// The cache lifetime the log shows for this call's writes: an hour when any were written
    /// for an hour, five minutes when some were written for five; `None` when the log does not
    /// say (no writes, or no split).
    pub fn lifetime(&self) -> Option<Lifetime> {
        if self.cache_write_1h_tokens > 0 {
            Some(Lifetime::OneHour)
        } else if self.cache_write_5m_tokens > 0 {
            Some(Lifetime::FiveMinutes)
        } else {
            None
        }
    }
}

/// How long a prompt-cache entry lives after its last use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lifetime {
    /// Anthropic's default (`"ttl": "5m"`), and OpenAI's usual retention.
    FiveMinutes,
    /// Anthropic's `"ttl": "1h"`.
    OneHour,
}

impl Lifetime {
    /// The lifetime in milliseconds.
    pub fn millis(self) -> i64 {
        match self {
            Lifetime::FiveMinutes => 5 * 60 * 1_000,
            Lifetime::OneHour => 60 * 60 * 1_000,
        }
    }
}
