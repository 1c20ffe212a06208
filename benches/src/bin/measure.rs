//! Times one compaction in a release build, for `cargo xtask bench-vs-reference`.
//!
//! `measure INPUT --counter SPEC (--target N | --fraction F) [--runs R] [--output FILE]`
//! `measure INPUT --counter SPEC --hook-steps N`
//! `measure INPUT --render-to FILE`: writes the text every counter measures (the rendered
//! conversation) to FILE.
//! `measure TEXT --huggingface TOKENIZER [--runs R]`: counts the text of the file TEXT with a
//! HuggingFace tokenizer, R times, as `bench_reference.py hf-count` does with Python's tokenizers.
//!
//! Reads and parses INPUT outside the timer, counts it, then times `compact()` R times (default 1),
//! and `apply()` of each result to a copy of the conversation, and prints one JSON object: sizes,
//! the counts, every timing in seconds and how many messages were pruned. `--output` writes the compacted conversation in Haystack's `to_dict` shape.

use std::process::ExitCode;
use std::time::Instant;

use compaction_core::{Compactor, PruningSettings, ToolResultPruningCompactor};
use compaction_model::messages_to_value;
use compaction_tokens::counter_from_spec;
use serde_json::json;

fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

/// Replays INPUT as an agent run of up to `steps` model calls: before each assistant message the
/// compaction hook runs (window: half the transcript's tokens, so it triggers now and then), then
/// the message is appended. Prints the time of every step, to show a step that does not compact
/// costs the same late in the run as early on.
fn hook_run(messages: Vec<compaction_model::Message>, spec: &str, steps: usize) -> Result<(), String> {
    use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
    let counter = counter_from_spec(spec).map_err(|e| e.to_string())?;
    let total = counter.count(&messages, &[]);
    let settings = CompactionHookSettings::new((total / 2).max(1));
    let hook = CompactionHook::new(Box::new(ToolResultPruningCompactor::default()), settings)
        .map_err(|e| e.to_string())?
        .with_counter(counter);
    let mut state = AgentState::new(Vec::new());
    let mut untriggered = Vec::new();
    let mut triggered = 0usize;
    let started = Instant::now();
    for message in messages {
        if message.is_from(compaction_model::Role::Assistant) {
            if untriggered.len() + triggered >= steps {
                break;
            }
            let step = Instant::now();
            let outcome = hook.run(&mut state);
            let seconds = step.elapsed().as_secs_f64();
            if outcome.triggered {
                triggered += 1;
            } else {
                untriggered.push(seconds);
            }
            state.step_count += 1;
        }
        state.push(message);
    }
    let mean = |xs: &[f64]| if xs.is_empty() { 0.0 } else { xs.iter().sum::<f64>() / xs.len() as f64 };
    let window = 200.min(untriggered.len());
    let report = json!({
        "steps": untriggered.len() + triggered,
        "triggered": triggered,
        "total_seconds": started.elapsed().as_secs_f64(),
        "first_steps_mean_seconds": mean(&untriggered[..window]),
        "last_steps_mean_seconds": mean(&untriggered[untriggered.len() - window..]),
        "messages_at_end": state.messages().len(),
    });
    println!("{report}");
    Ok(())
}

/// Counts the text of `path` with the tokenizer at `tokenizer`, `runs` times.
fn huggingface_count(path: &str, tokenizer: &str, runs: usize) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let started = Instant::now();
    let counter =
        compaction_tokens::HuggingFaceTokenCounter::from_file(tokenizer).map_err(|e| e.to_string())?;
    let load_seconds = started.elapsed().as_secs_f64();
    let mut seconds = Vec::new();
    let mut tokens = 0;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        tokens = counter.count_text(&text);
        seconds.push(started.elapsed().as_secs_f64());
    }
    println!(
        "{}",
        json!({"bytes": text.len(), "tokens": tokens, "load_seconds": load_seconds, "seconds": seconds})
    );
    Ok(())
}

fn run(args: &[String]) -> Result<(), String> {
    let input =
        args.first().filter(|a| !a.starts_with("--")).ok_or("usage: measure INPUT --counter SPEC ...")?;
    let runs: usize = value(args, "--runs").unwrap_or("1").parse().map_err(|_| "--runs takes a number")?;
    if let Some(tokenizer) = value(args, "--huggingface") {
        return huggingface_count(input, tokenizer, runs);
    }
    let spec = value(args, "--counter").unwrap_or("approximate");

    let started = Instant::now();
    let bytes = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
    let messages = compaction_benches::parse(&bytes);
    let parse_seconds = started.elapsed().as_secs_f64();

    if let Some(path) = value(args, "--render-to") {
        let text = compaction_tokens::rendered_text(&messages, &[]);
        return std::fs::write(path, text).map_err(|e| format!("{path}: {e}"));
    }

    if let Some(steps) = value(args, "--hook-steps") {
        let steps = steps.parse().map_err(|_| "--hook-steps takes a number")?;
        return hook_run(messages, spec, steps);
    }
    let counter = counter_from_spec(spec).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let total = counter.count(&messages, &[]);
    let count_seconds = started.elapsed().as_secs_f64();
    let target = match (value(args, "--target"), value(args, "--fraction")) {
        (Some(t), _) => t.parse().map_err(|_| "--target takes a number of tokens")?,
        (None, Some(f)) => {
            (total as f64 * f.parse::<f64>().map_err(|_| "--fraction takes a number")?) as usize
        }
        (None, None) => return Err("give --target N or --fraction F".into()),
    };

    let compactor = ToolResultPruningCompactor::new(PruningSettings::default()).map_err(|e| e.to_string())?;
    let mut seconds = Vec::with_capacity(runs);
    let mut apply_seconds = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let compaction =
            compactor.try_compact(&messages, target, counter.as_ref()).map_err(|e| e.to_string())?;
        seconds.push(started.elapsed().as_secs_f64());
        // try_compact() returns what changes; building the compacted conversation is apply(), timed
        // on its own over a copy made outside the timer.
        if let Some(compaction) = &compaction {
            let mut copy = messages.clone();
            let compaction = compaction.clone();
            let started = Instant::now();
            compaction.apply(&mut copy).expect("a compaction fits the conversation it was made from");
            apply_seconds.push(started.elapsed().as_secs_f64());
            drop(copy);
        }
        last = Some(compaction);
    }
    let compaction = last.flatten();
    let pruned = compaction.as_ref().map_or(0, |c| c.report.results.len());
    if let Some(path) = value(args, "--output") {
        let written = match &compaction {
            Some(c) => messages_to_value(&c.messages(&messages)),
            None => serde_json::Value::Null,
        };
        std::fs::write(path, serde_json::to_vec(&written).map_err(|e| e.to_string())?)
            .map_err(|e| format!("{path}: {e}"))?;
    }
    let report = json!({
        "input_bytes": bytes.len(),
        "messages": messages.len(),
        "counter": counter.describe(),
        "parse_seconds": parse_seconds,
        "count_seconds": count_seconds,
        "total_tokens": total,
        "target_tokens": target,
        "compact_seconds": seconds,
        "apply_seconds": apply_seconds,
        "pruned": pruned,
        "tokens_after": compaction.as_ref().map(|c| c.report.tokens_after),
    });
    println!("{report}");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("measure: {error}");
            ExitCode::FAILURE
        }
    }
}
