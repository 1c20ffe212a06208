//! `compaction simulate`: the per-call table, totals, CSV and SVG, on the bundled run and on
//! every real transcript.

use std::path::PathBuf;

use crate::{run, sample};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compaction-simulate-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One CSV row: tokens without and with compaction, and whether it compacted.
struct Row {
    without: u64,
    with: u64,
    compacted: bool,
    provider: Option<u64>,
    over_window: bool,
    first_changed: Option<usize>,
}

fn rows(csv: &str) -> Vec<Row> {
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            "step,message,tokens_without,estimated_tokens,tokens_with,triggered,compacted,pruned,offloaded,provider_tokens,\
             over_window,first_changed,refetches"
        )
    );
    lines
        .enumerate()
        .map(|(i, line)| {
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(cells.len(), 13, "{line}");
            assert_eq!(cells[0], (i + 1).to_string(), "steps count from 1");
            Row {
                without: cells[2].parse().unwrap(),
                with: cells[4].parse().unwrap(),
                compacted: cells[6] == "true",
                provider: cells[9].parse().ok(),
                over_window: cells[10] == "true",
                first_changed: cells[11].parse().ok(),
            }
        })
        .collect()
}

#[test]
fn a_small_window_compacts_and_writes_the_table_csv_and_chart() {
    let dir = scratch("agent-run");
    let (svg, csv) = (dir.join("run.svg"), dir.join("run.csv"));
    let input = sample("haystack/agent-run.json");
    let args = [
        "simulate",
        &input,
        "--context-window",
        "12000",
        "--svg",
        svg.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ];
    let done = run(&args, None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let table = String::from_utf8(done.stdout).unwrap();
    let header = table.lines().next().unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>()[..4],
        ["step", "message", "provider", "without"]
    );
    assert!(table.lines().any(|l| l.ends_with("compacted")), "{table}");
    // The agent run has 11 assistant messages and ends with a tool result: 12 calls.
    assert!(table.contains("model calls          12"), "{table}");

    let rows = rows(&std::fs::read_to_string(&csv).unwrap());
    assert_eq!(rows.len(), 12);
    assert!(rows.iter().any(|r| r.compacted));
    // Each compaction breaks the prompt cache at a message it changed; the flag follows the window.
    assert!(rows.iter().all(|r| r.compacted == r.first_changed.is_some()));
    assert!(rows.iter().all(|r| r.over_window == (r.with > 12_000)));
    let peak_without = rows.iter().map(|r| r.without).max().unwrap();
    let peak_with = rows.iter().map(|r| r.with).max().unwrap();
    assert!(peak_with < peak_without, "{peak_with} < {peak_without}");
    // The last call is the one answering the final result: the whole recorded conversation.
    let whole = run(&["count", &input], None).count();
    assert_eq!(rows.last().unwrap().without, whole);
    assert!(table.contains(&format!("peak context         without {peak_without} ")), "{table}");

    assert!(done.stderr.contains(&format!("wrote the chart to {}", svg.display())), "{}", done.stderr);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "an SVG document");
    for label in [
        "without compaction",
        "with compaction",
        "context window",
        "compact at 0.7",
        "compact to 0.4",
        "model call",
        "tokens in context",
        "agent-run.json",
        "approximate",
    ] {
        assert!(svg.contains(label), "the chart shows {label}");
    }
}

#[test]
fn a_large_window_never_triggers() {
    let input = sample("haystack/agent-run.json");
    let done = run(&["simulate", &input, "--context-window", "1000000"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let table = String::from_utf8(done.stdout).unwrap();
    assert!(table.contains("triggered 0 times"), "{table}");
    assert!(table.contains("(0.0% saved)"), "{table}");
}

#[test]
fn offloading_in_the_loop() {
    let dir = scratch("offload");
    let store = dir.join("store");
    let csv = dir.join("run.csv");
    let input = sample("haystack/agent-run.json");
    let args = [
        "simulate",
        &input,
        "--context-window",
        "12000",
        "--offload-store",
        store.to_str().unwrap(),
        "--policy",
        "*=over:8000",
        "--csv",
        csv.to_str().unwrap(),
    ];
    let done = run(&args, None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let files = std::fs::read_dir(&store).unwrap().count();
    assert!(files > 0);
    let table = String::from_utf8(done.stdout).unwrap();
    assert!(table.contains(&format!("results offloaded    {files}")), "{table}");
}

#[test]
fn usage_errors() {
    let input = sample("haystack/agent-run.json");
    for args in [
        vec!["simulate", &input],
        vec!["simulate", &input, "--context-window", "1000", "--compact-at", "0.3", "--compact-to", "0.5"],
        vec!["simulate", &input, "--context-window", "1000", "--policy", "*=always"],
        vec!["simulate", &input, "--context-window", "1000", "--offload-store", "x", "--policy", "*=maybe"],
    ] {
        let done = run(&args, None);
        assert_eq!(done.code, 2, "{args:?}: {}", done.stderr);
    }
}

#[test]
fn help_has_an_example() {
    let done = run(&["simulate", "--help"], None);
    assert_eq!(done.code, 0);
    let text = String::from_utf8(done.stdout).unwrap();
    assert!(text.contains("Examples:") && text.contains("compaction simulate "), "{text}");
}

#[test]
fn every_real_transcript() {
    let Some(dir) = crate::corpus() else { return };
    let out = scratch("real");
    let mut seen = 0;
    for folder in std::fs::read_dir(&dir).unwrap() {
        for entry in std::fs::read_dir(folder.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == "LICENSE") {
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let (svg, csv) = (out.join(format!("{name}.svg")), out.join(format!("{name}.csv")));
            let store = out.join(format!("{name}.store"));
            let path = path.display().to_string();
            let args = [
                "simulate",
                &path,
                "--context-window",
                "30000",
                "--offload-store",
                store.to_str().unwrap(),
                "--policy",
                "*=over:20000",
                "--svg",
                svg.to_str().unwrap(),
                "--csv",
                csv.to_str().unwrap(),
            ];
            let done = run(&args, None);
            assert_eq!(done.code, 0, "{path}: {}", done.stderr);
            let rows = rows(&std::fs::read_to_string(&csv).unwrap());
            assert!(!rows.is_empty(), "{path}");
            // Compaction never makes a request larger than the recorded one.
            assert!(rows.iter().all(|r| r.with <= r.without), "{path}");
            assert!(std::fs::read_to_string(&svg).unwrap().contains("with compaction"), "{path}");
            seen += 1;
        }
    }
    assert_eq!(seen, 7);
}

#[test]
fn claude_code_estimates_follow_the_provider() {
    // Anchored on the provider's counts the log records, the estimate before each call is the
    // provider's count after the previous reply plus what came since. Claude Code adds context it
    // does not log (files it re-reads after compacting, system reminders), so a few calls are
    // off by more — the table says so — and the rest stay within 5%.
    let Some(dir) = crate::corpus() else { return };
    let out = scratch("provider");
    let mut errors = Vec::new();
    for entry in std::fs::read_dir(dir.join("spotter-claude-code")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let csv = out.join(format!("{}.csv", path.file_name().unwrap().to_string_lossy()));
        let path = path.display().to_string();
        let args = ["simulate", &path, "--context-window", "1000000", "--csv", csv.to_str().unwrap()];
        let done = run(&args, None);
        assert_eq!(done.code, 0, "{path}: {}", done.stderr);
        let table = String::from_utf8(done.stdout).unwrap();
        assert!(table.contains("anchored on the provider's counts"), "{table}");
        let rows = rows(&std::fs::read_to_string(&csv).unwrap());
        assert!(rows.iter().all(|r| r.provider.is_some()), "{path}: every call has the provider's count");
        // The first request's count covers what the log does not hold (system prompt, tools):
        // it stands for the first estimate, so that one is the provider's own.
        assert_eq!(Some(rows[0].without), rows[0].provider, "{path}: the first call");
        let mut outside = false;
        for row in rows.iter().skip(1) {
            let provider = row.provider.unwrap() as f64;
            let error = (row.without as f64 - provider).abs() / provider;
            outside |= error > 0.05;
            errors.push(error);
        }
        // A call off by more than 5% is said, with why.
        let said = table.contains("(the others: the provider counted context the log does not hold)");
        assert_eq!(said, outside, "{table}");
    }
    assert!(errors.len() > 200, "{} calls", errors.len());
    errors.sort_by(f64::total_cmp);
    let median = errors[errors.len() / 2];
    let within = errors.iter().filter(|e| **e <= 0.05).count();
    assert!(median < 0.01, "median error {median}");
    assert!(within * 100 >= errors.len() * 97, "{within} of {} calls within 5%", errors.len());
    assert!(errors.last().unwrap() < &0.15, "worst error {}", errors.last().unwrap());
}

#[test]
fn a_log_without_provider_counts_says_what_its_counts_leave_out() {
    let input = sample("swe-agent/pandas-excerpt.traj");
    let done = run(&["simulate", &input, "--context-window", "100000"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let table = String::from_utf8(done.stdout).unwrap();
    assert!(table.contains("counted locally") && table.contains("tool schemas"), "{table}");
}

#[test]
fn the_cost_section_prices_the_calls_by_the_model_given() {
    let input = sample("haystack/agent-run.json");
    let done = run(&["simulate", &input, "--context-window", "12000"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let table = String::from_utf8(done.stdout).unwrap();
    assert!(
        table.contains("cost                 not estimated: the log names no model (--price-model NAME"),
        "{table}"
    );

    let args = ["simulate", &input, "--context-window", "12000", "--price-model", "claude-sonnet-4-5"];
    let done = run(&args, None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let table = String::from_utf8(done.stdout).unwrap();
    let section = &table[table.find("\ncost (anthropic prompt cache)\n").expect(&table)..];
    assert!(section.contains("uncached  cache read  cache write  output  dollars"), "{section}");
    assert!(section.lines().any(|l| l.trim_start().starts_with("without ")), "{section}");
    assert!(section.lines().any(|l| l.trim_start().starts_with("with ")), "{section}");
    // The log records no usage: nothing to check against, no recorded row.
    assert!(!section.contains("recorded"), "{section}");
    assert!(section.contains("compaction "), "{section}");
    assert!(section.contains("the log gives no time for 12 calls"), "{section}");

    let args = [
        "simulate",
        &input,
        "--context-window",
        "12000",
        "--price-model",
        "claude-sonnet-4-5",
        "--cache",
        "none",
    ];
    let table = String::from_utf8(run(&args, None).stdout).unwrap();
    assert!(table.contains("cost (no prompt cache)"), "{table}");
    assert!(table.contains("without a prompt cache"), "{table}");
}

#[test]
fn a_price_table_that_is_not_one_is_named() {
    let dir = scratch("prices");
    let prices = dir.join("prices.json");
    std::fs::write(&prices, r#"{"models": [{"match": "x", "input": -1, "output": 1, "cache": "none"}]}"#)
        .unwrap();
    let input = sample("haystack/agent-run.json");
    let args = ["simulate", &input, "--context-window", "12000", "--prices", prices.to_str().unwrap()];
    let done = run(&args, None);
    assert_ne!(done.code, 0);
    assert!(done.stderr.contains("prices.json") && done.stderr.contains("negative"), "{}", done.stderr);
}

#[test]
fn claude_code_costs_follow_what_the_log_records() {
    // Without compaction the replay is the logged conversation: its cost is what the log records,
    // within 5%, and the cache model priced on the log's own calls is within 5% too.
    let Some(dir) = crate::corpus() else { return };
    for entry in std::fs::read_dir(dir.join("spotter-claude-code")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let path = path.display().to_string();
        let done = run(&["simulate", &path, "--context-window", "1000000"], None);
        assert_eq!(done.code, 0, "{path}: {}", done.stderr);
        let table = String::from_utf8(done.stdout).unwrap();
        let dollars = |name: &str| -> f64 {
            let line = table.lines().find(|l| l.trim_start().starts_with(name)).expect(&table);
            line.split_whitespace().last().unwrap().parse().unwrap()
        };
        let (without, recorded) = (dollars("without "), dollars("recorded "));
        assert!(
            (without - recorded).abs() / recorded < 0.05,
            "{path}: {without} against {recorded}\n{table}"
        );
        assert!(table.contains("cache model vs log"), "{table}");
    }
}

#[test]
fn results_the_offload_strategy_moves_are_counted_as_offloaded() {
    let dir = scratch("offload-strategy");
    let store = dir.join("store");
    let input = sample("haystack/agent-run.json");
    let args = [
        "simulate",
        &input,
        "--context-window",
        "12000",
        "--strategy",
        "offload",
        "--offload-to",
        store.to_str().unwrap(),
    ];
    let done = run(&args, None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let table = String::from_utf8(done.stdout).unwrap();
    let written = std::fs::read_dir(&store).unwrap().count();
    assert!(written > 0);
    assert!(table.contains(&format!("results offloaded    {written}\n")), "{written} files\n{table}");
    assert!(table.contains("results pruned       0\n"), "{table}");
}

#[test]
fn a_conversation_without_tool_results_says_why_every_compaction_is_declined() {
    // Tool output as plain user messages, as text-action trajectories log it.
    let dir = scratch("text-actions");
    let path = dir.join("run.json");
    let message = |role: &str, text: String| serde_json::json!({"role": role, "content": [{"text": text}]});
    let mut messages = vec![message("user", "Fix the bug.".into())];
    for i in 0..6 {
        messages.push(message("assistant", format!("```bash\ncat file{i}.py\n```")));
        messages.push(message("user", format!("OBSERVATION: line of file {i}\n").repeat(100)));
    }
    std::fs::write(&path, serde_json::to_string(&messages).unwrap()).unwrap();
    let done = run(&["simulate", path.to_str().unwrap(), "--context-window", "3000"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let table = String::from_utf8(done.stdout).unwrap();
    assert!(table.contains("declined"), "{table}");
    assert!(
        table.contains(
            "times: no tool results in this conversation (its format holds tool output as plain messages)"
        ),
        "{table}"
    );
}
