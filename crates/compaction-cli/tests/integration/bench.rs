//! `compaction bench`: a grid of configurations over a folder of transcripts and over a JSON
//! Lines dataset; its JSON, CSV and totals, and its figures against `simulate`'s.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{run, sample};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compaction-bench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A folder of three bundled transcripts, one in a subfolder, and a broken file.
fn corpus(dir: &Path) -> PathBuf {
    let root = dir.join("in");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    for (from, to) in [
        ("haystack/agent-run.json", "agent-run.json"),
        ("swe-agent/pandas-excerpt.traj", "sub/pandas-excerpt.traj"),
        ("claude-code/fa812bfe-excerpt.jsonl", "fa812bfe-excerpt.jsonl"),
    ] {
        std::fs::copy(sample(from), root.join(to)).unwrap();
    }
    std::fs::write(root.join("sub/broken.json"), b"{\"messages\": [").unwrap();
    // Not a transcript's extension: skipped in a folder, and said so.
    std::fs::write(root.join("LICENSE"), b"MIT").unwrap();
    root
}

/// The `tokens sent` line of `simulate`: (without, with).
fn simulated_tokens(input: &str, extra: &[&str]) -> (u64, u64) {
    let mut args = vec!["simulate", input, "--context-window", "4000"];
    args.extend_from_slice(extra);
    let out = run(&args, None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().find(|l| l.starts_with("tokens sent")).expect("a tokens sent line");
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .map(|n| n.parse().unwrap())
        .collect();
    (numbers[0], numbers[1])
}

const SUMMED: [&str; 6] =
    ["calls", "over_window", "tokens_sent", "compactions", "refetches", "refetch_tokens"];

#[test]
fn a_folder_is_benchmarked_with_every_configuration() {
    let dir = scratch("folder");
    let root = corpus(&dir);
    let (json, csv, svg) = (dir.join("f.json"), dir.join("g.csv"), dir.join("c.svg"));
    let out = run(
        &[
            "bench",
            root.to_str().unwrap(),
            "--strategy",
            "tool-result-pruning,observation-masking",
            "--set",
            "min_tokens=0,200",
            "--context-window",
            "4000",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.code, 0, "one broken file does not fail the run: {}", out.stderr);
    assert!(out.stderr.contains("broken.json"), "the broken file is named: {}", out.stderr);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("3 transcripts benchmarked, 1 failed, 4 configurations"), "{table}");
    assert!(table.contains("skipped              1 file in the folders"), "{table}");

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // none, pruning with each min_tokens, masking (which takes no min_tokens) once.
    let names: Vec<&str> =
        report["configurations"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "none",
            "tool-result-pruning min_tokens=0",
            "tool-result-pruning min_tokens=200",
            "observation-masking"
        ]
    );
    assert_eq!(report["configurations"][1]["settings"]["min_tokens"], "0");
    let transcripts = report["transcripts"].as_array().unwrap();
    assert_eq!(transcripts.len(), 4);
    let broken: Vec<&Value> = transcripts.iter().filter(|t| !t["error"].is_null()).collect();
    assert_eq!(broken.len(), 1);
    assert!(broken[0]["path"].as_str().unwrap().ends_with("broken.json"));
    assert!(broken[0]["error"].as_str().unwrap().contains("broken.json"));
    let good: Vec<&Value> = transcripts.iter().filter(|t| t["error"].is_null()).collect();
    for t in &good {
        let results = t["results"].as_array().unwrap();
        let configurations: Vec<&str> =
            results.iter().map(|r| r["configuration"].as_str().unwrap()).collect();
        assert_eq!(configurations, names, "{}", t["path"]);
        assert!(!t["format"].is_null());
    }
    // The totals are the sums of the results.
    let totals = report["totals"].as_array().unwrap();
    assert_eq!(totals.len(), 4);
    for (k, total) in totals.iter().enumerate() {
        assert_eq!(total["configuration"], names[k]);
        for field in SUMMED {
            let sum: u64 = good.iter().map(|t| t["results"][k][field].as_u64().unwrap()).sum();
            assert_eq!(total[field].as_u64().unwrap(), sum, "{} {field}", names[k]);
        }
        // Tokens against none over the transcripts priced, as cost is.
        let priced: Vec<&&Value> = good.iter().filter(|t| t["results"][k]["cost"].is_f64()).collect();
        let tokens =
            |j: usize| priced.iter().map(|t| t["results"][j]["tokens_sent"].as_u64().unwrap()).sum::<u64>();
        let expected = tokens(k) as f64 / tokens(0) as f64 - 1.0;
        assert!((total["priced_tokens_vs_none"].as_f64().unwrap() - expected).abs() < 1e-12, "{}", names[k]);
        let costs: Vec<f64> = good.iter().filter_map(|t| t["results"][k]["cost"].as_f64()).collect();
        if !costs.is_empty() {
            let sum: f64 = costs.iter().sum();
            assert!((total["cost"].as_f64().unwrap() - sum).abs() < 1e-9, "{} cost", names[k]);
        }
    }
    // Each against none: the baseline is 0, pruning sends fewer tokens over the whole and on
    // the median transcript.
    assert_eq!(totals[0]["tokens_vs_none"], 0.0);
    assert_eq!(totals[0]["median_tokens_vs_none"], 0.0);
    assert!(totals[1]["tokens_vs_none"].as_f64().unwrap() < 0.0);
    assert!(totals[1]["median_tokens_vs_none"].as_f64().unwrap() <= 0.0);
    // The Claude Code excerpt records its usage: its cost is said beside none's estimate.
    assert!(table.contains("recorded cost        $") && table.contains("over the 1 transcripts"), "{table}");
    // ... and beside the same calls priced by the cache model, which agrees with the log.
    let modelled = table.split("the same calls priced by the model $").nth(1).expect("the model's check");
    let off: f64 = modelled.split(['(', '%']).nth(1).and_then(|p| p.parse().ok()).expect("a percentage");
    assert!(off.abs() <= 1.0, "{table}");
    // A configuration's figures for one transcript are what `simulate` says with its options.
    let run_json = good.iter().find(|t| t["path"].as_str().unwrap().ends_with("agent-run.json")).unwrap();
    let input = root.join("agent-run.json");
    let (without, with) = simulated_tokens(input.to_str().unwrap(), &["--min-tokens", "0"]);
    assert_eq!(run_json["results"][0]["tokens_sent"].as_u64().unwrap(), without);
    assert_eq!(run_json["results"][1]["tokens_sent"].as_u64().unwrap(), with);
    let (_, with) = simulated_tokens(input.to_str().unwrap(), &["--strategy", "observation-masking"]);
    assert_eq!(run_json["results"][3]["tokens_sent"].as_u64().unwrap(), with);
    assert!(run_json["results"][1]["compactions"].as_u64().unwrap() > 0);

    // The chart: the configurations priced (the Claude Code excerpt's), the cheapest marked.
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("(cheapest)"), "{svg}");
    // The CSV: a header and a row per transcript and configuration (the broken file's one row).
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("path,conversation,format,error,configuration,calls,"));
    assert_eq!(lines.count(), 3 * 4 + 1);
}

#[test]
fn a_jsonl_dataset_gives_a_transcript_a_line() {
    let dir = scratch("jsonl");
    let mut dataset = String::new();
    for relative in ["haystack/agent-run.json", "openai/weather.json"] {
        let value: Value = serde_json::from_str(&std::fs::read_to_string(sample(relative)).unwrap()).unwrap();
        dataset.push_str(&serde_json::to_string(&value).unwrap());
        dataset.push('\n');
    }
    let path = dir.join("trajectories.jsonl");
    std::fs::write(&path, dataset).unwrap();
    let json = dir.join("f.json");
    let out = run(
        &[
            "bench",
            "--jsonl",
            path.to_str().unwrap(),
            "--context-window",
            "4000",
            "--json",
            json.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let transcripts = report["transcripts"].as_array().unwrap();
    assert_eq!(transcripts.len(), 2, "{report}");
    for (line, t) in transcripts.iter().enumerate() {
        assert!(t["error"].is_null(), "{t}");
        assert_eq!(t["conversation"], line);
        assert_eq!(t["results"].as_array().unwrap().len(), 2);
    }
    assert_eq!(transcripts[0]["format"], "haystack");
    assert_eq!(transcripts[1]["format"], "openai");
}

#[test]
fn an_unknown_setting_is_a_usage_error_naming_the_known_ones() {
    let out = run(
        &["bench", &sample("haystack/agent-run.json"), "--context-window", "4000", "--set", "min_tokns=1"],
        None,
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("min_tokns") && out.stderr.contains("min_tokens"), "{}", out.stderr);
}

#[test]
fn nothing_benchmarked_fails_and_writes_nothing() {
    let dir = scratch("none");
    std::fs::write(dir.join("broken.json"), b"[").unwrap();
    let json = dir.join("f.json");
    let out = run(
        &["bench", dir.to_str().unwrap(), "--context-window", "4000", "--json", json.to_str().unwrap()],
        None,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(!json.exists());
}

#[test]
fn a_file_of_several_conversations_gives_a_transcript_each_in_order() {
    let dir = scratch("several");
    let json = dir.join("f.json");
    let input = sample("tau-bench/gpt-4o-airline-excerpt.json");
    let out = run(&["bench", &input, "--context-window", "4000", "--json", json.to_str().unwrap()], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let transcripts = report["transcripts"].as_array().unwrap();
    assert!(transcripts.len() > 1);
    for (k, t) in transcripts.iter().enumerate() {
        assert_eq!(t["conversation"], k, "in the file's order");
        assert!(t["error"].is_null(), "{t}");
    }
    let last = transcripts.len() - 1;
    let (without, with) = simulated_tokens(&input, &["--conversation", &last.to_string()]);
    assert_eq!(transcripts[last]["results"][0]["tokens_sent"].as_u64().unwrap(), without);
    assert_eq!(transcripts[last]["results"][1]["tokens_sent"].as_u64().unwrap(), with);
}

/// `bench` runs with mimalloc's purge delay at 0 unless the environment sets it (the peak then
/// follows the transcript in flight: BENCHMARKS.md (j)); the other commands keep mimalloc's
/// default, 10 ms. mimalloc prints its settings as a process starts when `MIMALLOC_VERBOSE=1`:
/// the last `purge_delay` it prints is that of the process that ran the command.
#[test]
fn bench_hands_freed_memory_back_at_once_unless_told_otherwise() {
    let input = sample("haystack/agent-run.json");
    let bench = ["bench", input.as_str(), "--context-window", "4000"];
    let count = ["count", input.as_str()];
    // (the command, MIMALLOC_PURGE_DELAY as the user set it, the delay it ran with)
    let cases: [(&[&str], Option<&str>, &str); 3] =
        [(&bench, None, "0"), (&bench, Some("7"), "7"), (&count, None, "10")];
    for (args, preset, expected) in cases {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_compaction"));
        command.args(args).env("MIMALLOC_VERBOSE", "1").env_remove("MIMALLOC_PURGE_DELAY");
        if let Some(value) = preset {
            command.env("MIMALLOC_PURGE_DELAY", value);
        }
        let output = command.output().expect("the binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {stderr}");
        let delay = stderr
            .lines()
            .rev()
            .filter_map(|line| line.split("option 'purge_delay':").nth(1))
            .next()
            .map(str::trim);
        assert_eq!(delay, Some(expected), "{args:?} with {preset:?}: {stderr}");
        if args[0] == "bench" {
            let table = String::from_utf8_lossy(&output.stdout);
            assert!(table.contains("1 transcripts benchmarked, 0 failed"), "{table}");
        }
    }
}
