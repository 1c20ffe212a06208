//! Claude Code sessions: the model's view, sidechains and subagents, compaction, usage, images,
//! and write-back that changes only pruned results.

use compaction_formats::{Error, Format, NoteKind, ReadOptions};
use compaction_model::{Changes, Part, ResultPart, Role, ToolResultContent};
use serde_json::{json, Value};

use crate::{lines, read, read_with, roles, written_back};

const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

fn event(kind: &str, uuid: &str, sidechain: bool, message: Value) -> Value {
    json!({"parentUuid": null, "isSidechain": sidechain, "userType": "external", "cwd": "/w",
           "sessionId": "s1", "version": "2.1.39", "type": kind, "message": message, "uuid": uuid,
           "timestamp": "2026-02-12T15:36:12.270Z"})
}

fn assistant(
    id: &str,
    uuid: &str,
    content: Value,
    input: u64,
    read: u64,
    created: u64,
    output: u64,
) -> Value {
    event(
        "assistant",
        uuid,
        false,
        json!({"model": "claude-opus-4-6", "id": id, "type": "message",
        "role": "assistant", "content": content, "stop_reason": null,
        "usage": {"input_tokens": input, "cache_creation_input_tokens": created,
                  "cache_read_input_tokens": read, "output_tokens": output}}),
    )
}

fn user(uuid: &str, content: Value) -> Value {
    event("user", uuid, false, json!({"role": "user", "content": content}))
}

fn big(label: &str) -> String {
    format!("{label}: ").repeat(400)
}

/// A session: a task, a reply logged as two lines (text, then a tool use), a progress line, a
/// result with an image, a subagent's sidechain, a compaction, the summary, and one more step.
fn session() -> Vec<Value> {
    vec![
        json!({"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}, "isSnapshotUpdate": false}),
        user("u1", json!("Look at the screenshot and the log.")),
        assistant("msg_1", "a1", json!([{"type": "text", "text": "Reading both."}]), 3, 17_000, 8_000, 9),
        assistant(
            "msg_1",
            "a2",
            json!([{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/w/shot.png"}}]),
            3,
            17_000,
            8_000,
            60,
        ),
        json!({"type": "progress", "uuid": "p1", "sessionId": "s1", "data": {"type": "hook_progress"}}),
        user(
            "u2",
            json!([{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": "The screenshot:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}]),
        ),
        event("user", "s1u", true, json!({"role": "user", "content": "Subagent task"})),
        event(
            "assistant",
            "s1a",
            true,
            json!({"id": "msg_s", "role": "assistant", "content": [{"type": "text", "text": "Subagent reply"}]}),
        ),
        assistant(
            "msg_2",
            "a3",
            json!([{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "cat log"}}]),
            1,
            25_000,
            900,
            40,
        ),
        user("u3", json!([{"type": "tool_result", "tool_use_id": "t2", "content": big("log line")}])),
        json!({"parentUuid": null, "logicalParentUuid": "u3", "isSidechain": false, "sessionId": "s1",
               "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
               "uuid": "c1", "compactMetadata": {"trigger": "auto", "preTokens": 31_000}}),
        json!({"parentUuid": "c1", "isSidechain": false, "sessionId": "s1", "type": "user",
               "message": {"role": "user", "content": "This session is being continued from a previous conversation."},
               "isCompactSummary": true, "uuid": "u4"}),
        assistant(
            "msg_3",
            "a4",
            json!([{"type": "tool_use", "id": "t3", "name": "Bash", "input": {"command": "grep error log"}}]),
            2,
            12_000,
            3_000,
            30,
        ),
        user("u5", json!([{"type": "tool_result", "tool_use_id": "t3", "content": big("error line")}])),
        assistant(
            "msg_4",
            "a5",
            json!([{"type": "tool_use", "id": "t4", "name": "Bash", "input": {"command": "tail log"}}]),
            1,
            15_000,
            4_000,
            20,
        ),
        user("u6", json!([{"type": "tool_result", "tool_use_id": "t4", "content": "ok"}])),
        assistant("msg_5", "a6", json!([{"type": "text", "text": "Done."}]), 1, 19_000, 50, 5),
    ]
}

#[test]
fn the_view_after_a_compaction_is_the_summary_and_what_follows() {
    let text = lines(&session());
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::ClaudeCode);
    assert_eq!(roles(&conversation.messages), "uatata");
    assert!(conversation.messages[0].text().unwrap().starts_with("This session is being continued"));
    // Usage by assistant message, prompt and reply.
    let usage: Vec<(usize, u64)> =
        conversation.usage.iter().map(|u| (u.message, u.usage.context_tokens())).collect();
    assert_eq!(usage, [(1, 15_032), (3, 19_021), (5, 19_056)]);
    assert_eq!(conversation.compactions.len(), 1);
    assert_eq!(conversation.compactions[0].tokens_before, Some(31_000));
    let compacted = conversation.notes.iter().find(|n| n.kind == NoteKind::Compacted).expect("a note");
    assert!(compacted.text.contains("line 11"), "{compacted}");
}

#[test]
fn the_full_history_keeps_everything_but_sidechains_and_bookkeeping() {
    let text = lines(&session());
    let conversation = read_with(&text, ReadOptions::named("t").with_full_history(true)).unwrap();
    // The reply logged as two lines is one message; the sidechain is not the main conversation.
    assert_eq!(roles(&conversation.messages), "uatatuatata");
    let calls = conversation.messages[1].tool_calls().count();
    assert_eq!((calls, conversation.messages[1].text()), (1, Some("Reading both.")));
    // The last line of a reply carries its final usage.
    assert_eq!(conversation.usage[0].usage.output_tokens, 60);
    assert_eq!(conversation.compactions[0].message, 5);
    let notes: Vec<String> = conversation.notes.iter().map(ToString::to_string).collect();
    assert!(notes.iter().any(|n| n == "skipped 2 sidechain lines (subagents' conversations)"), "{notes:?}");
    assert!(
        notes.iter().any(|n| n.contains("1 file-history-snapshot") && n.contains("1 progress")),
        "{notes:?}"
    );
    // The image in the tool result is an image.
    let result = conversation.messages[2].tool_call_result().unwrap();
    let ToolResultContent::Parts(parts) = &result.result else { panic!("parts") };
    assert!(matches!(&parts[1], ResultPart::Image(image) if image.mime_type.as_deref() == Some("image/png")));
}

#[test]
fn a_subagent_file_is_the_subagents_conversation() {
    let subagent: Vec<Value> = vec![
        event("user", "x1", true, json!({"role": "user", "content": "Find the config loader."})),
        event(
            "assistant",
            "x2",
            true,
            json!({"id": "msg_x", "role": "assistant", "model": "claude-opus-4-6",
            "content": [{"type": "tool_use", "id": "g1", "name": "Grep", "input": {"pattern": "load_config"}}],
            "usage": {"input_tokens": 4, "cache_read_input_tokens": 70_000, "cache_creation_input_tokens": 1_000, "output_tokens": 253}}),
        ),
        event(
            "user",
            "x3",
            true,
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "g1", "content": "src/config.rs"}]}),
        ),
        event(
            "assistant",
            "x4",
            true,
            json!({"id": "msg_y", "role": "assistant", "content": [{"type": "text", "text": "In src/config.rs."}]}),
        ),
    ];
    let conversation = read(&lines(&subagent));
    assert_eq!(roles(&conversation.messages), "uata");
    assert_eq!(conversation.usage[0].usage.context_tokens(), 71_257);
    assert!(conversation.notes.iter().all(|n| !n.text.contains("sidechain")), "{:?}", conversation.notes);
}

#[test]
fn a_pruned_result_is_written_back_in_place_and_nothing_else_changes() {
    let text = lines(&session());
    let conversation = read(&text);
    assert_eq!(written_back(&conversation, &conversation.messages, &[]), text.as_bytes());
    let mut messages = conversation.messages.clone();
    crate::prune(&mut messages, 2, "[pruned]");
    let out = String::from_utf8(written_back(&conversation, &messages, &[2])).unwrap();
    let expected = text.replace(&serde_json::to_string(&big("error line")).unwrap(), "\"[pruned]\"");
    assert_ne!(expected, text);
    assert_eq!(out, expected);
    // Read again, it is the same session with the result pruned.
    let again = read(&out);
    assert_eq!(again.messages, messages);
}

#[test]
fn what_a_session_cannot_hold_is_refused() {
    let text = lines(&session());
    let conversation = read(&text);
    let mut messages = conversation.messages.clone();
    messages[1].parts.insert(0, Part::Text(compaction_model::TextPart::new("new words")));
    let mut out = Vec::new();
    let error =
        compaction_formats::write(&conversation, &messages, None, &Changes::in_place(vec![1]), &mut out)
            .unwrap_err();
    assert!(matches!(error, Error::WriteBack { .. }), "{error}");
    messages.remove(1);
    let error =
        compaction_formats::write(&conversation, &messages, None, &Changes::Unknown, &mut out).unwrap_err();
    assert!(error.to_string().contains("can take back only"), "{error}");
}

#[test]
fn a_text_changed_anywhere_in_a_long_session_is_refused() {
    // Long enough that its messages are fingerprinted on two threads.
    let events: Vec<Value> = (0..1500)
        .flat_map(|k| {
            let said = json!([{"type": "text", "text": format!("answer {k}")}]);
            [
                user(&format!("u{k}"), json!(format!("question {k}"))),
                assistant(&format!("m{k}"), &format!("a{k}"), said, 1, 0, 0, 1),
            ]
        })
        .collect();
    let text = lines(&events);
    let conversation = read(&text);
    assert_eq!(conversation.messages.len(), 3000);
    assert_eq!(written_back(&conversation, &conversation.messages, &[]), text.as_bytes());
    // Every message looked at, none changed: each matches its fingerprint.
    let mut out = Vec::new();
    compaction_formats::write(&conversation, &conversation.messages, None, &Changes::Unknown, &mut out)
        .unwrap();
    assert_eq!(out, text.as_bytes());
    for index in [0, 1499, 1500, 2999] {
        let mut messages = conversation.messages.clone();
        messages[index].parts[0] = Part::Text(compaction_model::TextPart::new("other words"));
        let mut out = Vec::new();
        let error = compaction_formats::write(
            &conversation,
            &messages,
            None,
            &Changes::in_place(vec![index]),
            &mut out,
        )
        .expect_err("a changed text cannot be written back");
        assert!(error.to_string().contains(&format!("message {index} changed in more than")), "{error}");
    }
}

#[test]
fn a_log_of_nothing_the_model_saw_is_an_error() {
    let text = lines(&[
        json!({"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}}),
        json!({"type": "progress", "uuid": "p1", "sessionId": "s1", "data": {}}),
    ]);
    let error = read_with(&text, ReadOptions::named("s.jsonl")).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::NoMessages { .. }), "{message}");
    assert!(message.contains("s.jsonl") && message.contains("file-history-snapshot"), "{message}");
}

#[test]
fn a_codex_rollout_read_as_claude_code_says_to_try_codex() {
    let rollout =
        include_str!("../../../../examples/transcripts/codex/rollout-2025-10-04T09-00-00-0199a1b2.jsonl");
    let error =
        read_with(rollout, ReadOptions::named("r.jsonl").with_format(Format::ClaudeCode)).unwrap_err();
    assert!(error.to_string().contains("try --format codex"), "{error}");
}

#[test]
fn roles_come_from_the_events() {
    let conversation = read(&lines(&session()));
    assert!(conversation.messages.iter().all(|m| m.role != Role::System));
}

#[test]
fn usage_keeps_the_calls_time_model_and_cache_lifetimes() {
    // One reply logged as two lines: the call's time is its first line's, the usage its last's.
    let reply = |uuid: &str, at: &str, output: u64| {
        json!({"type": "assistant", "uuid": uuid, "sessionId": "s1", "isSidechain": false, "timestamp": at,
               "message": {"id": "msg_1", "role": "assistant", "model": "claude-sonnet-4-5",
                           "content": [{"type": "text", "text": "Done."}],
                           "usage": {"input_tokens": 3, "cache_read_input_tokens": 17_842,
                                     "cache_creation_input_tokens": 8_037, "output_tokens": output,
                                     "cache_creation": {"ephemeral_5m_input_tokens": 37,
                                                        "ephemeral_1h_input_tokens": 8_000}}}})
    };
    let text = lines(&[
        user("u1", json!("Go.")),
        reply("a1", "2026-02-11T20:36:47.925Z", 10),
        reply("a2", "2026-02-11T20:36:49.680Z", 60),
    ]);
    let conversation = read(&text);
    let [call] = &conversation.usage[..] else { panic!("one call: {:?}", conversation.usage) };
    assert_eq!(call.timestamp_ms, Some(1_770_842_207_925));
    assert_eq!(call.model.as_deref(), Some("claude-sonnet-4-5"));
    let usage = call.usage;
    assert_eq!(
        (usage.output_tokens, usage.cache_creation_5m_input_tokens, usage.cache_creation_1h_input_tokens),
        (60, 37, 8_000)
    );
}
