//! A provider that misbehaves in ways that could hold a call for minutes or leak a secret: a
//! reply that never finishes or trickles in, a `Retry-After` far in the future (in seconds, as a
//! date in 2100, in milliseconds), retries that would outlast the call's deadline, a password in
//! the base URL and keys echoed in an error body. Every test is bounded to a second or two.

use std::time::{Duration, Instant};

use compaction_llm::{
    AnthropicTokenCounter, ClientSettings, Error, OpenAIChatGenerator, OpenAITokenCounter, WaitLimit,
};
use compaction_model::Message;
use compaction_tokens::TokenCounter;
use serde_json::json;

use crate::server::{closed_port_url, Answer, Recorded, Server};
use crate::settings;

fn generator(settings: ClientSettings) -> OpenAIChatGenerator {
    OpenAIChatGenerator::new("tiny", settings).unwrap()
}

/// Runs `call`, asserting it ends within `bound`.
fn within<T>(bound: Duration, call: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let value = call();
    let took = started.elapsed();
    assert!(took < bound, "took {took:?}, more than {bound:?}");
    (value, took)
}

#[test]
fn a_reply_that_never_finishes_is_cut_at_the_timeout_of_each_attempt() {
    for answer in [
        Answer::Stall { start: "{\"input_tokens\": 1".into() },
        Answer::Trickle { every: Duration::from_millis(50) },
    ] {
        let server = Server::scripted(vec![answer.clone()]);
        let settings =
            settings(server.url("/v1")).with_timeout(Duration::from_millis(400)).with_max_retries(1);
        let counter = OpenAITokenCounter::new("m", settings).unwrap();
        let (error, took) = within(Duration::from_millis(1500), || {
            counter.try_count(&[Message::user("Hi")], &[]).unwrap_err()
        });
        assert!(took >= Duration::from_millis(700), "{answer:?}: both attempts ran out their time: {took:?}");
        assert_eq!(server.requests().len(), 2, "{answer:?}");
        let source = std::error::Error::source(&error).expect("the client's error");
        assert!(
            matches!(source.downcast_ref::<Error>(), Some(Error::Timeout { .. })),
            "{answer:?}: {source:?}"
        );
    }
}

#[test]
fn a_retry_after_beyond_the_timeout_fails_at_once_and_says_so() {
    let limited = json!({"error": {"message": "Rate limit reached", "type": "requests"}});
    for (header, value, asked) in [
        ("retry-after", "100000", "100000 s"),
        ("retry-after", "Fri, 01 Jan 2100 00:00:00 GMT", " s"),
        ("retry-after-ms", "100000000", "100000 s"),
        ("retry-after-ms", "1e300", " s"),
        ("retry-after", "inf", " s"),
    ] {
        let server = Server::scripted(vec![Answer::json(429, limited.clone()).with_header(header, value)]);
        let settings = settings(server.url("/v1")).with_timeout(Duration::from_secs(5)).with_max_retries(5);
        let (error, _) = within(Duration::from_secs(1), || {
            generator(settings).generate_blocking(&[Message::user("Hi")]).unwrap_err()
        });
        assert_eq!(server.requests().len(), 1, "{header}: {value}");
        let Error::RetryAfter { status: 429, limit: WaitLimit::Timeout(limit), asked: wait, .. } = &error
        else {
            panic!("{header}: {value}: {error:?}")
        };
        assert_eq!(*limit, Duration::from_secs(5));
        assert!(*wait > Duration::from_secs(99_999), "{wait:?}");
        let shown = error.to_string();
        assert!(shown.contains("HTTP 429: requests: Rate limit reached"), "{shown}");
        assert!(shown.contains("the server asked to retry after ") && shown.contains(asked), "{shown}");
        assert!(shown.ends_with(", beyond the timeout of 5 s"), "{shown}");
    }
}

#[test]
fn a_retry_after_within_the_limits_is_honoured_and_one_beyond_them_is_named() {
    let busy = json!({"error": {"message": "busy"}});
    let server = Server::scripted(vec![
        Answer::json(503, busy.clone()).with_header("retry-after-ms", "300"),
        Answer::json(200, json!({"input_tokens": 3})),
    ]);
    let counter = OpenAITokenCounter::new("m", settings(server.url("/v1"))).unwrap();
    let (count, took) = within(Duration::from_secs(2), || counter.try_count(&[Message::user("Hi")], &[]));
    assert_eq!(count.unwrap(), 3);
    assert!(took >= Duration::from_millis(300), "{took:?}");

    let server = Server::scripted(vec![Answer::json(503, busy.clone()).with_header("retry-after", "3")]);
    let limited = settings(server.url("/v1")).with_max_retry_after(Duration::from_secs(2));
    let error = generator(limited).generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert!(error.to_string().ends_with("retry after 3 s, beyond the longest wait allowed, 2 s"), "{error}");

    // Within the timeout, but not within what is left of the call's deadline.
    let server = Server::scripted(vec![Answer::json(503, busy).with_header("retry-after", "2")]);
    let settings = settings(server.url("/v1")).with_deadline(Duration::from_secs(1));
    let (error, _) = within(Duration::from_secs(1), || {
        generator(settings).generate_blocking(&[Message::user("Hi")]).unwrap_err()
    });
    assert!(matches!(&error, Error::RetryAfter { limit: WaitLimit::Deadline(_), .. }), "{error:?}");
    assert!(error.to_string().contains("left before the call's deadline"), "{error}");
}

#[test]
fn retries_end_at_the_deadline_of_attempts_times_timeout() {
    // Each attempt takes its whole timeout (0.3 s), each wait 0.5 to 1 s: four attempts and
    // three waits would take more than 3 s; the call's deadline, 4 × 0.3 s, ends it by 1.2 s.
    let server = Server::scripted(vec![Answer::Stall { start: String::new() }]);
    let settings = settings(server.url("/v1"))
        .with_timeout(Duration::from_millis(300))
        .with_max_retries(3)
        .with_backoff(Duration::from_secs(1), Duration::from_secs(1));
    assert_eq!(settings.call_deadline(), Duration::from_millis(1200));
    let (error, _) = within(Duration::from_millis(1600), || {
        generator(settings).generate_blocking(&[Message::user("Hi")]).unwrap_err()
    });
    let Error::Timeout { call, .. } = &error else { panic!("{error:?}") };
    assert!(call.attempt < 4 && call.deadline == Some(Duration::from_millis(1200)), "{call:?}");
    assert!(error.to_string().contains(", the last that fit in the call's deadline of 1.2 s"), "{error}");
}

#[test]
fn secrets_in_the_base_url_and_in_an_echoed_body_are_hidden() {
    let key = "key-the-server-echoes-1234";
    let echo = format!(
        "Incorrect API key provided: {key}. Got header Authorization: Bearer {key}; try sk-proj-0123456789abcdef"
    );
    let server = Server::scripted(vec![Answer::json(401, json!({"error": {"message": echo}}))]);
    let url = server.url("/v1").replace("http://", "http://me:pass-w0rd-secret@");
    let settings = settings(url).with_api_key(key);
    let error = generator(settings.clone()).generate_blocking(&[Message::user("Hi")]).unwrap_err();
    let shown = chain(&error);
    assert!(
        !shown.contains("pass-w0rd-secret") && !shown.contains(key) && !shown.contains("0123456789"),
        "{shown}"
    );
    assert!(shown.contains("http://***@127.0.0.1:"), "{shown}");
    assert!(
        shown.contains("Incorrect API key provided: ***. Got header Authorization: Bearer ***; try sk-***"),
        "{shown}"
    );
    assert!(!format!("{:?}", generator(settings)).contains("pass-w0rd-secret"));

    // A body that is not JSON, echoed as the start of a reply.
    let server = Server::scripted(vec![Answer::raw(200, &format!("<html>key {key}</html>"))]);
    let settings = crate::settings(server.url("/v1")).with_api_key(key);
    let shown = chain(&generator(settings).generate_blocking(&[Message::user("Hi")]).unwrap_err());
    assert!(shown.contains("<html>key ***</html>") && !shown.contains(key), "{shown}");

    // A reply of the wrong shape, quoted in the error.
    let reply =
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": {"echo": key}}}]});
    let server = Server::scripted(vec![Answer::json(200, reply)]);
    let settings = crate::settings(server.url("/v1")).with_api_key(key);
    let error = generator(settings).generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert!(
        matches!(&error, Error::UnexpectedReply { reason, .. } if reason.contains("\"echo\":\"***\"")),
        "{error:?}"
    );

    // A connection that fails, and a URL refused before any call.
    let url = closed_port_url("/v1").replace("http://", "http://me:pass-w0rd-secret@");
    let shown = chain(
        &generator(crate::settings(url).with_max_retries(0))
            .generate_blocking(&[Message::user("Hi")])
            .unwrap_err(),
    );
    assert!(!shown.contains("pass-w0rd-secret"), "{shown}");
    let error = OpenAIChatGenerator::new("m", crate::settings("http://me:pass-w0rd-secret@h/v1?x=1".into()))
        .unwrap_err();
    assert!(!chain(&error).contains("pass-w0rd-secret"), "{error}");
}

/// A server that refuses every call and echoes in its error what it received: every header (the
/// `Authorization: Basic` a client makes of the base URL's `user:password` among them), and the
/// key without its `sk-` prefix.
fn echoing_server(key: &'static str) -> Server {
    Server::start(move |request: &Recorded| {
        let headers: Vec<String> = request.headers.iter().map(|(n, v)| format!("'{n}': '{v}'")).collect();
        let message = format!("bad key. headers={{{}}} key={}", headers.join(", "), &key[3..]);
        Answer::json(401, json!({"error": {"message": message}}))
    })
}

/// The secrets of [`echoing_server`]'s calls, and how the server may echo them.
const KEY: &str = "sk-KEYSECRET123";
const ECHOED: [&str; 4] = ["KEYSECRET123", "Pw5ecret", "dXNlcjpQdzVlY3JldA", "user:Pw5ecret"];

/// Both providers' counters, with [`KEY`] and a base URL holding `user:Pw5ecret`, calling an
/// [`echoing_server`] (kept alive by the caller).
fn echoed_counters() -> (Server, OpenAITokenCounter, AnthropicTokenCounter) {
    let server = echoing_server(KEY);
    let url = server.url("/v1").replace("http://", "http://user:Pw5ecret@");
    let settings = settings(url).with_api_key(KEY).with_max_retries(0);
    let openai = OpenAITokenCounter::new("m", settings.clone()).unwrap();
    let anthropic = AnthropicTokenCounter::new("m", settings).unwrap();
    (server, openai, anthropic)
}

/// Each provider's error shows the server's echo, and none of [`ECHOED`].
fn assert_nothing_echoed_is_shown<E: std::error::Error>(errors: [(&str, E); 2]) {
    for (provider, error) in errors {
        let shown = chain(&error);
        assert!(shown.contains("HTTP 401: bad key. headers="), "{provider}: not the echo");
        for (index, echoed) in ECHOED.iter().enumerate() {
            // Never the line itself in the message: it may hold the secret.
            assert!(!shown.contains(echoed), "{provider}: secret {index} shown");
        }
    }
}

#[test]
fn secrets_a_server_echoes_with_the_headers_it_got_are_hidden_for_both_providers() {
    let (server, openai, anthropic) = echoed_counters();
    assert_nothing_echoed_is_shown([
        ("openai", openai.try_count(&[Message::user("Hi")], &[]).unwrap_err()),
        ("anthropic", anthropic.try_count(&[Message::user("Hi")], &[]).unwrap_err()),
    ]);
    // The Anthropic client sends the URL's credentials as `Basic`, and the server echoed them.
    assert!(server
        .requests()
        .iter()
        .any(|r| r.header("authorization").is_some_and(|a| a.starts_with("Basic "))));
}

#[cfg(feature = "async")]
#[tokio::test]
async fn secrets_a_server_echoes_to_the_async_clients_are_hidden() {
    let (_server, openai, anthropic) = echoed_counters();
    assert_nothing_echoed_is_shown([
        ("openai", openai.count_async(&[Message::user("Hi")], &[]).await.unwrap_err()),
        ("anthropic", anthropic.count_async(&[Message::user("Hi")], &[]).await.unwrap_err()),
    ]);
}

#[test]
fn a_malformed_base_url_is_shown_without_its_user_information() {
    for url in
        ["user:Pw5ecret@127.0.0.1:1", "http:/user:Pw5ecret@127.0.0.1:1/v1", "http://user:Pw5ecret@h/v1?x"]
    {
        let error = OpenAITokenCounter::new("m", settings(url.to_owned()).with_api_key(KEY)).unwrap_err();
        let shown = chain(&error);
        assert!(
            matches!(error, Error::InvalidBaseUrl { .. }) && shown.contains("***@"),
            "{url:?} not masked"
        );
        assert!(!shown.contains("Pw5ecret") && !shown.contains("user"), "a secret of {url:?} shown");
    }
}

/// An error and its sources, as a reporter prints them.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[cfg(feature = "async")]
#[tokio::test]
async fn the_async_path_is_bounded_alike() {
    let server = Server::scripted(vec![Answer::Stall { start: "{\"choices\"".into() }]);
    let settings = settings(server.url("/v1")).with_timeout(Duration::from_millis(300)).with_max_retries(1);
    let started = Instant::now();
    let error = generator(settings).generate_async(&[Message::user("Hi")]).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(1200), "{:?}", started.elapsed());
    assert!(matches!(&error, Error::Timeout { call, .. } if call.attempt == 2), "{error:?}");

    let server = Server::scripted(vec![
        Answer::json(429, json!({"error": {"message": "later"}})).with_header("retry-after", "100000")
    ]);
    let started = Instant::now();
    let error = generator(crate::settings(server.url("/v1")))
        .generate_async(&[Message::user("Hi")])
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert!(matches!(&error, Error::RetryAfter { limit: WaitLimit::Timeout(_), .. }), "{error:?}");
}
