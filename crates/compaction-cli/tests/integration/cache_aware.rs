//! `--cache-aware`: the hook's rule that compacts only when it pays for itself with the prompt
//! cache, through `prune --context-window` and `simulate`.

use crate::{run, sample};

/// Over the few calls one expects, rewriting the prompt after the first pruned result costs more
/// than the freed tokens save: `prune` leaves the conversation as it was and says why, in its
/// line and in the report; expecting ten calls, it compacts. A request over the window is
/// compacted whatever it costs, and the rule needs the hook (`--context-window`).
#[test]
fn prune_compacts_only_when_the_cache_makes_it_pay() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample("haystack/agent-run.json");
    let (out, report) = (dir.path().join("out.json"), dir.path().join("r.json"));
    let (out_s, report_s) = (out.to_str().unwrap(), report.to_str().unwrap());
    let base = [
        "prune",
        input.as_str(),
        "--context-window",
        "60000",
        "--cache-aware",
        "-o",
        out_s,
        "--report",
        report_s,
    ];

    let declined = run(&[&base[..], &["--expected-calls", "1"]].concat(), None);
    assert_eq!(declined.code, 0, "{}", declined.stderr);
    assert!(
        declined.stderr.contains("prune: not compacted under --cache-aware: compacting 48085 to"),
        "{}",
        declined.stderr
    );
    assert!(declined.stderr.contains("over the next call it would cost"), "{}", declined.stderr);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&input).unwrap());
    let document: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(document["changed"], false);
    assert!(document["declined"].as_str().is_some_and(|why| why.contains("cache-write price")));

    let paid = run(&base, None);
    assert_eq!(paid.code, 0, "{}", paid.stderr);
    assert!(paid.stderr.contains("prune: pruned 7 results"), "{}", paid.stderr);
    assert!(std::fs::read(&out).unwrap() != std::fs::read(&input).unwrap());

    // Over a 40,000-token window the request does not fit: compacted even for one call.
    let over = run(
        &[
            "prune",
            &input,
            "--context-window",
            "40000",
            "--cache-aware",
            "--expected-calls",
            "1",
            "-o",
            out_s,
        ],
        None,
    );
    assert!(over.stderr.contains("prune: pruned 7 results"), "{}", over.stderr);

    let fixed = run(&["prune", &input, "--target-tokens", "100", "--cache-aware"], None);
    assert_eq!(fixed.code, 2, "{}", fixed.stderr);
    assert!(fixed.stderr.contains("--cache-aware is a rule of the compaction hook"), "{}", fixed.stderr);
}

/// `simulate --cache-aware` replays the same log compacting where it pays: with one call
/// expected, no compaction pays on the Claude Code excerpt, so it costs what no compaction costs.
#[test]
fn simulate_replays_the_rule() {
    let input = sample("claude-code/fa812bfe-excerpt.jsonl");
    let line = |extra: &[&str]| {
        let done =
            run(&[&["simulate", input.as_str(), "--context-window", "30000"][..], extra].concat(), None);
        assert_eq!(done.code, 0, "{}", done.stderr);
        let table = String::from_utf8(done.stdout).unwrap();
        table.lines().find(|l| l.starts_with("compaction ")).unwrap().to_owned()
    };
    assert_eq!(line(&[]), "compaction           triggered 3 times, compacted 1");
    assert_eq!(
        line(&["--cache-aware", "--expected-calls", "1"]),
        "compaction           triggered 3 times, compacted 0"
    );
}

/// `bench --set cache_aware=false,true` runs both as configurations of the grid: with one call
/// expected, the rule makes no compaction on the Claude Code excerpt, where pruning makes one.
#[test]
fn bench_takes_the_rule_as_a_setting() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let done = run(
        &[
            "bench",
            &sample("claude-code/fa812bfe-excerpt.jsonl"),
            "--context-window",
            "30000",
            "--set",
            "cache_aware=false,true",
            "--set",
            "expected_calls=1",
            "--json",
            json.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let document: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let results = document["transcripts"][0]["results"].as_array().unwrap();
    let compactions: Vec<(String, u64)> = results
        .iter()
        .map(|r| (r["configuration"].as_str().unwrap().to_owned(), r["compactions"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        compactions,
        [
            ("none".to_owned(), 0),
            ("tool-result-pruning cache_aware=false expected_calls=1".to_owned(), 1),
            ("tool-result-pruning cache_aware=true expected_calls=1".to_owned(), 0),
        ]
    );
}
