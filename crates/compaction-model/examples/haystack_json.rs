//! Haystack's `ChatMessage` JSON in and out: a saved agent conversation is read (in the current
//! shape and an older one), looked at part by part, extended in code, and written back as
//! Haystack's `to_dict()` writes it.
//!
//! Run with `cargo run -p compaction-model --example haystack_json`. It checks what it prints, and
//! `cargo test` runs it.

use compaction_model::{messages_from_value, messages_to_value, Message, Role, ToolCall};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // As an agent saved it: the first message in the older `_role`/`_content` shape, the others
    // in the current one. A field Haystack does not know (`cache_control`) rides along.
    let saved = json!([
        {"_role": "system", "_content": [{"text": "You are a file agent."}], "_meta": {}, "_name": null},
        {"role": "user", "meta": {}, "name": null,
         "content": [{"text": "What does notes.txt say?", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "meta": {"usage": {"prompt_tokens": 41, "completion_tokens": 9}}, "name": null,
         "content": [{"tool_call": {"tool_name": "read_file", "arguments": {"path": "notes.txt"}, "id": "c1"}}]},
        {"role": "tool", "meta": {}, "name": null, "content": [{"tool_call_result": {
            "result": "Buy milk.\nCall Ada about the report.", "error": false,
            "origin": {"tool_name": "read_file", "arguments": {"path": "notes.txt"}, "id": "c1"}}}]}
    ]);
    let mut messages = messages_from_value(saved)?;

    for (index, message) in messages.iter().enumerate() {
        let what = if let Some(result) = message.tool_call_result() {
            format!("result of {} ({})", result.origin.tool_name, result.origin.id.as_deref().unwrap_or("-"))
        } else if let Some(call) = message.tool_calls().next() {
            format!("calls {} with {}", call.tool_name, serde_json::Value::from(call.arguments.clone()))
        } else {
            format!("{:?}", message.text().unwrap_or_default())
        };
        println!("{index}: {:<9} {what}", message.role.as_str());
    }
    assert_eq!(messages[0].role, Role::System);
    assert_eq!(messages[3].tool_call_result().map(|r| r.origin.id.as_deref()), Some(Some("c1")));

    // The next step, built in code. A model sent arguments that are not a JSON object: they are
    // kept as their exact text, not dropped.
    let call = ToolCall::with_raw_arguments("read_file", "{\"path\": \"todo.txt\"").with_id("c2");
    messages.push(Message::assistant_with_calls(None, vec![call.clone()]));
    messages.push(Message::tool("Error: the arguments are not valid JSON", call, true));

    // Written back in the current shape, with the unknown field where it was, and read again
    // into the same messages.
    let written = messages_to_value(&messages);
    println!("{}", serde_json::to_string_pretty(&written[0])?);
    assert_eq!(
        written[0],
        json!({"role": "system", "meta": {}, "name": null, "content": [{"text": "You are a file agent."}]})
    );
    assert_eq!(written[1]["content"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(written[4]["content"][0]["tool_call"]["arguments"], json!("{\"path\": \"todo.txt\""));
    assert_eq!(messages_from_value(written)?, messages);
    println!("{} messages read, extended and written back unchanged", messages.len());
    Ok(())
}
