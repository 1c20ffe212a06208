//! Anthropic Messages with server-side compaction: `compaction` blocks kept opaque and in
//! place, the view starting at the last one, and the messages before it written back untouched.

use compaction_formats::{NoteKind, ReadOptions, Target};
use compaction_model::{Changes, Role};
use serde_json::{json, Value};

use crate::{read, read_with, roles};

fn conversation() -> Value {
    json!({
        "model": "claude-opus-4-6",
        "system": "You search code.",
        "messages": [
            {"role": "user", "content": "Find the parser."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": "parse"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "src/parse.rs"}]},
            {"role": "assistant", "content": [
                {"type": "compaction", "content": "The user looks for the parser; it is in src/parse.rs.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "src/parse.rs"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "fn parse() {}\n".repeat(200)}]},
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "parse"}},
                {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []},
                {"type": "text", "text": "Done."}]}
        ]
    })
}

#[test]
fn the_view_starts_at_the_compaction_block_which_stays_opaque() {
    let text = conversation().to_string();
    let read = read(&text);
    assert_eq!(roles(&read.messages), "sata");
    let block = &read.messages[1].parts[0];
    let (format, item) = compaction_formats::provider_item(block).expect("kept opaque");
    assert_eq!((format, item["cache_control"]["type"].as_str()), ("anthropic", Some("ephemeral")));
    // Counted as its summary.
    assert_eq!(read.messages[1].text(), Some("The user looks for the parser; it is in src/parse.rs."));
    assert!(read.notes.iter().any(|n| n.kind == NoteKind::Compacted && n.count == 3), "{:?}", read.notes);
    assert!(read.notes.iter().any(|n| n.kind == NoteKind::Opaque), "{:?}", read.notes);
    let full = read_with(&text, ReadOptions::named("t").with_full_history(true)).unwrap();
    assert_eq!(roles(&full.messages), "suatata");
    assert_eq!(full.messages[0].role, Role::System);
}

#[test]
fn written_back_the_messages_before_it_are_untouched() {
    let text = conversation().to_string();
    let read = read(&text);
    let mut out = Vec::new();
    compaction_formats::write(&read, &read.messages, None, &Changes::none(), &mut out).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), conversation());
    let mut messages = read.messages.clone();
    crate::prune(&mut messages, 2, "[pruned]");
    let mut out = Vec::new();
    compaction_formats::write(&read, &messages, None, &Changes::in_place(vec![2]), &mut out).unwrap();
    let mut expected = conversation();
    expected["messages"][4]["content"][0]["content"] = json!("[pruned]");
    assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), expected);
    // Converted to Anthropic afresh, the compaction block is written as it was read.
    let converted = crate::converted(&read, Target::Anthropic);
    assert!(converted.contains(r#""type":"compaction""#), "{converted}");
}
