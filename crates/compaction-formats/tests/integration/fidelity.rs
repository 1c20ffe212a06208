//! Tree formats written back over their own bytes: OpenAI and Anthropic files, indented or
//! compact, escaping characters beyond ASCII or not, and files of conversations (tau-bench)
//! come back byte for byte but for the messages that changed, each written in its neighbours'
//! style.

use std::ops::Range;

use compaction_formats::{Conversation, ReadOptions, Target};
use compaction_model::{Changes, CompactionMarker, Message, Role};
use serde::Serialize;
use serde_json::{json, Value};

use crate::{prune, read, read_with};

/// `value` as Python's `json.dumps(value, indent=indent)` writes it (`ensure_ascii` escapes
/// every character beyond ASCII), or compact with `", "` and `": "` without `indent`.
fn python(value: &Value, indent: Option<usize>, ensure_ascii: bool) -> String {
    let text = match indent {
        Some(width) => {
            let unit = " ".repeat(width);
            let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
            let mut out = Vec::new();
            value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, formatter)).unwrap();
            String::from_utf8(out).unwrap()
        }
        None => spaced(value),
    };
    if !ensure_ascii {
        return text;
    }
    // Characters beyond ASCII only occur in strings, so each can be escaped where it stands.
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// Python's compact default: `", "` between items, `": "` after keys.
fn spaced(value: &Value) -> String {
    match value {
        Value::Array(items) => format!("[{}]", items.iter().map(spaced).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), spaced(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// The bytes of each element of the array that starts at `at` in `text`.
fn elements(text: &str, at: usize) -> Vec<Range<usize>> {
    assert_eq!(&text[at..at + 1], "[");
    let skip = |mut at: usize| {
        while text.as_bytes().get(at).is_some_and(|b| b.is_ascii_whitespace()) {
            at += 1;
        }
        at
    };
    let mut out = Vec::new();
    let mut at = skip(at + 1);
    while &text[at..at + 1] != "]" {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        values.next().unwrap().unwrap();
        let end = at + values.byte_offset();
        out.push(at..end);
        at = skip(end);
        if &text[at..at + 1] == "," {
            at = skip(at + 1);
        }
    }
    out
}

/// Where the `n`-th array under `key` starts.
fn array_of(text: &str, key: &str, n: usize) -> usize {
    let needle = format!("\"{key}\":");
    let (at, _) = text.match_indices(&needle).nth(n).expect("the key");
    at + text[at..].find('[').unwrap()
}

/// Asserts that `output` is `input` with each range of `changed` (in order, apart) replaced by
/// one JSON value, and returns those values with their text.
fn replaced(input: &str, output: &str, changed: &[Range<usize>]) -> Vec<(Value, String)> {
    let mut values = Vec::new();
    let (mut at_in, mut at_out) = (0, 0);
    for range in changed {
        let same = &input[at_in..range.start];
        assert!(
            output[at_out..].starts_with(same),
            "the bytes before the changed message at {range:?} differ:\n{}",
            &output[at_out..(at_out + same.len() + 80).min(output.len())]
        );
        at_out += same.len();
        let mut stream = serde_json::Deserializer::from_str(&output[at_out..]).into_iter::<Value>();
        let value = stream.next().expect("a value").expect("valid JSON");
        let end = at_out + stream.byte_offset();
        values.push((value, output[at_out..end].to_owned()));
        at_out = end;
        at_in = range.end;
    }
    assert_eq!(&output[at_out..], &input[at_in..], "the bytes after the last changed message differ");
    values
}

/// A changed message as a command leaves it: its marker in its meta.
fn mark(message: &mut Message) {
    CompactionMarker::new("tool_result_pruning", 100).write_to(&mut message.meta);
}

fn write_back(conversation: &Conversation, messages: &[Message], changed: &[usize]) -> String {
    String::from_utf8(crate::written_back(conversation, messages, changed)).unwrap()
}

fn openai_messages() -> Value {
    json!([
        {"role": "system", "content": "You book flights. Prix en €."},
        {"role": "user", "content": "Réserve un vol — merci 🎉", "name": "mia"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"from\": \"JFK\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "vol 1 à 9h\n".repeat(40)},
        {"role": "assistant", "content": "Voilà, c'est fait.", "refusal": null},
        {"role": "tool", "tool_call_id": "c1", "content": "second answer é"},
        {"role": "user", "content": "Merci."}
    ])
}

/// An OpenAI request, indented by Python with escapes: the pruned tool message is the only
/// change, written indented and escaped as its neighbours are; the same with the marker a
/// command leaves (the request path) and without (the tree path).
#[test]
fn an_indented_escaped_openai_request_changes_only_the_pruned_message() {
    let file = json!({"model": "gpt-4o", "messages": openai_messages(), "temperature": 0.0});
    for indent in [Some(2), Some(4), None] {
        let input = python(&file, indent, true) + "\n";
        let spans = elements(&input, array_of(&input, "messages", 0));
        let conversation = read(&input);
        for marked in [true, false] {
            let mut messages = conversation.messages.clone();
            prune(&mut messages, 3, "[pruned: vol]");
            if marked {
                mark(&mut messages[3]);
            }
            let output = write_back(&conversation, &messages, &[3]);
            let values = replaced(&input, &output, &[spans[3].clone()]);
            let expected = json!({"role": "tool", "tool_call_id": "c1", "content": "[pruned: vol]"});
            assert_eq!(values[0].0, expected);
            // In the neighbours' style: Python's spelling of the message at its depth.
            let margin = " ".repeat(indent.unwrap_or(0) * 2);
            let spelled = python(&expected, indent, true).replace('\n', &format!("\n{margin}"));
            assert_eq!(values[0].1, spelled, "indent {indent:?}, marked {marked}");
        }
    }
}

/// A bare array of OpenAI messages, indented or compact, escaping or not: untouched messages
/// keep their escapes, two changed messages apart are the only changes.
#[test]
fn an_openai_array_keeps_the_bytes_of_every_untouched_message() {
    for (indent, ascii) in [(Some(2), true), (None, true), (Some(2), false), (None, false)] {
        let input = python(&openai_messages(), indent, ascii);
        let spans = elements(&input, 0);
        let conversation = read(&input);
        assert_eq!(conversation.messages.len(), 7);
        let mut messages = conversation.messages.clone();
        prune(&mut messages, 3, "[pruned]");
        prune(&mut messages, 5, "[pruné]");
        let output = write_back(&conversation, &messages, &[3, 5]);
        let values = replaced(&input, &output, &[spans[3].clone(), spans[5].clone()]);
        assert_eq!(values[1].0["content"], "[pruné]");
        assert_eq!(values[1].1.contains("\\u00e9"), ascii, "{}", values[1].1);
    }
}

fn anthropic_file() -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "You list files — vite.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Liste les fichiers."},
            {"role": "assistant", "content": [{"type": "text", "text": "Je regarde."},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.rs\n".repeat(50)}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "ls", "input": {"path": "src"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "main.rs"}]},
            {"role": "assistant", "content": "Voilà."}
        ],
        "max_tokens": 1024
    })
}

/// An indented Anthropic request: a pruned result, and a `system` changed or removed, are the
/// only bytes that change.
#[test]
fn an_indented_anthropic_request_changes_only_what_changed() {
    let input = python(&anthropic_file(), Some(2), true) + "\n";
    let spans = elements(&input, array_of(&input, "messages", 0));
    let conversation = read(&input);
    assert_eq!(conversation.messages[0].role, Role::System);
    // The messages read: the system prompt first, then one a message here.
    let mut messages = conversation.messages.clone();
    prune(&mut messages, 3, "[pruned]");
    let output = write_back(&conversation, &messages, &[3]);
    let values = replaced(&input, &output, &[spans[2].clone()]);
    assert_eq!(values[0].0["content"][0]["content"], "[pruned]");
    assert!(
        values[0].1.starts_with("{\n      \"role\": \"user\",\n      \"content\": [\n        {\n"),
        "{}",
        values[0].1
    );

    // A new system prompt replaces the old one's value, indented in place.
    let system = {
        let start = input.find("\"system\": ").unwrap() + "\"system\": ".len();
        let mut stream = serde_json::Deserializer::from_str(&input[start..]).into_iter::<Value>();
        stream.next().unwrap().unwrap();
        start..start + stream.byte_offset()
    };
    let mut messages = conversation.messages.clone();
    messages[0] = Message::system("Tu listes des fichiers.");
    let output = write_back(&conversation, &messages, &[0]);
    let values = replaced(&input, &output, std::slice::from_ref(&system));
    assert_eq!(values[0].1, "\"Tu listes des fichiers.\"");

    // Without a system message, the member goes, with its comma.
    let output = write_back(&conversation, &conversation.messages[1..], &[]);
    let removed = input.find("\"system\"").unwrap()..input[system.end..].find('"').unwrap() + system.end;
    assert_eq!(output, format!("{}{}", &input[..removed.start], &input[removed.end..]));
    assert_eq!(read(&output).messages.len(), conversation.messages.len() - 1);
}

/// A bare array of Anthropic messages, indented: the untouched ones keep their bytes.
#[test]
fn an_indented_anthropic_array_keeps_the_untouched_messages() {
    let array = anthropic_file()["messages"].clone();
    let input = python(&array, Some(2), false);
    let spans = elements(&input, 0);
    let conversation =
        read_with(&input, ReadOptions::named("t").with_format(compaction_formats::Format::Anthropic))
            .unwrap();
    let mut messages = conversation.messages.clone();
    let index = messages.iter().position(Message::has_tool_call_result).unwrap();
    prune(&mut messages, index, "[pruned]");
    let output = write_back(&conversation, &messages, &[index]);
    let values = replaced(&input, &output, &[spans[2].clone()]);
    assert_eq!(values[0].0["content"][0]["content"], "[pruned]");
}

fn trajectory(task: usize, result: &str) -> Value {
    json!({
        "task_id": task,
        "reward": 1.0,
        "info": {"note": "é"},
        "traj": [
            {"role": "system", "content": "You are an airline agent."},
            {"role": "user", "content": "Book it."},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "find", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "find", "content": result},
            {"role": "assistant", "content": "Booked."}
        ]
    })
}

/// A tau-bench file: the conversation chosen changes its pruned message only, every other
/// trajectory keeps its bytes.
#[test]
fn a_tau_bench_file_changes_only_the_chosen_conversations_message() {
    let file =
        Value::Array((0..3).map(|task| trajectory(task, &"flight HAT136\n".repeat(30 + task))).collect());
    let input = python(&file, Some(2), true) + "\n";
    let conversation = read_with(&input, ReadOptions::named("t").with_conversation(1)).unwrap();
    assert_eq!(conversation.conversations, 3);
    let spans = elements(&input, array_of(&input, "traj", 1));
    let mut messages = conversation.messages.clone();
    prune(&mut messages, 3, "[pruned]");
    for marked in [false, true] {
        if marked {
            mark(&mut messages[3]);
        }
        let output = write_back(&conversation, &messages, &[3]);
        let values = replaced(&input, &output, &[spans[3].clone()]);
        assert_eq!(values[0].0["content"], "[pruned]");
        assert_eq!(values[0].0["name"], "find");
    }
}

/// Messages dropped and a summary put in (a sliding window): each message kept is its input
/// bytes, the envelope is as it was, and the summary is written in the messages' style.
#[test]
fn messages_kept_by_a_rewrite_keep_their_bytes() {
    let file = json!({"model": "gpt-4o", "messages": openai_messages()});
    for input in [python(&file, Some(2), true) + "\n", serde_json::to_string(&file).unwrap()] {
        let spans = elements(&input, array_of(&input, "messages", 0));
        let conversation = read(&input);
        let summary = Message::user("Summary: a flight was booked.");
        let messages = vec![conversation.messages[0].clone(), summary, conversation.messages[6].clone()];
        let origin = [Some(0), None, Some(6)];
        let mut out = Vec::new();
        compaction_formats::write(
            &conversation,
            &messages,
            None,
            &Changes::rewritten(origin.to_vec()),
            &mut out,
        )
        .unwrap();
        let output = String::from_utf8(out).unwrap();
        // The envelope up to the first message and from the last on, and both kept messages.
        assert!(output.starts_with(&input[..spans[0].end]), "{output}");
        assert!(output.ends_with(&input[spans[6].start..]), "{output}");
        let again = read(&output);
        assert_eq!(again.messages.len(), 3);
        assert_eq!(again.messages[1].text(), Some("Summary: a flight was booked."));
        let middle = &output[spans[0].end..output.len() - (input.len() - spans[6].start)];
        let separator = &input[spans[0].end..spans[1].start];
        assert!(middle.starts_with(separator), "{middle:?}");
        let summary = &middle[separator.len()..middle.len() - separator.len()];
        assert_eq!(
            serde_json::from_str::<Value>(summary).unwrap(),
            json!({"role": "user", "content": "Summary: a flight was booked."})
        );
        if input.contains('\n') {
            assert_eq!(
                summary,
                "{\n      \"role\": \"user\",\n      \"content\": \"Summary: a flight was booked.\"\n    }"
            );
        }
    }
}

/// Converted to another format, the output is not the input's bytes (nothing to keep): the
/// in-place path is only for the format read.
#[test]
fn a_conversion_is_written_whole() {
    let input = python(&json!({"model": "gpt-4o", "messages": openai_messages()}), Some(2), true);
    let conversation = read(&input);
    let output = crate::converted(&conversation, Target::Anthropic);
    assert!(output.starts_with('{') && !output.contains("\n  "), "{output}");
}
