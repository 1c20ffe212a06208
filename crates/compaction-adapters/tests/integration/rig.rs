//! rig-core's `completion::Message` ⇄ ours, and the memory policy.

use std::collections::BTreeMap;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use compaction_adapters::rig::{from_rig, pruning_memory, to_rig, CompactionPolicy};
use compaction_core::{PruningSettings, ToolResultPruningCompactor, DEFAULT_PLACEHOLDER};
use compaction_model::{Part, Role, TextPart};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use rig_core::completion::message::{
    AssistantContent, AssistantMessage, CallId, ToolCall, ToolFunction, ToolName, ToolResultContent,
    UserContent,
};
use rig_core::completion::Message;
use rig_core::id::ConversationId;
use rig_memory::{ConversationMemory, MemoryPolicy};
use serde_json::{json, Value};

use crate::{assert_round_trip, corpus};

#[test]
fn every_committed_conversation_round_trips_through_rig() {
    let mut all: BTreeMap<String, usize> = BTreeMap::new();
    for conversation in corpus() {
        let by_field = assert_round_trip(&conversation.name, &conversation.messages, to_rig, |m| from_rig(m));
        if !by_field.is_empty() {
            eprintln!("{}: {:?}", conversation.name, by_field);
        }
        for (field, n) in by_field {
            *all.entry(field).or_default() += n;
        }
    }
    eprintln!("all: {all:?}");
}

/// The real runs lose only what rig has no place for: Claude's reasoning signatures, SWE-agent's
/// one-text result lists (rig's results are lists, so a list of one text is a string to us) and
/// tau-bench's tool-message names.
#[test]
fn real_runs_lose_only_what_rig_cannot_hold() {
    let expected: &[(&str, &[&str])] = &[
        ("claude-code/fa812bfe-excerpt.json", &["reasoning.extra"]),
        ("swe-agent/pandas-excerpt.json", &["tool_call_result.result (a list of one text)"]),
        ("openhands/multi-swe-bench-1-excerpt.json", &[]),
        ("tau-bench/gpt-4o-airline-0.json", &["name"]),
        ("haystack/read-file.json", &["meta.model"]),
        (
            "haystack/agent-run.json",
            &["meta.tool_result_offloaded", "tool_call_result.result[1].image.validation"],
        ),
    ];
    let corpus = corpus();
    for (file, fields) in expected {
        let conversation = corpus.iter().find(|c| c.name.ends_with(file)).expect("transcript present");
        let found = assert_round_trip(file, &conversation.messages, to_rig, |m| from_rig(m));
        let found: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(found, *fields, "{file}");
    }
}

/// Every kind of rig content, with what our model has no field for (native items, a random
/// local call id, recovered arguments, URLs, file ids, raw bytes, opaque items, an origin and a
/// stop reason), comes back unchanged.
#[test]
fn every_kind_of_rig_content_comes_back_unchanged() {
    let history: Vec<Message> = serde_json::from_value(json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "Look at these."},
            {"type": "image", "data": {"type": "base64", "value": "iVBORw0KGgo="}, "media_type": "png", "detail": "high"},
            {"type": "image", "data": {"type": "url", "value": "https://example.com/cat.png"}},
            {"type": "audio", "data": {"type": "base64", "value": "UklGRg=="}, "media_type": "wav"},
            {"type": "video", "data": {"type": "fileId", "value": "file-123"}, "media_type": "mp4", "additional_params": {"fps": 2}},
            {"type": "document", "data": {"type": "base64", "value": "JVBERi0="}, "media_type": "pdf"},
            {"type": "document", "data": {"type": "string", "value": "# Notes\nplain text"}, "media_type": "markdown"},
            {"type": "document", "data": {"type": "raw", "value": [1, 2, 3]}},
            {"type": "audio", "data": {"type": "base64", "value": "AAAA"}}
        ]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "thinking", "native": {"item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "xyz"}, "fingerprint": "0123456789abcdef"}},
            {"type": "reasoning", "text": "", "redacted": true},
            {"type": "text", "text": "Let me check.", "native": {"item": {"id": "msg_1"}, "fingerprint": "00000000000000ff"}},
            {"type": "toolcall", "id": {"provider": "call_1"}, "function": {"name": "search", "arguments": {"q": "cats"}}},
            {"type": "toolcall", "id": {"local": "7a3c1f0e-2b4d-4e6f-8a9b-0c1d2e3f4a5b"}, "function": {"name": "read", "arguments": {"path": "a.t"}, "invalid_arguments": "{\"path\": \"a.t"}},
            {"type": "toolcall", "id": {"local": "00000000-0000-4000-8000-000000020005"}, "function": {"name": "list", "arguments": {}}},
            {"type": "opaque", "item": {"type": "web_search_call", "id": "ws_1"}, "replay": true},
            {"type": "image", "data": {"type": "base64", "value": "R0lGODlh"}, "media_type": "gif"}
        ], "origin": {"api": "openai.responses", "provider": "openai", "model": "gpt-5", "response_id": "resp_1"}, "stop": "tool_use"},
        {"role": "user", "content": [
            {"type": "toolresult", "call": {"provider": "call_1"}, "name": "search", "content": [
                {"type": "text", "text": "3 hits"}, {"type": "json", "value": {"hits": [1, 2.5, "x"], "z": null, "a": true}}]},
            {"type": "toolresult", "call": {"local": "7a3c1f0e-2b4d-4e6f-8a9b-0c1d2e3f4a5b"}, "name": "read", "content": [{"type": "text", "text": "no such file"}], "is_error": true},
            {"type": "toolresult", "call": {"local": "00000000-0000-4000-8000-000000020005"}, "name": "list", "content": [
                {"type": "image", "data": {"type": "base64", "value": "iVBORw0KGgo="}, "media_type": "png"}]},
            {"type": "toolresult", "call": {"provider": "call_9"}, "name": "unpaired", "content": []},
            {"type": "text", "text": "Also consider this."}
        ]},
        {"role": "user", "content": [
            {"type": "toolresult", "call": {"provider": "call_1"}, "name": "renamed", "content": [{"type": "text", "text": "again"}]}
        ]},
        {"role": "user", "content": []},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}], "stop": {"error": "overloaded"}}
    ]))
    .expect("rig reads its own serde form");
    let ours = from_rig(&history);
    // Each result is a tool message of its own; the text after them a user message.
    let roles: Vec<Role> = ours.iter().map(|m| m.role).collect();
    use Role::*;
    assert_eq!(roles, [System, User, Assistant, Tool, Tool, Tool, Tool, User, Tool, User, Assistant]);
    let read = ours[4].tool_call_result().unwrap();
    assert_eq!(
        read.origin.raw_arguments.as_deref(),
        Some("{\"path\": \"a.t"),
        "origin found by the local id"
    );
    assert!(read.error);
    assert_eq!(ours[2].parts.len(), 8);
    // A text document is text, counted as such.
    assert_eq!(
        ours[1].parts[6],
        Part::Text(TextPart {
            text: "# Notes\nplain text".into(),
            unknown: rig_stash(json!({"type": "document", "media_type": "markdown"})).into()
        })
    );

    let back = to_rig(&ours);
    assert!(back.is_lossless(), "{:?}", back.losses());
    assert_eq!(back.into_value(), history);
}

/// Numbers past 64 bits in tool arguments and JSON results survive (serde_json keeps every digit
/// in this workspace; rig's own serde form would not).
#[test]
fn big_numbers_survive() {
    let arguments: serde_json::Map<String, Value> =
        serde_json::from_str(r#"{"n": 18446744073709551616, "x": 1.000000000000000000001}"#).unwrap();
    let call = ToolCall::new(
        CallId::from_wire("c1"),
        ToolFunction::new(ToolName::new("f").unwrap(), Value::Object(arguments.clone())),
    );
    let value: Value = serde_json::from_str(r#"{"big": -99999999999999999999999}"#).unwrap();
    let history = vec![
        Message::from(AssistantContent::ToolCall(call.clone())),
        Message::User {
            content: vec![UserContent::ToolResult(call.result(vec![ToolResultContent::json(value.clone())]))],
        },
    ];
    let ours = from_rig(&history);
    assert_eq!(ours[0].tool_calls().next().unwrap().arguments, arguments);
    let back = to_rig(&ours).into_lossless().expect("lossless");
    assert_eq!(back, history);
}

/// What rig cannot hold is named, message and part.
#[test]
fn losses_name_the_message_and_part() {
    let call = compaction_model::ToolCall::new("search", Default::default()).with_id("c1");
    let mut with_extra = call.clone();
    with_extra.extra = Some(serde_json::Map::from_iter([("k".to_owned(), json!(1))]).into());
    let mut user = compaction_model::Message::user("hi").with_name("alice");
    user.meta.insert("usage".into(), json!({"tokens": 3}));
    let conversation = vec![
        user,
        compaction_model::Message::assistant_with_calls(None, vec![with_extra]),
        compaction_model::Message {
            parts: vec![compaction_model::Part::File(compaction_model::FilePart::new(
                "JVBERi0=",
                Some("application/pdf".into()),
                Some("a.pdf".into()),
            ))],
            ..compaction_model::Message::assistant("")
        },
        compaction_model::Message::tool("ok", call, false),
    ];
    let converted = to_rig(&conversation);
    let losses: Vec<String> = converted.losses().iter().map(ToString::to_string).collect();
    assert_eq!(
        losses,
        [
            "message 0: `name` is not kept",
            "message 0: `meta.usage` is not kept",
            "message 1, part 0: `tool_call.extra` is not kept",
            "message 2, part 0: `part` is not kept",
        ]
    );
    assert!(
        matches!(converted.into_lossless(), Err(compaction_adapters::Error::Lossy { losses }) if losses.len() == 4)
    );
}

fn rig_stash(value: Value) -> serde_json::Map<String, Value> {
    serde_json::Map::from_iter([("rig".to_owned(), value)])
}

/// A rig history of three steps, the first with two parallel calls, each result `size` chars.
fn agent_history(size: usize) -> Vec<Message> {
    let name = ToolName::new("read_file").unwrap();
    let call = |id: &str, path: &str| {
        ToolCall::new(CallId::from_wire(id), ToolFunction::new(name.clone(), json!({ "path": path })))
    };
    let result = |call: &ToolCall, text: &str| {
        UserContent::ToolResult(call.result(vec![ToolResultContent::text(text.repeat(size / text.len()))]))
    };
    let (a, b, c, d) =
        (call("call_a", "a.rs"), call("call_b", "b.rs"), call("call_c", "c.rs"), call("call_d", "d.rs"));
    vec![
        Message::user("Summarize the four files."),
        Message::Assistant(AssistantMessage::new(vec![
            AssistantContent::ToolCall(a.clone()),
            AssistantContent::ToolCall(b.clone()),
        ])),
        Message::User { content: vec![result(&a, "fn a() {}\n"), result(&b, "fn b() {}\n")] },
        Message::from(AssistantContent::ToolCall(c.clone())),
        Message::User { content: vec![result(&c, "fn c() {}\n")] },
        Message::from(AssistantContent::ToolCall(d.clone())),
        Message::User { content: vec![result(&d, "fn d() {}\n")] },
        Message::assistant("They define four functions."),
    ]
}

fn result_texts(message: &Message) -> Vec<String> {
    let Message::User { content } = message else { return Vec::new() };
    content
        .iter()
        .filter_map(|block| match block {
            UserContent::ToolResult(result) => {
                Some(result.content.iter().filter_map(|c| c.as_text()).collect())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_policy_prunes_old_results_and_keeps_the_rig_shape() {
    let history = agent_history(4_000);
    let counter = ApproximateTokenCounter::default();
    let before = counter.count(&from_rig(&history), &[]);
    let policy = CompactionPolicy::pruning(before / 2);
    let pruned = policy.apply(history.clone()).expect("compacts");

    // Same messages, calls untouched; the parallel results stay together in one user message.
    assert_eq!(pruned.len(), history.len());
    for i in [0, 1, 3, 5, 6, 7] {
        assert_eq!(pruned[i], history[i], "message {i}");
    }
    let placeholder = |tool: &str| DEFAULT_PLACEHOLDER.replace("{tool_name}", tool);
    assert_eq!(result_texts(&pruned[2]), [placeholder("read_file"), placeholder("read_file")]);
    assert_eq!(result_texts(&pruned[4]), [placeholder("read_file")]);
    let Message::User { content } = &pruned[2] else { panic!("a user message") };
    let ids: Vec<String> = content
        .iter()
        .filter_map(|block| match block {
            UserContent::ToolResult(result) => Some(result.call.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["call_a", "call_b"]);

    let after = counter.count(&from_rig(&pruned), &[]);
    assert!(after <= before / 2, "{after} tokens after, {before} before");
    let report = policy.last_report().expect("a report");
    assert_eq!(report.changed_indices(), [2, 3, 5], "ours: the results of a, b and c");
}

#[test]
fn the_policy_leaves_a_history_that_fits() {
    let history = agent_history(400);
    let policy = CompactionPolicy::pruning(100_000);
    assert_eq!(policy.apply(history.clone()).expect("fits"), history);
    assert!(policy.last_report().is_none());
    // Over the target but under the trigger: left alone too.
    let counter = ApproximateTokenCounter::default();
    let count = counter.count(&from_rig(&history), &[]);
    let policy = CompactionPolicy::pruning(count / 2).with_trigger_tokens(count);
    assert_eq!(policy.apply(history.clone()).expect("under the trigger"), history);
}

/// The one line a rig agent needs: loads come back pruned, the stored history stays whole.
#[test]
fn pruning_memory_prunes_loads_and_keeps_the_record() {
    let history = agent_history(4_000);
    let memory = pruning_memory(1_000);
    let id = ConversationId::new("demo");
    block_on(memory.append(&id, history.clone())).expect("append");
    let loaded = block_on(memory.load(&id)).expect("load");
    assert_eq!(loaded.len(), history.len());
    assert_ne!(loaded, history, "pruned");
    assert_eq!(block_on(memory.inner().load(&id)).expect("load the record"), history);
}

/// Runs a future that never waits (the in-memory store's), without an async runtime.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

/// A message that comes back with a part it did not have says so.
#[test]
fn a_system_message_without_text_is_reported() {
    let empty = compaction_model::Message { parts: Vec::new(), ..compaction_model::Message::system("") };
    let converted = to_rig(&[empty]);
    assert_eq!(converted.losses().iter().map(|l| l.field.as_str()).collect::<Vec<_>>(), ["content"]);
}

/// Clearing tool inputs too: the pruned results' calls lose their arguments, in rig's messages.
#[test]
fn the_policy_can_clear_tool_inputs() {
    let history = agent_history(4_000);
    let compactor = ToolResultPruningCompactor::new(PruningSettings::default().with_clear_tool_inputs(true))
        .expect("valid settings");
    let counter = ApproximateTokenCounter::default();
    let before = counter.count(&from_rig(&history), &[]);
    let pruned = CompactionPolicy::new(compactor, before / 2).apply(history.clone()).expect("compacts");
    let arguments = |message: &Message| match message {
        Message::Assistant(assistant) => {
            assistant.tool_calls().map(|call| call.function.arguments.clone()).collect()
        }
        _ => Vec::new(),
    };
    assert!(arguments(&pruned[1]).iter().all(|a| a.is_empty()), "the first step's calls are cleared");
    assert_eq!(arguments(&pruned[5]), arguments(&history[5]), "the newest step's call is kept");
}
