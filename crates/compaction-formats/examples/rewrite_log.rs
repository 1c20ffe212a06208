//! An OpenAI Chat Completions request saved by an agent: read into messages (format detected),
//! one large tool result shortened, and written back into the same file shape (only that message
//! changes) or converted to Anthropic Messages, with what the target cannot hold named.
//!
//! Run with `cargo run -p compaction-formats --example rewrite_log`. It checks what it prints,
//! and `cargo test` runs it.

use compaction_formats::{Format, ReadOptions, Target};
use compaction_model::{Changes, Message};

/// The request as the agent logged it, with fields our messages have no place for (`model`,
/// `temperature`, `refusal`) that writing back must keep.
const LOG: &str = r#"{
  "model": "gpt-4o",
  "temperature": 0,
  "messages": [
    {"role": "system", "content": "You fix failing builds."},
    {"role": "user", "content": "The build fails; find out why."},
    {"role": "assistant", "content": null, "refusal": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "run", "arguments": "{\"cmd\": \"make\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "LOG"},
    {"role": "assistant", "content": "The linker cannot find libssl.", "refusal": null}
  ]
}"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let build_log = format!("{}error: linking failed: cannot find -lssl", "cc -c src/main.c\n".repeat(200));
    let bytes = LOG.replace("\"LOG\"", &serde_json::to_string(&build_log)?).into_bytes();

    let conversation = compaction_formats::read(bytes, &ReadOptions::named("run.json"))?;
    assert_eq!(conversation.format, Format::OpenAi);
    println!("read {} messages as {:?}", conversation.messages.len(), conversation.format);
    for note in &conversation.notes {
        println!("note: {note}");
    }

    // Shorten the old tool result, as a compactor would (compaction-core does it for real).
    let mut messages = conversation.messages.clone();
    let index = messages.iter().position(Message::has_tool_call_result).expect("a tool result");
    let origin = messages[index].tool_call_result().expect("a tool result").origin.clone();
    messages[index] =
        Message::tool("[build log removed; the last line was: cannot find -lssl]", origin, false);

    // Written back: the same file, only that message rewritten.
    let mut same_file = Vec::new();
    compaction_formats::write(
        &conversation,
        &messages,
        None,
        &Changes::in_place(vec![index]),
        &mut same_file,
    )?;
    let written: serde_json::Value = serde_json::from_slice(&same_file)?;
    assert_eq!(written["model"], "gpt-4o");
    assert_eq!(written["messages"][2]["refusal"], serde_json::Value::Null);
    assert_eq!(
        written["messages"][3]["content"],
        "[build log removed; the last line was: cannot find -lssl]"
    );
    println!("written back: {} bytes instead of {}", same_file.len(), conversation.source().len());
    assert!(same_file.len() < conversation.source().len() / 5);

    // Converted to Anthropic Messages: the system prompt moves to `system`, the tool result into
    // a user message's `tool_result` block.
    let mut anthropic = Vec::new();
    let dropped = compaction_formats::write(
        &conversation,
        &messages,
        Some(Target::Anthropic),
        &Changes::Unknown,
        &mut anthropic,
    )?;
    let converted: serde_json::Value = serde_json::from_slice(&anthropic)?;
    assert_eq!(converted["system"], "You fix failing builds.");
    assert_eq!(converted["messages"][2]["content"][0]["type"], "tool_result");
    for note in &dropped {
        println!("not carried over: {note}");
    }
    println!(
        "as Anthropic Messages: {}",
        String::from_utf8_lossy(&anthropic).chars().take(120).collect::<String>()
    );

    // Read back, the converted file holds the same conversation.
    let again = compaction_formats::read(anthropic, &ReadOptions::named("run.anthropic.json"))?;
    assert_eq!(again.format, Format::Anthropic);
    let result = |m: &Message| m.tool_call_result().map(|r| r.result.clone());
    assert_eq!(again.messages.iter().find_map(result), messages.iter().find_map(result));
    Ok(())
}
