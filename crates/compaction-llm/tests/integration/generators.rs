//! The chat generators against a local server: success, tool calls, retries, timeouts, bad
//! replies, missing keys; blocking and on tokio.

use std::time::{Duration, Instant};

#[cfg(feature = "async")]
use compaction_core::AsyncChatGenerator;
use compaction_core::ChatGenerator;
use compaction_llm::{
    generator_from_provider, AnthropicChatGenerator, ClientSettings, Error, OpenAIChatGenerator, Provider,
};
use compaction_model::{Message, Part, Role, ToolCall};
use serde_json::{json, Map, Value};

use crate::server::{closed_port_url, Answer, Server};
use crate::settings;

fn completion(message: Value) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "tiny-1",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}
    })
}

fn anthropic_reply(content: Value, stop_reason: &str) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": stop_reason, "stop_sequence": null,
        "usage": {"input_tokens": 20, "output_tokens": 5}
    })
}

fn openai(server: &Server) -> OpenAIChatGenerator {
    OpenAIChatGenerator::new("tiny", settings(server.url("/v1"))).unwrap()
}

fn anthropic(server: &Server) -> AnthropicChatGenerator {
    AnthropicChatGenerator::new("claude-test", settings(server.url(""))).unwrap()
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

#[test]
fn openai_sends_the_conversation_and_reads_the_reply() {
    let server = Server::scripted(vec![Answer::json(
        200,
        completion(json!({"role": "assistant", "content": "Done."})),
    )]);
    let mut kwargs = Map::new();
    kwargs.insert("temperature".into(), json!(0));
    kwargs.insert("model".into(), json!("not this one"));
    let generator = openai(&server).with_generation_kwargs(kwargs);
    let reply =
        ChatGenerator::generate(&generator, &[Message::system("Summarize."), Message::user("Hi")]).unwrap();

    assert_eq!(reply.role, Role::Assistant);
    assert_eq!(reply.text(), Some("Done."));
    assert_eq!(
        Value::from(reply.meta.clone()),
        json!({"model": "tiny-1", "index": 0, "finish_reason": "stop",
               "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}})
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.json(),
        json!({"model": "tiny", "messages": [
            {"role": "system", "content": "Summarize."},
            {"role": "user", "content": "Hi"}
        ], "temperature": 0})
    );
}

#[test]
fn openai_tool_calls_go_out_and_come_back_without_loss() {
    let server = Server::scripted(vec![Answer::json(
        200,
        completion(json!({"role": "assistant", "content": null, "reasoning_content": "thinking...",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"ünï\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a"}},
            {"id": "call_c", "type": "function", "function": {"name": "noargs", "arguments": ""}},
            {"id": "call_d", "type": "custom", "custom": {"name": "patch", "input": "*** Begin"}}
        ]})),
    )]);
    let call = ToolCall::new("search", args(json!({"q": "x", "n": 1.5e-7}))).with_id("call_0");
    let broken = ToolCall::with_raw_arguments("read", "{\"path\": ").with_id("call_1");
    let conversation = vec![
        Message::user("go"),
        Message::assistant_with_calls(Some("Looking.".into()), vec![call.clone(), broken.clone()]),
        Message::tool("found", call, false),
        Message::tool("cut", broken, true),
    ];
    let reply = ChatGenerator::generate(&openai(&server), &conversation).unwrap();

    let sent = server.requests()[0].json();
    assert_eq!(
        sent["messages"][1],
        json!({"role": "assistant", "content": "Looking.", "tool_calls": [
            {"type": "function", "function": {"name": "search", "arguments": "{\"q\": \"x\", \"n\": 1.5e-07}"}, "id": "call_0"},
            {"type": "function", "function": {"name": "read", "arguments": "{\"path\": "}, "id": "call_1"}
        ]})
    );
    assert_eq!(sent["messages"][3], json!({"role": "tool", "content": "cut", "tool_call_id": "call_1"}));

    let calls: Vec<&ToolCall> = reply.tool_calls().collect();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0].arguments, args(json!({"q": "ünï"})));
    assert_eq!(calls[0].id.as_deref(), Some("call_a"));
    assert_eq!(
        (calls[1].raw_arguments.as_deref(), calls[1].arguments.is_empty()),
        (Some("{\"path\": \"a"), true)
    );
    assert!(calls[2].has_no_arguments());
    assert_eq!(
        (calls[3].tool_name.as_str(), calls[3].raw_arguments.as_deref()),
        ("patch", Some("*** Begin"))
    );
    assert!(matches!(&reply.parts[0], Part::Reasoning(r) if r.reasoning_text == "thinking..."));
    assert_eq!(reply.text(), None);
}

#[test]
fn anthropic_sends_system_apart_and_tool_results_as_user_turns() {
    let server = Server::scripted(vec![Answer::json(
        200,
        anthropic_reply(
            json!([
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "rust"}},
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}
            ]),
            "tool_use",
        ),
    )]);
    let call = ToolCall::new("search", args(json!({"q": "a"}))).with_id("toolu_0");
    let conversation = vec![
        Message::system("Be brief."),
        Message::user("Find a"),
        Message::assistant_with_calls(None, vec![call.clone()]),
        Message::tool("no hits", call, true),
        Message::user("Try again"),
    ];
    let reply = ChatGenerator::generate(&anthropic(&server), &conversation).unwrap();

    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("sk-test"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(
        request.json(),
        json!({"model": "claude-test", "max_tokens": 4096,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Find a"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_0", "name": "search", "input": {"q": "a"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_0", "content": "no hits", "is_error": true},
                {"type": "text", "text": "Try again"}
            ]}
        ]})
    );
    assert_eq!(reply.text(), Some("Let me look."));
    let call = reply.tool_calls().next().unwrap();
    assert_eq!((call.id.as_deref(), call.tool_name.as_str()), (Some("toolu_1"), "search"));
    assert!(
        matches!(&reply.parts[0], Part::Reasoning(r) if r.reasoning_text == "hmm" && r.extra["signature"] == "sig")
    );
    assert_eq!(reply.meta["finish_reason"], "tool_calls");
    assert_eq!(reply.meta["usage"], json!({"input_tokens": 20, "output_tokens": 5}));
    assert_eq!(reply.meta["unknown_content"][0]["type"], "server_tool_use");
}

#[test]
fn a_429_is_retried_after_the_wait_the_provider_asks() {
    let limited = json!({"error": {"message": "Rate limit reached", "type": "requests"}});
    let server = Server::scripted(vec![
        Answer::json(429, limited).with_header("retry-after-ms", "400"),
        Answer::json(200, completion(json!({"role": "assistant", "content": "ok"}))),
    ]);
    let started = Instant::now();
    let reply = ChatGenerator::generate(&openai(&server), &[Message::user("Hi")]).unwrap();
    assert_eq!(reply.text(), Some("ok"));
    assert_eq!(server.requests().len(), 2);
    // The backoff alone is a few milliseconds; only the header explains the wait.
    assert!(started.elapsed() >= Duration::from_millis(400), "{:?}", started.elapsed());
}

#[test]
fn anthropic_honours_retry_after_in_seconds() {
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let server = Server::scripted(vec![
        Answer::json(529, overloaded).with_header("retry-after", "1"),
        Answer::json(200, anthropic_reply(json!([{"type": "text", "text": "ok"}]), "end_turn")),
    ]);
    let started = Instant::now();
    let reply = ChatGenerator::generate(&anthropic(&server), &[Message::user("Hi")]).unwrap();
    assert_eq!(reply.text(), Some("ok"));
    assert_eq!(reply.meta["finish_reason"], "stop");
    assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
}

#[test]
fn server_errors_exhaust_the_retries_and_say_which_call_failed() {
    let long = "x".repeat(5000);
    let server = Server::scripted(vec![Answer::json(
        500,
        json!({"error": {"message": long, "type": "server_error"}}),
    )]);
    let error = openai(&server).generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert_eq!(server.requests().len(), 3, "one attempt and two retries");
    let Error::Status { call, status, message, overflow: None } = &error else { panic!("{error:?}") };
    assert_eq!((*status, call.provider, call.attempt, call.attempts_allowed), (500, Provider::OpenAI, 3, 3));
    assert_eq!(call.url, server.url("/v1/chat/completions"));
    assert_eq!(call.model, "tiny");
    assert!(
        message.starts_with("server_error: xxx") && message.ends_with('…') && message.chars().count() < 500
    );
    let shown = error.to_string();
    assert!(
        shown.starts_with(&format!(
            "openai POST {} (model tiny), attempt 3 of 3: HTTP 500: server_error: x",
            call.url
        )),
        "{shown}"
    );
}

#[test]
fn client_errors_are_not_retried() {
    let server = Server::scripted(vec![Answer::json(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    )]);
    let error = anthropic(&server).generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert_eq!(server.requests().len(), 1);
    assert!(
        matches!(&error, Error::Status { status: 401, message, call, overflow: None } if message == "authentication_error: invalid x-api-key" && call.attempt == 1),
        "{error:?}"
    );
}

#[test]
fn a_slow_server_times_out_on_every_attempt() {
    let server = Server::scripted(vec![Answer::After(
        Duration::from_secs(3),
        Box::new(Answer::json(200, completion(json!({"role": "assistant", "content": "late"})))),
    )]);
    let settings = settings(server.url("/v1")).with_timeout(Duration::from_millis(200)).with_max_retries(1);
    let generator = OpenAIChatGenerator::new("tiny", settings).unwrap();
    let started = Instant::now();
    let error = generator.generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(server.requests().len(), 2);
    let Error::Timeout { call, source } = &error else { panic!("{error:?}") };
    assert_eq!((call.attempt, call.attempts_allowed), (2, 2));
    assert!(!source.to_string().is_empty());
}

#[test]
fn a_refused_connection_is_a_transport_error_with_its_source() {
    let settings = settings(closed_port_url("/v1"));
    let generator = OpenAIChatGenerator::new("tiny", settings).unwrap();
    let error = generator.generate_blocking(&[Message::user("Hi")]).unwrap_err();
    let Error::Transport { call, .. } = &error else { panic!("{error:?}") };
    assert_eq!((call.attempt, call.attempts_allowed), (3, 3), "connection errors are retried");
    assert!(std::error::Error::source(&error).is_some());
}

#[test]
fn a_hang_up_is_retried_then_reported() {
    let server = Server::scripted(vec![
        Answer::HangUp,
        Answer::json(200, anthropic_reply(json!([{"type": "text", "text": "second time"}]), "end_turn")),
    ]);
    let reply = ChatGenerator::generate(&anthropic(&server), &[Message::user("Hi")]).unwrap();
    assert_eq!(reply.text(), Some("second time"));
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn malformed_replies_are_errors_not_retried() {
    let server = Server::scripted(vec![Answer::raw(200, "{\"choices\": [")]);
    let error = openai(&server).generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert!(matches!(&error, Error::MalformedReply { start, .. } if start == "{\"choices\": ["), "{error:?}");
    assert_eq!(server.requests().len(), 1);

    let server = Server::scripted(vec![Answer::json(200, json!({"choices": []}))]);
    let error = openai(&server).generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert!(
        matches!(&error, Error::UnexpectedReply { reason, call } if reason.contains("choices[0]") && call.attempt == 1)
    );

    let server = Server::scripted(vec![Answer::json(200, json!({"type": "message"}))]);
    let error = anthropic(&server).generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert!(matches!(&error, Error::UnexpectedReply { .. }), "{error:?}");
}

#[test]
fn messages_the_api_cannot_take_fail_before_any_request() {
    let server = Server::scripted(vec![Answer::raw(500, "")]);
    let call = ToolCall::new("search", Map::new());
    let error = openai(&server)
        .generate_blocking(&[Message::user("a"), Message::assistant_with_calls(None, vec![call])])
        .unwrap_err();
    assert!(
        matches!(&error, Error::UnsupportedMessage { index: 1, provider: Provider::OpenAI, reason } if reason.contains("id")),
        "{error:?}"
    );
    let raw = ToolCall::with_raw_arguments("search", "oops").with_id("t1");
    let error =
        anthropic(&server).generate_blocking(&[Message::assistant_with_calls(None, vec![raw])]).unwrap_err();
    assert!(matches!(&error, Error::UnsupportedMessage { index: 0, provider: Provider::Anthropic, .. }));
    assert!(server.requests().is_empty());
}

/// Runs the `#[ignore]`d test `name` in a child process without the providers' key variables,
/// so that no other test thread sees the environment change.
fn in_child_without_keys(name: &str) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--ignored", "--quiet"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{name} failed in its child process");
}

#[test]
fn a_missing_key_names_the_variable() {
    in_child_without_keys("generators::missing_key_child");
}

#[test]
#[ignore = "run by a_missing_key_names_the_variable without the key variables"]
fn missing_key_child() {
    let settings = ClientSettings::default().with_base_url("http://127.0.0.1:9/v1");
    let error = OpenAIChatGenerator::new("m", settings.clone()).unwrap_err();
    assert!(matches!(error, Error::MissingApiKey { variable: "OPENAI_API_KEY", .. }));
    assert!(error.to_string().contains("OPENAI_API_KEY"), "{error}");
    let error = generator_from_provider("anthropic", "m", settings.clone()).unwrap_err();
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
    let error = compaction_llm::counter_from_provider_spec("openai:gpt-4o", settings).unwrap_err();
    assert!(matches!(error, Error::MissingApiKey { variable: "OPENAI_API_KEY", .. }));
}

#[test]
fn provider_names_and_base_urls_are_checked() {
    let error =
        generator_from_provider("gemini", "m", ClientSettings::default().with_api_key("k")).unwrap_err();
    assert!(matches!(error, Error::UnknownProvider { .. }), "{error:?}");
    let error = generator_from_provider(
        "openai",
        "m",
        ClientSettings::default().with_api_key("k").with_base_url("localhost:8080"),
    )
    .unwrap_err();
    assert!(matches!(error, Error::InvalidBaseUrl { .. }), "{error:?}");
    let error =
        generator_from_provider("openai", " ", ClientSettings::default().with_api_key("k")).unwrap_err();
    assert!(matches!(error, Error::InvalidSpec { .. }), "{error:?}");
}

#[test]
fn generator_from_provider_talks_to_either_provider() {
    let server = Server::start(|request| {
        if request.path == "/v1/chat/completions" {
            Answer::json(200, completion(json!({"role": "assistant", "content": "from openai"})))
        } else {
            Answer::json(
                200,
                anthropic_reply(json!([{"type": "text", "text": "from anthropic"}]), "end_turn"),
            )
        }
    });
    let openai = generator_from_provider("openai", "m", settings(server.url("/v1/"))).unwrap();
    assert_eq!(ChatGenerator::generate(&openai, &[Message::user("Hi")]).unwrap().text(), Some("from openai"));
    let anthropic = generator_from_provider("Anthropic", "m", settings(server.url(""))).unwrap();
    assert_eq!(
        ChatGenerator::generate(&anthropic, &[Message::user("Hi")]).unwrap().text(),
        Some("from anthropic")
    );
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/chat/completions", "/v1/messages"]);
}

// The async path, on tokio.

#[cfg(feature = "async")]
#[tokio::test]
async fn async_generators_answer_and_retry() {
    let server = Server::scripted(vec![
        Answer::json(503, json!({"error": {"message": "busy"}})),
        Answer::json(200, completion(json!({"role": "assistant", "content": "async ok"}))),
    ]);
    let generator: &dyn AsyncChatGenerator = &openai(&server);
    let reply = generator.generate(&[Message::user("Hi")]).await.unwrap();
    assert_eq!(reply.text(), Some("async ok"));
    assert_eq!(server.requests().len(), 2);

    let server = Server::scripted(vec![Answer::json(
        200,
        anthropic_reply(
            json!([{"type": "tool_use", "id": "t", "name": "f", "input": {"a": [1]}}]),
            "tool_use",
        ),
    )]);
    let reply = AsyncChatGenerator::generate(&anthropic(&server), &[Message::user("Hi")]).await.unwrap();
    assert_eq!(reply.tool_calls().next().unwrap().arguments, args(json!({"a": [1]})));
}

#[cfg(feature = "async")]
#[tokio::test]
async fn async_errors_match_the_blocking_ones() {
    let server = Server::scripted(vec![Answer::json(500, json!({"error": {"message": "down"}}))]);
    let error = openai(&server).generate_async(&[Message::user("Hi")]).await.unwrap_err();
    assert!(matches!(&error, Error::Status { status: 500, call, .. } if call.attempt == 3), "{error:?}");
    assert_eq!(server.requests().len(), 3);

    let server =
        Server::scripted(vec![Answer::After(Duration::from_secs(3), Box::new(Answer::raw(200, "{}")))]);
    let settings = settings(server.url("")).with_timeout(Duration::from_millis(200)).with_max_retries(0);
    let error = AnthropicChatGenerator::new("m", settings)
        .unwrap()
        .generate_async(&[Message::user("Hi")])
        .await
        .unwrap_err();
    assert!(matches!(&error, Error::Timeout { call, .. } if call.attempts_allowed == 1), "{error:?}");

    let server = Server::scripted(vec![Answer::raw(200, "not json")]);
    let error = openai(&server).generate_async(&[Message::user("Hi")]).await.unwrap_err();
    assert!(matches!(error, Error::MalformedReply { .. }));

    let generator = OpenAIChatGenerator::new("m", settings_for_closed_port()).unwrap();
    let error = generator.generate_async(&[Message::user("Hi")]).await.unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error:?}");
}

#[cfg(feature = "async")]
fn settings_for_closed_port() -> ClientSettings {
    settings(closed_port_url("/v1"))
}

#[cfg(feature = "async")]
#[tokio::test(flavor = "current_thread")]
async fn a_waiting_call_leaves_the_runtime_free() {
    // One runtime thread: if the call blocked it, the ticker could not run until the reply.
    let server = Server::scripted(vec![Answer::After(
        Duration::from_millis(400),
        Box::new(Answer::json(200, completion(json!({"role": "assistant", "content": "slow"})))),
    )]);
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&ticks);
    let ticker = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let reply = openai(&server).generate_async(&[Message::user("Hi")]).await.unwrap();
    ticker.abort();
    assert_eq!(reply.text(), Some("slow"));
    let ticked = ticks.load(std::sync::atomic::Ordering::SeqCst);
    assert!(ticked >= 10, "the runtime ticked only {ticked} times while the call waited");
}
