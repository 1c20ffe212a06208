//! The server: accepting connections, refusing what it must (a remote listener without a
//! token, a client without the token, a body too large, too many requests), and handing each
//! request to the upstream it is meant for.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::compact::Endpoint;
use crate::error::Error;
use crate::memory::Memory;
use crate::metrics::{Failure, Metrics};
use crate::relay::{relay, ProxyBody};
use crate::settings::ProxySettings;
use crate::usage::{Seen, UsageReader};

/// What every connection's requests share.
pub(crate) struct Shared {
    pub(crate) settings: ProxySettings,
    client: reqwest::Client,
    in_flight: Arc<Semaphore>,
    /// Requests being read, counted and compacted at once: as many as there are cores unless the
    /// settings say otherwise. More would not go faster, and each holds its request parsed and
    /// written back beside its bytes.
    pub(crate) compacting: Arc<Semaphore>,
    /// The replacements made, by conversation prefix (see `memory.rs`).
    pub(crate) memory: Mutex<Memory>,
    pub(crate) metrics: Metrics,
}

/// The most a connection buffers of what its client sends (hyper's default is about 400 kB).
/// A body is copied out of it as it arrives into one buffer of its own, so a larger one would
/// only add to each request's memory (and stays with a connection kept alive); the request's
/// head must fit in it.
const READ_BUFFER: usize = 64 << 10;

/// Serves the proxy on `listener` until the task running it is dropped or aborted.
///
/// A listener on anything but a loopback address is refused unless the settings allow remote
/// clients with a token ([`ProxySettings::with_remote_clients`]). Each connection is served
/// by a task of its own; each streamed response is relayed by one more, which ends with the
/// response or as soon as its client goes.
///
/// # Errors
///
/// Before serving anything: [`Error::RemoteWithoutToken`], [`Error::Listener`],
/// [`Error::Upstream`] for an upstream URL that is not one, [`Error::Client`]. Once serving,
/// it returns only if the listener fails for good.
pub async fn serve(listener: TcpListener, settings: ProxySettings) -> Result<(), Error> {
    let address = listener.local_addr().map_err(Error::Listener)?;
    check_address(address, &settings)?;
    for url in [&settings.openai_upstream, &settings.anthropic_upstream] {
        let parsed = reqwest::Url::parse(url).map_err(|_| Error::Upstream { url: url.clone() })?;
        if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() {
            return Err(Error::Upstream { url: url.clone() });
        }
    }
    let client = client(settings.connect_timeout)?;
    let in_flight = Arc::new(Semaphore::new(settings.max_concurrent));
    let memory = Mutex::new(Memory::new(settings.remembered_bytes));
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    let compacting = Arc::new(Semaphore::new(settings.compacting_at_once.unwrap_or(cores)));
    let shared =
        Arc::new(Shared { settings, client, in_flight, compacting, memory, metrics: Metrics::default() });
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors, a connection reset before it was accepted: the next
                // accept may work, a little later.
                (shared.settings.log)(&format!("proxy: accept failed: {error}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        accepted(&stream);
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| handle(shared.clone(), request));
            // A connection that fails (the client went mid-request) concerns that client only.
            let _ = hyper::server::conn::http1::Builder::new()
                .max_buf_size(READ_BUFFER)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Readies an accepted connection: its writes go out at once (`TCP_NODELAY`). A streamed
/// answer is relayed an event at a time, each a small write, and its end is one more; held back
/// by Nagle's algorithm until the client acknowledged the write before (which a client may delay
/// by 40 ms), the end of each answer, and any event that follows another closely, would reach
/// the client that much later.
fn accepted(stream: &tokio::net::TcpStream) {
    // Only a matter of latency: a connection that refuses it is served all the same.
    let _ = stream.set_nodelay(true);
}

/// [`serve`] on a runtime of its own (as many worker threads as cores), for a caller without
/// one: blocks until the listener fails for good.
///
/// # Errors
///
/// As [`serve`]; [`Error::Listener`] when `listener` cannot be handed to the runtime.
pub fn run(listener: std::net::TcpListener, settings: ProxySettings) -> Result<(), Error> {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(Error::Listener)?;
    runtime.block_on(async move {
        listener.set_nonblocking(true).map_err(Error::Listener)?;
        let listener = TcpListener::from_std(listener).map_err(Error::Listener)?;
        serve(listener, settings).await
    })
}

/// Loopback only, unless remote clients are allowed with a token.
fn check_address(address: SocketAddr, settings: &ProxySettings) -> Result<(), Error> {
    match address.ip().is_loopback() || settings.remote_token.is_some() {
        true => Ok(()),
        false => Err(Error::RemoteWithoutToken { address }),
    }
}

/// The upstreams' client: rustls on ring with the Mozilla roots. No overall timeout (a
/// streamed answer may take minutes); the relay times the gaps instead.
fn client(connect_timeout: Duration) -> Result<reqwest::Client, Error> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Client(Box::new(e)))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(connect_timeout)
        // A redirect is the client's to follow or not: followed here, it would take the
        // client's credentials to another host.
        .redirect(reqwest::redirect::Policy::none())
        // Bodies go through as the upstream encoded them. Another crate of the same build may
        // turn on reqwest's decoders (features unify), which would ask for gzip on the client's
        // behalf and decode answers whose headers still name the encoding.
        .no_gzip()
        .no_brotli()
        .no_deflate()
        .no_zstd()
        .no_proxy()
        .build()
        .map_err(|e| Error::Client(Box::new(e)))
}

/// Which provider a path belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    /// Anthropic's Messages API (`/v1/messages`, `/v1/messages/count_tokens`, `/v1/messages/batches`…);
    /// everything else is OpenAI's or an OpenAI-compatible server's.
    pub(crate) fn of(path: &str) -> Provider {
        match path == "/v1/messages" || path.starts_with("/v1/messages/") || path.starts_with("/v1/messages?")
        {
            true => Provider::Anthropic,
            false => Provider::OpenAi,
        }
    }
}

/// The upstream URL for `path_and_query`: the base, then the path; a base ending in `/v1`
/// takes a path starting with `/v1/` without repeating it.
pub(crate) fn upstream_url(base: &str, path_and_query: &str) -> String {
    let base = base.trim_end_matches('/');
    match (base.ends_with("/v1"), path_and_query.strip_prefix("/v1")) {
        (true, Some(rest)) if rest.starts_with('/') || rest.starts_with('?') || rest.is_empty() => {
            format!("{base}{rest}")
        }
        _ => format!("{base}{path_and_query}"),
    }
}

/// Headers that concern one hop, not the request: never forwarded, either way. (`host` and
/// `content-length` are set anew for the upstream.)
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// `headers` less the hop-by-hop ones, those the `Connection` header names, and `also`.
fn end_to_end(headers: &HeaderMap, also: &[&str]) -> HeaderMap {
    let named: Vec<String> = headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let name_str = name.as_str();
        if HOP_BY_HOP.contains(&name_str) || also.contains(&name_str) || named.iter().any(|n| n == name_str) {
            continue;
        }
        kept.append(name.clone(), value.clone());
    }
    kept
}

/// The proxy's own answer: a status and a JSON error in both providers' shape.
pub(crate) fn answer(status: StatusCode, kind: &str, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({
        "type": "error",
        "error": { "type": kind, "message": message, "source": "compaction-proxy" },
    });
    let mut response = Response::new(ProxyBody::full(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Whether the client presented the token, compared in time independent of where it differs.
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers.get(hyper::header::PROXY_AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some(given) = given.strip_prefix("Bearer ").or_else(|| given.strip_prefix("bearer ")) else {
        return false;
    };
    let (given, token) = (given.trim().as_bytes(), token.as_bytes());
    let differ = given.iter().zip(token).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    given.len() == token.len() && differ == 0
}

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Result<Response<ProxyBody>, Infallible> {
    Ok(respond(&shared, request).await)
}

async fn respond(shared: &Arc<Shared>, request: Request<Incoming>) -> Response<ProxyBody> {
    let settings = &shared.settings;
    if let Some(token) = &settings.remote_token {
        if !authorized(request.headers(), token) {
            shared.metrics.failure(Failure::Unauthorized);
            return answer(
                StatusCode::PROXY_AUTHENTICATION_REQUIRED,
                "authentication_error",
                "this proxy requires Proxy-Authorization: Bearer <its token>",
            );
        }
    }
    if request.method() == hyper::Method::GET && request.uri().path() == "/metrics" {
        let mut response = Response::new(ProxyBody::full(shared.metrics.render()));
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        return response;
    }
    shared.metrics.request(match Endpoint::of(request.method(), request.uri().path()) {
        Some(Endpoint::ChatCompletions) => 0,
        Some(Endpoint::Responses | Endpoint::ResponsesInputTokens) => 1,
        Some(Endpoint::Messages | Endpoint::MessagesCountTokens) => 2,
        None => 3,
    });
    let Ok(permit) = shared.in_flight.clone().try_acquire_owned() else {
        shared.metrics.failure(Failure::Overloaded);
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded_error",
            "too many requests in flight at the proxy",
        );
    };
    let (parts, body) = request.into_parts();
    let body = match collect(body, settings.max_body_bytes).await {
        Ok(body) => body,
        Err(Collect::TooLarge) => {
            shared.metrics.failure(Failure::BodyTooLarge);
            return answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                &format!("the request body is over the proxy's limit of {} bytes", settings.max_body_bytes),
            );
        }
        // The client went, or sent a broken body: nobody reads this answer.
        Err(Collect::Failed) => {
            return answer(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "the request body could not be read",
            )
        }
    };
    let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let provider = Provider::of(path_and_query);
    let base = match provider {
        Provider::OpenAi => &settings.openai_upstream,
        Provider::Anthropic => &settings.anthropic_upstream,
    };
    let url = upstream_url(base, path_and_query);
    let logged = crate::bodylog::received(settings, &parts, &body);
    let (body, key) = match crate::compact::body(shared, &parts, body).await {
        Ok(forwarded) => forwarded,
        Err(response) => return *response,
    };
    crate::bodylog::forwarded(settings, logged, &body);
    forward(shared, parts, url, body, key, permit).await
}

/// Why a request body was not read whole.
enum Collect {
    TooLarge,
    Failed,
}

/// The most set aside for a body before its bytes arrive, whatever its `Content-Length` says.
const RESERVED: usize = 16 << 20;

/// The whole of `body`, at most `limit` bytes, in one buffer the size its `Content-Length`
/// says: each chunk is copied in and let go as it arrives, so a request's bytes are held once
/// (gathering the chunks and joining them at the end would hold them twice). A body said to be
/// larger than [`RESERVED`] gets that much at first, and more as it comes.
async fn collect(mut body: Incoming, limit: usize) -> Result<Bytes, Collect> {
    use http_body::Body as _;
    let expected = body.size_hint().exact().and_then(|n| usize::try_from(n).ok());
    if expected.is_some_and(|n| n > limit) {
        return Err(Collect::TooLarge);
    }
    let mut whole = bytes::BytesMut::with_capacity(expected.unwrap_or(0).min(RESERVED));
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|_| Collect::Failed)?.into_data() else { continue };
        if whole.len() + data.len() > limit {
            return Err(Collect::TooLarge);
        }
        whole.extend_from_slice(&data);
    }
    Ok(whole.freeze())
}

/// Sends the request on and relays the answer: its status, its headers and its body as it comes.
///
/// The usage the answer reports is remembered under `key` (the request's last prefix hash, and
/// what the request was made of) for its conversation's next request; its cache reads and
/// writes are counted.
async fn forward(
    shared: &Arc<Shared>,
    parts: hyper::http::request::Parts,
    url: String,
    body: Bytes,
    key: Option<crate::memory::CountKey>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Response<ProxyBody> {
    let settings = &shared.settings;
    // A conversation's answer is asked for uncompressed, so that the usage it reports can be
    // read as it passes (to anchor the next request); the client gets it as the upstream sent it.
    let headers = match key {
        Some(_) => end_to_end(&parts.headers, &["host", "content-length", "accept-encoding"]),
        None => end_to_end(&parts.headers, &["host", "content-length"]),
    };
    let sent = shared.client.request(parts.method, url).headers(headers).body(body).send();
    let upstream = match tokio::time::timeout(settings.upstream_timeout, sent).await {
        Ok(Ok(upstream)) => upstream,
        Ok(Err(error)) => {
            let (status, kind, failure) = match error.is_timeout() {
                true => (StatusCode::GATEWAY_TIMEOUT, "timeout_error", Failure::UpstreamTimeout),
                false => (StatusCode::BAD_GATEWAY, "upstream_error", Failure::UpstreamUnreachable),
            };
            shared.metrics.failure(failure);
            let message = format!("the upstream could not be reached: {}", chain(&error.without_url()));
            (settings.log)(&format!("proxy: {message}"));
            return answer(status, kind, &message);
        }
        Err(_) => {
            shared.metrics.failure(Failure::UpstreamTimeout);
            let message =
                format!("the upstream did not answer within {} s", settings.upstream_timeout.as_secs());
            (settings.log)(&format!("proxy: {message}"));
            return answer(StatusCode::GATEWAY_TIMEOUT, "timeout_error", &message);
        }
    };
    let status = upstream.status();
    shared.metrics.upstream_status(status.as_u16());
    let headers = end_to_end(upstream.headers(), &[]);
    let header = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let reader = UsageReader::new(
        header(hyper::header::CONTENT_TYPE).unwrap_or(""),
        header(hyper::header::CONTENT_ENCODING),
    )
    .filter(|_| status.is_success());
    let tap = reader.map(|reader| {
        let shared = shared.clone();
        let done = move |seen: Seen| {
            shared.metrics.cached(seen.cache_read, seen.cache_write);
            if let (Some(key), Some(count)) = (key, seen.context_tokens()) {
                let mut memory = shared.memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                memory.remember_count(key, usize::try_from(count).unwrap_or(usize::MAX));
            }
        };
        (reader, Box::new(done) as Box<dyn FnOnce(Seen) + Send>)
    });
    let mut response = Response::new(relay(upstream, settings.upstream_timeout, permit, tap));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// An error and its causes on one line.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_go_to_their_provider() {
        assert_eq!(Provider::of("/v1/messages"), Provider::Anthropic);
        assert_eq!(Provider::of("/v1/messages/count_tokens"), Provider::Anthropic);
        assert_eq!(Provider::of("/v1/messages?beta=true"), Provider::Anthropic);
        assert_eq!(Provider::of("/v1/messagesx"), Provider::OpenAi);
        assert_eq!(Provider::of("/v1/chat/completions"), Provider::OpenAi);
        assert_eq!(Provider::of("/v1/responses"), Provider::OpenAi);
    }

    #[test]
    fn upstream_urls_join_the_base_and_the_path() {
        assert_eq!(upstream_url("https://api.openai.com", "/v1/models"), "https://api.openai.com/v1/models");
        assert_eq!(
            upstream_url("http://h:8080/v1/", "/v1/chat/completions"),
            "http://h:8080/v1/chat/completions"
        );
        assert_eq!(upstream_url("http://h/v1", "/v1?x=1"), "http://h/v1?x=1");
        assert_eq!(upstream_url("http://h/api", "/v1/messages"), "http://h/api/v1/messages");
        assert_eq!(upstream_url("http://h/v1", "/health"), "http://h/v1/health");
    }

    #[test]
    fn only_loopback_is_served_without_a_token() {
        let settings = ProxySettings::default();
        for address in ["127.0.0.1:1", "[::1]:1"] {
            assert!(check_address(address.parse().expect("an address"), &settings).is_ok());
        }
        for address in ["0.0.0.0:1", "192.168.1.2:1", "[::]:1"] {
            let error = check_address(address.parse().expect("an address"), &settings).expect_err("refused");
            assert!(matches!(error, Error::RemoteWithoutToken { .. }));
        }
        let settings = ProxySettings::default().with_remote_clients("t");
        assert!(check_address("0.0.0.0:1".parse().expect("an address"), &settings).is_ok());
    }

    #[test]
    fn an_accepted_connection_writes_without_delay() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("a listener");
            let address = listener.local_addr().expect("an address");
            let client = tokio::net::TcpStream::connect(address);
            let (accepted_stream, _client) = tokio::join!(listener.accept(), client);
            let (stream, _) = accepted_stream.expect("a connection");
            accepted(&stream);
            assert!(stream.nodelay().expect("the option"), "TCP_NODELAY");
        });
    }

    #[test]
    fn only_the_exact_token_is_authorized() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers
                .insert(hyper::header::PROXY_AUTHORIZATION, HeaderValue::from_str(value).expect("a value"));
            headers
        };
        assert!(authorized(&with("Bearer s3cret"), "s3cret"));
        assert!(!authorized(&with("Bearer s3cre"), "s3cret"));
        assert!(!authorized(&with("Bearer s3cretx"), "s3cret"));
        assert!(!authorized(&with("Basic s3cret"), "s3cret"));
        assert!(!authorized(&HeaderMap::new(), "s3cret"));
    }
}
