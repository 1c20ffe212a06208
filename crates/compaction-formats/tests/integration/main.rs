//! The formats read from real shapes and written back: one module per format, no process.

mod anthropic;
mod claude_code;
mod codex;
mod detection;
mod fidelity;
mod fuzz;
mod openai;
mod openhands;
mod responses;
mod swe_agent;
mod threads;

use compaction_formats::{Conversation, Error, Format, ReadOptions, Target};
use compaction_model::{Changes, Message, Part, Role, ToolResultContent};
use serde_json::Value;

/// Reads `text` with `options`.
pub fn read_with(text: &str, options: ReadOptions) -> Result<Conversation, Error> {
    compaction_formats::read(text.as_bytes().to_vec(), &options)
}

/// Reads `text`, its format told from the content.
pub fn read(text: &str) -> Conversation {
    read_with(text, ReadOptions::named("t"))
        .unwrap_or_else(|e| panic!("{e}: {:?}", std::error::Error::source(&e)))
}

/// JSON values as JSON Lines.
pub fn lines(values: &[Value]) -> String {
    values.iter().map(|v| format!("{}\n", serde_json::to_string(v).unwrap())).collect()
}

/// The roles of messages, one letter each.
pub fn roles(messages: &[Message]) -> String {
    messages.iter().map(|m| &m.role.as_str()[..1]).collect()
}

/// Replaces the text of every tool result of message `index`.
pub fn prune(messages: &mut [Message], index: usize, text: &str) {
    for part in &mut messages[index].parts {
        if let Part::ToolCallResult(result) = part {
            result.result = ToolResultContent::Text(text.into());
        }
    }
}

/// The conversation written back in its own format (only `changed` changed).
pub fn written_back(conversation: &Conversation, messages: &[Message], changed: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    compaction_formats::write(conversation, messages, None, &Changes::in_place(changed.to_vec()), &mut out)
        .unwrap();
    out
}

/// The conversation converted to `target`.
pub fn converted(conversation: &Conversation, target: Target) -> String {
    let mut out = Vec::new();
    compaction_formats::write(
        conversation,
        &conversation.messages,
        Some(target),
        &Changes::Unknown,
        &mut out,
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

/// The index of the first tool message.
pub fn first_result(messages: &[Message]) -> usize {
    messages.iter().position(|m| m.role == Role::Tool).expect("a tool message")
}

#[test]
fn every_format_has_a_name() {
    for format in Format::ALL {
        assert_eq!(format.to_string().parse::<Format>().unwrap(), *format);
    }
}
