//! The provider's own token counts, as a log records them beside a model's reply.

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageUsage {
    /// The index of the assistant message the call produced.
    pub message: usize,
    /// What the provider counted.
    pub usage: Usage,
}

impl MessageUsage {
    /// The count `usage` for message `message`.
    pub fn new(message: usize, usage: Usage) -> Self {
        MessageUsage { message, usage }
    }
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
}
