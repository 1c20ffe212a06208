//! Times one compaction in a release build, for `cargo xtask bench-vs-reference`.
//!
//! `measure INPUT --counter SPEC (--target N | --fraction F) [--runs R] [--output FILE]`
//!
//! Reads and parses INPUT outside the timer, counts it, then times `compact()` R times (default 1)
//! and prints one JSON object: sizes, the counts, every timing in seconds and how many messages
//! were pruned. `--output` writes the compacted conversation in Haystack's `to_dict` shape.

use std::process::ExitCode;
use std::time::Instant;

use compaction_core::{Compactor, PruningSettings, ToolResultPruningCompactor};
use compaction_model::messages_to_value;
use compaction_tokens::counter_from_spec;
use serde_json::json;

fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

fn run(args: &[String]) -> Result<(), String> {
    let input =
        args.first().filter(|a| !a.starts_with("--")).ok_or("usage: measure INPUT --counter SPEC ...")?;
    let spec = value(args, "--counter").unwrap_or("approximate");
    let runs: usize = value(args, "--runs").unwrap_or("1").parse().map_err(|_| "--runs takes a number")?;

    let started = Instant::now();
    let bytes = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
    let messages = compaction_benches::parse(&bytes);
    let parse_seconds = started.elapsed().as_secs_f64();

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
    let mut last = None;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let compaction = compactor.compact(&messages, target, counter.as_ref());
        seconds.push(started.elapsed().as_secs_f64());
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
