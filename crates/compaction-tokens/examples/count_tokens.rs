//! Counting an agent's conversation: the text every counter measures, the approximate count,
//! an exact tiktoken count (with the `tiktoken` feature), each message's share, and a running
//! count that measures only what each step adds.
//!
//! Run with `cargo run -p compaction-tokens --example count_tokens --features tiktoken` (without
//! the feature it counts approximately only). It checks what it prints, and `cargo test` runs it.
//! A HuggingFace `tokenizer.json` counts the same way: `counter_from_spec("huggingface:PATH")`
//! with the `huggingface` feature.

use compaction_model::{Message, ToolCall, ToolSpec};
use compaction_tokens::{counter_from_spec, rendered_text, RunningCount, TokenCounter};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tools = vec![ToolSpec::new(
        "grep",
        "Search the repository.",
        json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
    )];
    let args = json!({"pattern": "fn main"}).as_object().cloned().unwrap_or_default();
    let call = ToolCall::new("grep", args).with_id("call_1");
    let messages = vec![
        Message::system("You are a coding agent."),
        Message::user("Where is the entry point?"),
        Message::assistant_with_calls(None, vec![call.clone()]),
        Message::tool("src/main.rs:12: fn main() {\nsrc/bin/tool.rs:3: fn main() {", call, false),
        Message::assistant("In src/main.rs, line 12."),
    ];

    // What every counter measures: the reference's rendering of the messages and tool schemas.
    let text = rendered_text(&messages, &tools);
    println!("rendered text ({} characters):\n{text}\n", text.chars().count());

    let mut counters = vec![counter_from_spec("approximate")?];
    if cfg!(feature = "tiktoken") {
        counters.push(counter_from_spec("tiktoken:gpt-4o")?); // o200k_base
    }
    for counter in &counters {
        let total = counter.count(&messages, &tools);
        let each = counter.count_each(&messages);
        println!(
            "{:<22} {total:>4} tokens with the tool schema; per message {:?}",
            counter.describe(),
            each.each
        );
        assert!(total > each.total, "the tool schema adds tokens");
        assert_eq!(each.each.len(), messages.len());
    }

    // An agent loop counts before every call; a running count measures each message once (for
    // counters whose counts add up message by message, as the approximate one's do).
    let counter = &counters[0];
    let mut running = RunningCount::default();
    let mut so_far = Vec::new();
    let mut count = 0;
    for message in &messages {
        so_far.push(message.clone());
        count = running.count(counter.as_ref(), &so_far, &tools);
        assert_eq!(count, counter.count(&so_far, &tools));
    }
    println!("running count after {} messages: {count} tokens, each message measured once", so_far.len());
    assert_eq!(running.measured(), messages.len());
    Ok(())
}
