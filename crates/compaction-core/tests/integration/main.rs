//! Integration tests of compaction-core: golden fixtures from the reference, the reference's own
//! cases, properties over random conversations, the options beyond the reference, and observation
//! masking against SWE-agent's own processor.

mod changes;
mod conformance;
mod family_cases;
mod family_conformance;
mod family_properties;
mod masking;
mod options;
mod properties;
mod reference_cases;
mod settings;

use compaction_model::{Message, ToolCall};
use compaction_tokens::TokenCounter;
use serde_json::{json, Value};

/// Builds the counter a fixture's `counter` object describes.
pub fn counter_from_fixture(spec: &Value) -> Box<dyn TokenCounter> {
    let image = spec["tokens_per_image"].as_u64().unwrap_or(85) as usize;
    let file = spec["tokens_per_file"].as_u64().unwrap_or(1000) as usize;
    match spec["kind"].as_str() {
        Some("approximate") => {
            let ratio = spec["chars_per_token"].as_f64().unwrap_or(4.0);
            Box::new(
                compaction_tokens::ApproximateTokenCounter::new(ratio)
                    .expect("valid ratio")
                    .with_charges(image, file),
            )
        }
        Some("tiktoken") => {
            let encoding =
                compaction_tokens::Encoding::from_name_or_model(spec["encoding"].as_str().unwrap_or(""))
                    .expect("known encoding");
            Box::new(compaction_tokens::TiktokenCounter::from_encoding(encoding).with_charges(image, file))
        }
        other => panic!("counter kind {other:?} not supported by these tests"),
    }
}

/// A counter that charges one token per character of every text and tool result, so the
/// reference cases can state exact sizes. Its counts are additive: a conversation costs the
/// sum of its messages.
#[derive(Debug, Clone, Copy, Default)]
pub struct CharCounter;

impl TokenCounter for CharCounter {
    fn try_count(
        &self,
        messages: &[Message],
        _tools: &[compaction_model::ToolSpec],
    ) -> Result<usize, compaction_tokens::Error> {
        Ok(messages.iter().map(message_chars).sum())
    }

    fn describe(&self) -> String {
        "chars".into()
    }
}

fn message_chars(message: &Message) -> usize {
    use compaction_model::{Part, ToolResultContent};
    message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text(t) => t.text.chars().count(),
            Part::ToolCall(c) => {
                c.tool_name.len()
                    + match &c.raw_arguments {
                        Some(raw) => raw.len(),
                        None => serde_json::to_string(&c.arguments).map_or(0, |s| s.len()),
                    }
            }
            // Like every counter, it sees only what a result renders as (the contract the pruning
            // compactor's one count per placeholder relies on): the texts.
            Part::ToolCallResult(r) => match &r.result {
                ToolResultContent::Text(text) => text.chars().count(),
                ToolResultContent::Parts(parts) => parts
                    .iter()
                    .map(|part| match part {
                        compaction_model::ResultPart::Text(t) => t.text.chars().count(),
                        _ => 0,
                    })
                    .sum(),
            },
            _ => 0,
        })
        .sum()
}

/// A call to `tool` with id `id` and one argument.
pub fn call(tool: &str, id: &str) -> ToolCall {
    let arguments = json!({"query": format!("about {id}")}).as_object().cloned().unwrap_or_default();
    ToolCall::new(tool, arguments).with_id(id)
}

/// An assistant message calling each of `calls`.
pub fn calling(calls: &[ToolCall]) -> Message {
    Message::assistant_with_calls(None, calls.to_vec())
}

/// A tool message answering `origin` with `size` characters.
pub fn result(origin: &ToolCall, size: usize) -> Message {
    Message::tool("x".repeat(size), origin.clone(), false)
}

pub use compaction_testkit::python_equal;

/// Every fixture of one kind: the committed ones, plus a differential run's.
pub fn fixture_files(kind: &str) -> Vec<std::path::PathBuf> {
    compaction_testkit::fixture_files(env!("CARGO_MANIFEST_DIR"), kind)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

/// Runs a future that never waits on anything outside it (the tests' stand-in models answer at
/// once) to completion on this thread.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}
