//! genai's `ChatMessage` ⇄ ours.

use std::collections::BTreeMap;

use compaction_adapters::genai::{from_genai, to_genai};
use compaction_model::Role;
use genai::chat::ChatMessage;
use serde_json::{json, Value};

use crate::{assert_round_trip_by, corpus};

fn as_json(messages: &Vec<ChatMessage>) -> Value {
    serde_json::to_value(messages).expect("genai messages serialize")
}

#[test]
fn every_committed_conversation_round_trips_through_genai() {
    let mut all: BTreeMap<String, usize> = BTreeMap::new();
    for conversation in corpus() {
        let by_field = assert_round_trip_by(
            &conversation.name,
            &conversation.messages,
            to_genai,
            |m| from_genai(m),
            as_json,
        );
        for (field, n) in by_field {
            *all.entry(field).or_default() += n;
        }
    }
    eprintln!("all: {all:?}");
}

#[test]
fn real_runs_lose_only_what_genai_cannot_hold() {
    let expected: &[(&str, &[&str])] = &[
        // Claude's thinking signatures, and results of several texts (genai's tool responses
        // are a string: the texts are joined).
        ("claude-code/fa812bfe-excerpt.json", &["reasoning.extra", "tool_call_result.result"]),
        ("swe-agent/pandas-excerpt.json", &["tool_call_result.result (a list of one text)"]),
        ("openhands/multi-swe-bench-1-excerpt.json", &[]),
        ("tau-bench/gpt-4o-airline-0.json", &["name"]),
    ];
    let corpus = corpus();
    for (file, fields) in expected {
        let conversation = corpus.iter().find(|c| c.name.ends_with(file)).expect("transcript present");
        let found = assert_round_trip_by(file, &conversation.messages, to_genai, |m| from_genai(m), as_json);
        let found: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(found, *fields, "{file}");
    }
}

/// Every kind of content part comes back unchanged.
#[test]
fn every_kind_of_genai_part_comes_back_unchanged() {
    let history: Vec<ChatMessage> = serde_json::from_value(json!([
        {"role": "System", "content": [{"Text": "Be brief."}], "options": {"cache_control": "Ephemeral"}},
        {"role": "User", "content": [
            {"Text": "Look."},
            {"Binary": {"content_type": "image/png", "source": {"Base64": "iVBORw0KGgo="}, "name": "cat.png"}},
            {"Binary": {"content_type": "image/jpeg", "source": {"Url": "https://example.com/dog.jpg"}}},
            {"Binary": {"content_type": "application/pdf", "source": {"Base64": "JVBERi0="}, "name": "a.pdf"}}
        ]},
        {"role": "Assistant", "content": [
            {"ReasoningContent": "thinking"},
            {"ThoughtSignature": "sig-0"},
            {"Text": "Checking."},
            {"ToolCall": {"call_id": "call_1", "fn_name": "search", "fn_arguments": {"q": "cats"}, "thought_signatures": ["sig-1"]}},
            {"ToolCall": {"call_id": "call_2", "fn_name": "read", "fn_arguments": "{\"path\": \"a.t"}},
            {"ToolCall": {"call_id": "", "fn_name": "list", "fn_arguments": [1, 2]}},
            {"ToolCall": {"call_id": "call_4", "fn_name": "noop", "fn_arguments": null}},
            {"Custom": {"model_iden": null, "data": {"type": "web_search", "q": "cats"}}}
        ]},
        {"role": "Tool", "content": [
            {"ToolResponse": {"call_id": "call_1", "fn_name": "search", "content": "3 hits"}},
            {"ToolResponse": {"call_id": "call_2", "content": "no such file"}},
            {"ToolResponse": {"call_id": "", "fn_name": "list", "content": "[]"}},
            {"ToolResponse": {"call_id": "call_9", "fn_name": "unpaired", "content": "?"}}
        ]},
        {"role": "Assistant", "content": [{"Text": "Done."}]}
    ]))
    .expect("genai messages");
    let ours = from_genai(&history);
    assert_eq!(
        ours.iter().map(|m| m.role).collect::<Vec<_>>(),
        [Role::System, Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    let results: Vec<_> = ours[3].tool_call_results().collect();
    assert_eq!(results[1].origin.raw_arguments.as_deref(), Some("{\"path\": \"a.t"));
    assert_eq!(results[2].origin.raw_arguments.as_deref(), Some("[1,2]"));
    assert_eq!(results[3].origin.tool_name, "unpaired");

    let back = to_genai(&ours);
    assert!(back.is_lossless(), "{:?}", back.losses());
    assert_eq!(as_json(&back.into_value()), as_json(&history));
}
