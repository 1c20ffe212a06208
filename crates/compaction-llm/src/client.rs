//! The HTTP side of every generator and counter: a provider's endpoint, its headers, and one
//! JSON POST driven through [`Attempts`](crate::retry::Attempts) by the blocking transport
//! (ureq) or the async one (reqwest on tokio).

use serde_json::Value;

use crate::error::Error;
use crate::provider::Provider;
use crate::redact::{redact_url, Secrets};
#[cfg(any(feature = "blocking", feature = "async"))]
use crate::retry::{parse_retry_after, parse_should_retry, Reply, TransportFailure};
use crate::retry::{Attempts, Step, Target};
use crate::settings::{ApiKey, ClientSettings};

/// The Anthropic API version sent in `anthropic-version`.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Replies larger than this are refused: a chat reply or a count is a few kilobytes.
#[cfg(any(feature = "blocking", feature = "async"))]
const MAX_REPLY_BYTES: u64 = 16 * 1024 * 1024;

/// A configured connection to one provider.
#[derive(Clone)]
pub(crate) struct Client {
    provider: Provider,
    base_url: String,
    api_key: ApiKey,
    /// What errors must not show: the key, the base URL's user and password.
    secrets: Secrets,
    settings: ClientSettings,
    #[cfg(feature = "blocking")]
    agent: ureq::Agent,
    #[cfg(feature = "async")]
    http: reqwest::Client,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("provider", &self.provider)
            .field("base_url", &redact_url(&self.base_url))
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for `provider`: the key and base URL from the settings or the environment.
    ///
    /// # Errors
    ///
    /// When no API key is given or found in the environment, or the HTTP client cannot be
    /// built.
    pub fn new(provider: Provider, settings: ClientSettings) -> Result<Self, Error> {
        let api_key = match &settings.api_key {
            Some(key) => key.clone(),
            None => match std::env::var(provider.api_key_variable()) {
                Ok(key) if !key.trim().is_empty() => ApiKey::new(key.trim()),
                _ => return Err(Error::MissingApiKey { provider, variable: provider.api_key_variable() }),
            },
        };
        let base_url = match &settings.base_url {
            Some(url) => url.clone(),
            None => std::env::var(provider.base_url_variable())
                .ok()
                .filter(|url| !url.trim().is_empty())
                .unwrap_or_else(|| provider.default_base_url().to_owned()),
        };
        let base_url = check_base_url(base_url.trim())?;
        Ok(Client {
            provider,
            secrets: Secrets::new(api_key.expose(), &base_url),
            base_url,
            api_key,
            #[cfg(feature = "blocking")]
            agent: blocking_agent(&settings),
            #[cfg(feature = "async")]
            http: async_client(provider, &settings)?,
            settings,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// The target of a POST to `path` (such as `/chat/completions`) for `model`.
    pub fn target(&self, path: &str, model: &str) -> Target {
        let url = format!("{}{path}", self.base_url);
        Target { provider: self.provider, shown_url: redact_url(&url), url, model: model.to_owned() }
    }

    /// The provider's headers, the key among them.
    #[cfg(any(feature = "blocking", feature = "async"))]
    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("content-type", "application/json".to_owned())];
        match self.provider {
            Provider::OpenAI => headers.push(("authorization", format!("Bearer {}", self.api_key.expose()))),
            Provider::Anthropic => {
                headers.push(("x-api-key", self.api_key.expose().to_owned()));
                headers.push(("anthropic-version", ANTHROPIC_VERSION.to_owned()));
            }
        }
        headers
    }

    /// POSTs `body` to `target`, retrying as the settings say; the reply read by `read` (whose
    /// error says what the reply lacks).
    ///
    /// # Errors
    ///
    /// When every attempt failed (the last failure, naming the call), the provider refused the
    /// request, or the reply lacks what `read` needs.
    #[cfg(feature = "blocking")]
    pub fn post<T>(
        &self,
        target: &Target,
        body: &Value,
        read: fn(&Value) -> Result<T, String>,
    ) -> Result<T, Error> {
        let bytes = bytes_of(body);
        let headers = self.headers();
        let mut attempts = Attempts::new(target, &self.settings, &self.secrets);
        loop {
            let timeout = attempts.start();
            match attempts.judge(self.send_blocking(&target.url, &headers, &bytes, timeout)) {
                Step::Done(value) => return attempts.read(&value, read),
                Step::Wait(wait) => std::thread::sleep(wait),
                Step::Fail(error) => return Err(error),
            }
        }
    }

    #[cfg(feature = "blocking")]
    fn send_blocking(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: &[u8],
        timeout: std::time::Duration,
    ) -> Result<Reply, TransportFailure> {
        // The whole attempt, the reply's body read to its end included, however slowly it comes.
        let mut request = self.agent.post(url).config().timeout_global(Some(timeout)).build();
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let mut response = request.send(body).map_err(ureq_failure)?;
        let header =
            |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let retry_after =
            parse_retry_after(header("retry-after-ms").as_deref(), header("retry-after").as_deref());
        let should_retry = parse_should_retry(header("x-should-retry").as_deref());
        let status = response.status().as_u16();
        let body =
            response.body_mut().with_config().limit(MAX_REPLY_BYTES).read_to_vec().map_err(ureq_failure)?;
        Ok(Reply { status, retry_after, should_retry, body })
    }

    /// [`Client::post`] without blocking the runtime.
    ///
    /// # Errors
    ///
    /// As `post`.
    #[cfg(feature = "async")]
    pub async fn post_async<T>(
        &self,
        target: &Target,
        body: &Value,
        read: fn(&Value) -> Result<T, String>,
    ) -> Result<T, Error> {
        let bytes = bytes_of(body);
        let headers = self.headers();
        let mut attempts = Attempts::new(target, &self.settings, &self.secrets);
        loop {
            let timeout = attempts.start();
            let outcome = self.send_async(&target.url, &headers, bytes.clone(), timeout).await;
            match attempts.judge(outcome) {
                Step::Done(value) => return attempts.read(&value, read),
                Step::Wait(wait) => tokio::time::sleep(wait).await,
                Step::Fail(error) => return Err(error),
            }
        }
    }

    #[cfg(feature = "async")]
    async fn send_async(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
        timeout: std::time::Duration,
    ) -> Result<Reply, TransportFailure> {
        // reqwest's timeout runs until the body is read to its end.
        let mut request = self.http.post(url).body(body).timeout(timeout);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let mut response = request.send().await.map_err(reqwest_failure)?;
        let header =
            |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let retry_after =
            parse_retry_after(header("retry-after-ms").as_deref(), header("retry-after").as_deref());
        let should_retry = parse_should_retry(header("x-should-retry").as_deref());
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(reqwest_failure)? {
            if (body.len() + chunk.len()) as u64 > MAX_REPLY_BYTES {
                return Err(TransportFailure {
                    timeout: false,
                    retryable: false,
                    source: format!("the reply is larger than {MAX_REPLY_BYTES} bytes").into(),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Reply { status, retry_after, should_retry, body })
    }
}

/// The request body's bytes: a lone surrogate read from a transcript (held as its stand-in, see
/// compaction-model's `dialect`) goes out as the `\uXXXX` escape it was read from, as Python's
/// `json.dumps` would send it, never as the stand-in character.
fn bytes_of(body: &Value) -> Vec<u8> {
    let mut out = compaction_model::SurrogateEscapes::new(Vec::new());
    // Neither serializing a JSON value nor writing to a vector can fail.
    serde_json::to_writer(&mut out, body).expect("a JSON value always serializes");
    out.into_inner().expect("a vector takes every byte")
}

/// The base URL without its trailing slashes, if it is an `http://` or `https://` URL with a host.
fn check_base_url(url: &str) -> Result<String, Error> {
    let invalid = |reason: &str| Error::InvalidBaseUrl { url: redact_url(url), reason: reason.to_owned() };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| invalid("it must start with http:// or https://"))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(invalid("it has no host"));
    }
    if url.contains(['?', '#']) || url.chars().any(char::is_whitespace) {
        return Err(invalid("it may not hold a query, a fragment or spaces"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

#[cfg(feature = "blocking")]
fn blocking_agent(settings: &ClientSettings) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(settings.connect_timeout))
        .timeout_global(Some(settings.timeout))
        // Error statuses are replies to read (the provider's message, Retry-After), not errors.
        .http_status_as_error(false)
        .user_agent(concat!("compaction-llm/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

#[cfg(feature = "blocking")]
fn ureq_failure(error: ureq::Error) -> TransportFailure {
    use ureq::Error as E;
    let timeout = matches!(error, E::Timeout(_));
    let retryable =
        matches!(error, E::Timeout(_) | E::Io(_) | E::ConnectionFailed | E::HostNotFound | E::Protocol(_));
    TransportFailure { timeout, retryable, source: Box::new(error) }
}

#[cfg(feature = "async")]
fn async_client(provider: Provider, settings: &ClientSettings) -> Result<reqwest::Client, Error> {
    // rustls on ring with the Mozilla roots, as the blocking client has: no aws-lc build, and no
    // need for a system certificate store.
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Error::Client { provider, source: Box::new(e) })?
    .with_root_certificates(roots)
    .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(settings.connect_timeout)
        .timeout(settings.timeout)
        .user_agent(concat!("compaction-llm/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Error::Client { provider, source: Box::new(e) })
}

#[cfg(feature = "async")]
fn reqwest_failure(error: reqwest::Error) -> TransportFailure {
    TransportFailure { timeout: error.is_timeout(), retryable: !error.is_builder(), source: Box::new(error) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_surrogate_is_sent_as_its_escape() {
        // A high surrogate alone, as compaction-model reads `"\ud83d"` from a transcript.
        let body = compaction_model::value_from_slice(br#"{"t": "a\ud83d b"}"#).expect("Python's JSON");
        let sent = String::from_utf8(bytes_of(&body)).expect("UTF-8");
        assert_eq!(sent, r#"{"t":"a\ud83d b"}"#);
    }

    #[test]
    fn base_urls_are_checked_and_trimmed() {
        assert_eq!(check_base_url("http://127.0.0.1:8080/v1/").unwrap(), "http://127.0.0.1:8080/v1");
        assert_eq!(check_base_url("https://api.anthropic.com").unwrap(), "https://api.anthropic.com");
        for bad in ["127.0.0.1:8080/v1", "ftp://x", "http://", "http:///v1", "http://x/v1?a=1", "http://x y"]
        {
            assert!(matches!(check_base_url(bad), Err(Error::InvalidBaseUrl { .. })), "{bad}");
        }
    }

    #[test]
    fn a_given_key_is_used_and_hidden() {
        let settings =
            ClientSettings::default().with_api_key("sk-secret").with_base_url("http://127.0.0.1:1/v1");
        let client = Client::new(Provider::OpenAI, settings).unwrap();
        assert!(!format!("{client:?}").contains("sk-secret"));
    }
}
