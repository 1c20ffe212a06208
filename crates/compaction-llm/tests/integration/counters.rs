//! The provider counters against a local server: the requests they send, one request per
//! distinct message, failures reported by `try_count` and estimated by `count`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
#[cfg(feature = "async")]
use std::time::Duration;

use compaction_llm::{counter_from_provider_spec, AnthropicTokenCounter, Error, OpenAITokenCounter};
use compaction_model::{Message, ToolCall, ToolSpec};
use compaction_tokens::{ApproximateTokenCounter, Counts, TokenCounter};
use serde_json::{json, Value};

use crate::server::{Answer, Recorded, Server};
use crate::settings;

/// A server that counts as a stand-in provider would: the characters of the request's
/// conversation part (`input`, or `system` + `messages`) and tools, so different requests get
/// different, predictable counts.
fn counting_server() -> Server {
    Server::start(|request: &Recorded| {
        Answer::json(
            200,
            json!({"object": "response.input_tokens", "input_tokens": stand_in_count(&request.json())}),
        )
    })
}

fn stand_in_count(body: &Value) -> usize {
    let part = |key: &str| body.get(key).map(|v| v.to_string().len()).unwrap_or(0);
    part("input") + part("system") + part("messages") + part("tools")
}

fn conversation() -> Vec<Message> {
    let call = ToolCall::new("search", json!({"q": "rust"}).as_object().unwrap().clone()).with_id("c1");
    vec![
        Message::system("Be brief."),
        Message::user("Find rust"),
        Message::assistant_with_calls(None, vec![call.clone()]),
        Message::tool("3 hits", call, false),
        Message::user("Find rust"),
    ]
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec::new(
        "search",
        "Searches.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    )]
}

#[test]
fn openai_counter_posts_responses_input_and_reads_input_tokens() {
    let server = counting_server();
    let counter = OpenAITokenCounter::new("gpt-test", settings(server.url("/v1"))).unwrap();
    let messages = conversation();
    let count = counter.try_count(&messages, &tools()).unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.path.as_str(), request.header("authorization")),
        ("/v1/responses/input_tokens", Some("Bearer sk-test"))
    );
    let body = request.json();
    assert_eq!(count, stand_in_count(&body));
    assert_eq!(body, counter.request_body(&messages, &tools()).unwrap());
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["input"][0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(
        body["input"][2],
        json!({"type": "function_call", "name": "search", "arguments": "{\"q\": \"rust\"}", "id": "c1", "call_id": ""})
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["name"], "search");
    assert_eq!(counter.describe(), "openai:gpt-test");
}

#[test]
fn nothing_to_count_asks_nothing() {
    let server = counting_server();
    let counter = OpenAITokenCounter::new("gpt-test", settings(server.url("/v1"))).unwrap();
    assert_eq!(counter.try_count(&[], &[]).unwrap(), 0);
    assert_eq!(counter.try_count_each(&[]).unwrap(), Counts::default());
    assert!(server.requests().is_empty());
}

#[test]
fn count_each_asks_once_per_distinct_message_plus_the_whole() {
    let server = counting_server();
    let counter =
        OpenAITokenCounter::new("gpt-test", settings(server.url("/v1")).with_max_concurrent_requests(3))
            .unwrap();
    let messages = conversation();
    let counts = counter.try_count_each(&messages).unwrap();

    // Messages 1 and 4 send the same request: 4 distinct messages, and the whole.
    assert_eq!(server.requests().len(), 5);
    let alone = |m: &Message| stand_in_count(&counter.request_body(std::slice::from_ref(m), &[]).unwrap());
    assert_eq!(counts.each, messages.iter().map(alone).collect::<Vec<_>>());
    assert_eq!(counts.total, stand_in_count(&counter.request_body(&messages, &[]).unwrap()));
    assert_eq!(counts.each[1], counts.each[4]);
}

#[test]
fn anthropic_counter_posts_count_tokens() {
    let server = counting_server();
    let counter = AnthropicTokenCounter::new("claude-test", settings(server.url(""))).unwrap();
    let messages = conversation();
    let count = counter.try_count(&messages, &tools()).unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages/count_tokens");
    assert_eq!(request.header("x-api-key"), Some("sk-test"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    let body = request.json();
    assert_eq!(count, stand_in_count(&body));
    assert_eq!(body["system"], json!([{"type": "text", "text": "Be brief."}]));
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(body["messages"].as_array().unwrap().len(), 3, "user / assistant / user (tool result + text)");
    assert_eq!(counter.describe(), "anthropic:claude-test");

    // A system message alone is still counted: as a user turn, since the API needs one.
    let system = counter.request_body(&[Message::system("Be brief.")], &[]).unwrap();
    assert_eq!(
        system,
        json!({"model": "claude-test", "messages": [{"role": "user", "content": [{"type": "text", "text": "Be brief."}]}]})
    );
}

#[test]
fn a_failed_count_is_an_error_for_try_count_and_an_estimate_for_count() {
    let server = Server::scripted(vec![Answer::json(
        503,
        json!({"error": {"message": "try later", "type": "overloaded"}}),
    )]);
    let counter = OpenAITokenCounter::new("gpt-test", settings(server.url("/v1"))).unwrap();
    let messages = conversation();

    let error = counter.try_count(&messages, &[]).unwrap_err();
    let compaction_tokens::Error::Provider { counter: name, source } = &error else { panic!("{error:?}") };
    assert_eq!(name, "openai:gpt-test");
    let cause = source.downcast_ref::<Error>().expect("the source is compaction_llm's error");
    assert!(
        matches!(cause, Error::Status { status: 503, message, .. } if message == "overloaded: try later")
    );
    assert_eq!(server.requests().len(), 3);

    assert!(counter.try_count_each(&messages).is_err());
    let approximate = ApproximateTokenCounter::default();
    assert_eq!(counter.count(&messages, &tools()), approximate.count(&messages, &tools()));
    assert_eq!(counter.count_each(&messages), approximate.count_each(&messages));
}

#[test]
fn count_each_stops_at_the_first_failure() {
    let asked = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&asked);
    let server = Server::start(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
        Answer::json(400, json!({"error": {"message": "bad"}}))
    });
    let settings = settings(server.url("/v1")).with_max_concurrent_requests(1);
    let counter = OpenAITokenCounter::new("gpt-test", settings).unwrap();
    let error = counter.count_each_blocking(&conversation()).unwrap_err();
    assert!(matches!(error, Error::Status { status: 400, .. }));
    assert_eq!(asked.load(Ordering::SeqCst), 1, "one worker, and it stopped after the first failure");
}

#[test]
fn a_message_the_api_cannot_take_names_its_real_index() {
    let server = counting_server();
    let counter = OpenAITokenCounter::new("gpt-test", settings(server.url("/v1"))).unwrap();
    let mut messages = conversation();
    messages.push(Message::user_parts(vec![]));
    let error = counter.count_each_blocking(&messages).unwrap_err();
    assert!(matches!(error, Error::UnsupportedMessage { index: 5, .. }), "{error:?}");
    assert!(server.requests().is_empty());
}

#[test]
fn counters_from_a_spec() {
    let server = counting_server();
    let counter = counter_from_provider_spec("anthropic:claude-x", settings(server.url(""))).unwrap();
    assert_eq!(counter.describe(), "anthropic:claude-x");
    assert!(counter.try_count(&[Message::user("hi")], &[]).unwrap() > 0);
    assert!(matches!(
        counter_from_provider_spec("openai", settings(server.url(""))),
        Err(Error::InvalidSpec { .. })
    ));
    assert!(matches!(
        counter_from_provider_spec("tiktoken:gpt-4o", settings(server.url(""))),
        Err(Error::UnknownProvider { .. })
    ));
}

#[cfg(feature = "async")]
#[tokio::test]
async fn async_counts_run_concurrently_and_agree_with_the_blocking_ones() {
    let server = Server::start(|request| {
        Answer::After(
            Duration::from_millis(150),
            Box::new(Answer::json(200, json!({"input_tokens": stand_in_count(&request.json())}))),
        )
    });
    let counter =
        AnthropicTokenCounter::new("claude-test", settings(server.url("")).with_max_concurrent_requests(8))
            .unwrap();
    let messages = conversation();
    let started = std::time::Instant::now();
    let counts = counter.count_each_async(&messages).await.unwrap();
    // Five requests of 150 ms each, all at once: far less than their sum.
    assert!(started.elapsed() < Duration::from_millis(600), "{:?}", started.elapsed());
    assert_eq!(server.requests().len(), 5);
    let blocking =
        tokio::task::spawn_blocking(move || counter.count_each_blocking(&messages)).await.unwrap().unwrap();
    assert_eq!(counts, blocking);

    let counter = OpenAITokenCounter::new("gpt-test", settings(server.url("/v1"))).unwrap();
    let total = counter.count_async(&conversation(), &tools()).await.unwrap();
    assert_eq!(total, stand_in_count(&counter.request_body(&conversation(), &tools()).unwrap()));
}
