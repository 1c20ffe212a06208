//! One call's attempts, without I/O: what a reply or a transport failure means (done, wait and
//! try again, or fail), shared by the blocking and the async transport.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

use compaction_core::context_overflow;
use serde_json::Value;

use crate::error::{BoxError, CallInfo, Error};
use crate::provider::Provider;
use crate::settings::ClientSettings;

/// How much of a provider's error message (or of a body that is not JSON) an error keeps.
const MESSAGE_CHARS: usize = 400;

/// Where a call goes: enough to name it in an error.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub provider: Provider,
    pub url: String,
    pub model: String,
}

/// What came back from one attempt that reached the server.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    /// `retry-after-ms` (OpenAI) or `retry-after` (seconds or an HTTP date), as a wait.
    pub retry_after: Option<Duration>,
    /// `x-should-retry`: the provider's own word on whether to retry.
    pub should_retry: Option<bool>,
    pub body: Vec<u8>,
}

/// An attempt that did not reach a reply.
#[derive(Debug)]
pub(crate) struct TransportFailure {
    pub timeout: bool,
    /// Whether trying again may help (a refused connection may; a malformed URL will not).
    pub retryable: bool,
    pub source: BoxError,
}

/// What to do after an attempt.
#[derive(Debug)]
pub(crate) enum Step {
    /// The reply's JSON.
    Done(Value),
    /// Wait this long, then try again.
    Wait(Duration),
    /// Give up with this error.
    Fail(Error),
}

/// The attempts of one call.
#[derive(Debug)]
pub(crate) struct Attempts<'a> {
    target: &'a Target,
    settings: &'a ClientSettings,
    attempt: u32,
}

impl<'a> Attempts<'a> {
    pub fn new(target: &'a Target, settings: &'a ClientSettings) -> Self {
        Attempts { target, settings, attempt: 0 }
    }

    /// Call before each attempt.
    pub fn start(&mut self) {
        self.attempt += 1;
    }

    /// A successful reply read by `read`; what it lacks is an [`Error::UnexpectedReply`].
    ///
    /// # Errors
    ///
    /// When `read` finds the reply lacking: an unexpected-reply error naming the call.
    pub fn read<T>(&self, value: &Value, read: fn(&Value) -> Result<T, String>) -> Result<T, Error> {
        read(value).map_err(|reason| Error::UnexpectedReply { call: self.call(), reason })
    }

    fn call(&self) -> CallInfo {
        CallInfo {
            provider: self.target.provider,
            url: self.target.url.clone(),
            model: self.target.model.clone(),
            attempt: self.attempt,
            attempts_allowed: self.settings.attempts_allowed(),
        }
    }

    /// What the outcome of the current attempt means.
    pub fn judge(&mut self, outcome: Result<Reply, TransportFailure>) -> Step {
        let last = self.attempt >= self.settings.attempts_allowed();
        match outcome {
            Ok(reply) if (200..300).contains(&reply.status) => match serde_json::from_slice(&reply.body) {
                Ok(value) => Step::Done(value),
                Err(source) => Step::Fail(Error::MalformedReply {
                    call: self.call(),
                    start: body_start(&reply.body),
                    source,
                }),
            },
            Ok(reply) => {
                let overflow = context_overflow(reply.status, &String::from_utf8_lossy(&reply.body));
                // A request too long for the window is refused however often it is sent (some
                // servers answer it with a 5xx): only a shorter one can succeed.
                let retry = overflow.is_none()
                    && reply.should_retry.unwrap_or_else(|| retryable_status(reply.status));
                if retry && !last {
                    let wait = match reply.retry_after {
                        Some(asked) => asked.min(self.settings.max_retry_after),
                        None => self.backoff(),
                    };
                    tracing::debug!(
                        call = %self.call(),
                        status = reply.status,
                        wait_ms = wait.as_millis() as u64,
                        "retrying"
                    );
                    return Step::Wait(wait);
                }
                Step::Fail(Error::Status {
                    call: self.call(),
                    status: reply.status,
                    message: error_message(&reply.body),
                    overflow: overflow.map(Box::new),
                })
            }
            Err(failure) => {
                if failure.retryable && !last {
                    let wait = self.backoff();
                    tracing::debug!(call = %self.call(), error = %failure.source, wait_ms = wait.as_millis() as u64, "retrying");
                    return Step::Wait(wait);
                }
                let call = self.call();
                Step::Fail(if failure.timeout {
                    Error::Timeout { call, source: failure.source }
                } else {
                    Error::Transport { call, source: failure.source }
                })
            }
        }
    }

    /// Exponential backoff with jitter: half the doubled wait, plus a random share of the other
    /// half, so that clients that failed together do not retry together.
    fn backoff(&self) -> Duration {
        let doublings = self.attempt.saturating_sub(1).min(30);
        let base =
            self.settings.initial_backoff.saturating_mul(1 << doublings).min(self.settings.max_backoff);
        let half = base / 2;
        half + half.mul_f64(random_unit())
    }
}

/// 408 (timeout), 409 (lock conflict), 429 (rate limit) and every 5xx are worth another try, as
/// the providers' SDKs agree.
fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// A number in `[0, 1)`, from the standard library's randomly keyed hasher (no dependency for
/// jitter).
fn random_unit() -> f64 {
    let mut hasher = std::hash::RandomState::new().build_hasher();
    hasher
        .write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The wait a reply asks for: `retry-after-ms`, else `retry-after` in seconds or as an HTTP date.
pub(crate) fn parse_retry_after(retry_after_ms: Option<&str>, retry_after: Option<&str>) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = retry_after?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(1e9)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

/// `x-should-retry: true|false`.
pub(crate) fn parse_should_retry(value: Option<&str>) -> Option<bool> {
    match value?.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// The provider's error message: `error.message` (with `error.type` or `error.code` before it)
/// as OpenAI and Anthropic both send it, else the start of the body.
fn error_message(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        let error = value.get("error").unwrap_or(&value);
        if let Some(message) = error.get("message").and_then(Value::as_str) {
            let kind = ["type", "code"].iter().find_map(|k| error.get(*k).and_then(Value::as_str));
            let text = match kind {
                Some(kind) if !kind.is_empty() => format!("{kind}: {message}"),
                _ => message.to_owned(),
            };
            return cut(&text);
        }
    }
    match body_start(body) {
        start if start.is_empty() => "(empty body)".to_owned(),
        start => start,
    }
}

fn body_start(body: &[u8]) -> String {
    let head = &body[..body.len().min(MESSAGE_CHARS * 4)];
    cut(String::from_utf8_lossy(head).trim())
}

/// `text` cut to [`MESSAGE_CHARS`] characters, with `…` when something was cut.
fn cut(text: &str) -> String {
    match text.char_indices().nth(MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_milliseconds_seconds_and_dates() {
        assert_eq!(parse_retry_after(Some("250"), Some("9")), Some(Duration::from_millis(250)));
        assert_eq!(parse_retry_after(None, Some("2")), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(None, Some("0.5")), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after(None, Some("soon")), None);
        assert_eq!(parse_retry_after(None, Some("-3")), None);
        let later = SystemTime::now() + Duration::from_secs(30);
        let wait = parse_retry_after(None, Some(&httpdate::fmt_http_date(later))).unwrap();
        assert!(wait > Duration::from_secs(25) && wait <= Duration::from_secs(30), "{wait:?}");
        // A date in the past means: now.
        assert_eq!(parse_retry_after(None, Some("Sun, 06 Nov 1994 08:49:37 GMT")), Some(Duration::ZERO));
    }

    #[test]
    fn error_messages_are_the_providers_and_cut_short() {
        let openai = br#"{"error": {"message": "Rate limit reached", "type": "requests", "code": null}}"#;
        assert_eq!(error_message(openai), "requests: Rate limit reached");
        let anthropic =
            br#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#;
        assert_eq!(error_message(anthropic), "overloaded_error: Overloaded");
        assert_eq!(error_message(b"<html>bad gateway</html>"), "<html>bad gateway</html>");
        assert_eq!(error_message(b""), "(empty body)");
        let long = "é".repeat(1000);
        let message = error_message(long.as_bytes());
        assert_eq!(message.chars().count(), MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'));
    }

    #[test]
    fn backoff_doubles_with_jitter_and_stays_under_the_cap() {
        let target = Target { provider: Provider::OpenAI, url: "http://x".into(), model: "m".into() };
        let settings = ClientSettings::default()
            .with_backoff(Duration::from_millis(100), Duration::from_millis(350))
            .with_max_retries(10);
        let mut attempts = Attempts::new(&target, &settings);
        let mut waits = Vec::new();
        for _ in 0..4 {
            attempts.start();
            match attempts.judge(Ok(Reply {
                status: 503,
                retry_after: None,
                should_retry: None,
                body: vec![],
            })) {
                Step::Wait(wait) => waits.push(wait),
                other => panic!("expected a wait, got {other:?}"),
            }
        }
        let bounds = [(50, 100), (100, 200), (175, 350), (175, 350)];
        for (wait, (low, high)) in waits.iter().zip(bounds) {
            assert!(*wait >= Duration::from_millis(low) && *wait <= Duration::from_millis(high), "{waits:?}");
        }
    }

    #[test]
    fn the_provider_decides_with_x_should_retry() {
        let target = Target { provider: Provider::Anthropic, url: "http://x".into(), model: "m".into() };
        let settings = ClientSettings::default();
        let mut attempts = Attempts::new(&target, &settings);
        attempts.start();
        let reply = Reply { status: 500, retry_after: None, should_retry: Some(false), body: vec![] };
        assert!(matches!(attempts.judge(Ok(reply)), Step::Fail(Error::Status { status: 500, .. })));
        let reply =
            Reply { status: 400, retry_after: Some(Duration::ZERO), should_retry: Some(true), body: vec![] };
        assert!(matches!(attempts.judge(Ok(reply)), Step::Wait(_)));
        let reply = Reply { status: 400, retry_after: None, should_retry: None, body: vec![] };
        assert!(matches!(attempts.judge(Ok(reply)), Step::Fail(Error::Status { status: 400, .. })));
    }
}
