//! One call's attempts, without I/O: what a reply or a transport failure means (done, wait and
//! try again, or fail), shared by the blocking and the async transport.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant, SystemTime};

use compaction_core::context_overflow;
use serde_json::Value;

use crate::error::{BoxError, CallInfo, Error, WaitLimit};
use crate::provider::Provider;
use crate::redact::Secrets;
use crate::settings::ClientSettings;

/// How much of a provider's error message (or of a body that is not JSON) an error keeps.
const MESSAGE_CHARS: usize = 400;

/// The longest wait a reply can ask for that is read as a number: past it, any wait is too long.
const LONGEST_WAIT_READ: Duration = Duration::from_secs(1 << 40);

/// Where a call goes: enough to name it in an error.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub provider: Provider,
    pub url: String,
    /// `url` as errors show it: without its user information.
    pub shown_url: String,
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

/// The attempts of one call, within its deadline.
#[derive(Debug)]
pub(crate) struct Attempts<'a> {
    target: &'a Target,
    settings: &'a ClientSettings,
    secrets: &'a Secrets,
    attempt: u32,
    started: Instant,
    deadline: Duration,
}

impl<'a> Attempts<'a> {
    pub fn new(target: &'a Target, settings: &'a ClientSettings, secrets: &'a Secrets) -> Self {
        Attempts {
            target,
            settings,
            secrets,
            attempt: 0,
            started: Instant::now(),
            deadline: settings.call_deadline(),
        }
    }

    /// Call before each attempt: how long it may take, the timeout or what is left of the
    /// call's deadline, whichever is shorter.
    pub fn start(&mut self) -> Duration {
        self.attempt += 1;
        self.settings.timeout.min(self.left()).max(Duration::from_millis(1))
    }

    /// What is left of the call's deadline.
    fn left(&self) -> Duration {
        self.deadline.saturating_sub(self.started.elapsed())
    }

    /// A successful reply read by `read`; what it lacks is an [`Error::UnexpectedReply`].
    ///
    /// # Errors
    ///
    /// When `read` finds the reply lacking: an unexpected-reply error naming the call.
    pub fn read<T>(&self, value: &Value, read: fn(&Value) -> Result<T, String>) -> Result<T, Error> {
        // The reason may quote the reply, which may echo a key.
        read(value).map_err(|reason| Error::UnexpectedReply {
            call: self.call(),
            reason: self.secrets.redact(&reason),
        })
    }

    fn call(&self) -> CallInfo {
        CallInfo {
            provider: self.target.provider,
            url: self.target.shown_url.clone(),
            model: self.target.model.clone(),
            attempt: self.attempt,
            attempts_allowed: self.settings.attempts_allowed(),
            deadline: None,
        }
    }

    /// What the outcome of the current attempt means.
    pub fn judge(&mut self, outcome: Result<Reply, TransportFailure>) -> Step {
        let (failure, retry, asked) = match outcome {
            Ok(reply) if (200..300).contains(&reply.status) => {
                return match serde_json::from_slice(&reply.body) {
                    Ok(value) => Step::Done(value),
                    Err(source) => Step::Fail(Error::MalformedReply {
                        call: self.call(),
                        start: body_start(&reply.body, self.secrets),
                        source,
                    }),
                };
            }
            Ok(reply) => {
                let overflow = context_overflow(reply.status, &String::from_utf8_lossy(&reply.body));
                // A request too long for the window is refused however often it is sent (some
                // servers answer it with a 5xx): only a shorter one can succeed.
                let retry = overflow.is_none()
                    && reply.should_retry.unwrap_or_else(|| retryable_status(reply.status));
                let failure = Failure::Status {
                    status: reply.status,
                    message: error_message(&reply.body, self.secrets),
                    overflow: overflow.map(Box::new),
                };
                (failure, retry, reply.retry_after)
            }
            Err(failure) => {
                let retry = failure.retryable;
                (Failure::Transport(failure), retry, None)
            }
        };
        if !retry || self.attempt >= self.settings.attempts_allowed() {
            return Step::Fail(failure.into_error(self.call()));
        }
        let left = self.left();
        let wait = match asked {
            Some(asked) => {
                let (most, is_timeout) = self.settings.retry_after_limit();
                let limit = match (asked > most, is_timeout) {
                    (true, true) => Some(WaitLimit::Timeout(most)),
                    (true, false) => Some(WaitLimit::MaxRetryAfter(most)),
                    (false, _) if asked >= left => Some(WaitLimit::Deadline(left)),
                    (false, _) => None,
                };
                if let Some(limit) = limit {
                    return Step::Fail(failure.into_retry_after(self.call(), asked, limit));
                }
                asked
            }
            None => self.backoff(),
        };
        if wait >= left {
            let call = CallInfo { deadline: Some(self.deadline), ..self.call() };
            return Step::Fail(failure.into_error(call));
        }
        tracing::debug!(call = %self.call(), wait_ms = wait.as_millis() as u64, "retrying");
        Step::Wait(wait)
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

/// An attempt that failed, before the call it belongs to is known to have failed.
enum Failure {
    Status { status: u16, message: String, overflow: Option<Box<compaction_core::ContextOverflow>> },
    Transport(TransportFailure),
}

impl Failure {
    fn into_error(self, call: CallInfo) -> Error {
        match self {
            Failure::Status { status, message, overflow } => {
                Error::Status { call, status, message, overflow }
            }
            Failure::Transport(TransportFailure { timeout: true, source, .. }) => {
                Error::Timeout { call, source }
            }
            Failure::Transport(TransportFailure { source, .. }) => Error::Transport { call, source },
        }
    }

    fn into_retry_after(self, call: CallInfo, asked: Duration, limit: WaitLimit) -> Error {
        match self {
            Failure::Status { status, message, .. } => {
                Error::RetryAfter { call: Box::new(call), status, message, asked, limit }
            }
            other => other.into_error(call),
        }
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
    let wait = |seconds: f64| {
        // NaN and negative waits are no wait asked; a huge one (even infinite) stays huge, so
        // that it is refused as such, never read as a short one.
        (seconds >= 0.0).then(|| Duration::try_from_secs_f64(seconds).unwrap_or(LONGEST_WAIT_READ))
    };
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok()) {
        if let Some(wait) = wait(ms / 1000.0) {
            return Some(wait.min(LONGEST_WAIT_READ));
        }
    }
    let value = retry_after?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return wait(seconds).map(|wait| wait.min(LONGEST_WAIT_READ));
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
fn error_message(body: &[u8], secrets: &Secrets) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        let error = value.get("error").unwrap_or(&value);
        if let Some(message) = error.get("message").and_then(Value::as_str) {
            let kind = ["type", "code"].iter().find_map(|k| error.get(*k).and_then(Value::as_str));
            let text = match kind {
                Some(kind) if !kind.is_empty() => format!("{kind}: {message}"),
                _ => message.to_owned(),
            };
            return cut(&secrets.redact(&text));
        }
    }
    match body_start(body, secrets) {
        start if start.is_empty() => "(empty body)".to_owned(),
        start => start,
    }
}

/// The start of a body, its secrets hidden. Read a little past what is shown, so that a key that
/// straddles the cut is hidden whole.
fn body_start(body: &[u8], secrets: &Secrets) -> String {
    let head = &body[..body.len().min(MESSAGE_CHARS * 4 + 512)];
    cut(&secrets.redact(String::from_utf8_lossy(head).trim()))
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
        // Waits too long to hold stay too long, never a panic nor a short wait.
        let huge = Some(LONGEST_WAIT_READ);
        assert_eq!(parse_retry_after(Some("1e300"), None), huge);
        assert_eq!(parse_retry_after(None, Some("inf")), huge);
        assert_eq!(parse_retry_after(None, Some("NaN")), None);
        assert!(
            parse_retry_after(None, Some("Fri, 01 Jan 2100 00:00:00 GMT")).unwrap()
                > Duration::from_secs(1 << 31)
        );
        // A date in the past means: now.
        assert_eq!(parse_retry_after(None, Some("Sun, 06 Nov 1994 08:49:37 GMT")), Some(Duration::ZERO));
    }

    #[test]
    fn error_messages_are_the_providers_and_cut_short() {
        let openai = br#"{"error": {"message": "Rate limit reached", "type": "requests", "code": null}}"#;
        assert_eq!(error_message(openai, &Secrets::default()), "requests: Rate limit reached");
        let anthropic =
            br#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#;
        assert_eq!(error_message(anthropic, &Secrets::default()), "overloaded_error: Overloaded");
        assert_eq!(
            error_message(b"<html>bad gateway</html>", &Secrets::default()),
            "<html>bad gateway</html>"
        );
        assert_eq!(error_message(b"", &Secrets::default()), "(empty body)");
        let long = "é".repeat(1000);
        let message = error_message(long.as_bytes(), &Secrets::default());
        assert_eq!(message.chars().count(), MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'));
    }

    #[test]
    fn backoff_doubles_with_jitter_and_stays_under_the_cap() {
        let target = Target {
            provider: Provider::OpenAI,
            url: "http://x".into(),
            shown_url: "http://x".into(),
            model: "m".into(),
        };
        let settings = ClientSettings::default()
            .with_backoff(Duration::from_millis(100), Duration::from_millis(350))
            .with_max_retries(10);
        let secrets = Secrets::default();
        let mut attempts = Attempts::new(&target, &settings, &secrets);
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
        let target = Target {
            provider: Provider::Anthropic,
            url: "http://x".into(),
            shown_url: "http://x".into(),
            model: "m".into(),
        };
        let settings = ClientSettings::default();
        let secrets = Secrets::default();
        let mut attempts = Attempts::new(&target, &settings, &secrets);
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
