//! Agent logs through the command: read as the model saw them, written back as the log they
//! were, the provider's counts, and what `prune` says.

use serde_json::Value;

use crate::{run, sample};

const CODEX: &str = "codex/rollout-2025-10-04T09-00-00-0199a1b2.jsonl";

/// The lines of `after` that differ from `before`, each parsed.
fn changed_lines(before: &[u8], after: &[u8]) -> Vec<(Value, Value)> {
    let (before, after) = (std::str::from_utf8(before).unwrap(), std::str::from_utf8(after).unwrap());
    assert_eq!(before.lines().count(), after.lines().count(), "every line kept");
    before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap()))
        .collect()
}

#[test]
fn a_pruned_claude_code_session_is_a_session_with_only_results_replaced() {
    let Some(dir) = crate::corpus() else { return };
    let path = dir.join("spotter-claude-code/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl");
    let path = path.to_str().unwrap();
    let done = run(&["prune", path, "--target-tokens", "20000"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.stderr.contains("prune: pruned 2 results: 33,489 → 17,247 tokens (target 20,000, reached)"),
        "{}",
        done.stderr
    );
    let changed = changed_lines(&std::fs::read(path).unwrap(), &done.stdout);
    assert_eq!(changed.len(), 2);
    for (mut before, after) in changed {
        let blocks = after["message"]["content"].as_array().unwrap().clone();
        for (k, block) in blocks.iter().enumerate() {
            if block["type"] == "tool_result"
                && block["content"] != before["message"]["content"][k]["content"]
            {
                assert!(block["content"].as_str().unwrap().starts_with("[Tool result removed"));
                before["message"]["content"][k]["content"] = block["content"].clone();
            }
        }
        assert_eq!(before, after, "only tool_result contents change");
    }
    // -q says nothing.
    let quiet = run(&["prune", path, "--target-tokens", "20000", "-q"], None);
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr);
}

#[test]
fn prune_says_why_a_target_is_missed() {
    let path = sample("haystack/agent-run.json");
    let done = run(&["prune", &path, "--target-tokens", "10", "-o", "/dev/null"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let line = done.stderr.lines().find(|l| l.starts_with("prune:")).expect("a summary line");
    assert!(line.contains("not reached: ") && line.contains("the newest step holds 8,089 tokens"), "{line}");
    let no_results =
        br#"[{"role": "user", "content": "a long question"}, {"role": "assistant", "content": "an answer"}]"#;
    let done = run(&["prune", "--target-tokens", "1"], Some(no_results));
    assert!(done.stderr.contains("not reached: no tool results in this conversation"), "{}", done.stderr);
    assert_eq!(done.stdout, no_results);
}

#[test]
fn a_pruned_codex_rollout_stays_a_rollout() {
    let path = sample(CODEX);
    let done = run(&["prune", &path, "--full-history", "--target-tokens", "300", "--min-tokens", "50"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let changed = changed_lines(&std::fs::read(&path).unwrap(), &done.stdout);
    assert!(!changed.is_empty());
    for (mut before, after) in changed {
        assert_eq!(before["payload"]["type"], "function_call_output");
        before["payload"]["output"] = after["payload"]["output"].clone();
        assert_eq!(before, after, "only outputs change");
    }
    // The view after the compaction has nothing left to prune but the newest step.
    let done = run(&["prune", &path, "--target-tokens", "300"], None);
    assert!(done.stderr.contains("not reached"), "{}", done.stderr);
    assert!(done.stdout == std::fs::read(&path).unwrap());
}

#[test]
fn count_provider_prints_the_last_recorded_count() {
    let path = sample(CODEX);
    let provider = run(&["count", &path, "--provider"], None).count();
    // The last call: 3,990 prompt tokens and 40 of reply.
    assert_eq!(provider, 4_030);
    let local = run(&["count", &path], None);
    assert!(local.stderr.contains("the provider counted 4030 tokens"), "{}", local.stderr);
    let none = run(&["count", &sample("openai/weather.json"), "--provider"], None);
    assert_eq!(none.code, 1);
    assert!(none.stderr.contains("records no provider counts"), "{}", none.stderr);
}

#[test]
fn a_file_that_reads_as_nothing_is_an_error() {
    let progress = b"{\"type\":\"progress\",\"uuid\":\"p1\",\"sessionId\":\"s\"}\n{\"type\":\"progress\",\"uuid\":\"p2\",\"sessionId\":\"s\"}\n";
    for command in ["count", "convert"] {
        let done = run(&[command], Some(progress));
        assert_eq!(done.code, 1, "{command}: {}", done.stderr);
        assert!(done.stdout.is_empty());
        assert!(done.stderr.contains("holds no message"), "{}", done.stderr);
    }
    let done = run(&["count", "--format", "openhands", &sample(CODEX)], None);
    assert_eq!(done.code, 1, "{}", done.stderr);
}

#[test]
fn count_and_convert_read_logs_line_by_line_with_the_same_answer() {
    let path = sample(CODEX);
    let bytes = std::fs::read(&path).unwrap();
    // From a file (read line by line) and from standard input, the same count and conversion.
    assert_eq!(run(&["count", &path], None).count(), run(&["count"], Some(&bytes)).count());
    let from_file = run(&["convert", &path, "--to", "haystack"], None);
    let from_stdin = run(&["convert", "--to", "haystack"], Some(&bytes));
    assert_eq!(from_file.code, 0, "{}", from_file.stderr);
    assert!(from_file.stdout == from_stdin.stdout);
    // A broken line is named by its number.
    let broken = [&bytes[..], b"{\"timestamp\": \n"].concat();
    let done = run(&["count"], Some(&broken));
    assert_eq!(done.code, 1);
    assert!(done.stderr.contains("line 31"), "{}", done.stderr);
}
