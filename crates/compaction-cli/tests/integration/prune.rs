//! `compaction prune`: output, report, dry run, atomic writes, and pairing on real transcripts.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::{run, sample};

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("compaction-prune-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every tool result of a Haystack conversation has an earlier call with its id and name, and
/// every call has its result.
fn assert_paired(messages: &[Value], what: &str) {
    let mut open: HashMap<String, usize> = HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        for part in message["content"].as_array().unwrap() {
            if let Some(call) = part.get("tool_call") {
                *open.entry(format!("{}|{}", call["id"], call["tool_name"])).or_default() += 1;
            }
            if let Some(result) = part.get("tool_call_result") {
                let key = format!("{}|{}", result["origin"]["id"], result["origin"]["tool_name"]);
                let slot = open.get_mut(&key).filter(|n| **n > 0);
                let Some(count) = slot else { panic!("{what}: result at {index} has no open call {key}") };
                *count -= 1;
            }
        }
    }
    // Every call answered, except possibly in a final step still waiting for its results.
    let unanswered: usize = open.values().sum();
    assert!(unanswered <= 8, "{what}: {unanswered} calls without results");
}

#[test]
fn prune_writes_a_smaller_conversation_and_a_report() {
    let dir = scratch("report");
    let out = dir.join("out.json");
    let report = dir.join("report.json");
    let input = sample("haystack/agent-run.json");
    let before = run(&["count", &input], None).count();
    let result = run(
        &[
            "prune",
            &input,
            "--target-tokens",
            "10",
            "--min-tokens",
            "0",
            "-o",
            out.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert!(result.stdout.is_empty(), "the conversation goes to -o, not stdout");
    let after = run(&["count", out.to_str().unwrap()], None).count();
    assert!(after < before, "{after} < {before}");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["changed"], true);
    assert_eq!(report["tokens_before"], before);
    for key in ["tokens_after", "target_tokens", "target_reached", "pruned", "results", "timings_ms"] {
        assert!(report.get(key).is_some(), "report lacks {key}: {report}");
    }
    for key in ["read", "parse", "compact", "write"] {
        assert!(report["timings_ms"][key].is_number(), "timings lack {key}");
    }
    assert!(!report["pruned"].as_array().unwrap().is_empty());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("Tool result removed to free up context"), "{text}");
}

/// A named OpenAI tool message (the `name` older function-calling code sends) keeps its name
/// when its result is pruned; the reference would drop it (README, "Deviations").
#[test]
fn a_pruned_named_tool_message_keeps_its_name() {
    let mut messages = vec![json!({"role": "user", "content": "weather?"})];
    for k in 0..4 {
        let id = format!("c{k}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "name": "get_weather", "content": "sunny ".repeat(400)}));
        messages.push(json!({"role": "assistant", "content": "Sunny."}));
    }
    let input = serde_json::to_vec(&json!({"model": "m", "messages": messages})).unwrap();
    let result = run(&["prune", "-", "--target-tokens", "900"], Some(&input));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let written: Value = serde_json::from_slice(&result.stdout).unwrap();
    let tools: Vec<&Value> =
        written["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    let pruned =
        tools.iter().filter(|m| m["content"].as_str().unwrap().starts_with("[Tool result removed")).count();
    assert!(pruned >= 2, "{written}");
    for tool in tools {
        assert_eq!(tool["name"], "get_weather", "{tool}");
    }
}

#[test]
fn nothing_to_prune_writes_the_input_unchanged() {
    let input = sample("openai/weather.json");
    let result = run(&["prune", &input, "--target-tokens", "1000000"], None);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert_eq!(result.stdout, std::fs::read(&input).unwrap());
}

#[test]
fn dry_run_prints_the_plan_and_writes_nothing() {
    let dir = scratch("dry");
    let out = dir.join("out.json");
    let input = sample("haystack/agent-run.json");
    let result = run(
        &[
            "prune",
            &input,
            "--target-tokens",
            "10",
            "--min-tokens",
            "0",
            "--dry-run",
            "-o",
            out.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(result.code, 0, "{}", result.stderr);
    let report: Value = serde_json::from_slice(&result.stdout).unwrap();
    assert_eq!(report["changed"], true);
    assert!(!out.exists(), "a dry run writes no conversation");
}

#[test]
fn a_failed_run_leaves_an_existing_output_as_it_was() {
    let dir = scratch("atomic");
    let out = dir.join("out.json");
    std::fs::write(&out, b"precious").unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, b"[{\"role\": \"user\", \"content\": \"x\"}, {\"role\": ").unwrap();
    let result =
        run(&["prune", bad.to_str().unwrap(), "--target-tokens", "1", "-o", out.to_str().unwrap()], None);
    assert_eq!(result.code, 1);
    assert!(result.stderr.contains("bad.json"), "{}", result.stderr);
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(leftovers.len(), 2, "no temporary file stays behind");
}

#[test]
fn invalid_settings_are_usage_errors() {
    let input = sample("haystack/read-file.json");
    let result = run(&["prune", &input, "--target-tokens", "1", "--min-keep-steps", "0"], None);
    assert_eq!(result.code, 2, "{}", result.stderr);
    assert!(result.stdout.is_empty());
    let result = run(&["prune", &input], None);
    assert_eq!(result.code, 2, "--target-tokens is required");
}

#[test]
fn every_real_transcript_prunes_with_calls_paired() {
    let Some(dir) = crate::corpus() else { return };
    let mut seen = 0;
    for folder in std::fs::read_dir(&dir).unwrap() {
        for entry in std::fs::read_dir(folder.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == "LICENSE") {
                continue;
            }
            let path = path.display().to_string();
            let result = run(&["prune", &path, "--target-tokens", "2000", "--to", "haystack"], None);
            assert_eq!(result.code, 0, "{path}: {}", result.stderr);
            let messages = match result.json() {
                Value::Array(messages) => messages,
                other => panic!("{path}: expected an array, got {other}"),
            };
            assert_paired(&messages, &path);
            seen += 1;
        }
    }
    assert_eq!(seen, 7);
}

#[test]
fn context_window_runs_the_hook_logic() {
    let input = sample("haystack/agent-run.json");
    let total = run(&["count", &input], None).count();
    // Below compact_at of the window: nothing happens and the input comes back unchanged.
    let window = (total * 2).to_string();
    let dir = scratch("window");
    let report = dir.join("r.json");
    let result =
        run(&["prune", &input, "--context-window", &window, "--report", report.to_str().unwrap()], None);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert_eq!(result.stdout, std::fs::read(&input).unwrap());
    let document: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(document["triggered"], false);
    assert_eq!(document["changed"], false);
    assert_eq!(document["estimated_tokens"], total);
    assert_eq!(document["context_tokens"], 0);

    // Above it: compacted towards compact_to of the window.
    let window = (total + total / 4).to_string();
    let result = run(
        &[
            "prune",
            &input,
            "--context-window",
            &window,
            "--compact-to",
            "0.3",
            "--report",
            report.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(result.code, 0, "{}", result.stderr);
    let document: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(document["triggered"], true);
    assert_eq!(document["changed"], true);
    let expected_target = ((total + total / 4) as f64 * 0.3) as u64;
    assert_eq!(document["target_tokens"], expected_target, "no tools, so no overhead");
    let after = run(&["count", "-"], Some(&result.stdout)).count();
    assert!(after < total);
    // The hook ran the same compactor with that target: the same bytes come out.
    let direct = run(&["prune", &input, "--target-tokens", &expected_target.to_string()], None);
    assert_eq!(direct.code, 0, "{}", direct.stderr);
    assert!(result.stdout == direct.stdout, "--context-window and --target-tokens outputs differ");

    // Invalid fractions are usage errors.
    let result = run(
        &["prune", &input, "--context-window", "1000", "--compact-at", "0.3", "--compact-to", "0.5"],
        None,
    );
    assert_eq!(result.code, 2, "{}", result.stderr);
}

#[test]
fn offload_to_writes_results_to_files_and_leaves_pointers() {
    let dir = scratch("offload");
    let store = dir.join("store");
    let input = sample("haystack/agent-run.json");
    let result = run(
        &[
            "prune",
            &input,
            "--target-tokens",
            "5000",
            "--offload-to",
            store.to_str().unwrap(),
            "--to",
            "haystack",
        ],
        None,
    );
    assert_eq!(result.code, 0, "{}", result.stderr);
    let messages = match result.json() {
        Value::Array(messages) => messages,
        other => panic!("expected an array, got {other}"),
    };
    let original = match run(&["convert", &input, "--to", "haystack"], None).json() {
        Value::Array(messages) => messages,
        other => panic!("expected an array, got {other}"),
    };
    let mut offloaded = 0;
    for (index, message) in messages.iter().enumerate() {
        let Some(references) = message["meta"]["tool_result_offloaded"].as_array() else { continue };
        if original[index]["meta"].get("tool_result_offloaded").is_some() {
            continue;
        }
        offloaded += 1;
        let text = message["content"][0]["tool_call_result"]["result"].as_str().unwrap();
        assert!(text.starts_with("Tool result offloaded to"), "{text}");
        let reference = references[0].as_str().unwrap();
        assert!(reference.starts_with(store.to_str().unwrap()), "{reference}");
        let stored = std::fs::read_to_string(reference).unwrap();
        let before = original[index]["content"][0]["tool_call_result"]["result"].as_str().unwrap();
        assert_eq!(stored, before, "the store holds the original result");
    }
    assert!(offloaded > 0);
    assert_paired(&messages, "offloaded");
}

#[test]
fn a_report_to_a_device_is_written_to_it_not_over_it() {
    let input = sample("haystack/agent-run.json");
    let result =
        run(&["prune", &input, "--target-tokens", "5000", "--report", "/dev/null", "-o", "/dev/null"], None);
    assert_eq!(result.code, 0, "{}", result.stderr);
    let null = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(!null.is_file(), "/dev/null must stay a device");
}

#[test]
fn a_large_file_is_read_whole() {
    // Files of 4 MB and more are read into fresh memory by two threads; what is read must be
    // the file, byte for byte, as from standard input.
    let result = "data line with ünïcode and \\\"quotes\\\"\\n".repeat(400);
    let messages: Vec<String> = (0..300)
        .flat_map(|i| {
            [
                format!(
                    r#"{{"role":"assistant","meta":{{}},"name":null,"content":[{{"tool_call":{{"tool_name":"read","arguments":{{"n":{i}}},"id":"c{i}","extra":null}}}}]}}"#
                ),
                format!(
                    r#"{{"role":"tool","meta":{{}},"name":null,"content":[{{"tool_call_result":{{"result":"{i}: {result}","origin":{{"tool_name":"read","arguments":{{"n":{i}}},"id":"c{i}","extra":null}},"error":false}}}}]}}"#
                ),
            ]
        })
        .collect();
    let input = format!("[{}]\n", messages.join(","));
    assert!(input.len() > 4 << 20, "{} bytes is below the two-thread read", input.len());
    let dir = scratch("large");
    let path = dir.join("large.json");
    std::fs::write(&path, &input).unwrap();
    let path = path.to_str().unwrap();
    assert_eq!(run(&["count", path], None).count(), run(&["count"], Some(input.as_bytes())).count());
    let converted = run(&["convert", path], None);
    assert_eq!(converted.code, 0, "{}", converted.stderr);
    assert!(converted.stdout == input.as_bytes(), "convert changed a large file");
}

#[test]
fn preview_ends_keep_both_ends_of_each_pruned_result() {
    let input = sample("haystack/agent-run.json");
    let original = crate::haystack(&[&input]);
    let done = run(&["prune", &input, "--target-tokens", "10", "--preview-ends", "30"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let pruned = done.json();
    let mut seen = 0;
    for (before, after) in original.iter().zip(pruned.as_array().unwrap()) {
        let (Some(old), Some(new)) = (
            before["content"][0]["tool_call_result"]["result"].as_str(),
            after["content"][0]["tool_call_result"]["result"].as_str(),
        ) else {
            continue;
        };
        if old == new {
            continue;
        }
        seen += 1;
        let head: String = old.chars().take(30).collect();
        let tail: String = old.chars().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
        assert!(new.starts_with(&format!("{head}...\n[Tool result removed")), "{new}");
        assert!(new.ends_with(&format!("\n...{tail}")), "{new}");
    }
    assert!(seen > 3, "{seen} results pruned");
}
