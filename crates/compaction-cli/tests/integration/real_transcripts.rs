//! Every real transcript of the shared corpus counts and converts.
//!
//! The corpus lives beside the repository (`<repo>/../shared/transcripts/raw`); without it these
//! tests say so and pass.

use serde_json::Value;

use crate::{corpus, haystack, run};

fn file(relative: &str) -> Option<String> {
    Some(corpus()?.join(relative).display().to_string())
}

fn tool_results(messages: &[Value]) -> (usize, usize) {
    let results: Vec<&Value> = messages
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter_map(|part| part.get("tool_call_result"))
        .collect();
    (results.len(), results.iter().filter(|r| r["error"] == true).count())
}

#[test]
fn every_file_counts_and_converts() {
    let Some(dir) = corpus() else { return };
    let mut seen = 0;
    for folder in std::fs::read_dir(&dir).unwrap() {
        for entry in std::fs::read_dir(folder.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == "LICENSE") {
                continue;
            }
            let path = path.display().to_string();
            assert!(run(&["count", &path], None).count() > 0, "{path}");
            for to in ["haystack", "openai", "anthropic"] {
                let out = run(&["convert", &path, "--to", to], None);
                assert_eq!(out.code, 0, "{path} --to {to}: {}", out.stderr);
            }
            seen += 1;
        }
    }
    assert_eq!(seen, 7);
}

#[test]
fn claude_code_sessions() {
    // (session, messages, results, failed results) after the compaction boundary, as the model
    // saw them at its last call, then with the full history.
    let sessions = [
        ("fa812bfe-b295-4cca-9c2f-fdf01028cb46", (70, 38, 1), (358, 197, 8)),
        ("8463c716-a2ea-4c14-9efa-87158ebd9f20", (163, 89, 10), (323, 177, 13)),
        ("258c7280-ae70-4798-800f-63464d01a85d", (115, 62, 1), (344, 186, 7)),
        ("4d5611e5-241a-462a-8d15-5122611a9569", (161, 81, 5), (293, 150, 5)),
    ];
    for (id, view, full) in sessions {
        let Some(path) = file(&format!("spotter-claude-code/{id}.jsonl")) else { return };
        let read = haystack(&[&path]);
        assert_eq!((read.len(), tool_results(&read).0, tool_results(&read).1), view, "{id}");
        // The view opens with the summary Claude Code wrote at the boundary.
        let summary = read[0]["content"][0]["text"].as_str().unwrap();
        assert!(summary.starts_with("This session is being continued"), "{id}: {summary:.80}");
        let read = haystack(&[&path, "--full-history"]);
        assert_eq!((read.len(), tool_results(&read).0, tool_results(&read).1), full, "{id}");
    }
}

#[test]
fn swe_agent_trajectory() {
    let Some(path) = file("swe-smith/pandas-dev__pandas.95280573.pr_53652.traj") else { return };
    let read = haystack(&[&path]);
    assert_eq!(read.len(), 76);
    assert_eq!(tool_results(&read).0, 37);
}

#[test]
fn openhands_instances() {
    let Some(path) = file("openhands/multi_swe_bench_examples_output.jsonl") else { return };
    let mut results = 0;
    let mut untied = 0;
    for n in ["0", "1", "2"] {
        let read = haystack(&[&path, "--conversation", n]);
        results += tool_results(&read).0;
        untied += read.iter().filter(|m| m["role"] == "user").count() - 1;
    }
    assert_eq!((results, untied), (103, 2));
    assert_eq!(run(&["count", &path, "--conversation", "3"], None).code, 2);
}

#[test]
fn tau_bench_every_conversation() {
    let Some(path) = file("tau-bench/gpt-4o-airline.json") else { return };
    let original: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(run(&["convert", &path], None).json(), original);
    let (mut messages, mut results) = (0, 0);
    for n in 0..200 {
        let read = haystack(&[&path, "--conversation", &n.to_string()]);
        messages += read.len();
        results += tool_results(&read).0;
    }
    assert_eq!((messages, results), (5308, 1164));
}
