//! One agent run compacted three ways to fit a smaller budget: old tool results pruned to a
//! placeholder; a chain that drops the oldest turns with a sliding window when pruning is not
//! enough; and a summary written by a model (here a stand-in), driven step by step.
//!
//! Run with `cargo run -p compaction-core --example compact_agent_run`. It checks what it
//! prints, and `cargo test` runs it.

use compaction_core::{
    ChainCompactor, Compactor, SlidingWindowCompactor, SlidingWindowSettings, SummarizationCompactor,
    SummarizationSettings, ToolResultPruningCompactor,
};
use compaction_model::{Message, ToolCall};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};

/// An earlier exchange, then the current task: six searches with long results.
fn agent_run() -> Vec<Message> {
    let mut messages = vec![
        Message::system("You are a research agent."),
        Message::user("What did we decide about caching yesterday? ".repeat(10)),
        Message::assistant("We chose a write-through cache with a one-hour TTL. ".repeat(10)),
        Message::user("Compare six databases for an embedded device."),
    ];
    for step in 0..6 {
        let call = ToolCall::new("search", serde_json::Map::new()).with_id(format!("call_{step}"));
        messages.push(Message::assistant_with_calls(None, vec![call.clone()]));
        messages.push(Message::tool(format!("result {step}: benchmark table row ").repeat(60), call, false));
    }
    messages
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let counter = ApproximateTokenCounter::default();
    let messages = agent_run();
    let before = counter.count(&messages, &[]);
    println!("the run: {} messages, {before} tokens", messages.len());

    // 1. Pruning: the oldest results give way to a placeholder until the target fits; the
    //    newest step and every call stay.
    let target = before / 2;
    let compaction = ToolResultPruningCompactor::default()
        .try_compact(&messages, target, &counter)
        .unwrap()
        .expect("prunable");
    let pruned = compaction.messages(&messages);
    let changed: Vec<usize> = (0..messages.len()).filter(|&i| pruned[i] != messages[i]).collect();
    let after = counter.count(&pruned, &[]);
    println!("pruning to {target}: {after} tokens, results rewritten at {changed:?}");
    println!("  now reads: {:?}", pruned[changed[0]].tool_call_result().map(|r| &r.result));
    assert!(after <= target && pruned.len() == messages.len());
    assert!(!changed.contains(&(messages.len() - 1)), "the newest result stays");

    // 2. A budget pruning alone cannot meet: a chain prunes first, then a sliding window drops
    //    the oldest turns (and leaves a note saying how many went).
    let tight = 700;
    let chain = ChainCompactor::new()
        .then(ToolResultPruningCompactor::default())
        .then(SlidingWindowCompactor::new(SlidingWindowSettings::default()));
    let compaction = chain.try_compact(&messages, tight, &counter).unwrap().expect("compactable");
    let mut chained = messages.clone();
    compaction.apply(&mut chained)?; // in place, as an agent loop does
    let after = counter.count(&chained, &[]);
    println!(
        "chain to {tight}: {} messages, {after} tokens; the note: {:?}",
        chained.len(),
        chained[1].text()
    );
    assert!(after <= tight && chained.len() < messages.len());
    assert_eq!(chained[0], messages[0], "the system prompt stays");

    // 3. Summarization: the compactor asks for summaries and you call the model (any client,
    //    sync or async); here a stand-in answers.
    let summarizer =
        SummarizationCompactor::new(SummarizationSettings::default().with_approximate_summary_tokens(40))?;
    let mut session = summarizer.session(&messages, before - 100, &counter)?;
    let mut requests = 0;
    while let Some(request) = session.next_request()? {
        requests += 1;
        println!("summary request {requests}: {} messages to the model", request.messages.len());
        session.supply(Ok(Message::assistant("- Yesterday: write-through cache, one-hour TTL.")))?;
    }
    let summarized = session.finish()?;
    let compacted = summarized.compaction.expect("summarized").messages(&messages);
    println!("summarized: {} messages, {} tokens", compacted.len(), counter.count(&compacted, &[]));
    assert!(compacted.iter().any(|m| m.text().is_some_and(|t| t.contains("<conversation_summary>"))));
    assert!(counter.count(&compacted, &[]) < before);
    Ok(())
}
