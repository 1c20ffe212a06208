//! Writing changed conversations back: what a compactor changed changes, nothing else.

use compaction_model::{Changes, Message, Part, ToolResultContent};
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
    write(&conversation, messages, Some(target), &Changes::Unknown, &mut out).unwrap();
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
    let conversation = crate::read::read_tree(input, &ReadOptions::named("t")).unwrap();
    let mut out = Vec::new();
    write(&conversation, messages, Some(Target::Haystack), &Changes::Unknown, &mut out).unwrap();
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
        assert!(matches!(conversation.back, crate::conversation::Back::Spans(_)), "read without a tree");
        let pruned = conversation.messages.iter().position(Message::has_tool_call_result).unwrap();
        let mut messages = conversation.messages.clone();
        prune(&mut messages, pruned);
        for (messages, changed) in [(&conversation.messages, vec![]), (&messages, vec![pruned])] {
            // Messages left alone keep their input's spelling (here pretty-printed, or spaced
            // out), so the output is the tree path's JSON, keys in the same order, though not
            // always its bytes.
            let mut out = Vec::new();
            write(
                &conversation,
                messages,
                Some(Target::Haystack),
                &Changes::in_place(changed.to_vec()),
                &mut out,
            )
            .unwrap();
            assert_eq!(respelled(&out), written_by_tree(&input, messages));
            let mut out = Vec::new();
            write(&conversation, messages, Some(Target::Haystack), &Changes::Unknown, &mut out).unwrap();
            assert_eq!(respelled(&out), written_by_tree(&input, messages));
        }
        let mut fewer = conversation.messages.clone();
        fewer.remove(1);
        let mut out = Vec::new();
        write(&conversation, &fewer, Some(Target::Haystack), &Changes::Unknown, &mut out).unwrap();
        assert_eq!(out, written_by_tree(&input, &fewer));
    }
}

/// A Haystack file of a few megabytes with most of its tool results pruned: the changed messages
/// are encoded ahead of their turn on another thread, and the output is the tree path's.
#[test]
fn a_large_haystack_array_with_many_changes_is_written_as_the_tree_path_writes_it() {
    let value: Value = serde_json::from_str(HAYSTACK).unwrap();
    let one = value.as_array().unwrap();
    let mut many = Vec::new();
    while serde_json::to_vec(&many).unwrap().len() < 3 << 20 {
        many.extend(one.iter().cloned());
    }
    let compact = serde_json::to_vec(&many).unwrap();
    // Spaced as Python writes it, in which every message is still spelled as its encoding.
    let spaced = String::from_utf8(compact.clone()).unwrap().replace("\",\"", "\", \"").into_bytes();
    for input in [compact, spaced] {
        let conversation = read(input.clone(), &ReadOptions::named("t")).unwrap();
        assert!(matches!(conversation.back, crate::conversation::Back::Spans(_)), "read without a tree");
        let mut messages = conversation.messages.clone();
        let changed: Vec<usize> = (0..messages.len())
            .filter(|&index| messages[index].has_tool_call_result() && index % 5 != 0)
            .collect();
        assert!(changed.len() > 4 * 64, "several blocks of them: {}", changed.len());
        for &index in &changed {
            prune(&mut messages, index);
        }
        let mut out = Vec::new();
        write(
            &conversation,
            &messages,
            Some(Target::Haystack),
            &Changes::in_place(changed.to_vec()),
            &mut out,
        )
        .unwrap();
        assert_eq!(respelled(&out), written_by_tree(&input, &messages));
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
    // What a compaction's report says (message 0 removed, the last put in) is that origin.
    let changes = Changes::dropping_and_inserting(count, count, &[0], &[count - 1]);
    assert_eq!(changes, Changes::rewritten(origin));
    let mut out = Vec::new();
    crate::write(&conversation, &messages, None, &changes, &mut out).unwrap();
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
    crate::write(&conversation, &messages, None, &Changes::rewritten(origin), &mut out).unwrap();
    let out: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(out, compaction_model::messages_to_value(&messages));

    let log = include_str!("../../../examples/transcripts/claude-code/fa812bfe-excerpt.jsonl");
    let conversation = read(log.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    assert!(!conversation.takes_back_rewrites());
    let messages: Vec<Message> = conversation.messages[1..].to_vec();
    let changes = Changes::rewritten((1..conversation.messages.len()).map(Some).collect());
    let error = crate::write(&conversation, &messages, None, &changes, &mut Vec::new()).unwrap_err();
    assert!(error.to_string().contains("Claude Code log can take back only"), "{error}");
    // Converted, it is written.
    let mut out = Vec::new();
    crate::write(&conversation, &messages, Some(Target::Anthropic), &changes, &mut out).unwrap();
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
    crate::write(&conversation, &messages, None, &Changes::rewritten(origin), &mut out).unwrap();
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
        assert!(matches!(conversation.back, crate::conversation::Back::Spans(_)), "read without a tree");
        let pruned = conversation.messages.iter().position(Message::has_tool_call_result).unwrap();
        let mut messages = conversation.messages.clone();
        prune(&mut messages, pruned);
        let mut out = Vec::new();
        write(&conversation, &messages, Some(Target::Haystack), &Changes::in_place(vec![pruned]), &mut out)
            .unwrap();
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
    write(&conversation, &messages, None, &Changes::in_place(vec![1]), &mut out).unwrap();
    let expected = log.replace(r#""con\u0074ent":"second""#, r#""con\u0074ent":"[pruned]""#);
    assert_eq!(String::from_utf8(out).unwrap(), expected);
}

/// The tree path's output for an OpenAI request, for the same messages.
fn written_as_openai_by_tree(input: &[u8], messages: &[Message], changed: Option<&[usize]>) -> Value {
    let conversation = crate::read::read_tree(input, &ReadOptions::named("t")).unwrap();
    let mut out = Vec::new();
    write(
        &conversation,
        messages,
        None,
        &changed.map_or(Changes::Unknown, |c| Changes::in_place(c.to_vec())),
        &mut out,
    )
    .unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// An OpenAI request, as written by hand, compact, or pretty-printed, is read without a tree
/// into the messages the tree path reads, and written back with the envelope and every message
/// left alone as their input bytes: the same JSON as the tree path's.
#[test]
fn an_openai_request_is_read_and_written_without_a_tree() {
    let value: Value = serde_json::from_str(OPENAI).unwrap();
    let compact = serde_json::to_vec(&value).unwrap();
    let pretty = serde_json::to_vec_pretty(&value).unwrap();
    let ascii = compaction_testkit::python_dumps(&value, true).into_bytes();
    for input in [OPENAI.as_bytes().to_vec(), compact, pretty, ascii] {
        let conversation = read(input.clone(), &ReadOptions::named("t")).unwrap();
        assert!(matches!(conversation.back, crate::conversation::Back::Request(_)), "read without a tree");
        let by_tree = crate::read::read_tree(&input, &ReadOptions::named("t")).unwrap();
        assert_eq!(conversation.messages, by_tree.messages);
        assert_eq!(conversation.tools.len(), 1);
        assert_eq!(conversation.tools, by_tree.tools);

        // Left alone, the file comes back byte for byte.
        let mut out = Vec::new();
        write(&conversation, &conversation.messages, None, &Changes::none(), &mut out).unwrap();
        assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&input));

        // A pruned result, marked as compactors mark it, is the one message encoded.
        let mut messages = conversation.messages.clone();
        prune(&mut messages, 3);
        messages[3].meta.insert("compacted".into(), json!(true));
        let mut out = Vec::new();
        write(&conversation, &messages, None, &Changes::in_place(vec![3]), &mut out).unwrap();
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out, written_as_openai_by_tree(&input, &messages, Some(&[3])));
        assert_eq!(
            out["messages"][3],
            json!({"role": "tool", "tool_call_id": "call_1", "content": "[pruned]"})
        );

        // Without the marker, or with messages dropped, the tree path decides, as before.
        let mut unmarked = conversation.messages.clone();
        prune(&mut unmarked, 3);
        let mut fewer = conversation.messages.clone();
        fewer.remove(1);
        for (messages, changed) in [(&unmarked, Some(&[3][..])), (&unmarked, None), (&fewer, None)] {
            let mut out = Vec::new();
            write(
                &conversation,
                messages,
                None,
                &changed.map_or(Changes::Unknown, |c| Changes::in_place(c.to_vec())),
                &mut out,
            )
            .unwrap();
            let out: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(out, written_as_openai_by_tree(&input, messages, changed));
        }
    }
}

/// What the request reader is not sure of goes to the tree path, which reads or refuses it as
/// it always has.
#[test]
fn an_unusual_openai_request_is_left_to_the_tree_path() {
    let cases: &[(&str, Option<Format>)] = &[
        // A key twice at the top, or in a message: the last is read, and the note says so.
        (
            r#"{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}"#,
            Some(Format::OpenAi),
        ),
        (r#"{"messages":[{"role":"user","content":"a","content":"b"}]}"#, Some(Format::OpenAi)),
        // Anthropic, told by its `system` or its blocks.
        (r#"{"system":"s","messages":[{"role":"user","content":"a"}]}"#, Some(Format::Anthropic)),
        (
            r#"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"sh","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"a"}]}]}"#,
            Some(Format::Anthropic),
        ),
        // Not JSON, or not a message.
        (r#"{"messages":[{"role":"user","content":"a\u00"}]}"#, None),
        (r#"{"messages":[{"role":"wizard","content":"a"}]}"#, None),
        (r#"{"messages":[]}"#, None),
        (r#"{"messages":[{"role":"user","content":"a"}]} x"#, None),
    ];
    for (input, format) in cases {
        let read_fast = read(input.as_bytes().to_vec(), &ReadOptions::named("t"));
        let read_slow = crate::read::read_tree(input.as_bytes(), &ReadOptions::named("t"));
        match (read_fast, format) {
            (Ok(conversation), Some(format)) => {
                assert_eq!(conversation.format, *format, "{input}");
                assert!(!matches!(conversation.back, crate::conversation::Back::Request(_)), "{input}");
                let slow = read_slow.unwrap();
                assert_eq!(conversation.messages, slow.messages, "{input}");
                assert_eq!(conversation.notes, slow.notes, "{input}");
            }
            (Err(error), None) => {
                let slow = read_slow.map(|c| c.messages.len());
                assert!(slow.as_ref().is_err() || slow.as_ref().is_ok_and(|n| *n == 0), "{input}: {error}");
            }
            (other, _) => panic!("{input}: {other:?}"),
        }
    }
}

/// A key repeated deeper in a message (here in a call's `function`) is noted as the tree path
/// notes it, though only the values parsed are scanned.
#[test]
fn a_key_repeated_in_a_request_is_noted_as_the_tree_path_notes_it() {
    let input = concat!(
        r#"{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","#,
        r#""function":{"name":"x","name":"y","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"r"}],"#,
        r#""metadata":{"k":1,"k":2}}"#
    );
    let conversation = read(input.as_bytes().to_vec(), &ReadOptions::named("t")).unwrap();
    assert!(matches!(conversation.back, crate::conversation::Back::Request(_)), "read without a tree");
    let by_tree = crate::read::read_tree(input.as_bytes(), &ReadOptions::named("t")).unwrap();
    assert_eq!(conversation.messages, by_tree.messages);
    assert_eq!(conversation.notes, by_tree.notes);
    assert_eq!(conversation.notes.len(), 1);
    assert!(
        conversation.notes[0].to_string().contains("2 objects repeated a key"),
        "{}",
        conversation.notes[0]
    );
}

/// A request of a few megabytes, read on two threads: the same messages as the tree path's,
/// and an Anthropic request without `system` (told only by its blocks) still left to the tree
/// path, whichever thread meets the first block.
#[test]
fn a_large_request_reads_on_two_threads_as_the_tree_path_reads_it() {
    let output = "line of output, with ünïcödé and \"quotes\"\n".repeat(30);
    let mut openai = Vec::new();
    let mut anthropic = Vec::new();
    for k in 0..3000 {
        let id = format!("call_{k}");
        openai.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "sh", "arguments": format!("{{\"n\": {k}}}")}}
        ]}));
        openai.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
        anthropic.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "sh", "input": {"n": k}}]}));
        anthropic.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}));
    }
    // The first messages tell nothing: only later ones (read by the second thread) tell Anthropic.
    let plain =
        [json!({"role": "user", "content": "Go."}), json!({"role": "assistant", "content": "On it."})];
    let anthropic: Vec<Value> = plain.iter().cloned().chain(anthropic).collect();
    for (messages, format, fast) in [(openai, Format::OpenAi, true), (anthropic, Format::Anthropic, false)] {
        let input = serde_json::to_vec(&json!({"model": "m", "messages": messages})).unwrap();
        assert!(input.len() > 2 << 20, "large enough for two threads: {}", input.len());
        let conversation = read(input.clone(), &ReadOptions::named("t")).unwrap();
        assert_eq!(conversation.format, format);
        assert_eq!(matches!(conversation.back, crate::conversation::Back::Request(_)), fast);
        let by_tree = crate::read::read_tree(&input, &ReadOptions::named("t")).unwrap();
        assert_eq!(conversation.messages.len(), 6000 + usize::from(!fast) * 2);
        assert_eq!(conversation.messages, by_tree.messages);
    }
}

/// Memory (issue 31, item 13): the first thread makes room for as many messages as its bytes
/// foretell, and the second hands its prepared messages over in blocks. However wrong the
/// foretelling (the short messages first, or the long ones) and however many blocks, the
/// messages are the tree path's, in order.
#[test]
fn a_long_request_of_uneven_messages_reads_as_the_tree_path_reads_it() {
    let message = |k: usize, long: bool| {
        let id = format!("c{k}");
        let output = if long { "a longer line of output\n".repeat(12) } else { format!("ok {k}") };
        [
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": "sh", "arguments": format!("{{\"n\": {k}}}")}}
            ]}),
            json!({"role": "tool", "tool_call_id": id, "content": output}),
        ]
    };
    for long_first in [false, true] {
        let messages: Vec<Value> = (0..24_000).flat_map(|k| message(k, (k < 12_000) == long_first)).collect();
        let input = serde_json::to_vec(&json!({"model": "m", "messages": messages})).unwrap();
        assert!(input.len() > 2 << 20, "large enough for two threads: {}", input.len());
        let conversation = read(input.clone(), &ReadOptions::named("t")).unwrap();
        assert!(matches!(conversation.back, crate::conversation::Back::Request(_)));
        let by_tree = crate::read::read_tree(&input, &ReadOptions::named("t")).unwrap();
        assert_eq!(conversation.messages.len(), 48_000);
        assert_eq!(conversation.messages, by_tree.messages, "long first: {long_first}");
    }
}

/// A Claude Code session of a few megabytes, its edits found on two threads: pruned results
/// change, in order, and nothing else does, as on one thread.
#[test]
fn a_large_log_is_written_back_as_a_small_one_is() {
    let mut log = String::new();
    for k in 0..3_000 {
        log.push_str(&format!(
            r#"{{"type":"assistant","message":{{"id":"m{k}","role":"assistant","content":[{{"type":"tool_use","id":"c{k}","name":"sh","input":{{"n":{k}}}}}]}}}}"#
        ));
        log.push('\n');
        log.push_str(&format!(
            r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"c{k}","content":"out {k}: {}"}}]}},"toolUseResult":"x"}}"#,
            "data ".repeat(100)
        ));
        log.push('\n');
    }
    assert!(log.len() > 1 << 20);
    let conversation = read(log.clone().into_bytes(), &ReadOptions::named("t")).unwrap();
    assert_eq!(conversation.format, Format::ClaudeCode);
    let mut messages = conversation.messages.clone();
    let changed: Vec<usize> = (1..messages.len()).step_by(6).collect();
    let mut expected = log.clone();
    for &index in &changed {
        prune(&mut messages, index);
        let k = index / 2;
        let was = format!(r#""content":"out {k}: {}""#, "data ".repeat(100));
        expected = expected.replacen(&was, r#""content":"[pruned]""#, 1);
    }
    let mut out = Vec::new();
    write(&conversation, &messages, None, &Changes::in_place(changed.to_vec()), &mut out).unwrap();
    assert_eq!(out.len(), expected.len());
    assert!(String::from_utf8(out).unwrap() == expected);
    // A message changed beyond its results is refused, whichever thread finds it.
    let mut messages = conversation.messages.clone();
    let last = messages.len() - 2;
    messages[last].parts.clear();
    let mut out = Vec::new();
    // Unless it is among those said to have changed, it is not looked at.
    assert!(write(&conversation, &messages, None, &Changes::in_place(changed.to_vec()), &mut out).is_ok());
    let changed: Vec<usize> = changed.into_iter().chain([last]).collect();
    let error =
        write(&conversation, &messages, None, &Changes::in_place(changed.to_vec()), &mut out).unwrap_err();
    assert!(error.to_string().contains(&format!("message {last} changed")), "{error}");
}

/// A Haystack file as Python's `json.dump` writes one holding lone surrogates and non-finite
/// floats: read alike without a tree and as a tree, and written back alike, with the surrogates
/// as their escapes and the floats as Python spells them.
#[test]
fn a_haystack_file_in_pythons_dialect_reads_and_writes_alike_on_both_paths() {
    let call = r#"{"tool_name": "run", "arguments": {"q": "x\ud83d", "k\udc00": NaN, "i": [Infinity, -Infinity]}, "id": "c1", "extra": null}"#;
    let input = format!(
        r#"[{{"role": "user", "meta": {{"v": NaN}}, "name": null, "content": [{{"text": "a\ud83db \ude00 \ud83d\u0041 \ud83d"}}]}}, {{"role": "assistant", "meta": {{}}, "name": null, "content": [{{"tool_call": {call}}}]}}, {{"role": "tool", "meta": {{"w": -Infinity}}, "name": null, "content": [{{"tool_call_result": {{"result": "out \ud83d end", "origin": {call}, "error": false}}}}]}}]"#
    );
    let conversation = read(input.clone().into_bytes(), &ReadOptions::named("t")).unwrap();
    assert!(matches!(conversation.back, crate::conversation::Back::Spans(_)), "read without a tree");
    let tree = crate::read::read_tree(input.as_bytes(), &ReadOptions::named("t")).unwrap();
    assert_eq!(conversation.messages, tree.messages);
    assert_eq!(conversation.messages[0].text().map(|t| t.chars().count()), Some(10));
    let mut out = Vec::new();
    write(&conversation, &conversation.messages, Some(Target::Haystack), &Changes::none(), &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap().trim_end(), input, "written back as it was");
    let mut messages = conversation.messages.clone();
    prune(&mut messages, 2);
    let mut out = Vec::new();
    write(&conversation, &messages, Some(Target::Haystack), &Changes::in_place(vec![2]), &mut out).unwrap();
    let by_tree = written_by_tree(input.as_bytes(), &messages);
    let value =
        |bytes: &[u8]| serde_json::to_string(&compaction_model::value_from_slice(bytes).unwrap()).unwrap();
    assert_eq!(value(&out), value(&by_tree));
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(r#"{"q":"x\ud83d","k\udc00":NaN,"i":[Infinity,-Infinity]}"#), "{text}");
    assert!(text.contains(r#""meta":{"w":-Infinity}"#), "{text}");
    assert!(!text.contains('\u{10F03D}'), "{text}");
}

/// Memory (issue 31, item 13): read without write-back, a conversation holds the messages,
/// tools, notes and layout of a read with it, in every way a file is read whole (an OpenAI
/// request without a tree, on one thread or two, or as a bare array; a Haystack array; the tree
/// path; an event log), and keeps none of what writing back needs. Written back in its own
/// format it is refused, with nothing written and an error that says why; converted to another
/// format, it comes out as the full read's does.
#[test]
fn a_conversation_read_without_write_back_is_the_same_but_cannot_be_written_back() {
    let output = "line of output\n".repeat(40);
    let mut large = Vec::new();
    for k in 0..6000 {
        let id = format!("call_{k}");
        large.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "sh", "arguments": format!("{{\"n\": {k}}}")}}
        ]}));
        large.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
    }
    let bare = serde_json::to_vec(&large[..4]).unwrap();
    let large = serde_json::to_vec(&json!({"model": "m", "messages": large})).unwrap();
    assert!(large.len() > 2 << 20, "large enough for two threads: {}", large.len());
    let inputs: [(&str, Vec<u8>, Format); 7] = [
        ("an OpenAI request", OPENAI.as_bytes().to_vec(), Format::OpenAi),
        ("a large OpenAI request", large, Format::OpenAi),
        ("a bare array of OpenAI messages", bare, Format::OpenAi),
        ("a Haystack array", HAYSTACK.as_bytes().to_vec(), Format::Haystack),
        ("an Anthropic request (the tree path)", ANTHROPIC.as_bytes().to_vec(), Format::Anthropic),
        (
            "a Claude Code log",
            include_bytes!("../../../examples/transcripts/claude-code/fa812bfe-excerpt.jsonl").to_vec(),
            Format::ClaudeCode,
        ),
        (
            "a tau-bench file of conversations",
            include_bytes!("../../../examples/transcripts/tau-bench/gpt-4o-airline-excerpt.json").to_vec(),
            Format::OpenAi,
        ),
    ];
    // The request reader does not find where the messages sit at all.
    for input in [&inputs[0].1, &inputs[1].1, &inputs[2].1] {
        let source = compaction_model::JsonSource::new(input.clone());
        let kept = crate::request::read(&source, "t", true).unwrap();
        let unkept = crate::request::read(&source, "t", false).unwrap();
        assert_eq!(unkept.messages, kept.messages);
        assert_eq!(kept.spans.messages.len(), kept.messages.len());
        assert!(unkept.spans.messages.is_empty() && unkept.spans.contents.is_empty());
    }
    for (what, input, format) in inputs {
        let full = read(input.clone(), &ReadOptions::named("t")).unwrap();
        let options = ReadOptions::named("t").without_write_back();
        assert!(!options.write_back);
        let lean = read(input, &options).unwrap();
        assert_eq!(lean.format, format, "{what}");
        assert!(matches!(lean.back, crate::conversation::Back::Unkept), "{what}: {:?}", lean.back);
        assert_eq!(lean.messages, full.messages, "{what}");
        assert_eq!(lean.tools, full.tools, "{what}");
        assert_eq!(lean.notes, full.notes, "{what}");
        assert_eq!(lean.usage, full.usage, "{what}");
        assert_eq!(lean.layout, full.layout, "{what}");
        assert_eq!((lean.conversations, lean.selected), (full.conversations, full.selected), "{what}");
        assert_eq!(lean.source(), full.source(), "{what}");
        assert!(!lean.takes_back_rewrites(), "{what}");

        for changes in [Changes::none(), Changes::Unknown, Changes::Rewritten(vec![Some(0)])] {
            let messages = match changes {
                Changes::Rewritten(_) => &lean.messages[..1],
                _ => &lean.messages[..],
            };
            let mut out = Vec::new();
            let error = write(&lean, messages, None, &changes, &mut out).unwrap_err();
            assert!(out.is_empty(), "{what}: nothing is written");
            assert!(error.to_string().contains("read without what writing it back needs"), "{what}: {error}");
        }
        let target = match format {
            Format::Haystack => Target::OpenAi,
            _ => Target::Haystack,
        };
        let mut lean_out = Vec::new();
        let mut full_out = Vec::new();
        write(&lean, &lean.messages, Some(target), &Changes::none(), &mut lean_out).unwrap();
        write(&full, &full.messages, Some(target), &Changes::none(), &mut full_out).unwrap();
        assert_eq!(lean_out, full_out, "{what}");
    }
}

/// An Anthropic request with every kind of block: a system prompt of blocks with
/// `cache_control`, thinking and redacted thinking, calls whose input nests, results as a string
/// and as text and image blocks (one an error), a text beside results, server tools and their
/// results (kept opaque), citations, a document, an image, empty contents, escapes and text
/// beyond ASCII, settings around the messages.
fn anthropic_request() -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are brief. ünï 😀", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "sh", "description": "Run", "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}],
        "messages": [
            {"role": "user", "content": "Look at \"this\"\n\ttab é 😀 \u{1}"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "xyz"},
                {"type": "text", "text": "Running.", "cache_control": {"type": "ephemeral"}},
                {"type": "tool_use", "id": "t1", "name": "sh", "input": {"cmd": "ls", "n": [1, 2.5, {"x": null}]}},
                {"type": "tool_use", "id": "t2", "name": "sh", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a\nb \"q\" \\ é", "cache_control": {"type": "ephemeral"}},
                {"type": "tool_result", "tool_use_id": "t2", "is_error": true, "content": [
                    {"type": "text", "text": "err 😀", "cache_control": {"type": "ephemeral"}},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
                ]},
                {"type": "text", "text": "and then?"}
            ]},
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"q": "x"}},
                {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [{"type": "web_search_result", "url": "u", "title": "t", "text": "kept"}]},
                {"type": "text", "text": "Found.", "citations": [{"type": "x", "cited_text": "y"}]},
                {"type": "tool_use", "id": "t3", "name": "sh", "input": {"cmd": "cat"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t3", "content": "x".repeat(300)},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}, "title": "doc"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
                {"type": "text", "text": ""}
            ]},
            {"role": "assistant", "content": []},
            {"role": "user", "content": ""},
            {"role": "assistant", "content": null, "id": "m7"}
        ],
        "metadata": {"user_id": "u"},
        "stream": true
    })
}

/// Anthropic requests, spelled every way this crate meets them: the bundled examples and test
/// data, and generated ones compact, pretty-printed, as Python writes them (escaped to ASCII or
/// not), with CRLF line breaks, a byte-order mark, `system` as a string or absent or after the
/// messages.
fn anthropic_requests() -> Vec<(String, Vec<u8>)> {
    let mut inputs = vec![
        ("search.json".to_owned(), ANTHROPIC.as_bytes().to_vec()),
        ("fuzz".to_owned(), include_bytes!("../tests/data/fuzz/anthropic.json").to_vec()),
        (
            "dialect".to_owned(),
            include_bytes!("../../compaction-cli/tests/data/dialect/anthropic.json").to_vec(),
        ),
    ];
    let full = anthropic_request();
    let mut string_system = full.clone();
    string_system["system"] = json!("Be brief.");
    let mut no_system = full.clone();
    no_system.as_object_mut().unwrap().shift_remove("system");
    let mut system_last = no_system.clone();
    system_last["system"] = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
    let small = json!({"messages": [{"role": "user", "content": "hi"}]});
    let values = [
        ("full", full),
        ("search", serde_json::from_str(ANTHROPIC).unwrap()),
        ("string system", string_system),
        ("no system", no_system),
        ("system last", system_last),
        ("small", small),
    ];
    for (name, value) in values {
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        inputs.push((format!("{name} compact"), serde_json::to_vec(&value).unwrap()));
        inputs.push((
            format!("{name} python ascii"),
            compaction_testkit::python_dumps(&value, true).into_bytes(),
        ));
        inputs.push((format!("{name} python"), compaction_testkit::python_dumps(&value, false).into_bytes()));
        inputs.push((
            format!("{name} crlf"),
            String::from_utf8(pretty.clone()).unwrap().replace('\n', "\r\n").into_bytes(),
        ));
        inputs.push((format!("{name} bom"), [b"\xEF\xBB\xBF".as_slice(), &pretty, b"\n"].concat()));
        inputs.push((format!("{name} pretty"), pretty));
    }
    // Lone surrogate escapes, which Python reads and serde_json refuses, in a result, a text
    // block and a string `content`.
    let ascii = compaction_testkit::python_dumps(&anthropic_request(), true);
    for (k, (from, to)) in
        [("a\\nb", "a\\ud800b"), ("and then?", "and \\udc00then?"), ("Look at", "\\ud83d Look at")]
            .iter()
            .enumerate()
    {
        assert!(ascii.contains(from), "{from}");
        inputs.push((format!("lone surrogate {k}"), ascii.replace(from, to).into_bytes()));
    }
    inputs
}

fn anthropic_options() -> ReadOptions {
    ReadOptions::named("t").with_format(Format::Anthropic)
}

/// What a read gave, for comparing two: everything a caller sees of the conversation, or the
/// error as it is worded.
fn seen(read: &Result<crate::Conversation, crate::Error>) -> String {
    match read {
        Ok(c) => format!(
            "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {} {}",
            c.format, c.messages, c.tools, c.usage, c.notes, c.layout, c.model, c.conversations, c.selected
        ),
        Err(error) => format!("error: {error}"),
    }
}

/// What writing `messages` over a conversation gives: the bytes and the notes, or the error.
fn written_over(
    conversation: &crate::Conversation,
    messages: &[Message],
    target: Option<Target>,
    changes: &Changes,
) -> Result<(Vec<u8>, Vec<crate::Note>), String> {
    let mut out = Vec::new();
    let notes = write(conversation, messages, target, changes, &mut out).map_err(|e| e.to_string())?;
    Ok((out, notes))
}

/// Every change a test writes back: none; each tool result pruned alone, marked as compactors
/// mark it; all of them; the first text changed; every message marked (the system prompt with
/// them or not); a result pruned without the marker; the pruned messages with the changes
/// unknown; one message dropped.
fn anthropic_changes(messages: &[Message]) -> Vec<(String, Vec<Message>, Changes)> {
    let results: Vec<usize> = (0..messages.len()).filter(|&i| messages[i].has_tool_call_result()).collect();
    let marked = |indices: &[usize]| {
        let mut changed = messages.to_vec();
        for &index in indices {
            prune(&mut changed, index);
            changed[index].meta.insert("compacted".into(), json!(true));
        }
        changed
    };
    let mut changes = vec![("none".to_owned(), messages.to_vec(), Changes::none())];
    for &index in &results {
        changes.push((format!("prune {index}"), marked(&[index]), Changes::in_place(vec![index])));
    }
    changes.push(("prune all".into(), marked(&results), Changes::in_place(results.clone())));
    if let Some(index) = messages.iter().position(|m| m.role != compaction_model::Role::System) {
        let mut changed = messages.to_vec();
        changed[index].parts = vec![Part::Text(compaction_model::TextPart::new("Changed ✨"))];
        changed[index].meta.insert("compacted".into(), json!(true));
        changes.push((format!("text {index}"), changed, Changes::in_place(vec![index])));
    }
    // Every message marked, none otherwise changed: each is encoded afresh over its original.
    let mut all = messages.to_vec();
    for message in &mut all {
        message.meta.insert("compacted".into(), json!(true));
    }
    let not_system: Vec<usize> =
        (0..messages.len()).filter(|&i| messages[i].role != compaction_model::Role::System).collect();
    changes.push(("all marked".into(), all.clone(), Changes::in_place(not_system)));
    changes.push(("all marked, system too".into(), all, Changes::in_place((0..messages.len()).collect())));
    if let Some(&index) = results.first() {
        let mut unmarked = messages.to_vec();
        prune(&mut unmarked, index);
        changes.push(("unmarked".into(), unmarked.clone(), Changes::in_place(vec![index])));
        changes.push(("unknown".into(), unmarked, Changes::Unknown));
    }
    if messages.len() > 1 {
        let fewer = messages[..messages.len() - 1].to_vec();
        let origin = (0..fewer.len()).map(Some).collect();
        changes.push(("dropped".into(), fewer, Changes::Rewritten(origin)));
    }
    changes
}

/// An Anthropic request named as one is read without a tree into what the tree path reads, and
/// written back, unchanged or changed in every way a command changes it, or converted, into the
/// very bytes the tree path writes.
#[test]
fn an_anthropic_request_is_read_and_written_without_a_tree_as_the_tree_path_does() {
    let mut fast = 0;
    for (name, input) in anthropic_requests() {
        let conversation = read(input.clone(), &anthropic_options());
        let by_tree = crate::read::read_with_tree(input.clone(), &anthropic_options());
        assert_eq!(seen(&conversation), seen(&by_tree), "{name}");
        let (Ok(conversation), Ok(by_tree)) = (conversation, by_tree) else { continue };
        if matches!(conversation.back, crate::conversation::Back::Request(_)) {
            fast += 1;
        }
        for (change, messages, changes) in anthropic_changes(&conversation.messages) {
            for target in [None, Some(Target::Anthropic), Some(Target::OpenAi), Some(Target::Haystack)] {
                let ours = written_over(&conversation, &messages, target, &changes);
                let theirs = written_over(&by_tree, &messages, target, &changes);
                let show = |w: Result<(Vec<u8>, Vec<crate::Note>), String>| {
                    w.map(|(bytes, notes)| (String::from_utf8_lossy(&bytes).into_owned(), notes))
                };
                assert_eq!(show(ours), show(theirs), "{name}: {change} to {target:?}");
            }
        }
        // Left alone, the file comes back byte for byte.
        let mut out = Vec::new();
        write(&conversation, &conversation.messages, None, &Changes::none(), &mut out).unwrap();
        assert_eq!(out, input, "{name}");
        // Read without write-back, nothing of where the messages sit is gathered.
        let unkept = crate::messages::read(&compaction_model::JsonSource::new(input.clone()), "t", false);
        if let Some(unkept) = unkept {
            assert_eq!(unkept.messages, conversation.messages, "{name}");
            let spans = &unkept.spans;
            assert!(
                spans.messages.is_empty() && spans.contents.is_empty() && spans.firsts.is_empty(),
                "{name}"
            );
        }
    }
    // Every generated spelling, and the bundled ones whose envelope holds no lone surrogate.
    assert!(fast >= 41, "{fast} read without a tree");
}

/// What the Anthropic request reader is not sure of goes to the tree path, which reads or
/// refuses it as it always has.
#[test]
fn an_unusual_anthropic_request_is_left_to_the_tree_path() {
    let cases = [
        // Keys twice: in the envelope, a message, a block; a key written with an escape.
        r#"{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}"#,
        r#"{"messages":[{"role":"user","content":"a","content":"b"}]}"#,
        r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}"#,
        r#"{"messages":[{"role":"user","content":"a","m\u0065ta":1}]}"#,
        // A system prompt that is null or not text, a system message in the list.
        r#"{"system":null,"messages":[{"role":"user","content":"a"}]}"#,
        r#"{"system":[{"type":"image"}],"messages":[{"role":"user","content":"a"}]}"#,
        r#"{"messages":[{"role":"system","content":"s"},{"role":"user","content":"a"}]}"#,
        // A compaction block, a message as the whole file, JSON Lines, empty, not JSON.
        r#"{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"compaction","content":"sum"}]}]}"#,
        r#"{"role":"user","content":"a","messages":[{"role":"user","content":"a"}]}"#,
        "{\"messages\":[\n{\"role\":\"user\",\"content\":\"a\"}\n]}",
        r#"{"messages":[]}"#,
        r#"{"model":"m"}"#,
        r#"{"messages":[{"role":"user","content":"a\u00"}]}"#,
        r#"{"messages":[{"role":"wizard","content":"a"}]}"#,
        r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"a"}]}]}"#,
        r#"{"messages":[{"role":"user","content":"a"}]} x"#,
        r#"{"temperature":NaN,"messages":[{"role":"user","content":"a"}]}"#,
        r#"{"tools":[{"description":"no name"}],"messages":[{"role":"user","content":"a"}]}"#,
    ];
    for input in cases {
        let fast =
            crate::messages::read(&compaction_model::JsonSource::new(input.as_bytes().to_vec()), "t", true);
        assert!(fast.is_none(), "{input}");
        let conversation = read(input.as_bytes().to_vec(), &anthropic_options());
        let by_tree = crate::read::read_with_tree(input.as_bytes().to_vec(), &anthropic_options());
        assert_eq!(seen(&conversation), seen(&by_tree), "{input}");
    }
}

/// Spoiled requests (bytes changed, put in, taken out, or the body cut short): the reader
/// either leaves them to the tree path or reads what the tree path reads and writes it back
/// alike, and never panics.
#[test]
fn a_spoiled_anthropic_request_is_read_as_the_tree_path_reads_it_or_left_to_it() {
    const BYTES: &[u8] = b"\"\\,:{}[]0-.eE+ \n\x01atfnu/x\xC3\xA9";
    let mut state = 7u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % n
    };
    let inputs: Vec<Vec<u8>> = anthropic_requests()
        .into_iter()
        .filter(|(name, _)| {
            ["full compact", "full pretty", "search.json", "string system python ascii"]
                .contains(&name.as_str())
        })
        .map(|(_, input)| input)
        .collect();
    let (mut fast, mut refused) = (0, 0);
    for k in 0..3000 {
        let mut input = inputs[k % inputs.len()].clone();
        match next(4) {
            0 => input.truncate(next(input.len())),
            _ => {
                for _ in 0..1 + next(2) {
                    let at = next(input.len());
                    match next(3) {
                        0 => input.insert(at, BYTES[next(BYTES.len())]),
                        1 => {
                            input.remove(at);
                        }
                        _ => input[at] = BYTES[next(BYTES.len())],
                    }
                }
            }
        }
        let conversation = read(input.clone(), &anthropic_options());
        let by_tree = crate::read::read_with_tree(input.clone(), &anthropic_options());
        let shown = String::from_utf8_lossy(&input);
        assert_eq!(seen(&conversation), seen(&by_tree), "{shown}");
        let (Ok(conversation), Ok(by_tree)) = (conversation, by_tree) else {
            refused += 1;
            continue;
        };
        if matches!(conversation.back, crate::conversation::Back::Request(_)) {
            fast += 1;
        }
        let changes = anthropic_changes(&conversation.messages);
        for (change, messages, changes) in
            changes.into_iter().filter(|(c, ..)| c == "prune all" || c == "none")
        {
            let ours = written_over(&conversation, &messages, None, &changes);
            let theirs = written_over(&by_tree, &messages, None, &changes);
            assert_eq!(ours, theirs, "{shown}: {change}");
        }
    }
    assert!(fast > 300 && refused > 300, "{fast} read without a tree, {refused} refused");
}

/// A request of a few megabytes, its changed messages encoded on another thread while the rest
/// is copied: the same messages as the tree path's, and the same bytes written back.
#[test]
fn a_large_anthropic_request_is_read_and_written_as_the_tree_path_does() {
    let output = "line of output, with ünïcödé and \"quotes\"\n".repeat(30);
    let mut messages = vec![json!({"role": "user", "content": "Go."})];
    for k in 0..3000 {
        let id = format!("call_{k}");
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "sh", "input": {"n": k}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}));
    }
    let input = serde_json::to_vec(&json!({"model": "m", "system": "s", "messages": messages})).unwrap();
    assert!(input.len() > 2 << 20, "large enough for two threads: {}", input.len());
    let conversation = read(input.clone(), &anthropic_options()).unwrap();
    assert!(matches!(conversation.back, crate::conversation::Back::Request(_)), "read without a tree");
    let by_tree = crate::read::read_with_tree(input.clone(), &anthropic_options()).unwrap();
    assert_eq!(seen(&Ok(conversation)), seen(&Ok(by_tree)));
    let conversation = read(input.clone(), &anthropic_options()).unwrap();
    let by_tree = crate::read::read_with_tree(input, &anthropic_options()).unwrap();
    // Every other result pruned, marked as compactors mark it.
    let mut pruned = conversation.messages.clone();
    let changed: Vec<usize> =
        (0..pruned.len()).filter(|&i| pruned[i].has_tool_call_result() && i % 4 == 1).collect();
    for &index in &changed {
        prune(&mut pruned, index);
        pruned[index].meta.insert("compacted".into(), json!(true));
    }
    assert_eq!(changed.len(), 1500);
    let changes = Changes::in_place(changed);
    let ours = written_over(&conversation, &pruned, None, &changes).unwrap();
    assert!(ours == written_over(&by_tree, &pruned, None, &changes).unwrap());
}
