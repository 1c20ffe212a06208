//! Requests passed through unchanged: routing by path, credentials to their own upstream only,
//! streamed answers relayed as they come, errors, limits and clients that go.

use std::time::Duration;

use compaction_proxy::ProxySettings;

use crate::upstream::{Upstream, ANSWER, EVENTS};
use crate::{bounded, client, Proxy};

/// Two upstreams and a proxy in front of them.
async fn setup(settings: ProxySettings) -> (Upstream, Upstream, Proxy) {
    let openai = Upstream::start().await;
    let anthropic = Upstream::start().await;
    let settings = settings.with_openai_upstream(openai.url()).with_anthropic_upstream(anthropic.url());
    let proxy = Proxy::start(settings).await;
    (openai, anthropic, proxy)
}

#[test]
fn each_path_goes_to_its_upstream_with_the_clients_own_credentials_only() {
    bounded(async {
        let (openai, anthropic, proxy) = setup(ProxySettings::default()).await;
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false}"#;
        let answer = client()
            .post(proxy.url("/v1/chat/completions?x=1"))
            .header("authorization", "Bearer sk-openai")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.text().await.expect("a body"), ANSWER);
        let answer = client()
            .post(proxy.url("/v1/messages/count_tokens"))
            .header("x-api-key", "sk-ant")
            .header("anthropic-version", "2023-06-01")
            .body("{}")
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200);

        let to_openai = openai.received();
        let to_anthropic = anthropic.received();
        assert_eq!(to_openai.len(), 1);
        assert_eq!(to_anthropic.len(), 1);
        assert_eq!(to_openai[0].method, "POST");
        assert_eq!(to_openai[0].path, "/v1/chat/completions?x=1");
        assert_eq!(to_openai[0].body, body.as_bytes());
        assert_eq!(to_openai[0].header("authorization"), Some("Bearer sk-openai"));
        assert_eq!(to_openai[0].header("x-api-key"), None);
        assert_eq!(to_anthropic[0].path, "/v1/messages/count_tokens");
        assert_eq!(to_anthropic[0].header("x-api-key"), Some("sk-ant"));
        assert_eq!(to_anthropic[0].header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(to_anthropic[0].header("authorization"), None);
        assert_eq!(to_anthropic[0].header("host"), Some(anthropic.address.to_string().as_str()));
        // Nothing the proxy logs holds a credential.
        assert!(proxy.log().iter().all(|line| !line.contains("sk-")), "{:?}", proxy.log());
    });
}

#[test]
fn a_streamed_answer_comes_back_event_by_event_byte_for_byte() {
    bounded(async {
        let (_openai, anthropic, proxy) = setup(ProxySettings::default()).await;
        let mut answer = client()
            .post(proxy.url("/v1/messages"))
            .header("x-test", "stream")
            .body(r#"{"stream":true}"#)
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.headers()["content-type"], "text/event-stream");
        let mut received = Vec::new();
        // Each event arrives before the upstream is even allowed to send the next one.
        for (i, event) in EVENTS.iter().enumerate() {
            while received.len() < EVENTS[..=i].iter().map(|e| e.len()).sum::<usize>() {
                let chunk = answer.chunk().await.expect("a chunk").expect("not the end yet");
                received.extend_from_slice(&chunk);
            }
            assert!(received.ends_with(event.as_bytes()));
            anthropic.release.notify_one();
        }
        assert!(answer.chunk().await.expect("the end").is_none());
        assert_eq!(received, EVENTS.concat().as_bytes());
    });
}

#[test]
fn upstream_errors_keep_their_status_headers_and_body() {
    bounded(async {
        let (_openai, _anthropic, proxy) = setup(ProxySettings::default()).await;
        let answer = client()
            .post(proxy.url("/v1/messages"))
            .header("x-test", "429")
            .body("{}")
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 429);
        assert_eq!(answer.headers()["retry-after"], "7");
        assert!(answer.text().await.expect("a body").contains("rate_limit_error"));
        // An upstream that closes without answering: 502 from the proxy, saying so.
        let answer = client()
            .post(proxy.url("/v1/messages"))
            .header("x-test", "reset")
            .body("{}")
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 502);
        assert!(answer.text().await.expect("a body").contains("compaction-proxy"));
    });
}

#[test]
fn an_upstream_that_does_not_answer_in_time_gives_504_and_is_let_go() {
    bounded(async {
        let settings = ProxySettings::default().with_upstream_timeout(Duration::from_millis(300));
        let (openai, _anthropic, proxy) = setup(settings).await;
        let answer =
            client().get(proxy.url("/v1/models")).header("x-test", "hang").send().await.expect("an answer");
        assert_eq!(answer.status(), 504);
        assert!(openai.saw_client_go().await, "the upstream request was dropped");
    });
}

#[test]
fn a_client_that_goes_mid_stream_cancels_the_upstream_request() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default()).await;
        let mut answer = client()
            .post(proxy.url("/v1/chat/completions"))
            .header("x-test", "tick")
            .body("{}")
            .send()
            .await
            .expect("an answer");
        assert!(answer.chunk().await.expect("a chunk").is_some());
        drop(answer);
        assert!(openai.saw_client_go().await, "the upstream request was dropped");
    });
}

#[test]
fn a_client_that_goes_before_the_answer_cancels_the_upstream_request() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default()).await;
        let client = crate::client_builder().timeout(Duration::from_millis(300)).build().expect("a client");
        let gave_up =
            client.post(proxy.url("/v1/chat/completions")).header("x-test", "hang").body("{}").send().await;
        assert!(gave_up.is_err_and(|e| e.is_timeout()));
        assert!(openai.saw_client_go().await, "the upstream request was dropped");
    });
}

#[test]
fn a_body_over_the_limit_is_refused_and_not_forwarded() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default().with_max_body_bytes(1000)).await;
        let answer = client()
            .post(proxy.url("/v1/chat/completions"))
            .body(vec![b' '; 2000])
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 413);
        let answer = client()
            .post(proxy.url("/v1/chat/completions"))
            .body(vec![b' '; 1000])
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200);
        assert_eq!(openai.received().len(), 1);
    });
}

/// Sends `body` to the proxy as a chunked request (no `Content-Length`), in `chunk`-byte
/// chunks, on a connection of its own; the answer's status.
async fn post_chunked(proxy: &Proxy, body: &[u8], chunk: usize) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(proxy.address).await.expect("a connection");
    let mut request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        proxy.address
    )
    .into_bytes();
    for piece in body.chunks(chunk) {
        request.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        request.extend_from_slice(piece);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    // The proxy may answer 413 and close before it has read everything: what is left unsent
    // does not matter then.
    let _ = stream.write_all(&request).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn a_chunked_body_is_read_whole_up_to_the_limit_and_refused_past_it() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default().with_max_body_bytes(1000)).await;
        // (body size, chunk size, the answer's status)
        let cases = [(1000, 7, 200), (1000, 1000, 200), (1001, 7, 413), (1001, 1001, 413), (0, 1, 200)];
        let mut forwarded = Vec::new();
        for (size, chunk, status) in cases {
            let body: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
            assert_eq!(post_chunked(&proxy, &body, chunk).await, status, "{size} bytes in chunks of {chunk}");
            if status == 200 {
                forwarded.push(body);
            }
        }
        let received: Vec<Vec<u8>> = openai.received().into_iter().map(|r| r.body).collect();
        assert_eq!(received, forwarded, "the bodies under the limit went through byte for byte");
    });
}

#[test]
fn a_body_larger_than_the_proxy_sets_aside_up_front_goes_through_whole() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default()).await;
        // 17 MiB, over the 16 MiB set aside from the Content-Length, under the 64 MiB limit.
        let body: Vec<u8> = (0..17usize << 20).map(|i| b'a' + (i % 26) as u8).collect();
        let answer = client()
            .post(proxy.url("/v1/chat/completions"))
            .body(body.clone())
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200);
        let received = openai.received();
        assert_eq!(received.len(), 1);
        assert!(received[0].body == body, "the body went through byte for byte");
    });
}

#[test]
fn with_remote_clients_every_client_presents_the_token_which_is_not_forwarded() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default().with_remote_clients("t0ken")).await;
        let answer = client().get(proxy.url("/v1/models")).send().await.expect("an answer");
        assert_eq!(answer.status(), 407);
        let answer = client()
            .get(proxy.url("/v1/models"))
            .header("proxy-authorization", "Bearer wrong")
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 407);
        let answer = client()
            .get(proxy.url("/v1/models"))
            .header("proxy-authorization", "Bearer t0ken")
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200);
        let received = openai.received();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].header("proxy-authorization"), None);
    });
}

#[test]
fn an_upstream_that_is_not_a_url_is_refused_before_serving() {
    bounded(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let settings = ProxySettings::default().with_openai_upstream("api.openai.com");
        let error = compaction_proxy::serve(listener, settings).await.expect_err("refused");
        assert!(matches!(error, compaction_proxy::Error::Upstream { .. }), "{error}");
    });
}

#[test]
fn requests_beyond_the_limit_in_flight_get_503_and_one_that_ends_frees_its_place() {
    bounded(async {
        let settings =
            ProxySettings::default().with_max_concurrent(1).with_upstream_timeout(Duration::from_millis(500));
        let (openai, _anthropic, proxy) = setup(settings).await;
        let url = proxy.url("/v1/models");
        let hanging = tokio::spawn(async move { client().get(url).header("x-test", "hang").send().await });
        // Wait until the upstream holds the first request.
        for _ in 0..100 {
            if !openai.received().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let answer = client().get(proxy.url("/v1/models")).send().await.expect("an answer");
        assert_eq!(answer.status(), 503);
        assert_eq!(hanging.await.expect("joins").expect("an answer").status(), 504);
        let answer = client().get(proxy.url("/v1/models")).send().await.expect("an answer");
        assert_eq!(answer.status(), 200);
    });
}

#[test]
fn a_redirect_goes_back_to_the_client_and_the_credentials_to_no_other_host() {
    bounded(async {
        let (openai, anthropic, proxy) = setup(ProxySettings::default()).await;
        let elsewhere = format!("redirect:{}/v1/stolen", openai.url());
        let answer = client()
            .post(proxy.url("/v1/messages"))
            .header("x-api-key", "sk-ant")
            .header("x-test", elsewhere)
            .body("{}")
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 307);
        assert_eq!(answer.headers()["location"], format!("{}/v1/stolen", openai.url()));
        assert_eq!(anthropic.received().len(), 1);
        assert!(openai.received().is_empty(), "the redirect was not followed");
    });
}

#[test]
fn an_upstream_that_breaks_off_mid_stream_breaks_the_clients_stream_off_too() {
    bounded(async {
        let (_openai, anthropic, proxy) = setup(ProxySettings::default()).await;
        let mut answer = client()
            .post(proxy.url("/v1/messages"))
            .header("x-test", "cut")
            .body("{}")
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200);
        let mut received = Vec::new();
        let ended = loop {
            match answer.chunk().await {
                Ok(Some(chunk)) => received.extend_from_slice(&chunk),
                Ok(None) => break Ok(()),
                Err(error) => break Err(error),
            }
        };
        assert_eq!(received, EVENTS[0].as_bytes());
        assert!(ended.is_err(), "the client sees the stream cut, not ended");
        assert_eq!(anthropic.received().len(), 1);
    });
}

#[test]
fn many_streamed_conversations_at_once_with_large_bodies_all_go_through() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default()).await;
        // 64 requests of 1 MB at once, each answered with a stream; bounded for a debug build
        // on two shared cores.
        let body = vec![b'x'; 1 << 20];
        let requests = (0..64).map(|_| {
            let (url, body) = (proxy.url("/v1/chat/completions"), body.clone());
            tokio::spawn(async move {
                let answer =
                    client().post(url).header("x-test", "tick-3").body(body).send().await.expect("an answer");
                (answer.status(), answer.bytes().await.expect("a body"))
            })
        });
        for request in requests.collect::<Vec<_>>() {
            let (status, bytes) = request.await.expect("joins");
            assert_eq!(status, 200);
            assert_eq!(bytes, "data: {\"tick\":true}\n\n".repeat(3).as_bytes());
        }
        let received = openai.received();
        assert_eq!(received.len(), 64);
        assert!(received.iter().all(|r| r.body == body));
    });
}
