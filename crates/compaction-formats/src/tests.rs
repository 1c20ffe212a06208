//! Writing changed conversations back: what a compactor changed changes, nothing else.

use compaction_model::{Message, Part, ToolResultContent};
use serde_json::{json, Value};

use crate::{read, write, Format, ReadOptions, Target};

const OPENAI: &str = include_str!("../../../examples/transcripts/openai/weather.json");
const ANTHROPIC: &str = include_str!("../../../examples/transcripts/anthropic/search.json");

fn prune(messages: &mut [Message], index: usize) {
    for part in &mut messages[index].parts {
        if let Part::ToolCallResult(result) = part {
            result.result = ToolResultContent::Text("[pruned]".into());
        }
    }
}

fn written(input: &str, messages: &[Message], target: Target) -> Value {
    let conversation = read(input.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    let mut out = Vec::new();
    write(&conversation, messages, Some(target), None, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn a_pruned_openai_result_changes_only_its_content() {
    let conversation = read(OPENAI.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    assert_eq!(conversation.format, Format::OpenAi);
    let mut messages = conversation.messages.clone();
    prune(&mut messages, 6);
    let out = written(OPENAI, &messages, Target::OpenAi);
    let mut expected: Value = serde_json::from_str(OPENAI).unwrap();
    expected["messages"][6]["content"] = json!("[pruned]");
    assert_eq!(out, expected);
}

#[test]
fn a_changed_openai_call_keeps_raw_arguments_and_unknown_fields() {
    let conversation = read(OPENAI.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    let mut messages = conversation.messages.clone();
    messages[2].parts.insert(0, Part::Text(compaction_model::TextPart::new("Checking both.")));
    messages[0].parts = vec![Part::Text(compaction_model::TextPart::new("Be brief."))];
    let out = written(OPENAI, &messages, Target::OpenAi);
    let mut expected: Value = serde_json::from_str(OPENAI).unwrap();
    expected["messages"][0]["content"] = json!("Be brief.");
    expected["messages"][2]["content"] = json!("Checking both.");
    assert_eq!(out, expected);
    assert_eq!(out["messages"][0]["role"], "developer");
    assert_eq!(out["messages"][2]["tool_calls"][1]["function"]["arguments"], "{\"city\": \"Oslo\"");
    assert_eq!(out["messages"][2]["refusal"], Value::Null);
}

#[test]
fn a_pruned_anthropic_result_stays_in_its_user_message() {
    let conversation = read(ANTHROPIC.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    let mut messages = conversation.messages.clone();
    prune(&mut messages, 4);
    let out = written(ANTHROPIC, &messages, Target::Anthropic);
    let mut expected: Value = serde_json::from_str(ANTHROPIC).unwrap();
    expected["messages"][2]["content"][1]["content"] = json!("[pruned]");
    assert_eq!(out, expected);
}

#[test]
fn a_dropped_message_leaves_the_others_as_they_were() {
    let conversation = read(OPENAI.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    let mut messages = conversation.messages.clone();
    messages.remove(1);
    let out = written(OPENAI, &messages, Target::OpenAi);
    let mut expected: Value = serde_json::from_str(OPENAI).unwrap();
    expected["messages"].as_array_mut().unwrap().remove(1);
    assert_eq!(out, expected);
}

#[test]
fn a_changed_anthropic_system_is_written_to_the_envelope() {
    let conversation = read(ANTHROPIC.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    let mut messages = conversation.messages.clone();
    messages[0] = Message::system("New rules.");
    let out = written(ANTHROPIC, &messages, Target::Anthropic);
    assert_eq!(out["system"], "New rules.");
    assert_eq!(out["messages"], serde_json::from_str::<Value>(ANTHROPIC).unwrap()["messages"]);
}

const HAYSTACK: &str = include_str!("../../../examples/transcripts/haystack/agent-run.json");

/// The tree path's output for the same conversation and messages.
fn written_by_tree(input: &[u8], messages: &[Message]) -> Vec<u8> {
    let conversation = crate::read_tree(input, &ReadOptions::named("t")).unwrap();
    let mut out = Vec::new();
    write(&conversation, messages, Some(Target::Haystack), None, &mut out).unwrap();
    out
}

/// JSON text as serde_json spells it, followed by a newline as the writers end files.
fn respelled(json: &[u8]) -> Vec<u8> {
    let mut text = serde_json::to_vec(&serde_json::from_slice::<Value>(json).unwrap()).unwrap();
    text.push(b'\n');
    text
}

#[test]
fn a_haystack_array_is_written_as_the_tree_path_writes_it() {
    let value: Value = serde_json::from_str(HAYSTACK).unwrap();
    let compact = serde_json::to_vec(&value).unwrap();
    let pretty = serde_json::to_vec_pretty(&value).unwrap();
    let mut spaced = b"\xEF\xBB\xBF[\n".to_vec();
    for (index, message) in value.as_array().unwrap().iter().enumerate() {
        if index > 0 {
            spaced.extend_from_slice(b",\n");
        }
        spaced.extend(serde_json::to_vec(message).unwrap());
    }
    spaced.extend_from_slice(b"\n]\n");
    for input in [HAYSTACK.as_bytes().to_vec(), compact, pretty, spaced] {
        let conversation = read(input.clone(), &ReadOptions::named("t")).unwrap();
        assert!(matches!(conversation.back, crate::Back::Spans(_)), "read without a tree");
        let pruned = conversation.messages.iter().position(Message::has_tool_call_result).unwrap();
        let mut messages = conversation.messages.clone();
        prune(&mut messages, pruned);
        for (messages, changed) in [(&conversation.messages, vec![]), (&messages, vec![pruned])] {
            // Messages left alone keep their input's spelling (here pretty-printed, or spaced
            // out), so the output is the tree path's JSON, keys in the same order, though not
            // always its bytes.
            let mut out = Vec::new();
            write(&conversation, messages, Some(Target::Haystack), Some(&changed), &mut out).unwrap();
            assert_eq!(respelled(&out), written_by_tree(&input, messages));
            let mut out = Vec::new();
            write(&conversation, messages, Some(Target::Haystack), None, &mut out).unwrap();
            assert_eq!(respelled(&out), written_by_tree(&input, messages));
        }
        let mut fewer = conversation.messages.clone();
        fewer.remove(1);
        let mut out = Vec::new();
        write(&conversation, &fewer, Some(Target::Haystack), None, &mut out).unwrap();
        assert_eq!(out, written_by_tree(&input, &fewer));
    }
}

/// Messages dropped and put in with the count unchanged: each kept message is written as its own
/// original, and the new one fresh, never over the original that held its place.
#[test]
fn a_rewritten_openai_conversation_lands_each_message_on_its_own_original() {
    let conversation = read(OPENAI.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    let count = conversation.messages.len();
    let mut messages: Vec<Message> = conversation.messages[1..].to_vec();
    messages.push(Message::user("[1 earlier message was removed]"));
    let origin: Vec<Option<usize>> = (1..count).map(Some).chain([None]).collect();
    assert_eq!(messages.len(), count, "the count is the same, so only the origins tell");
    let mut out = Vec::new();
    crate::write_rewritten(&conversation, &messages, None, &origin, &mut out).unwrap();
    let out: Value = serde_json::from_slice(&out).unwrap();

    let original: Value = serde_json::from_str(OPENAI).unwrap();
    let mut expected = original.clone();
    let list = expected["messages"].as_array_mut().unwrap();
    list.remove(0);
    list.push(json!({"role": "user", "content": "[1 earlier message was removed]"}));
    assert_eq!(out, expected);
    // The last reply's `annotations` stay on it, not on the note that took its place.
    assert_eq!(out["messages"][count - 2]["annotations"], json!([]));
}

#[test]
fn a_rewritten_haystack_array_and_a_log_that_cannot_take_it() {
    let haystack = include_str!("../../../examples/transcripts/haystack/read-file.json");
    let conversation = read(haystack.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    assert!(conversation.takes_back_rewrites());
    let messages: Vec<Message> = conversation.messages[1..].to_vec();
    let origin: Vec<Option<usize>> = (1..conversation.messages.len()).map(Some).collect();
    let mut out = Vec::new();
    crate::write_rewritten(&conversation, &messages, None, &origin, &mut out).unwrap();
    let out: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(out, compaction_model::messages_to_value(&messages));

    let log = include_str!("../../../examples/transcripts/claude-code/fa812bfe-excerpt.jsonl");
    let conversation = read(log.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    assert!(!conversation.takes_back_rewrites());
    let messages: Vec<Message> = conversation.messages[1..].to_vec();
    let origin: Vec<Option<usize>> = (1..conversation.messages.len()).map(Some).collect();
    let error = crate::write_rewritten(&conversation, &messages, None, &origin, &mut Vec::new()).unwrap_err();
    assert!(error.to_string().contains("Claude Code log can take back only"), "{error}");
    // Converted, it is written.
    let mut out = Vec::new();
    crate::write_rewritten(&conversation, &messages, Some(Target::Anthropic), &origin, &mut out).unwrap();
    let out: Value = serde_json::from_slice(&out).unwrap();
    assert!(out["messages"].is_array());
}

#[test]
fn a_rewritten_anthropic_conversation_keeps_its_system_and_blocks() {
    let conversation = read(ANTHROPIC.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    assert_eq!(conversation.messages[1].text(), Some("Where is the retry limit set, and what is it?"));
    // The first question gives way to a note in its place: the count is the same.
    let mut messages = conversation.messages.clone();
    messages[1] = Message::user("[1 earlier message was removed]");
    let mut origin: Vec<Option<usize>> = (0..messages.len()).map(Some).collect();
    origin[1] = None;
    let mut out = Vec::new();
    crate::write_rewritten(&conversation, &messages, None, &origin, &mut out).unwrap();
    let out: Value = serde_json::from_slice(&out).unwrap();
    let mut expected: Value = serde_json::from_str(ANTHROPIC).unwrap();
    expected["messages"][0] = json!({"role": "user", "content": "[1 earlier message was removed]"});
    assert_eq!(out, expected);
}

/// A Haystack file as Python's `json.dump` writes it (spaced out, and by default every non-ASCII
/// character escaped) is read without a tree, and written back with the messages left alone
/// copied as their input bytes; only the changed one is encoded.
#[test]
fn a_python_written_haystack_file_keeps_its_bytes() {
    let value: Value = serde_json::from_str(HAYSTACK).unwrap();
    let items = value.as_array().unwrap();
    for ensure_ascii in [false, true] {
        let mut input = compaction_testkit::python_dumps(&value, ensure_ascii).into_bytes();
        input.push(b'\n');
        let conversation = read(input.clone(), &ReadOptions::named("t")).unwrap();
        assert!(matches!(conversation.back, crate::Back::Spans(_)), "read without a tree");
        let pruned = conversation.messages.iter().position(Message::has_tool_call_result).unwrap();
        let mut messages = conversation.messages.clone();
        prune(&mut messages, pruned);
        let mut out = Vec::new();
        write(&conversation, &messages, Some(Target::Haystack), Some(&[pruned]), &mut out).unwrap();
        // Runs of messages left alone are copied with the separators between them.
        let spelled = |items: &[Value]| {
            items.iter().map(|item| compaction_testkit::python_dumps(item, ensure_ascii)).collect::<Vec<_>>()
        };
        let mut expected = format!("[{}", spelled(&items[..pruned]).join(", ")).into_bytes();
        if pruned > 0 {
            expected.push(b',');
        }
        expected.extend(serde_json::to_vec(&messages[pruned]).unwrap());
        if pruned + 1 < items.len() {
            expected.extend(format!(",{}", spelled(&items[pruned + 1..]).join(", ")).into_bytes());
        }
        expected.extend_from_slice(b"]\n");
        assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&expected));
        assert_eq!(respelled(&out), written_by_tree(&input, &messages));
    }
}

#[test]
fn a_key_repeated_through_an_escape_is_written_where_it_was_read() {
    // The parser reads the last of the two spellings of `content`; the write-back edits it.
    let log = concat!(
        r#"{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"c1","name":"sh","input":{}}]}}"#,
        "\n",
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"first","con\u0074ent":"second"}]}}"#,
        "\n"
    );
    let conversation = read(log.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    assert_eq!(conversation.format, Format::ClaudeCode);
    let mut messages = conversation.messages.clone();
    prune(&mut messages, 1);
    let mut out = Vec::new();
    write(&conversation, &messages, None, Some(&[1]), &mut out).unwrap();
    let expected = log.replace(r#""con\u0074ent":"second""#, r#""con\u0074ent":"[pruned]""#);
    assert_eq!(String::from_utf8(out).unwrap(), expected);
}
