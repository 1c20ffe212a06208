//! OpenAI Responses item lists: messages, calls paired by `call_id`, reasoning, `compaction`
//! items kept opaque and in place, and write-back that changes only pruned outputs.

use compaction_formats::{Format, Target};
use compaction_model::{Part, Role};
use serde_json::{json, Value};

use crate::{read, roles, written_back};

fn items() -> Value {
    json!([
        {"role": "developer", "content": "Answer with the weather."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris and Oslo?"}]},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-opaque-summary"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two lookups."}], "encrypted_content": "gAAAAB-r"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "weather", "arguments": "{\"city\": \"Oslo\""},
        {"type": "function_call_output", "call_id": "call_1", "output": "Paris: 21C, sunny. ".repeat(50)},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "Oslo: 9C, rain."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Paris is warm; Oslo rains."}]}
    ])
}

#[test]
fn items_become_messages_with_calls_paired_by_call_id() {
    let text = serde_json::to_string_pretty(&items()).unwrap();
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::Responses);
    assert_eq!(roles(&conversation.messages), "suatta");
    let reply = &conversation.messages[2];
    // The compaction item stays where it was, as a text part holding the item.
    let (_, item) = compaction_formats::provider_item(&reply.parts[0]).expect("opaque compaction");
    assert_eq!(item["id"], "cmp_1");
    assert_eq!(reply.text(), Some("gAAAAB-opaque-summary"));
    assert!(matches!(reply.parts[1], Part::Reasoning(_)));
    let calls: Vec<_> = reply.tool_calls().collect();
    assert_eq!(calls[1].raw_arguments.as_deref(), Some("{\"city\": \"Oslo\""));
    let oslo = conversation.messages[4].tool_call_result().unwrap();
    assert_eq!(oslo.origin.id.as_deref(), Some("call_2"));
    assert!(conversation.messages.iter().all(|m| m.role != Role::Tool || m.parts.len() == 1));
}

#[test]
fn a_pruned_output_is_written_back_in_place() {
    for text in [
        serde_json::to_string_pretty(&items()).unwrap(),
        json!({"model": "gpt-5", "input": items()}).to_string(),
    ] {
        let conversation = read(&text);
        assert_eq!(written_back(&conversation, &conversation.messages, &[]), text.as_bytes());
        let mut messages = conversation.messages.clone();
        crate::prune(&mut messages, 3, "[pruned]");
        crate::prune(&mut messages, 4, "[gone]");
        let out = String::from_utf8(written_back(&conversation, &messages, &[3, 4])).unwrap();
        let expected =
            text.replace(&json!("Paris: 21C, sunny. ".repeat(50)).to_string(), "\"[pruned]\"").replace(
                r#"[{"type":"input_text","text":"Oslo: 9C, rain."}]"#,
                r#"[{"type":"input_text","text":"[gone]"}]"#,
            );
        let pretty_oslo = "[\n      {\n        \"type\": \"input_text\",\n        \"text\": \"Oslo: 9C, rain.\"\n      }\n    ]";
        let expected = expected.replace(pretty_oslo, r#"[{"type":"input_text","text":"[gone]"}]"#);
        assert_eq!(out, expected);
    }
}

#[test]
fn items_one_a_line_are_read_and_written_back() {
    let text: String = items().as_array().unwrap().iter().map(|i| format!("{i}\n")).collect();
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::Responses);
    assert_eq!(roles(&conversation.messages), "suatta");
    assert_eq!(written_back(&conversation, &conversation.messages, &[]), text.as_bytes());
    // Converted to Chat Completions, the compaction item becomes its text.
    let openai = crate::converted(&conversation, Target::OpenAi);
    assert!(openai.contains("gAAAAB-opaque-summary"));
}

#[test]
fn a_list_after_a_byte_order_mark_is_written_back_with_it() {
    for text in [items().to_string(), json!({"model": "gpt-5", "input": items()}).to_string()] {
        let text = format!("\u{FEFF}{text}");
        let conversation = read(&text);
        assert_eq!(written_back(&conversation, &conversation.messages, &[]), text.as_bytes());
        let mut messages = conversation.messages.clone();
        crate::prune(&mut messages, 3, "[pruned]");
        let out = String::from_utf8(written_back(&conversation, &messages, &[3])).unwrap();
        let expected = text.replace(&json!("Paris: 21C, sunny. ".repeat(50)).to_string(), "\"[pruned]\"");
        assert_eq!(out, expected);
    }
}
