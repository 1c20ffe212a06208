//! Codex rollouts: the view after `compacted`, calls paired by `call_id`, usage from
//! `token_count`, raw arguments, and write-back that changes only pruned outputs.

use compaction_formats::{Format, NoteKind, ReadOptions};
use compaction_model::{Changes, Role};
use serde_json::{json, Value};

use crate::{lines, read, read_with, roles, written_back};

const ROLLOUT: &str =
    include_str!("../../../../examples/transcripts/codex/rollout-2025-10-04T09-00-00-0199a1b2.jsonl");

fn full() -> compaction_formats::Conversation {
    read_with(ROLLOUT, ReadOptions::named("r").with_full_history(true)).unwrap()
}

#[test]
fn the_view_after_compacted_is_its_replacement_history_and_what_follows() {
    let conversation = read(ROLLOUT);
    assert_eq!(conversation.format, Format::Codex);
    // The task, the compaction item, then the steps after the compaction.
    assert_eq!(roles(&conversation.messages), "uaatatata");
    let compaction = &conversation.messages[1].parts[0];
    let (format, item) = compaction_formats::provider_item(compaction).expect("kept opaque");
    assert_eq!((format, item["type"].as_str()), ("responses", Some("compaction")));
    assert!(conversation.notes.iter().any(|n| n.kind == NoteKind::Compacted));
    assert!(conversation.notes.iter().any(|n| n.kind == NoteKind::Opaque && n.text.contains("1 compaction")));
}

#[test]
fn calls_pair_by_call_id_and_usage_follows_each_call() {
    let conversation = full();
    assert_eq!(roles(&conversation.messages), "uuatattatatata");
    // Two calls of one model response: a function call and a local shell call.
    let calls: Vec<&str> = conversation.messages[4].tool_calls().map(|c| c.tool_name.as_str()).collect();
    assert_eq!(calls, ["shell", "local_shell"]);
    let shell = conversation.messages[6].tool_call_result().unwrap();
    assert_eq!(
        (shell.origin.id.as_deref(), shell.origin.tool_name.as_str()),
        (Some("call_A3"), "local_shell")
    );
    // `token_count` belongs to the reply before it; OpenAI counts cached tokens inside the input.
    let first = conversation.usage[0].clone();
    assert_eq!(first.message, 2);
    assert_eq!(
        (first.usage.input_tokens, first.usage.cache_read_input_tokens, first.usage.context_tokens()),
        (6_210, 0, 6_390)
    );
    let second = conversation.usage[1].clone();
    assert_eq!((second.usage.input_tokens, second.usage.cache_read_input_tokens), (7_800 - 6_144, 6_144));
    assert_eq!(second.usage.prompt_tokens(), 7_800);
    // The call's time is its `token_count` line's; its model the latest `turn_context`'s.
    assert_eq!(first.timestamp_ms, Some(1_759_568_449_000));
    assert_eq!(first.model.as_deref(), Some("gpt-5-codex"));
}

#[test]
fn arguments_that_are_not_json_are_kept_as_their_text() {
    let conversation = full();
    let raw = conversation
        .messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .find(|c| c.id.as_deref() == Some("call_B2"));
    let raw = raw.expect("call_B2");
    assert!(raw.arguments.is_empty());
    assert_eq!(raw.raw_arguments.as_deref(), Some(r#"{"command":["bash","-lc","cargo test -p parser""#));
    let patch =
        conversation.messages.iter().flat_map(|m| m.tool_calls()).find(|c| c.tool_name == "apply_patch");
    assert!(patch.unwrap().raw_arguments.as_deref().unwrap().starts_with("*** Begin Patch"));
}

#[test]
fn a_pruned_output_is_written_back_in_place_and_nothing_else_changes() {
    let conversation = full();
    assert_eq!(written_back(&conversation, &conversation.messages, &[]), ROLLOUT.as_bytes());
    let mut messages = conversation.messages.clone();
    let index = crate::first_result(&messages);
    crate::prune(&mut messages, index, "[pruned]");
    let out = String::from_utf8(written_back(&conversation, &messages, &[index])).unwrap();
    let changed: Vec<(&str, &str)> = ROLLOUT.lines().zip(out.lines()).filter(|(a, b)| a != b).collect();
    assert_eq!(changed.len(), 1);
    let (before, after) = changed[0];
    let (mut before, after): (Value, Value) =
        (serde_json::from_str(before).unwrap(), serde_json::from_str(after).unwrap());
    before["payload"]["output"] = json!("[pruned]");
    assert_eq!(before, after);
    // The whole rollout converts too, raw arguments and all.
    let openai = crate::converted(&conversation, compaction_formats::Target::OpenAi);
    assert!(openai.contains(r#"cargo test -p parser\""#), "raw arguments kept");
}

#[test]
fn compacted_without_replacement_history_is_rebuilt_from_the_user_messages_and_summary() {
    let record = |kind: &str, payload: Value| json!({"timestamp": "2025-10-04T09:00:00.000Z", "type": kind, "payload": payload});
    let message = |role: &str, text: &str| {
        let kind = if role == "assistant" { "output_text" } else { "input_text" };
        record(
            "response_item",
            json!({"type": "message", "role": role, "content": [{"type": kind, "text": text}]}),
        )
    };
    let text = lines(&[
        record("session_meta", json!({"id": "x", "cwd": "/w"})),
        message("developer", "You are Codex."),
        message("user", "First task."),
        message("assistant", "Done with the first."),
        message("user", "Second task."),
        record("compacted", json!({"message": "Both tasks were discussed."})),
        message("assistant", "Continuing."),
    ]);
    let conversation = read(&text);
    let texts: Vec<(Role, &str)> =
        conversation.messages.iter().map(|m| (m.role, m.text().unwrap())).collect();
    assert_eq!(
        texts,
        [
            (Role::System, "You are Codex."),
            (Role::User, "First task."),
            (Role::User, "Second task."),
            (Role::User, "Both tasks were discussed."),
            (Role::Assistant, "Continuing."),
        ]
    );
}

#[test]
fn an_older_rollout_of_bare_items_and_a_rollback_are_read() {
    let text = lines(&[
        json!({"id": "0199", "timestamp": "2025-07-01T10:00:00Z", "instructions": null}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files."}]}),
        json!({"record_type": "state"}),
        json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "c1"}),
        json!({"type": "function_call_output", "call_id": "c1", "output": {"content": "a\nb", "success": true}}),
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a and b."}]}),
    ]);
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::Codex);
    assert_eq!(roles(&conversation.messages), "uata");
    let mut messages = conversation.messages.clone();
    crate::prune(&mut messages, 2, "[pruned]");
    let out = String::from_utf8(written_back(&conversation, &messages, &[2])).unwrap();
    assert!(out.contains(r#""output":{"content":"[pruned]","success":true}"#), "{out}");

    let record = |kind: &str, payload: Value| json!({"timestamp": "t", "type": kind, "payload": payload});
    let user = |text: &str| {
        record(
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
        )
    };
    let reply = |text: &str| {
        record(
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}),
        )
    };
    let text = lines(&[
        user("one"),
        reply("1"),
        user("two"),
        reply("2"),
        record("event_msg", json!({"type": "thread_rolled_back", "num_turns": 1})),
        user("three"),
    ]);
    let conversation = read(&text);
    let texts: Vec<&str> = conversation.messages.iter().map(|m| m.text().unwrap()).collect();
    assert_eq!(texts, ["one", "1", "three"]);
}

#[test]
fn read_line_by_line_it_is_the_same_conversation() {
    for full_history in [false, true] {
        let options = ReadOptions::named("r").with_full_history(full_history);
        let whole = read_with(ROLLOUT, options.clone()).unwrap();
        let mut reader = compaction_formats::LineReader::new(Format::Codex, &options).unwrap();
        for line in ROLLOUT.lines() {
            reader.push(line.as_bytes()).unwrap();
        }
        let lines = reader.finish().unwrap();
        assert_eq!(lines.messages, whole.messages);
        assert_eq!(lines.usage, whole.usage);
        assert_eq!(lines.notes, whole.notes);
        // Read without its bytes, it converts but cannot be written back.
        let mut out = Vec::new();
        assert!(
            compaction_formats::write(&lines, &lines.messages, None, &Changes::Unknown, &mut out).is_err()
        );
    }
}

#[test]
fn a_cleared_shell_action_is_written_as_an_exec_of_nothing_and_reads_back_cleared() {
    let conversation = full();
    let mut messages = conversation.messages.clone();
    // Message 4 holds a function call and a local shell call: both cleared, as
    // `--clear-tool-inputs` clears them.
    for part in &mut messages[4].parts {
        if let compaction_model::Part::ToolCall(call) = part {
            call.arguments = compaction_model::Arguments::new();
            call.raw_arguments = None;
        }
    }
    let out = String::from_utf8(written_back(&conversation, &messages, &[4])).unwrap();
    let changed: Vec<&str> =
        ROLLOUT.lines().zip(out.lines()).filter(|(a, b)| a != b).map(|(_, b)| b).collect();
    assert_eq!(changed.len(), 2, "{changed:?}");
    // Codex's `LocalShellAction` is a tagged `exec` with a required `command`: `{}` would not read.
    let shell: Value = serde_json::from_str(changed[1]).unwrap();
    assert_eq!(shell["payload"]["action"], json!({"type": "exec", "command": []}));
    // Read again, the output is the conversation written: what is counted is what was written.
    let again = read_with(&out, ReadOptions::named("r").with_full_history(true)).unwrap();
    assert_eq!(again.messages[4].parts, messages[4].parts);
    // Unchanged, the cleared file is written back as it is.
    assert_eq!(written_back(&again, &again.messages, &[4]), out.as_bytes());
}

#[test]
fn a_custom_tool_input_reads_as_arguments_only_when_it_is_a_json_object() {
    let conversation = full();
    let patch =
        conversation.messages.iter().flat_map(|m| m.tool_calls()).find(|c| c.tool_name == "apply_patch");
    assert!(patch.unwrap().raw_arguments.as_deref().unwrap().starts_with("*** Begin Patch"));
    // Cleared, it is written as `{}`, which reads back as the cleared call.
    let text = lines(&[
        json!({"type": "response_item", "payload": {"type": "custom_tool_call", "call_id": "c1",
        "name": "apply_patch", "input": "{}"}}),
        json!({"type": "response_item", "payload":
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}}),
    ]);
    let conversation = read(&text);
    let call = conversation.messages[0].tool_calls().next().unwrap();
    assert!(call.arguments.is_empty() && call.raw_arguments.is_none(), "{call:?}");
}

#[test]
fn a_computer_call_whose_action_changed_is_refused_not_lost() {
    let text = lines(&[
        json!({"type": "computer_call", "call_id": "c1", "action": {"type": "click", "x": 1, "y": 2}}),
        json!({"type": "computer_call_output", "call_id": "c1", "output": "done"}),
    ]);
    let conversation = read_with(&text, ReadOptions::named("r").with_format(Format::Responses)).unwrap();
    let mut messages = conversation.messages.clone();
    for part in &mut messages[0].parts {
        if let compaction_model::Part::ToolCall(call) = part {
            call.arguments = compaction_model::Arguments::new();
        }
    }
    let mut out = Vec::new();
    let error =
        compaction_formats::write(&conversation, &messages, None, &Changes::in_place(vec![0]), &mut out)
            .unwrap_err();
    assert!(error.to_string().contains("message 0 changed in more than"), "{error}");
}
