//! An agent loop with a scripted "model": long results are offloaded as they arrive, the model reads
//! one back with the read-back tool, and the compaction hook prunes the
//! shorter ones that stayed once the window fills; pruning leaves the pointers alone.
//!
//! Run with `cargo run -p compaction-offload --example agent_loop`.

use std::sync::Arc;

use compaction_core::{PruningSettings, ToolResultPruningCompactor};
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
use compaction_model::{Message, ToolCall, ToolSpec};
use compaction_offload::{
    read_offloaded_result, read_tool_spec, InMemoryToolResultStore, OffloadOverChars, OffloadStrategies,
    ToolResultOffloadHook, READ_TOOL_NAME,
};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use serde_json::json;

/// Stands in for a chat model: one tool call per step, then a final answer.
fn model(step: usize, state: &AgentState) -> Message {
    let args = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    match step {
        0..=5 => Message::assistant_with_calls(
            None,
            vec![ToolCall::new("search", args(json!({"query": format!("topic {step}")})))
                .with_id(format!("s{step}"))],
        ),
        6 => {
            // Follow the pointer left for the first result.
            let reference = state
                .messages()
                .iter()
                .find_map(|m| compaction_model::offloaded_references(&m.meta))
                .and_then(|refs| refs.into_iter().next())
                .unwrap_or_default();
            Message::assistant_with_calls(
                None,
                vec![ToolCall::new(
                    READ_TOOL_NAME,
                    args(json!({"reference": reference, "start_line": 1, "end_line": 2})),
                )
                .with_id("r1")],
            )
        }
        _ => Message::assistant("Here is what I found."),
    }
}

fn run_tool(call: &ToolCall, store: &InMemoryToolResultStore) -> Message {
    if call.tool_name == READ_TOOL_NAME {
        return read_offloaded_result(store, &call.arguments.to_map()).into_message(call.clone());
    }
    let query = call.arguments.get("query");
    let query = query.as_ref().and_then(|q| q.as_str()).unwrap_or_default();
    let hits = if call.id.as_deref().is_some_and(|id| id.ends_with(['1', '3', '5'])) { 80 } else { 60 };
    let text: String = (1..=hits).map(|i| format!("hit {i} for {query}: a long snippet of text\n")).collect();
    Message::tool(text, call.clone(), false)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = Arc::new(InMemoryToolResultStore::new());
    let offload = ToolResultOffloadHook::new(
        store.clone(),
        OffloadStrategies::new()
            .with("search", OffloadOverChars::new(3_000))
            .with("*", OffloadOverChars::new(20_000)),
    );
    let compaction = CompactionHook::new(
        Box::new(ToolResultPruningCompactor::new(PruningSettings::default().with_min_tokens(0))?),
        CompactionHookSettings::new(2_000),
    )?;
    // Stands in for the provider's usage report.
    let provider = ApproximateTokenCounter::default();

    let tools = vec![ToolSpec::new("search", "Search the web.", json!({"type": "object"})), read_tool_spec()];
    let mut state = AgentState::new(vec![
        Message::system("You are a researcher."),
        Message::user("Research six topics."),
    ])
    .with_tools(tools);

    for step in 0.. {
        let outcome = compaction.run(&mut state);
        println!(
            "step {step}: estimate {} tokens, triggered {}, compacted {}",
            outcome.estimated_tokens, outcome.triggered, outcome.compacted
        );
        let reply = model(step, &state);
        state.push(reply.clone());
        state.context_tokens = provider.count(state.messages(), &state.tools);
        let calls: Vec<ToolCall> = reply.tool_calls().cloned().collect();
        if calls.is_empty() {
            println!("final answer: {}", reply.text().unwrap_or_default());
            break;
        }
        state.extend(calls.iter().map(|call| run_tool(call, &store)));
        state.step_count += 1;
        let offloaded = offload.run(&mut state);
        if !offloaded.offloaded.is_empty() {
            println!("  offloaded messages {:?}", offloaded.offloaded);
        }
        // A store failure leaves the result in context; say it rather than swallow it.
        for failure in &offloaded.failures {
            eprintln!("  could not offload message {}: {}", failure.at.index, failure.error);
        }
        if let Some(result) = state.messages().last().and_then(|m| m.tool_call_result()) {
            if result.origin.tool_name == READ_TOOL_NAME {
                println!("  read back: {:?}", result.result);
            }
        }
    }
    println!("{} results in the store: {:?}", store.len(), store.references());
    Ok(())
}
