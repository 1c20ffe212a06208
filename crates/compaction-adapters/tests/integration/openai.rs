//! async-openai's Chat Completions messages and Responses input items ⇄ ours.

use std::collections::BTreeMap;
use std::path::Path;

use async_openai::types::chat::ChatCompletionRequestMessage;
use async_openai::types::responses::InputItem;
use compaction_adapters::openai::{
    from_chat_completions, from_responses_input, to_chat_completions, to_responses_input,
};
use compaction_model::{Part, Role};
use serde_json::{json, Value};

use crate::{assert_round_trip, corpus};

fn workspace_file(path: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    serde_json::from_slice(&std::fs::read(&path).expect("file readable")).expect("JSON")
}

#[test]
fn every_committed_conversation_round_trips_through_chat_completions() {
    let mut all: BTreeMap<String, usize> = BTreeMap::new();
    for conversation in corpus() {
        let by_field =
            assert_round_trip(&conversation.name, &conversation.messages, to_chat_completions, |m| {
                from_chat_completions(m)
            });
        for (field, n) in by_field {
            *all.entry(field).or_default() += n;
        }
    }
    eprintln!("all: {all:?}");
}

/// The real runs lose only what Chat Completions has no place for.
#[test]
fn real_runs_lose_only_what_chat_completions_cannot_hold() {
    let expected: &[(&str, &[&str])] = &[
        // Claude's thinking, and a result's error flag (OpenAI tool messages have none).
        ("claude-code/fa812bfe-excerpt.json", &["part"]),
        ("swe-agent/pandas-excerpt.json", &[]),
        ("openhands/multi-swe-bench-1-excerpt.json", &[]),
        // Tool messages have no name.
        ("tau-bench/gpt-4o-airline-0.json", &["name"]),
    ];
    let corpus = corpus();
    for (file, fields) in expected {
        let conversation = corpus.iter().find(|c| c.name.ends_with(file)).expect("transcript present");
        let found = assert_round_trip(file, &conversation.messages, to_chat_completions, |m| {
            from_chat_completions(m)
        });
        let found: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(found, *fields, "{file}");
    }
}

/// OpenAI messages written by others (the bundled request, tau-bench's trajectories) come back
/// from ours unchanged.
#[test]
fn openai_transcripts_come_back_unchanged() {
    let mut conversations =
        vec![workspace_file("examples/transcripts/openai/weather.json")["messages"].clone()];
    for trajectory in
        workspace_file("examples/transcripts/tau-bench/gpt-4o-airline-excerpt.json").as_array().unwrap()
    {
        conversations.push(trajectory["traj"].clone());
    }
    for messages in conversations {
        let messages: Vec<ChatCompletionRequestMessage> =
            serde_json::from_value(messages).expect("OpenAI messages");
        let ours = from_chat_completions(&messages);
        let back = to_chat_completions(&ours);
        assert!(back.is_lossless(), "{:?}", back.losses());
        assert_eq!(back.into_value(), messages);
    }
}

#[test]
fn every_committed_conversation_round_trips_through_responses() {
    let mut all: BTreeMap<String, usize> = BTreeMap::new();
    for conversation in corpus() {
        let by_field =
            assert_round_trip(&conversation.name, &conversation.messages, to_responses_input, |m| {
                from_responses_input(m)
            });
        for (field, n) in by_field {
            *all.entry(field).or_default() += n;
        }
    }
    eprintln!("all: {all:?}");
}

#[test]
fn real_runs_lose_only_what_responses_cannot_hold() {
    let expected: &[(&str, &[&str])] = &[
        // Claude's thinking signatures.
        ("claude-code/fa812bfe-excerpt.json", &["reasoning.extra"]),
        ("swe-agent/pandas-excerpt.json", &[]),
        ("openhands/multi-swe-bench-1-excerpt.json", &[]),
        ("tau-bench/gpt-4o-airline-0.json", &["name"]),
    ];
    let corpus = corpus();
    for (file, fields) in expected {
        let conversation = corpus.iter().find(|c| c.name.ends_with(file)).expect("transcript present");
        let found =
            assert_round_trip(file, &conversation.messages, to_responses_input, |m| from_responses_input(m));
        let found: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(found, *fields, "{file}");
    }
}

/// Every kind of input item, with fields our model has no place for, comes back unchanged.
#[test]
fn every_kind_of_responses_item_comes_back_unchanged() {
    let items: Vec<InputItem> = serde_json::from_value(json!([
        {"type": "message", "role": "developer", "content": "Be brief."},
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "One list item."}]},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Compare these."},
            {"type": "input_image", "detail": "high", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            {"type": "input_image", "detail": "auto", "file_id": "file-img"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
            {"type": "input_file", "file_url": "https://example.com/b.pdf"}
        ]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "First."}, {"type": "summary_text", "text": "Second."}], "encrypted_content": "opaque=="},
        {"type": "reasoning", "id": null, "summary": []},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [
            {"type": "output_text", "text": "Looking.", "annotations": [], "logprobs": null},
            {"type": "refusal", "refusal": "Not that one."}
        ]},
        {"type": "message", "role": "assistant", "content": "Plain text from an easy message."},
        {"type": "function_call", "call_id": "call_1", "name": "search", "arguments": "{\"q\": \"cats\"}", "id": "fc_1", "status": "completed"},
        {"type": "function_call", "call_id": "call_2", "name": "read", "arguments": "{\"path\": \"a.t"},
        {"type": "custom_tool_call", "call_id": "call_3", "name": "patch", "input": "*** Begin Patch", "id": "ctc_1"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "cats"}},
        {"type": "function_call_output", "call_id": "call_1", "output": "3 hits"},
        {"type": "function_call_output", "call_id": "call_2", "output": [
            {"type": "input_text", "text": "no such file"},
            {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,iVBORw0KGgo="}
        ], "status": "completed"},
        {"type": "custom_tool_call_output", "call_id": "call_3", "output": "patched"},
        {"type": "item_reference", "id": "msg_0"},
        {"type": "message", "role": "assistant", "content": "Done."},
        {"type": "message", "role": "assistant", "content": [{"type": "input_text", "text": "A list."}]},
        {"type": "message", "role": "user", "content": "Thanks."}
    ]))
    .expect("Responses input items");
    let ours = from_responses_input(&items);
    let roles: Vec<Role> = ours.iter().map(|m| m.role).collect();
    use Role::*;
    assert_eq!(roles, [System, System, User, Assistant, Tool, Tool, Tool, Assistant, User]);
    // The model's consecutive items make one assistant message: 2 reasoning, 3 texts, 3 calls,
    // the web search call.
    assert_eq!(ours[3].parts.len(), 9);
    assert_eq!(ours[3].tool_calls().count(), 3);
    let read = ours[5].tool_call_result().unwrap();
    assert_eq!(read.origin.raw_arguments.as_deref(), Some("{\"path\": \"a.t"));
    assert!(matches!(ours[3].parts[0], Part::Reasoning(ref r) if r.reasoning_text == "First.\n\nSecond."));

    let back = to_responses_input(&ours);
    assert!(back.is_lossless(), "{:?}", back.losses());
    assert_eq!(back.into_value(), items);
}
