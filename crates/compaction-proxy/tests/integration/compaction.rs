//! Requests compacted on their way: the upstream receives exactly what reading the body,
//! running the hook and writing it back gives when the libraries are called directly, with
//! every field of the request the proxy does not know kept; what cannot be read goes through
//! unchanged (or is refused with --fail-closed).

use compaction_core::{PruningSettings, ToolResultPruningCompactor};
use compaction_formats::{Format, ReadOptions};
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
use compaction_model::Changes;
use compaction_proxy::ProxySettings;
use serde_json::{json, Value};

use crate::upstream::Upstream;
use crate::{bounded, client, Proxy};

/// The hook every test runs: pruning with its defaults, an 8,000-token window.
pub fn hook() -> CompactionHook {
    hook_for(8_000)
}

/// Pruning with its defaults for a window of `window` tokens.
pub fn hook_for(window: usize) -> CompactionHook {
    let pruning = ToolResultPruningCompactor::new(PruningSettings::default()).expect("valid settings");
    CompactionHook::new(Box::new(pruning), CompactionHookSettings::new(window)).expect("valid settings")
}

/// A tool result of about 1,000 tokens, told apart by `n`.
fn output(n: usize) -> String {
    format!("file {n}:\n{}", format!("line {n} of the output, with some text in it\n").repeat(90))
}

/// A Claude Code-shaped Messages request: `steps` tool calls and results, streamed, with a
/// cached system prompt, tools, metadata and a cache breakpoint on the last result.
pub fn anthropic_request(steps: usize) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "Fix the failing test."})];
    for n in 0..steps {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Reading file {n}.")},
            {"type": "tool_use", "id": format!("toolu_{n}"), "name": "Read", "input": {"file_path": format!("/src/f{n}.rs")}},
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{n}"), "content": output(n)},
        ]}));
    }
    let last = messages.last_mut().expect("a message");
    last["content"][0]["cache_control"] = json!({"type": "ephemeral"});
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}],
        "metadata": {"user_id": "user_1"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": messages,
    })
}

/// An OpenAI SDK-shaped Chat Completions request with `steps` tool calls and results.
pub fn openai_request(steps: usize) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": "Fix the failing test."}),
    ];
    for n in 0..steps {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{n}"), "type": "function", "function": {"name": "read_file", "arguments": format!("{{\"path\":\"f{n}.rs\"}}")}},
        ]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{n}"), "content": output(n)}));
    }
    json!({
        "model": "gpt-4o",
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": 0,
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}],
        "messages": messages,
        "x_vendor_field": {"kept": [1, 2.50, "three"]},
    })
}

/// What the hook makes of `body`, calling the libraries directly: read, run, written back.
pub fn compacted_directly(body: &[u8], format: Format) -> Vec<u8> {
    compacted_directly_with(hook(), body, format)
}

/// What `hook` makes of `body`, calling the libraries directly.
pub fn compacted_directly_with(hook: CompactionHook, body: &[u8], format: Format) -> Vec<u8> {
    let mut conversation =
        compaction_formats::read(body.to_vec(), &ReadOptions::named("request").with_format(format))
            .expect("reads");
    let messages = std::mem::take(&mut conversation.messages);
    let mut state = AgentState::new(messages).with_tools(conversation.tools.clone());
    let outcome = hook.try_run(&mut state).expect("runs");
    assert!(outcome.compacted, "the request is large enough to compact");
    let mut out = Vec::new();
    let changes = outcome.changes.unwrap_or(Changes::Unknown);
    compaction_formats::write(&conversation, state.messages(), None, &changes, &mut out).expect("writes");
    out
}

pub async fn setup(settings: ProxySettings) -> (Upstream, Upstream, Proxy) {
    let openai = Upstream::start().await;
    let anthropic = Upstream::start().await;
    let settings = settings.with_openai_upstream(openai.url()).with_anthropic_upstream(anthropic.url());
    (openai, anthropic, Proxy::start(settings).await)
}

pub async fn post(proxy: &Proxy, path: &str, body: Vec<u8>) -> reqwest::Response {
    client()
        .post(proxy.url(path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("an answer")
}

#[test]
fn a_messages_request_reaches_the_upstream_as_the_hook_compacts_it_with_its_envelope_kept() {
    bounded(async {
        let (_openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        let body = serde_json::to_vec(&anthropic_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", body.clone()).await.status(), 200);
        let received = &anthropic.received()[0];
        assert_eq!(received.body, compacted_directly(&body, Format::Anthropic));
        assert!(received.body.len() < body.len() / 2, "{} of {} bytes", received.body.len(), body.len());
        let (sent, forwarded): (Value, Value) = (
            serde_json::from_slice(&body).expect("json"),
            serde_json::from_slice(&received.body).expect("json"),
        );
        for key in ["model", "max_tokens", "stream", "system", "tools", "metadata", "thinking"] {
            assert_eq!(sent[key], forwarded[key], "{key}");
        }
        let last = |request: &Value| request["messages"].as_array().expect("messages").last().cloned();
        assert_eq!(last(&sent), last(&forwarded), "the newest result and its cache breakpoint are kept");
        assert_eq!(forwarded["messages"].as_array().map(Vec::len), Some(17), "every call keeps its result");
        let log = proxy.log();
        assert_eq!(log.len(), 1, "{log:?}");
        assert!(log[0].starts_with("proxy: /v1/messages: conversation "), "{log:?}");
        assert!(log[0].contains(": compacted: "), "{log:?}");
        // The conversation read holds the system prompt too: 18 messages, the first result third.
        assert!(log[0].ends_with("; the prompt cache is written again from message 3 of 18"), "{log:?}");
        assert!(log[0].contains("tool results cleared"), "{log:?}");
    });
}

#[test]
fn a_chat_completions_request_reaches_the_upstream_as_the_hook_compacts_it() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        let body = serde_json::to_vec(&openai_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/chat/completions", body.clone()).await.status(), 200);
        let received = &openai.received()[0];
        assert_eq!(received.body, compacted_directly(&body, Format::OpenAi));
        assert!(received.body.len() < body.len() / 2);
        let forwarded: Value = serde_json::from_slice(&received.body).expect("json");
        assert_eq!(forwarded["x_vendor_field"], json!({"kept": [1, 2.50, "three"]}));
        assert_eq!(forwarded["stream_options"], json!({"include_usage": true}));
        assert_eq!(forwarded["temperature"], json!(0));
    });
}

#[test]
fn a_request_under_the_threshold_and_other_paths_go_through_byte_for_byte() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        // Spacing of its own, which a rewrite would not keep.
        let small = serde_json::to_vec_pretty(&openai_request(2)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/chat/completions", small.clone()).await.status(), 200);
        let large = serde_json::to_vec(&openai_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/embeddings", large.clone()).await.status(), 200);
        let received = openai.received();
        assert_eq!(received[0].body, small);
        assert_eq!(received[1].body, large);
        assert!(proxy.log().is_empty(), "{:?}", proxy.log());
    });
}

#[test]
fn a_body_that_does_not_read_goes_through_with_a_warning_or_is_refused_when_failing_closed() {
    bounded(async {
        let body = br#"{"model":"gpt-4o","messages":5}"#.to_vec();
        let (openai, _anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        assert_eq!(post(&proxy, "/v1/chat/completions", body.clone()).await.status(), 200);
        assert_eq!(openai.received()[0].body, body);
        let log = proxy.log();
        assert!(
            log.len() == 1
                && log[0].starts_with("proxy: warning: ")
                && log[0].ends_with("forwarded unchanged"),
            "{log:?}"
        );

        let (openai, _anthropic, proxy) =
            setup(ProxySettings::default().with_compaction(hook()).with_fail_closed()).await;
        let answer = post(&proxy, "/v1/chat/completions", body).await;
        assert_eq!(answer.status(), 502);
        assert!(answer.text().await.expect("a body").contains("compaction_error"));
        assert!(openai.received().is_empty());
    });
}

#[test]
fn a_dry_run_logs_the_compaction_and_forwards_the_request_unchanged() {
    bounded(async {
        let (_openai, anthropic, proxy) =
            setup(ProxySettings::default().with_compaction(hook()).with_dry_run()).await;
        let body = serde_json::to_vec(&anthropic_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", body.clone()).await.status(), 200);
        assert_eq!(anthropic.received()[0].body, body);
        let log = proxy.log();
        assert!(log.len() == 1 && log[0].contains("compacted (dry run, forwarded unchanged)"), "{log:?}");
    });
}

/// The text of a request written compactly up to its message `{"role":"user","content":[{"type":
/// "tool_result","tool_use_id":"toolu_N"`: what a later request of the conversation must start
/// with for the provider's cache to hold, the client having moved its cache breakpoint from
/// that message to its newest.
fn prefix_before_result(body: &[u8], n: usize) -> &[u8] {
    let marker = format!(r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_{n}""#);
    let at = body.windows(marker.len()).position(|w| w == marker.as_bytes()).expect("the message is there");
    &body[..at]
}

#[test]
fn a_result_pruned_once_is_pruned_the_same_way_in_the_conversations_later_requests() {
    bounded(async {
        let (_openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        let first = serde_json::to_vec(&anthropic_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", first.clone()).await.status(), 200);
        // The agent's next request: its own, uncompacted conversation, two steps longer.
        let second = serde_json::to_vec(&anthropic_request(10)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", second.clone()).await.status(), 200);
        // Another conversation: its first message differs, so nothing is recalled for it.
        let mut other = anthropic_request(10);
        other["messages"][0]["content"] = json!("Another task.");
        let other = serde_json::to_vec(&other).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", other.clone()).await.status(), 200);

        let received = anthropic.received();
        assert_ne!(received[0].body, first, "the first request was compacted");
        assert!(
            received[1].body.starts_with(prefix_before_result(&received[0].body, 7)),
            "the second request begins with the first as forwarded, byte for byte"
        );
        assert!(received[1].body.len() < second.len() / 2);
        // The second request, recalled, is under the threshold: the hook did not run again.
        assert_eq!(proxy.log().len(), 2, "{:?}", proxy.log());
        assert_eq!(received[2].body, compacted_directly(&other, Format::Anthropic));

        // Grown past the threshold again, the conversation is compacted again, from the oldest
        // result still whole: what was forwarded before it stays as it was.
        let third = serde_json::to_vec(&anthropic_request(14)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", third).await.status(), 200);
        let received = anthropic.received();
        let pruned = |body: &[u8]| -> Vec<usize> {
            let request: Value = serde_json::from_slice(body).expect("json");
            let results = request["messages"].as_array().expect("messages").len() / 2;
            (0..results)
                .filter(|n| {
                    let text = request["messages"][2 + 2 * n]["content"][0]["content"].as_str();
                    text.is_some_and(|text| text.starts_with("[Tool result removed"))
                })
                .collect()
        };
        let before = pruned(&received[1].body);
        assert_eq!(before, pruned(&received[0].body));
        let k = before.len();
        assert_eq!(before, (0..k).collect::<Vec<_>>());
        let after = pruned(&received[3].body);
        assert!(after.len() > k && after[..k] == before[..], "{before:?} then {after:?}");
        assert!(received[3].body.starts_with(prefix_before_result(&received[1].body, k)));
        assert!(!received[3].body.starts_with(prefix_before_result(&received[1].body, k + 1)));
        let log = proxy.log();
        assert!(log[2].contains(&format!(", {k} earlier replacements kept; ")), "{log:?}");
        // Both requests of the conversation are named alike; the other conversation otherwise.
        let conversation = |line: &str| line.split(": ").nth(2).map(str::to_owned);
        assert_eq!(conversation(&log[0]), conversation(&log[2]));
        assert_ne!(conversation(&log[0]), conversation(&log[1]));
    });
}

#[test]
fn what_the_proxy_remembers_is_bounded_by_its_setting() {
    bounded(async {
        // Nothing remembered: each request of the conversation is compacted afresh, as the hook
        // alone would compact it.
        let settings = ProxySettings::default().with_compaction(hook()).with_remembered_bytes(0);
        let (_openai, anthropic, proxy) = setup(settings).await;
        let first = serde_json::to_vec(&anthropic_request(8)).expect("serializes");
        let second = serde_json::to_vec(&anthropic_request(10)).expect("serializes");
        for body in [&first, &second] {
            assert_eq!(post(&proxy, "/v1/messages", body.clone()).await.status(), 200);
        }
        let received = anthropic.received();
        assert_eq!(received[0].body, compacted_directly(&first, Format::Anthropic));
        assert_eq!(received[1].body, compacted_directly(&second, Format::Anthropic));
        let log = proxy.log();
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(log.iter().all(|l| l.contains(": compacted: ") && !l.contains("earlier")), "{log:?}");
    });
}

/// A Codex-shaped Responses request with `steps` shell calls and their outputs.
pub fn responses_request(steps: usize) -> Value {
    let mut input = vec![
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]}),
    ];
    for n in 0..steps {
        input.push(json!({"type": "function_call", "name": "shell", "arguments": format!("{{\"command\":[\"cat\",\"f{n}.rs\"]}}"), "call_id": format!("call_{n}")}));
        input.push(
            json!({"type": "function_call_output", "call_id": format!("call_{n}"), "output": output(n)}),
        );
    }
    json!({
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": input,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "session-1",
    })
}

#[test]
fn a_responses_request_reaches_the_upstream_as_the_hook_compacts_it() {
    bounded(async {
        let (openai, _anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        let body = serde_json::to_vec(&responses_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/responses", body.clone()).await.status(), 200);
        let received = &openai.received()[0];
        assert_eq!(received.body, compacted_directly(&body, Format::Responses));
        assert!(received.body.len() < body.len() / 2, "{} of {} bytes", received.body.len(), body.len());
        let (sent, forwarded): (Value, Value) = (
            serde_json::from_slice(&body).expect("json"),
            serde_json::from_slice(&received.body).expect("json"),
        );
        for key in [
            "model",
            "instructions",
            "tools",
            "tool_choice",
            "reasoning",
            "store",
            "stream",
            "include",
            "prompt_cache_key",
        ] {
            assert_eq!(sent[key], forwarded[key], "{key}");
        }
        assert_eq!(forwarded["input"].as_array().map(Vec::len), Some(17), "every call keeps its output");
    });
}

#[test]
fn metrics_count_requests_compactions_and_errors() {
    bounded(async {
        let (_openai, _anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        let body = serde_json::to_vec(&anthropic_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", body).await.status(), 200);
        assert_eq!(post(&proxy, "/v1/chat/completions", br#"{"messages":5}"#.to_vec()).await.status(), 200);
        let answer = client().get(proxy.url("/metrics")).send().await.expect("an answer");
        assert_eq!(answer.status(), 200);
        assert!(answer.headers()["content-type"]
            .to_str()
            .expect("text")
            .starts_with("text/plain; version=0.0.4"));
        let text = answer.text().await.expect("a body");
        for line in [
            "compaction_proxy_requests_total{endpoint=\"messages\"} 1",
            "compaction_proxy_requests_total{endpoint=\"chat_completions\"} 1",
            "compaction_proxy_compactions_total 1",
            "compaction_proxy_errors_total{kind=\"body_unreadable\"} 1",
            "compaction_proxy_upstream_responses_total{class=\"2xx\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(text
            .lines()
            .any(|l| l.starts_with("compaction_proxy_results_cleared_total ") && !l.ends_with(" 0")));
    });
}

#[test]
fn the_next_request_is_estimated_from_the_upstreams_count_of_the_previous_one() {
    bounded(async {
        let (_openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        // Under the threshold as counted here, so forwarded as it came; the upstream's stream
        // says it was 7,050 tokens with its reply.
        let first = serde_json::to_vec(&anthropic_request(4)).expect("serializes");
        let answer = client()
            .post(proxy.url("/v1/messages"))
            .header("x-test", "usage-stream")
            .body(first.clone())
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.text().await.expect("a body"), crate::upstream::USAGE_EVENTS.concat());
        // The reply and one more result: still under the threshold as counted here, over it from
        // the upstream's count plus the new messages.
        let second = serde_json::to_vec(&anthropic_request(5)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", second.clone()).await.status(), 200);
        let received = anthropic.received();
        assert_eq!(received[0].body, first);
        assert_ne!(received[1].body, second, "compacted");
        let log = proxy.log();
        assert_eq!(log.len(), 1, "{log:?}");
        assert!(log[0].contains("tokens estimated (from the upstream's count of 7050)"), "{log:?}");
        let metrics =
            client().get(proxy.url("/metrics")).send().await.expect("an answer").text().await.expect("text");
        assert!(
            metrics.lines().any(|l| l == "compaction_proxy_upstream_cache_read_tokens_total 1000"),
            "{metrics}"
        );
    });
}

#[test]
fn a_count_of_tokens_is_asked_for_the_request_as_it_would_be_sent() {
    bounded(async {
        let (openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        let messages = serde_json::to_vec(&anthropic_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages/count_tokens", messages.clone()).await.status(), 200);
        let responses = serde_json::to_vec(&responses_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/responses/input_tokens", responses.clone()).await.status(), 200);
        assert_eq!(anthropic.received()[0].path, "/v1/messages/count_tokens");
        assert_eq!(anthropic.received()[0].body, compacted_directly(&messages, Format::Anthropic));
        assert_eq!(openai.received()[0].path, "/v1/responses/input_tokens");
        assert_eq!(openai.received()[0].body, compacted_directly(&responses, Format::Responses));
    });
}

#[test]
fn a_conversations_answer_is_asked_for_uncompressed_so_its_usage_can_be_read() {
    bounded(async {
        let (openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        let body = serde_json::to_vec(&anthropic_request(2)).expect("serializes");
        let sent =
            client().post(proxy.url("/v1/messages")).header("accept-encoding", "gzip, br").body(body).send();
        assert_eq!(sent.await.expect("an answer").status(), 200);
        let sent = client().get(proxy.url("/v1/models")).header("accept-encoding", "gzip, br").send();
        assert_eq!(sent.await.expect("an answer").status(), 200);
        assert_eq!(anthropic.received()[0].header("accept-encoding"), None);
        assert_eq!(openai.received()[0].header("accept-encoding"), Some("gzip, br"));
    });
}

#[test]
fn under_the_cache_aware_rule_a_compaction_that_does_not_pay_is_declined_and_said() {
    bounded(async {
        let pruning = ToolResultPruningCompactor::new(PruningSettings::default()).expect("valid settings");
        let settings = CompactionHookSettings::new(8_000).with_cache(compaction_hook::CacheRule::default());
        let cache_aware = CompactionHook::new(Box::new(pruning), settings).expect("valid settings");
        let (_openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(cache_aware)).await;
        // Just over the threshold: writing the pruned prompt again costs more than it saves on
        // the next ten calls at the cache-read price.
        let body = serde_json::to_vec(&anthropic_request(6)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", body.clone()).await.status(), 200);
        assert_eq!(anthropic.received()[0].body, body);
        let log = proxy.log();
        assert!(log.len() == 1 && log[0].contains("not compacted under the cache-aware rule"), "{log:?}");
        // The same request without the rule is compacted.
        let (_openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        assert_eq!(post(&proxy, "/v1/messages", body.clone()).await.status(), 200);
        assert_ne!(anthropic.received()[0].body, body);
    });
}

#[test]
fn a_real_claude_code_session_sent_as_a_request_is_compacted_as_the_hook_would() {
    bounded(async {
        // The repository's excerpt of a Claude Code session, as Claude Code would send it.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/transcripts/claude-code/fa812bfe-excerpt.jsonl"
        );
        let session =
            compaction_formats::read(std::fs::read(path).expect("the excerpt"), &ReadOptions::named(path))
                .expect("reads");
        let mut written = Vec::new();
        let to = Some(compaction_formats::Target::Anthropic);
        compaction_formats::write(&session, &session.messages, to, &Changes::Unknown, &mut written)
            .expect("writes");
        let mut request: Value = serde_json::from_slice(&written).expect("json");
        request["model"] = json!("claude-opus-4-6");
        request["max_tokens"] = json!(32000);
        request["stream"] = json!(true);
        let body = serde_json::to_vec(&request).expect("serializes");

        let (_openai, anthropic, proxy) =
            setup(ProxySettings::default().with_compaction(hook_for(2_000))).await;
        assert_eq!(post(&proxy, "/v1/messages?beta=true", body.clone()).await.status(), 200);
        let received = &anthropic.received()[0];
        assert_eq!(received.path, "/v1/messages?beta=true");
        assert_eq!(received.body, compacted_directly_with(hook_for(2_000), &body, Format::Anthropic));
        assert!(received.body.len() < body.len());
    });
}

/// `body` up to where `marker` first appears.
fn before<'a>(body: &'a [u8], marker: &str) -> &'a [u8] {
    let at = body.windows(marker.len()).position(|w| w == marker.as_bytes()).expect("the marker is there");
    &body[..at]
}

#[test]
fn chat_completions_and_responses_conversations_stay_cache_stable_too() {
    bounded(async {
        // The path, the request of N steps, and the start of the first request's last message.
        type Shape = (&'static str, fn(usize) -> Value, &'static str);
        let shapes: [Shape; 2] = [
            ("/v1/chat/completions", openai_request, r#"{"role":"tool","tool_call_id":"call_7""#),
            ("/v1/responses", responses_request, r#"{"type":"function_call_output","call_id":"call_7""#),
        ];
        for (path, request, last_of_first) in shapes {
            let (openai, _anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
            for steps in [8, 10] {
                let body = serde_json::to_vec(&request(steps)).expect("serializes");
                assert_eq!(post(&proxy, path, body).await.status(), 200);
            }
            let received = openai.received();
            let first = before(&received[0].body, last_of_first);
            assert!(first.len() > received[0].body.len() / 2, "{path}: the marker is the last message");
            assert!(
                received[1].body.starts_with(first),
                "{path}: the second request begins as the first was sent"
            );
            assert_eq!(proxy.log().len(), 1, "{path}: {:?}", proxy.log());
        }
    });
}

/// The messages of a request as the upstream received it, whatever its shape, without the
/// cache breakpoints (which the client moves to its newest message with each request).
fn messages_of(body: &[u8]) -> Vec<Value> {
    fn unmarked(value: &mut Value) {
        match value {
            Value::Object(object) => {
                object.remove("cache_control");
                object.values_mut().for_each(unmarked);
            }
            Value::Array(items) => items.iter_mut().for_each(unmarked),
            _ => {}
        }
    }
    let mut request: Value = serde_json::from_slice(body).expect("json");
    unmarked(&mut request);
    let messages = request.get("messages").or_else(|| request.get("input")).expect("messages");
    messages.as_array().expect("an array").clone()
}

/// A sliding window drops messages and puts a note in: the messages forwarded in their place
/// are remembered like single replacements, so the conversation's later requests begin as the
/// compacted one was sent and the hook runs again only once it has grown past the threshold,
/// whichever of the three shapes the request has.
#[test]
fn a_sliding_windows_cut_is_kept_in_the_conversations_later_requests() {
    bounded(async {
        type Shape = (&'static str, fn(usize) -> Value);
        let shapes: [Shape; 3] = [
            ("/v1/messages", anthropic_request),
            ("/v1/chat/completions", openai_request),
            ("/v1/responses", responses_request),
        ];
        for (path, request) in shapes {
            let window = compaction_core::SlidingWindowCompactor::new(Default::default());
            let hook =
                CompactionHook::new(Box::new(window), CompactionHookSettings::new(8_000)).expect("valid");
            let (openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook)).await;
            let upstream = if path == "/v1/messages" { &anthropic } else { &openai };
            let mut sent = Vec::new();
            for steps in [8, 10, 11, 16, 17] {
                let body = serde_json::to_vec(&request(steps)).expect("serializes");
                let answer = post(&proxy, path, body.clone()).await;
                assert_eq!(answer.status(), 200, "{path}");
                // Read to its end, as an agent does before its next request: the usage it
                // reports anchors that request.
                answer.bytes().await.expect("the answer's body");
                let received = upstream.received().pop().expect("a request").body;
                // Everything around the messages reaches the upstream as the client sent it.
                let key = if path == "/v1/responses" { "input" } else { "messages" };
                let (mut around, sent_around): (Value, Value) = (
                    serde_json::from_slice(&received).expect("JSON"),
                    serde_json::from_slice(&body).expect("JSON"),
                );
                around[key] = sent_around[key].clone();
                assert_eq!(around, sent_around, "{path}");
                sent.push(messages_of(&received));
            }
            let log = proxy.log();
            assert_eq!(log.len(), 2, "{path}: compacted at 8 steps and at 16, not between: {log:?}");
            let first = messages_of(&serde_json::to_vec(&request(8)).expect("serializes"));
            assert!(sent[0].len() < first.len(), "{path}");
            for (before, after) in [(0, 1), (1, 2), (3, 4)] {
                let n = sent[before].len();
                assert!(
                    sent[after].len() > n && sent[after][..n] == sent[before][..],
                    "{path}: request {after} begins as request {before} was sent"
                );
            }
            assert!(sent[3].len() < sent[2].len(), "{path}: the second compaction cut again");
            assert!(log[1].contains("earlier replacement"), "{path}: {log:?}");
        }
    });
}

/// How many cache breakpoints `body` carries.
fn breakpoints(body: &[u8]) -> usize {
    body.windows(15).filter(|w| w == b"\"cache_control\"").count()
}

#[test]
fn recalled_replacements_carry_the_cache_breakpoints_the_client_put_now_not_then() {
    bounded(async {
        let (_openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        // A breakpoint on an older result too (the agent's previous one), which gets pruned.
        let mut first = anthropic_request(8);
        first["messages"][4]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        let first = serde_json::to_vec(&first).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", first.clone()).await.status(), 200);
        // The next request: the client has moved its breakpoints on, off that result.
        let mut second = anthropic_request(10);
        second["messages"][18]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        let second = serde_json::to_vec(&second).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", second.clone()).await.status(), 200);

        let received = anthropic.received();
        let forwarded: Value = serde_json::from_slice(&received[0].body).expect("json");
        let pruned = &forwarded["messages"][4]["content"][0];
        assert!(
            pruned["content"].as_str().is_some_and(|t| t.starts_with("[Tool result removed")),
            "{pruned}"
        );
        assert_eq!(pruned["cache_control"], json!({"type": "ephemeral"}), "the client's breakpoint is kept");
        assert_eq!(breakpoints(&received[0].body), breakpoints(&first));

        let forwarded: Value = serde_json::from_slice(&received[1].body).expect("json");
        let recalled = &forwarded["messages"][4]["content"][0];
        assert!(
            recalled["content"].as_str().is_some_and(|t| t.starts_with("[Tool result removed")),
            "{recalled}"
        );
        assert_eq!(recalled.get("cache_control"), None, "no breakpoint the client did not put");
        assert_eq!(breakpoints(&received[1].body), breakpoints(&second));
    });
}

#[test]
fn thinking_blocks_are_never_edited() {
    bounded(async {
        let (_openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook())).await;
        let mut request = anthropic_request(8);
        for message in request["messages"].as_array_mut().expect("messages") {
            if message["role"] == "assistant" {
                let thinking = json!({"type": "thinking", "thinking": "Let me read the file.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"});
                message["content"].as_array_mut().expect("blocks").insert(0, thinking);
            }
        }
        let body = serde_json::to_vec(&request).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", body.clone()).await.status(), 200);
        let received = &anthropic.received()[0];
        assert_ne!(received.body, body, "compacted");
        let forwarded: Value = serde_json::from_slice(&received.body).expect("json");
        let assistants = |request: &Value| -> Vec<Value> {
            request["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .filter(|m| m["role"] == "assistant")
                .cloned()
                .collect()
        };
        assert_eq!(assistants(&forwarded), assistants(&request));
    });
}

#[test]
fn clear_thinking_drops_the_thinking_of_all_but_the_last_assistant_messages() {
    bounded(async {
        let settings = ProxySettings::default().with_compaction(hook()).with_clear_thinking(2);
        let (_openai, anthropic, proxy) = setup(settings).await;
        // Under the compaction threshold: only the thinking goes.
        let mut request = anthropic_request(4);
        for message in request["messages"].as_array_mut().expect("messages") {
            if message["role"] == "assistant" {
                let thinking = json!({"type": "thinking", "thinking": "Let me read the file.", "signature": "EqQBCgIYAhIM"});
                message["content"].as_array_mut().expect("blocks").insert(0, thinking);
            }
        }
        let body = serde_json::to_vec(&request).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", body).await.status(), 200);
        let forwarded: Value = serde_json::from_slice(&anthropic.received()[0].body).expect("json");
        let (sent, kept) = (
            request["messages"].as_array().expect("messages"),
            forwarded["messages"].as_array().expect("messages"),
        );
        assert_eq!(sent.len(), kept.len());
        for (index, (sent, kept)) in sent.iter().zip(kept).enumerate() {
            match index {
                1 | 3 => {
                    assert_eq!(kept["content"].as_array().map(Vec::len), Some(2), "{kept}");
                    assert!(kept["content"]
                        .as_array()
                        .expect("blocks")
                        .iter()
                        .all(|b| b["type"] != "thinking"));
                    assert_eq!(kept["content"][1], sent["content"][2], "the tool call is kept");
                }
                _ => assert_eq!(kept, sent, "message {index}"),
            }
        }
    });
}

#[test]
fn after_a_compaction_that_drops_messages_the_next_request_is_not_anchored_on_the_shorter_ones_count() {
    bounded(async {
        let window =
            compaction_core::SlidingWindowCompactor::new(compaction_core::SlidingWindowSettings::default());
        let hook = CompactionHook::new(Box::new(window), CompactionHookSettings::new(8_000))
            .expect("valid settings");
        let (_openai, anthropic, proxy) = setup(ProxySettings::default().with_compaction(hook)).await;
        let first = serde_json::to_vec(&anthropic_request(8)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", first.clone()).await.status(), 200);
        // The agent sends its whole conversation again, one step longer: the upstream's count
        // of the window it was sent (answered with a count of 15 tokens here) says nothing of it.
        let second = serde_json::to_vec(&anthropic_request(9)).expect("serializes");
        assert_eq!(post(&proxy, "/v1/messages", second.clone()).await.status(), 200);
        let received = anthropic.received();
        assert!(received[0].body.len() < first.len() / 2, "the first was compacted");
        assert!(received[1].body.len() < second.len() / 2, "so was the second: {:?}", proxy.log());
    });
}
