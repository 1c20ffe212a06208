//! Telling formats apart, and saying what was seen when none fits.

use compaction_formats::{Error, Format, ReadOptions};
use serde_json::json;

use crate::{lines, read_with};

fn error(text: &str) -> String {
    read_with(text, ReadOptions::named("f")).unwrap_err().to_string()
}

#[test]
fn json_lines_of_unknown_records_are_refused_with_what_they_carry() {
    let text = lines(&[
        json!({"timestamp": "t", "type": "span_start", "payload": {"x": 1}}),
        json!({"timestamp": "t", "type": "span_end", "payload": {"x": 2}}),
    ]);
    let message = error(&text);
    assert!(message.contains("`type`/`payload`") && message.contains("span_start"), "{message}");
    let text = lines(&[json!({"type": "note", "text": "a"}), json!({"type": "note", "text": "b"})]);
    let message = error(&text);
    assert!(message.contains("no Claude Code fields") && message.contains("--format codex"), "{message}");
}

#[test]
fn zero_messages_is_an_error_not_an_empty_conversation() {
    for text in ["[]", "{\"messages\": []}"] {
        let error = read_with(text, ReadOptions::named("f")).unwrap_err();
        assert!(matches!(error, Error::NoMessages { .. }), "{text}: {error}");
    }
    // Read as OpenHands, a Codex rollout has no events it knows: said, not counted as 0.
    let rollout =
        include_str!("../../../../examples/transcripts/codex/rollout-2025-10-04T09-00-00-0199a1b2.jsonl");
    let error = read_with(rollout, ReadOptions::named("r").with_format(Format::OpenHands)).unwrap_err();
    assert!(matches!(error, Error::NoMessages { .. }), "{error}");
}

#[test]
fn long_values_in_errors_are_cut() {
    let role = "x".repeat(100_000);
    let text = json!([{"role": role, "content": "hi", "tool_calls": []}]).to_string();
    let message = error(&text);
    assert!(message.len() < 300, "{} bytes: {message:.200}", message.len());
    assert!(message.contains("100000 characters"), "{message}");
}

#[test]
fn a_repeated_key_is_said_once() {
    let text = lines(&[
        json!({"type": "user", "message": {"role": "user", "content": "a"}}),
        json!({"type": "user", "message": {"role": "user", "content": "b"}}),
    ])
    .replace(r#""content":"a""#, r#""content":"a","content":"x""#)
    .replace(r#""content":"b""#, r#""content":"b","content":"y""#);
    let conversation = crate::read(&text);
    let repeated: Vec<_> =
        conversation.notes.iter().filter(|n| n.kind == compaction_formats::NoteKind::DuplicateKey).collect();
    assert_eq!(repeated.len(), 1, "{:?}", conversation.notes);
    assert_eq!(repeated[0].count, 2);
    assert!(repeated[0].text.contains("\"content\" on line 1"), "{}", repeated[0]);
    // The last value is what was read.
    assert_eq!(conversation.messages[0].text(), Some("x"));
}

#[test]
fn a_request_names_its_model_and_other_files_none() {
    let user = json!({"role": "user", "content": "hi"});
    // (the file, the format it is read as, the model found)
    let cases = [
        (json!({"model": "gpt-4o", "messages": [user]}), Format::OpenAi, Some("gpt-4o")),
        // A key the fast reader leaves to the tree path (a tool declared the Anthropic way).
        (
            json!({"model": "gpt-4o", "tools": [{"name": "ls", "input_schema": {}}], "messages": [user]}),
            Format::OpenAi,
            Some("gpt-4o"),
        ),
        (json!({"messages": [user]}), Format::OpenAi, None),
        (json!({"model": 4, "messages": [user]}), Format::OpenAi, None),
        (json!([user]), Format::OpenAi, None),
        (
            json!({"model": "claude-opus-4-1", "system": "be brief", "messages": [user]}),
            Format::Anthropic,
            Some("claude-opus-4-1"),
        ),
        (json!({"model": "claude-opus-4-1", "messages": [user]}), Format::Anthropic, Some("claude-opus-4-1")),
        (
            json!({"model": "gpt-5", "input": [{"role": "user", "content": "hi"}]}),
            Format::Responses,
            Some("gpt-5"),
        ),
        (json!([{"role": "user", "content": "hi"}]), Format::Responses, None),
    ];
    for (file, format, model) in cases {
        let text = file.to_string();
        let conversation = read_with(&text, ReadOptions::named("r").with_format(format))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(conversation.model.as_deref(), model, "{text}");
    }
}
