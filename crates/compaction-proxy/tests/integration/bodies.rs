//! `--log-bodies`: without it no body text reaches the log, whatever happens to the request;
//! with it each body is logged as it came and as it was forwarded, every credential redacted.

use compaction_proxy::ProxySettings;
use serde_json::{json, Value};

use crate::compaction::{anthropic_request, hook_for, setup};
use crate::{bounded, client, Proxy};

const ANTHROPIC_KEY: &str = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-AAAA";
const OPENAI_KEY: &str = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789";
const MARKER: &str = "MARKER-the-users-own-words";

/// A Claude Code-shaped request large enough to compact under an 8,000-token window, whose
/// first message carries the user's words and, pasted into them, an OpenAI key and a bearer
/// token.
fn request() -> Vec<u8> {
    let mut request: Value = anthropic_request(8);
    request["messages"][0]["content"] =
        json!(format!("{MARKER}: my key is {OPENAI_KEY}, try Authorization: Bearer tok_0123456789abcdef"));
    serde_json::to_vec(&request).expect("serializes")
}

async fn send(proxy: &Proxy, path: &str, body: Vec<u8>) {
    let answer = client()
        .post(proxy.url(path))
        .header("x-api-key", ANTHROPIC_KEY)
        .header("authorization", format!("Bearer {OPENAI_KEY}"))
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), 200);
}

fn assert_no_credential(log: &[String]) {
    for line in log {
        for secret in [ANTHROPIC_KEY, OPENAI_KEY, "Zx9Yw8Vu7Ts6", "tok_0123456789abcdef"] {
            assert!(!line.contains(secret), "{secret} in {line}");
        }
    }
}

#[test]
fn without_the_option_no_body_reaches_the_log() {
    bounded(async {
        let settings = ProxySettings::default().with_compaction(hook_for(8_000));
        let (_openai, _anthropic, proxy) = setup(settings).await;
        send(&proxy, "/v1/messages", request()).await;
        send(&proxy, "/v1/chat/completions", b"{\"model\":\"gpt-4o\",\"messages\":5}".to_vec()).await;
        let log = proxy.log();
        assert_eq!(log.len(), 2, "a compaction and a warning: {log:?}");
        assert_no_credential(&log);
        for line in &log {
            for text in [MARKER, "Reading file", "line 3 of the output", "\"messages\""] {
                assert!(!line.contains(text), "{text} in {line}");
            }
        }
    });
}

#[test]
fn with_the_option_each_body_is_logged_as_received_and_as_forwarded_with_keys_redacted() {
    bounded(async {
        let settings = ProxySettings::default().with_compaction(hook_for(8_000)).with_log_bodies();
        let (_openai, anthropic, proxy) = setup(settings).await;
        send(&proxy, "/v1/messages", request()).await;
        send(&proxy, "/v1/models", Vec::new()).await;
        let log = proxy.log();
        assert_no_credential(&log);
        let received: Vec<&String> = log.iter().filter(|l| l.contains(" received: ")).collect();
        assert_eq!(received.len(), 2, "{log:?}");
        let first = received[0];
        assert!(
            first.starts_with("proxy: body #") && first.contains(" received: POST /v1/messages, headers {")
        );
        for text in [
            MARKER,
            "x-api-key: [REDACTED]",
            "authorization: [REDACTED]",
            "anthropic-version: 2023-06-01",
            "my key is sk-[REDACTED]",
            "Bearer [REDACTED]",
            "line 3 of the output",
        ] {
            assert!(first.contains(text), "{text} in {first}");
        }
        // The forwarded body is the compacted one, redacted the same way.
        let forwarded =
            log.iter().find(|l| l.contains(" forwarded, ")).expect("the compacted body is logged");
        let upstream = String::from_utf8(anthropic.received()[0].body.clone()).expect("UTF-8");
        let redacted =
            upstream.replace(OPENAI_KEY, "sk-[REDACTED]").replace("tok_0123456789abcdef", "[REDACTED]");
        assert!(forwarded.ends_with(&format!("{} bytes: {redacted}", upstream.len())), "{forwarded}");
        assert!(
            !forwarded.contains("line 3 of the output"),
            "the pruned result is not in the forwarded body"
        );
        // A request passed through is said to be forwarded unchanged.
        assert!(received[1].contains(" received: POST /v1/models, ") && received[1].ends_with(", 0 bytes: "));
        assert!(log.last().is_some_and(|l| l.ends_with(" forwarded unchanged")), "{log:?}");
    });
}
