//! The one error type of this crate: what was asked of which provider, and why it failed.

use std::fmt;
use std::time::Duration;

use compaction_core::ContextOverflow;
use thiserror::Error;

use crate::provider::Provider;

/// A boxed error from the HTTP stack, kept whole as a source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Which call failed: the provider, the URL, the model and the attempt.
///
/// Displayed as `openai POST http://127.0.0.1:8080/v1/chat/completions (model gpt-4o), attempt 2 of 6`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallInfo {
    /// The provider called.
    pub provider: Provider,
    /// The full URL posted to.
    pub url: String,
    /// The model named in the request.
    pub model: String,
    /// The attempt that failed, from 1.
    pub attempt: u32,
    /// How many attempts the settings allow (`max_retries + 1`).
    pub attempts_allowed: u32,
    /// The call's deadline ([`ClientSettings::call_deadline`](crate::ClientSettings::call_deadline)),
    /// when it is what ended the call before its attempts ran out.
    pub deadline: Option<Duration>,
}

impl fmt::Display for CallInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} POST {} (model {}), attempt {} of {}",
            self.provider, self.url, self.model, self.attempt, self.attempts_allowed
        )?;
        if let Some(deadline) = self.deadline {
            write!(f, ", the last that fit in the call's deadline of {}", Seconds(deadline))?;
        }
        Ok(())
    }
}

/// What a `Retry-After` asked for went beyond: see [`Error::RetryAfter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitLimit {
    /// The timeout of one attempt, which is also the longest wait honoured unless
    /// [`ClientSettings::max_retry_after`](crate::ClientSettings::max_retry_after) says otherwise.
    Timeout(Duration),
    /// [`ClientSettings::max_retry_after`](crate::ClientSettings::max_retry_after).
    MaxRetryAfter(Duration),
    /// What was left of the call's deadline.
    Deadline(Duration),
}

impl fmt::Display for WaitLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WaitLimit::Timeout(limit) => write!(f, "the timeout of {}", Seconds(limit)),
            WaitLimit::MaxRetryAfter(limit) => write!(f, "the longest wait allowed, {}", Seconds(limit)),
            WaitLimit::Deadline(left) => write!(f, "the {} left before the call's deadline", Seconds(left)),
        }
    }
}

/// A duration in seconds as a person reads it: `100000 s`, `2.5 s`, `0.25 s` (whole seconds
/// from 100 s on, milliseconds below).
struct Seconds(Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = self.0.as_millis();
        if millis % 1000 == 0 || millis >= 100_000 {
            write!(f, "{} s", (millis + 500) / 1000)
        } else {
            write!(f, "{} s", millis as f64 / 1000.0)
        }
    }
}

/// Why a client could not be built, a message could not be sent, or a call failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// No API key was given and the provider's environment variable is unset or empty.
    #[error(
        "no API key for {provider}: set the {variable} environment variable (any non-empty value for a \
         local server that checks none) or give one in the settings"
    )]
    MissingApiKey {
        /// The provider that needs the key.
        provider: Provider,
        /// The environment variable read.
        variable: &'static str,
    },
    /// A provider name that this crate does not know.
    #[error("unknown provider {name:?}; expected `openai` or `anthropic`")]
    UnknownProvider {
        /// The name as given.
        name: String,
    },
    /// A `PROVIDER:MODEL` spec that could not be read.
    #[error("invalid provider spec {spec:?}: {reason}")]
    InvalidSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A base URL that is not an `http://` or `https://` URL.
    #[error("invalid base URL {url:?}: {reason}")]
    InvalidBaseUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be set up (TLS configuration).
    #[error("could not set up the HTTP client for {provider}")]
    Client {
        /// The provider the client was for.
        provider: Provider,
        /// The HTTP library's error.
        #[source]
        source: BoxError,
    },
    /// A message has content the provider's API cannot take.
    #[error("message {index} cannot be sent to {provider}: {reason}")]
    UnsupportedMessage {
        /// The provider whose format was being written.
        provider: Provider,
        /// The message's index in the conversation given.
        index: usize,
        /// What it holds that the API cannot take.
        reason: String,
    },
    /// The provider answered with an error status (after the retries the settings allow, for
    /// statuses worth retrying).
    #[error("{call}: HTTP {status}: {message}")]
    Status {
        /// The call that failed.
        call: CallInfo,
        /// The HTTP status code.
        status: u16,
        /// The provider's error message (or the start of the body), cut short.
        message: String,
        /// Set when the reply says the request was longer than the model's context window,
        /// with the sizes it states (read from the whole body); see
        /// [`Error::is_context_overflow`]. Boxed: most errors are not overflows, and every
        /// `Result` of this crate carries the error's size.
        overflow: Option<Box<ContextOverflow>>,
    },
    /// The provider asked to be called again later than the client waits (a `Retry-After`
    /// beyond the timeout, the longest wait allowed, or the call's deadline): the call fails
    /// at once instead.
    #[error("{call}: HTTP {status}: {message}; the server asked to retry after {}, beyond {limit}", Seconds(*asked))]
    RetryAfter {
        /// The call that failed (boxed: every `Result` of this crate carries the error's size).
        call: Box<CallInfo>,
        /// The HTTP status code.
        status: u16,
        /// The provider's error message (or the start of the body), cut short.
        message: String,
        /// The wait asked for (`retry-after-ms`, or `retry-after` in seconds or as a date).
        asked: Duration,
        /// What it went beyond.
        limit: WaitLimit,
    },
    /// The call took longer than the connect or total timeout.
    #[error("{call}: timed out")]
    Timeout {
        /// The call that failed.
        call: CallInfo,
        /// The HTTP library's error.
        #[source]
        source: BoxError,
    },
    /// The connection failed or broke (DNS, refused, reset, TLS).
    #[error("{call}: transport error")]
    Transport {
        /// The call that failed.
        call: CallInfo,
        /// The HTTP library's error.
        #[source]
        source: BoxError,
    },
    /// The provider answered with a success status but a body that is not JSON.
    #[error("{call}: the reply is not JSON (it starts {start:?})")]
    MalformedReply {
        /// The call that failed.
        call: CallInfo,
        /// The start of the body, cut short.
        start: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The reply is JSON but not of the shape the API documents.
    #[error("{call}: unexpected reply: {reason}")]
    UnexpectedReply {
        /// The call that failed.
        call: CallInfo,
        /// What was missing or wrong.
        reason: String,
    },
}

impl Error {
    /// Whether the provider refused the request as longer than the model's context window
    /// (OpenAI's `context_length_exceeded`, Anthropic's "prompt is too long", and the other
    /// shapes [`compaction_core::context_overflow`] knows). Such a request is never retried as
    /// sent: compact the conversation and send it again (compaction-hook's
    /// `ContextOverflowRecovery` does that once per request).
    pub fn is_context_overflow(&self) -> bool {
        self.context_overflow().is_some()
    }

    /// What a context-overflow error states: the window, the input counted, the reply's
    /// reserve (each when stated). `None` for every other error.
    pub fn context_overflow(&self) -> Option<&ContextOverflow> {
        match self {
            Error::Status { overflow, .. } => overflow.as_deref(),
            _ => None,
        }
    }

    /// The model's context window in tokens, when a context-overflow error states it.
    pub fn context_limit(&self) -> Option<usize> {
        self.context_overflow().and_then(|overflow| overflow.limit)
    }
}
