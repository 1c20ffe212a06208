//! Reactive recovery end to end: a local server with a smaller window than the agent believes
//! refuses a request as too long, the client's error says so (with the stated window), the
//! hook's recovery compacts, and the retried request goes through; a request that cannot be
//! made to fit stops after one retry.

use compaction_core::ToolResultPruningCompactor;
use compaction_hook::{
    AgentState, CompactionHook, CompactionHookSettings, ContextOverflowRecovery, Recovery,
};
#[cfg(feature = "async")]
use compaction_llm::AnthropicChatGenerator;
use compaction_llm::{Error, OpenAIChatGenerator};
use compaction_model::{Message, ToolCall};
use serde_json::{json, Value};

use crate::server::{Answer, Recorded, Server};
use crate::settings;

/// The tokens the stand-in server counts for a request: a character count of its messages over
/// four.
fn prompt_tokens(request: &Recorded) -> usize {
    request.json()["messages"].to_string().chars().count() / 4
}

/// An OpenAI-compatible server whose model has a window of `window` tokens: a larger request is
/// refused as OpenAI refuses it, naming the window and the count.
fn openai_server(window: usize) -> Server {
    Server::start(move |request| {
        let tokens = prompt_tokens(request);
        if tokens > window {
            return Answer::json(
                400,
                json!({"error": {
                    "message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
                    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"
                }}),
            );
        }
        Answer::json(
            200,
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "tiny",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "The logs show three restarts."}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": tokens, "completion_tokens": 7, "total_tokens": tokens + 7}
            }),
        )
    })
}

/// Five steps of a run, each with a log of about 1,000 tokens.
fn long_run() -> AgentState {
    let mut state = AgentState::new(vec![
        Message::system("You read logs and answer briefly."),
        Message::user("Why did the service restart?"),
    ]);
    for step in 0..5 {
        let call = ToolCall::new("read_log", serde_json::Map::new()).with_id(format!("call_{step}"));
        state.push(Message::assistant_with_calls(None, vec![call.clone()]));
        let log: String = (0..100).map(|i| format!("{step}:{i:03} service ok\n")).collect();
        state.push(Message::tool(log.repeat(2), call, false));
        state.step_count += 1;
    }
    state
}

/// A hook set for a 100,000-token window: it sees no reason to compact these runs.
fn hook() -> CompactionHook {
    CompactionHook::new(Box::new(ToolResultPruningCompactor::default()), CompactionHookSettings::new(100_000))
        .unwrap()
}

/// The agent loop's model call: on a context overflow, recover and send the request again while
/// the recovery says so.
fn generate_with_recovery(
    generator: &OpenAIChatGenerator,
    hook: &CompactionHook,
    state: &mut AgentState,
    recovery: &mut ContextOverflowRecovery,
) -> Result<Message, Error> {
    loop {
        let error = match generator.generate_blocking(state.messages()) {
            Ok(reply) => return Ok(reply),
            Err(error) => error,
        };
        let Some(overflow) = error.context_overflow() else { return Err(error) };
        if !recovery.recover(hook, state, overflow).expect("the counter counts").should_retry() {
            return Err(error);
        }
    }
}

#[test]
fn an_overflow_is_compacted_away_and_the_retry_succeeds() {
    let server = openai_server(3_000);
    let generator = OpenAIChatGenerator::new("tiny", settings(server.url("/v1"))).unwrap();
    let hook = hook();
    let mut state = long_run();
    assert!(!hook.run(&mut state).compacted, "the hook's estimate is far below its window");

    let mut recovery = ContextOverflowRecovery::new();
    let reply = generate_with_recovery(&generator, &hook, &mut state, &mut recovery).unwrap();
    assert_eq!(reply.text(), Some("The logs show three restarts."));

    let requests = server.requests();
    // The refused request was not retried as it was (the client retries 5xx twice here), only
    // once after compacting.
    assert_eq!(requests.len(), 2);
    let (refused, accepted) = (prompt_tokens(&requests[0]), prompt_tokens(&requests[1]));
    assert!(refused > 3_000 && accepted <= 3_000, "{refused} then {accepted}");
    // The retry carries the same calls, each with its result; the older results are pruned and
    // the newest step is whole.
    let messages = requests[1].json()["messages"].as_array().unwrap().clone();
    let results: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), 5);
    assert!(results[..4].iter().all(|m| m["content"].as_str().unwrap().starts_with("[Tool result removed")));
    assert!(results[4]["content"].as_str().unwrap().starts_with("4:000 service ok"));
}

#[test]
fn the_error_names_the_window_and_a_second_overflow_is_not_retried() {
    // A window no compaction can reach: the system prompt and the newest step alone exceed it.
    let server = openai_server(300);
    let generator = OpenAIChatGenerator::new("tiny", settings(server.url("/v1"))).unwrap();
    let hook = hook();
    let mut state = long_run();
    let mut recovery = ContextOverflowRecovery::new();

    let error = generate_with_recovery(&generator, &hook, &mut state, &mut recovery).unwrap_err();
    assert!(error.is_context_overflow(), "{error}");
    assert_eq!(error.context_limit(), Some(300));
    assert!(matches!(&error, Error::Status { status: 400, .. }));
    // One refused request, one retry after compacting, and no more.
    assert_eq!(server.requests().len(), 2);
    let overflow = *error.context_overflow().unwrap();
    assert!(matches!(recovery.recover(&hook, &mut state, &overflow).unwrap(), Recovery::AlreadyRetried));
}

#[test]
fn an_overflow_answered_with_500_is_not_retried_as_sent() {
    // llama.cpp's server has answered an overflow with 500, which the client would otherwise
    // retry.
    let server = Server::scripted(vec![Answer::json(
        500,
        json!({"error": {"code": 500, "message": "the request exceeds the available context size. try increasing the context size or enable context shift", "type": "exceed_context_size_error", "n_prompt_tokens": 1407, "n_ctx": 256}}),
    )]);
    let generator = OpenAIChatGenerator::new("tiny", settings(server.url("/v1"))).unwrap();
    let error = generator.generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert_eq!(server.requests().len(), 1);
    let overflow = error.context_overflow().expect("an overflow");
    assert_eq!((overflow.limit, overflow.requested), (Some(256), Some(1_407)));
    // Other errors are not overflows.
    let server = Server::scripted(vec![Answer::json(401, json!({"error": {"message": "bad key"}}))]);
    let generator = OpenAIChatGenerator::new("tiny", settings(server.url("/v1"))).unwrap();
    let error = generator.generate_blocking(&[Message::user("Hi")]).unwrap_err();
    assert!(!error.is_context_overflow() && error.context_limit().is_none());
}

#[cfg(feature = "async")]
#[tokio::test]
async fn anthropic_on_tokio_recovers_the_same_way() {
    const WINDOW: usize = 3_000;
    let server = Server::start(|request| {
        let tokens = prompt_tokens(request);
        if tokens > WINDOW {
            return Answer::json(
                400,
                json!({"type": "error", "error": {"type": "invalid_request_error",
                    "message": format!("prompt is too long: {tokens} tokens > {WINDOW} maximum")}}),
            );
        }
        Answer::json(
            200,
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                "content": [{"type": "text", "text": "Three restarts."}], "stop_reason": "end_turn",
                "usage": {"input_tokens": tokens, "output_tokens": 3}}),
        )
    });
    let generator = AnthropicChatGenerator::new("claude-test", settings(server.url(""))).unwrap();
    let hook = hook();
    let mut state = long_run();
    let mut recovery = ContextOverflowRecovery::new();

    let error = generator.generate_async(state.messages()).await.unwrap_err();
    let overflow = *error.context_overflow().expect("an overflow");
    assert_eq!(overflow.limit, Some(WINDOW));
    assert_eq!(overflow.requested, Some(prompt_tokens(&server.requests()[0])));
    let recovered = recovery.recover_async(&hook, &mut state, &overflow).await.unwrap();
    assert!(recovered.should_retry(), "{recovered:?}");
    let reply = generator.generate_async(state.messages()).await.unwrap();
    assert_eq!(reply.text(), Some("Three restarts."));
    assert_eq!(server.requests().len(), 2);
}
