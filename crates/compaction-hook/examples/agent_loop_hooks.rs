//! A blocking agent loop with the three hooks around its model call: the compaction hook before
//! each call (pruning once the conversation reaches 80% of the window), recovery when the
//! provider still refuses a request as too long, and the token budget that ends the run.
//!
//! The "provider" is a stand-in on this thread: it counts the request, refuses it with OpenAI's
//! context-length error when it exceeds its real window (smaller than the agent was told), and
//! otherwise asks for another file read, reporting its usage as providers do.
//!
//! Run with `cargo run -p compaction-hook --example agent_loop_hooks`. It checks what it prints,
//! and `cargo test` runs it.

use compaction_core::ToolResultPruningCompactor;
use compaction_hook::{
    context_overflow, AgentState, CompactionHook, CompactionHookSettings, ContextOverflowRecovery,
    TokenBudgetHook,
};
use compaction_model::{Message, ToolCall};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use serde_json::json;

/// The window the agent is told; the server's real one is smaller.
const TOLD_WINDOW: usize = 4_000;
const REAL_WINDOW: usize = 3_000;

/// Stands in for a chat model behind an HTTP API: a reply, or the status and body of an error.
fn provider(state: &AgentState, step: usize) -> Result<Message, (u16, String)> {
    let prompt_tokens = ApproximateTokenCounter::default().count(state.messages(), &state.tools);
    if prompt_tokens > REAL_WINDOW {
        let message = format!(
            "This model's maximum context length is {REAL_WINDOW} tokens. However, your messages resulted in {prompt_tokens} tokens."
        );
        let body = json!({"error": {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}});
        return Err((400, body.to_string()));
    }
    let call = ToolCall::new(
        "read_file",
        json!({"path": format!("src/part{step}.rs")}).as_object().cloned().unwrap_or_default(),
    )
    .with_id(format!("call_{step}"));
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": 20});
    Ok(Message::assistant_with_calls(None, vec![call])
        .with_meta(json!({"usage": usage}).as_object().cloned().unwrap_or_default()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let settings = CompactionHookSettings::new(TOLD_WINDOW).with_compact_at(0.8).with_compact_to(0.5);
    let hook = CompactionHook::new(Box::new(ToolResultPruningCompactor::default()), settings)?;
    let budget = TokenBudgetHook::new(30_000)?.with_final_message(true);
    let mut recovery = ContextOverflowRecovery::new();
    let mut state = AgentState::new(vec![
        Message::system("You are a code reviewer."),
        Message::user("Review the source files one by one."),
    ]);
    let (mut compactions, mut recoveries) = (0, 0);

    for step in 0.. {
        let spent = budget.run(&mut state);
        if spent.exceeded {
            println!("step {step}: stopping after {} tokens spent: {:?}", spent.total_tokens, state.stop_run);
            break;
        }
        let outcome = hook.run(&mut state);
        if outcome.compacted {
            compactions += 1;
            println!("step {step}: compacted at about {} tokens", outcome.estimated_tokens);
        }
        let reply = loop {
            match provider(&state, step) {
                Ok(reply) => break reply,
                Err((status, body)) => {
                    let overflow =
                        context_overflow(status, &body).ok_or("an error that is not an overflow")?;
                    let (requested, limit) = (overflow.requested.unwrap_or(0), overflow.limit.unwrap_or(0));
                    println!("step {step}: refused as too long ({requested} tokens, the limit is {limit}); compacting");
                    if !recovery.recover(&hook, &mut state, &overflow)?.should_retry() {
                        return Err(body.into());
                    }
                    recoveries += 1;
                }
            }
        };
        state.record_usage(std::slice::from_ref(&reply));
        let call = reply.tool_calls().next().cloned().ok_or("the model asked for no tool")?;
        state.push(reply);
        // The tool: a file of 1,200 to 2,000 characters.
        state.push(Message::tool("let x = compute();\n".repeat(60 + 7 * (step % 7)), call, false));
        state.step_count += 1;
    }

    let tokens = ApproximateTokenCounter::default().count(state.messages(), &[]);
    println!(
        "{} messages at the end, {tokens} tokens; {compactions} compactions, {recoveries} recoveries",
        state.messages().len()
    );
    assert!(compactions > 0 && recoveries > 0, "both the hook and the recovery had work");
    assert_eq!(state.stop_run.as_deref(), Some("token_budget_exceeded"));
    assert!(tokens <= REAL_WINDOW + 100, "the conversation stayed near the real window");
    Ok(())
}
