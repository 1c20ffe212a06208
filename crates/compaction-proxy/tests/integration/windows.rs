//! Compacting by model: the window is the one the user gave for the request's model, else the
//! bundled table's (dated snapshots included); a model with neither goes through uncompacted with
//! one warning per model (or is refused when failing closed); a fixed window always wins.

use std::sync::{Arc, Mutex};

use compaction_formats::Format;
use compaction_proxy::ProxySettings;
use serde_json::Value;

use crate::compaction::{anthropic_request, compacted_directly_with, hook_for, openai_request, post, setup};
use crate::{bounded, client};

/// Settings compacting by model, with the windows hooks were built for recorded.
fn by_model() -> (ProxySettings, Arc<Mutex<Vec<usize>>>) {
    let built = Arc::new(Mutex::new(Vec::new()));
    let seen = built.clone();
    let settings = ProxySettings::default().with_compaction_by_model(move |window| {
        seen.lock().expect("not poisoned").push(window);
        Ok(hook_for(window))
    });
    (settings, built)
}

fn with_model(mut request: Value, model: &str) -> Vec<u8> {
    request["model"] = model.into();
    serde_json::to_vec(&request).expect("serializes")
}

async fn metrics(proxy: &crate::Proxy) -> String {
    let answer = client().get(proxy.url("/metrics")).send().await.expect("an answer");
    answer.text().await.expect("a body")
}

#[test]
fn a_models_own_window_compacts_its_requests_as_a_hook_for_that_window_would() {
    bounded(async {
        let (settings, built) = by_model();
        let (openai, anthropic, proxy) = setup(settings.with_model_window("local-coder", 8_000)).await;
        let body = with_model(anthropic_request(8), "local-coder");
        assert_eq!(post(&proxy, "/v1/messages", body.clone()).await.status(), 200);
        assert_eq!(
            anthropic.received()[0].body,
            compacted_directly_with(hook_for(8_000), &body, Format::Anthropic)
        );
        // A dated snapshot of the name takes its window too; the hook is built once.
        let body = with_model(openai_request(8), "local-coder-2025-01-31");
        assert_eq!(post(&proxy, "/v1/chat/completions", body.clone()).await.status(), 200);
        assert_eq!(
            openai.received()[0].body,
            compacted_directly_with(hook_for(8_000), &body, Format::OpenAi)
        );
        assert_eq!(*built.lock().expect("not poisoned"), [8_000]);
        let log = proxy.log();
        assert!(log.len() == 2 && log.iter().all(|l| l.contains(": compacted: ")), "{log:?}");
    });
}

#[test]
fn a_providers_model_and_its_dated_snapshots_take_the_bundled_tables_window() {
    bounded(async {
        let (settings, built) = by_model();
        let (openai, anthropic, proxy) = setup(settings).await;
        for (model, path) in [
            ("claude-sonnet-4-5-20250929", "/v1/messages"),
            ("claude-opus-4-6", "/v1/messages"),
            ("gpt-4o-2024-08-06", "/v1/chat/completions"),
            ("gpt-4.1", "/v1/chat/completions"),
        ] {
            let request = if path == "/v1/messages" { anthropic_request(8) } else { openai_request(8) };
            let body = with_model(request, model);
            assert_eq!(post(&proxy, path, body).await.status(), 200, "{model}");
        }
        // Under these windows 8 results are far below the threshold: sent as they came.
        assert_eq!(anthropic.received().len() + openai.received().len(), 4);
        assert_eq!(*built.lock().expect("not poisoned"), [200_000, 1_000_000, 128_000, 1_047_576]);
        assert!(proxy.log().is_empty(), "{:?}", proxy.log());
    });
}

#[test]
fn a_model_without_a_window_goes_through_unchanged_with_one_warning_per_model() {
    bounded(async {
        let (settings, built) = by_model();
        let (openai, anthropic, proxy) = setup(settings).await;
        let mystery = with_model(anthropic_request(8), "mystery-70b");
        let other = with_model(openai_request(8), "gpt-5.4-preview-x");
        let nameless = {
            let mut request = openai_request(8);
            request.as_object_mut().expect("an object").remove("model");
            serde_json::to_vec(&request).expect("serializes")
        };
        for _ in 0..3 {
            assert_eq!(post(&proxy, "/v1/messages", mystery.clone()).await.status(), 200);
        }
        assert_eq!(post(&proxy, "/v1/chat/completions", other.clone()).await.status(), 200);
        assert_eq!(post(&proxy, "/v1/chat/completions", nameless.clone()).await.status(), 200);
        assert!(anthropic.received().iter().all(|r| r.body == mystery));
        let received = openai.received();
        assert_eq!((&received[0].body, &received[1].body), (&other, &nameless));
        assert!(built.lock().expect("not poisoned").is_empty());
        let log = proxy.log();
        assert_eq!(
            log,
            [
                "proxy: warning: the /v1/messages request's model \"mystery-70b\" has no known context window; \
                 forwarded unchanged",
                "proxy: warning: the /v1/chat/completions request's model \"gpt-5.4-preview-x\" has no known \
                 context window; forwarded unchanged",
                "proxy: warning: the /v1/chat/completions request's model (none given) has no known context \
                 window; forwarded unchanged",
            ]
        );
        let text = metrics(&proxy).await;
        assert!(
            text.lines().any(|l| l == "compaction_proxy_errors_total{kind=\"unknown_model\"} 5"),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l == "compaction_proxy_errors_total{kind=\"not_compacted\"} 0"),
            "{text}"
        );
    });
}

#[test]
fn failing_closed_a_model_without_a_window_is_answered_502() {
    bounded(async {
        let (settings, _built) = by_model();
        let (_openai, anthropic, proxy) = setup(settings.with_fail_closed()).await;
        let answer = post(&proxy, "/v1/messages", with_model(anthropic_request(8), "mystery-70b")).await;
        assert_eq!(answer.status(), 502);
        let text = answer.text().await.expect("a body");
        assert!(text.contains("compaction_error") && text.contains("mystery-70b"), "{text}");
        assert!(anthropic.received().is_empty());
    });
}

#[test]
fn a_body_whose_model_cannot_be_read_is_unreadable() {
    bounded(async {
        let (settings, _built) = by_model();
        let (openai, _anthropic, proxy) = setup(settings).await;
        let body = b"{\"model\": \"gpt-4o\", \"messages\": [".to_vec();
        assert_eq!(post(&proxy, "/v1/chat/completions", body.clone()).await.status(), 200);
        assert_eq!(openai.received()[0].body, body);
        let text = metrics(&proxy).await;
        assert!(
            text.lines().any(|l| l == "compaction_proxy_errors_total{kind=\"body_unreadable\"} 1"),
            "{text}"
        );
    });
}

#[test]
fn a_fixed_window_wins_over_the_model() {
    bounded(async {
        let settings =
            ProxySettings::default().with_compaction(hook_for(8_000)).with_model_window("mystery-70b", 1);
        let (_openai, anthropic, proxy) = setup(settings).await;
        let body = with_model(anthropic_request(8), "mystery-70b");
        assert_eq!(post(&proxy, "/v1/messages", body.clone()).await.status(), 200);
        assert_eq!(
            anthropic.received()[0].body,
            compacted_directly_with(hook_for(8_000), &body, Format::Anthropic)
        );
    });
}
