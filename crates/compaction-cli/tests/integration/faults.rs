//! Fault injection: interrupted runs, truncated and malformed inputs. Whatever happens, the
//! command never panics, never leaves a partial output file and never replaces a good output
//! with a bad one; every failure is one short line on stderr and a non-zero exit.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{run, sample};

/// Temporary output files left in `dir`.
fn partial_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("compaction-partial"))
        .collect()
}

/// A Haystack conversation of about `megabytes` MB: steps of a tool call and a long result.
fn big_conversation(megabytes: usize) -> Vec<u8> {
    let result = "line of tool output, ".repeat(2_000);
    let steps = megabytes * 1_000_000 / result.len() + 1;
    let mut messages = vec![serde_json::json!({"role": "user", "content": "go"})];
    for i in 0..steps {
        let call = serde_json::json!({"tool_name": "read", "arguments": {"n": i}, "id": format!("c{i}")});
        messages.push(serde_json::json!({"role": "assistant", "content": [{"tool_call": call}]}));
        messages.push(serde_json::json!({"role": "tool", "content": [
            {"tool_call_result": {"result": result, "origin": call, "error": false}}]}));
    }
    serde_json::to_vec(&messages).unwrap()
}

/// SIGINT, SIGTERM or SIGHUP while the output is being written: the temporary file goes, and an
/// output that existed before is left as it was.
#[cfg(unix)]
#[test]
fn an_interrupted_write_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.json");
    std::fs::write(&input, big_conversation(60)).unwrap();
    let output = dir.path().join("out.json");
    let mut interrupted = 0;
    for signal in ["INT", "TERM", "HUP"] {
        std::fs::write(&output, b"previous output\n").unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_compaction"))
            .args(["convert", "--to", "openai", "-q", "-o"])
            .arg(&output)
            .arg(&input)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the temporary file to appear, then interrupt the write.
        let started = Instant::now();
        let mut seen = false;
        while started.elapsed() < Duration::from_secs(60) {
            if !partial_files(dir.path()).is_empty() {
                seen = true;
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let killed = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status();
        assert!(killed.unwrap().success());
        let status = child.wait().unwrap();
        if seen && !status.success() {
            interrupted += 1;
            assert_eq!(
                std::fs::read(&output).unwrap(),
                b"previous output\n",
                "SIG{signal} replaced the output"
            );
        }
        assert_eq!(partial_files(dir.path()), Vec::<String>::new(), "SIG{signal} left a partial file");
    }
    assert!(interrupted > 0, "no run was interrupted while writing; the input is too small for this machine");
}

/// The entries of `dir` whose names start with `prefix`.
fn entries(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// SIGINT, SIGTERM, SIGHUP or SIGKILL while results are being written to an offload store: no
/// scratch file stays in the store (on Linux a result is written without a name until it is
/// whole, so not even SIGKILL leaves one; elsewhere a SIGKILL may leave one named
/// `.offload-*.partial`), and every file there holds a whole result.
#[cfg(unix)]
#[test]
fn an_interrupted_offload_leaves_only_whole_results_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.json");
    std::fs::write(&input, big_conversation(25)).unwrap();
    let result = "line of tool output, ".repeat(2_000);
    let mut interrupted = 0;
    for signal in ["INT", "TERM", "HUP", "KILL"] {
        let store = dir.path().join(format!("store-{signal}"));
        let output = dir.path().join(format!("out-{signal}.json"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_compaction"))
            .args(["prune", "--target-tokens", "0", "--min-tokens", "0", "-q", "--offload-to"])
            .arg(&store)
            .arg("-o")
            .arg(&output)
            .arg(&input)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the first result in the store, then interrupt the writes.
        let started = Instant::now();
        let mut seen = false;
        while started.elapsed() < Duration::from_secs(60) {
            if entries(&store, "").iter().any(|name| name.ends_with(".txt")) {
                seen = true;
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let killed = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status();
        assert!(killed.unwrap().success());
        let status = child.wait().unwrap();
        let stored = entries(&store, "");
        if seen && !status.success() && !output.exists() {
            interrupted += 1;
        }
        let scratch: Vec<&String> = stored.iter().filter(|name| !name.ends_with(".txt")).collect();
        if signal == "KILL" && !cfg!(target_os = "linux") {
            assert!(
                scratch.iter().all(|name| name.starts_with(".offload-") && name.ends_with(".partial")),
                "SIGKILL left {scratch:?}"
            );
        } else {
            assert!(scratch.is_empty(), "SIG{signal} left {scratch:?} in the store");
        }
        for name in stored.iter().filter(|name| name.ends_with(".txt")) {
            let text = std::fs::read_to_string(store.join(name)).unwrap();
            assert_eq!(text.len(), result.len(), "SIG{signal}: {name} holds part of a result");
        }
        assert_eq!(partial_files(dir.path()), Vec::<String>::new(), "SIG{signal} left a partial output");
    }
    assert!(interrupted > 0, "no run was interrupted while storing; the input is too small for this machine");
}

/// Every prefix of a real transcript is either read or refused with one short line; none panics
/// and none writes an output file.
#[test]
fn truncated_transcripts_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    for (name, file) in [
        ("haystack", "haystack/agent-run.json"),
        ("claude-code", "claude-code/fa812bfe-excerpt.jsonl"),
        ("openai", "openai/weather.json"),
    ] {
        let bytes = std::fs::read(sample(file)).unwrap();
        for cut in [1, bytes.len() / 7, bytes.len() / 3, bytes.len() / 2, bytes.len() - 2] {
            let input = dir.path().join(format!("{name}-{cut}"));
            std::fs::write(&input, &bytes[..cut]).unwrap();
            let output = dir.path().join(format!("{name}-{cut}.out"));
            let input = input.display().to_string();
            let output_arg = output.display().to_string();
            let result = run(&["prune", &input, "--target-tokens", "100", "-q", "-o", &output_arg], None);
            assert!(!result.stderr.contains("panicked"), "{name} cut at {cut}: {}", result.stderr);
            if result.code != 0 {
                assert_eq!(result.code, 1, "{name} cut at {cut}: {}", result.stderr);
                assert_eq!(result.stderr.trim_end().lines().count(), 1, "{}", result.stderr);
                assert!(result.stderr.len() < 400, "a long error line: {}", result.stderr);
                assert!(!output.exists(), "{name} cut at {cut} wrote an output");
            }
            assert_eq!(partial_files(dir.path()), Vec::<String>::new());
        }
    }
}

/// A value of 300 KB where a short one belongs is named by its start and its length.
#[test]
fn error_lines_stay_short() {
    let big = "x".repeat(300_000);
    let cases = [
        serde_json::json!([{"role": "user", "content": [{ big.as_str(): 1 }]}]),
        serde_json::json!([{"role": "user", "meta": {}, "name": null, "content": [{"video": {"url": big}}]}]),
    ];
    for case in cases {
        let result = run(&["count"], Some(&serde_json::to_vec(&case).unwrap()));
        assert_eq!(result.code, 1, "{}", &result.stderr[..result.stderr.len().min(300)]);
        assert!(result.stderr.len() < 400, "{} bytes: {}", result.stderr.len(), &result.stderr[..300]);
        assert!(!result.stderr.contains("[{}]"));
    }
}
