//! How a client connects: key, base URL, timeouts, retries. One settings type for every
//! generator and counter of this crate.

use std::fmt;
use std::time::Duration;

/// An API key. Its `Debug` output hides the key, so settings can be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key from its text.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key's text, for the request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<hidden>)")
    }
}

/// Connection settings shared by every client of this crate.
///
/// Build from [`ClientSettings::default`] and the `with_*` methods, so that settings added later
/// break nobody:
///
/// ```
/// use std::time::Duration;
/// use compaction_llm::ClientSettings;
///
/// let settings = ClientSettings::default()
///     .with_base_url("http://127.0.0.1:8080/v1")
///     .with_timeout(Duration::from_secs(120))
///     .with_max_retries(2);
/// assert_eq!(settings.max_retries, 2);
/// ```
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct ClientSettings {
    /// The API key. `None` (the default) reads the provider's environment variable
    /// (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`) when the client is built.
    pub api_key: Option<ApiKey>,
    /// The base URL as the provider's SDK takes it: `https://api.openai.com/v1` (or any
    /// OpenAI-compatible server's, such as `http://127.0.0.1:8080/v1`), `https://api.anthropic.com`.
    /// `None` (the default) reads `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`, then falls back to
    /// the provider's own.
    pub base_url: Option<String>,
    /// How long to wait for a connection (10 s).
    pub connect_timeout: Duration,
    /// How long one attempt may take in all: connecting, sending, waiting and reading the whole
    /// reply, however slowly it comes (60 s).
    pub timeout: Duration,
    /// How many times a failed call is tried again (5, as the reference's default): on 408, 409,
    /// 429 and 5xx statuses, timeouts and connection errors, unless the provider says
    /// `x-should-retry: false`.
    pub max_retries: u32,
    /// The wait before the first retry (0.5 s); it doubles with each retry, with jitter.
    pub initial_backoff: Duration,
    /// The longest wait between two attempts when the provider does not say (8 s).
    pub max_backoff: Duration,
    /// The longest wait a `Retry-After` header is honoured for; a provider that asks for a
    /// longer one fails the call at once ([`Error::RetryAfter`](crate::Error::RetryAfter)),
    /// rather than being kept waiting or asked again too soon. `None` (the default): the
    /// `timeout`.
    pub max_retry_after: Option<Duration>,
    /// The longest one call may take in all, its attempts and the waits between them included:
    /// an attempt is cut at what is left of it, and no attempt starts (nor a wait) that could
    /// not end before it. `None` (the default): `timeout` × the attempts allowed, so that
    /// `(max_retries + 1) × timeout` is the longest a call can take.
    pub deadline: Option<Duration>,
    /// How many requests a counter sends at once when it needs several (4): counting each
    /// message of a conversation takes one request per distinct message.
    pub max_concurrent_requests: usize,
}

// By hand: a base URL's user information (`http://user:pw@host`) stays out of logs, as the key does.
impl fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSettings")
            .field("api_key", &self.api_key)
            .field("base_url", &self.base_url.as_deref().map(crate::redact::redact_url))
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("max_retry_after", &self.max_retry_after)
            .field("deadline", &self.deadline)
            .field("max_concurrent_requests", &self.max_concurrent_requests)
            .finish()
    }
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            api_key: None,
            base_url: None,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(60),
            max_retries: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: None,
            deadline: None,
            max_concurrent_requests: 4,
        }
    }
}

impl ClientSettings {
    /// The same settings with an API key, so that no environment variable is read.
    #[must_use]
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }

    /// The same settings with a base URL.
    #[must_use]
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// The same settings with a connect timeout.
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The same settings with a total timeout per attempt.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same settings with a number of retries (0: one attempt only).
    #[must_use]
    pub fn with_max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// The same settings with the first and the longest backoff.
    #[must_use]
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// The same settings with the longest `Retry-After` wait honoured (a longer one fails the
    /// call).
    #[must_use]
    pub fn with_max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = Some(max);
        self
    }

    /// The same settings with the longest one call may take, retries and waits included.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The same settings with a number of requests a counter may send at once (at least 1).
    #[must_use]
    pub fn with_max_concurrent_requests(mut self, requests: usize) -> Self {
        self.max_concurrent_requests = requests.max(1);
        self
    }

    /// How many attempts a call gets in all.
    pub(crate) fn attempts_allowed(&self) -> u32 {
        self.max_retries.saturating_add(1)
    }

    /// The longest one call may take: [`ClientSettings::deadline`], else `timeout` × attempts.
    pub fn call_deadline(&self) -> Duration {
        self.deadline.unwrap_or_else(|| self.timeout.saturating_mul(self.attempts_allowed()))
    }

    /// The longest `Retry-After` honoured, and whether it is the timeout's.
    pub(crate) fn retry_after_limit(&self) -> (Duration, bool) {
        match self.max_retry_after {
            Some(max) => (max, false),
            None => (self.timeout, true),
        }
    }
}
