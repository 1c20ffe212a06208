//! Fault injection: what a hostile or unlucky run does to the command. Whatever happens, the
//! command never panics, never hangs, never leaves a partial output file or a scratch file in a
//! store, never replaces a good output with a bad one, never writes outside a store; every
//! failure is one short line on stderr and a non-zero exit.
//!
//! This module is the suite's index, and holds the faults that need the binary and the system:
//! signals mid-write (SIGINT, SIGTERM, SIGHUP and SIGKILL, of the output and of an offload
//! store), truncated and randomly mutated transcripts of every format, FIFOs and links planted
//! in a store, FIFOs as input and output. The rest of the suite, each where its subject lives:
//!
//! - malformed inputs, one kind each (bad JSON, bad UTF-8, a result without its call, deep
//!   nesting, a huge line): `errors.rs`;
//! - concurrent offloaders on one store: eight processes in `offload.rs`
//!   (`eight_processes_offloading_into_one_store_lose_nothing`), threads and async writes in
//!   compaction-offload's `tests/integration/concurrency.rs`;
//! - planted links, hard links, FIFOs and devices, and a link swapped against writes in a
//!   race: compaction-offload's `tests/integration/safety.rs`;
//! - a store that cannot be made or written, and writes failing midway: `offload.rs` and
//!   compaction-offload's `safety.rs`;
//! - interrupted store writes leaving nothing, with and without names: compaction-offload's
//!   `fs_unix.rs` unit tests;
//! - failures after the output is written (a report that cannot be written, a full disk, a
//!   signal after the commit point), links as outputs, and one conversation of several written
//!   over its file: `commit_point.rs`;
//! - a provider that never finishes its reply, asks to wait for days, or echoes secrets:
//!   `provider_faults.rs` (and compaction-llm's own `provider_faults.rs`);
//! - inputs cut at every byte, a byte-order mark, Codex shell calls cleared: `readers_faults.rs`,
//!   and every reader fuzzed from a committed corpus: compaction-formats' `fuzz.rs`;
//! - Python's JSON dialect (lone surrogates, `NaN`, `Infinity`) read, counted and written back:
//!   `dialect.rs`;
//! - outputs a reader would reject (tool calls without ids, a result before its call) and bytes
//!   kept outside the changed messages: `write_fidelity.rs`.
//!
//! All of it runs in `cargo test` (CI's `.ci/run`), in a few seconds.

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
/// output that existed before is left as it was. After SIGKILL, which no program can catch, the
/// output is as it was too, and a leftover temporary file is named as the README says.
#[cfg(unix)]
#[test]
fn an_interrupted_write_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.json");
    std::fs::write(&input, big_conversation(60)).unwrap();
    let output = dir.path().join("out.json");
    let mut interrupted = 0;
    for signal in ["INT", "TERM", "HUP", "KILL"] {
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
        let left = partial_files(dir.path());
        if signal == "KILL" {
            // No program can catch it: a leftover says what it is, and the output is as it was.
            for name in &left {
                assert!(name.starts_with(".out.json.compaction-partial-"), "SIGKILL left {name}");
                std::fs::remove_file(dir.path().join(name)).unwrap();
            }
        } else {
            assert_eq!(left, Vec::<String>::new(), "SIG{signal} left a partial file");
        }
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

/// Makes a FIFO at `path`.
#[cfg(unix)]
fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Waits for `child` at most `seconds`, killing it (and failing) if it has not ended.
fn finish_within(mut child: std::process::Child, seconds: u64, what: &str) -> std::process::Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(seconds) {
            let _ = child.kill();
            panic!("{what} did not finish in {seconds} s: it blocks");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

/// A FIFO, a link out of the store and a hard link planted where results would go: `offload`
/// neither blocks on the FIFO nor follows or replaces a link; the result goes to the next free
/// name, and nothing outside the store is touched.
#[cfg(unix)]
#[test]
fn planted_fifos_and_links_in_the_store_are_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let call = serde_json::json!({"tool_name": "read", "arguments": {"path": "a"}, "id": "c1"});
    let result = "the file's content, ".repeat(50);
    let messages = serde_json::json!([
        {"role": "user", "content": [{"text": "read a"}]},
        {"role": "assistant", "content": [{"tool_call": call}]},
        {"role": "tool", "content": [{"tool_call_result": {"result": result, "origin": call, "error": false}}]},
    ]);
    let input = dir.path().join("run.json");
    std::fs::write(&input, serde_json::to_vec(&messages).unwrap()).unwrap();
    // The step's key is 1_read_c1.txt; its first numbered siblings are planted too.
    mkfifo(&store.join("1_read_c1.txt"));
    std::os::unix::fs::symlink(outside.join("stolen.txt"), store.join("1_read_c1_2.txt")).unwrap();
    std::fs::write(outside.join("kept.txt"), b"someone else's").unwrap();
    std::fs::hard_link(outside.join("kept.txt"), store.join("1_read_c1_3.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, store.join("1_read_c1_4.txt")).unwrap();
    let output = dir.path().join("out.json");
    let child = Command::new(env!("CARGO_BIN_EXE_compaction"))
        .args(["offload", "-q", "--store"])
        .arg(&store)
        .arg("-o")
        .arg(&output)
        .arg(&input)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = finish_within(child, 60, "offload into a store with a FIFO");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&output).unwrap()).unwrap();
    let reference = written[2]["meta"]["tool_result_offloaded"][0].as_str().unwrap();
    assert!(reference.ends_with("1_read_c1_5.txt"), "{reference}");
    assert_eq!(std::fs::read_to_string(reference).unwrap(), result);
    assert!(!outside.join("stolen.txt").exists(), "a write followed the link out of the store");
    assert_eq!(std::fs::read(outside.join("kept.txt")).unwrap(), b"someone else's");
    let mut outside_now: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outside_now.sort();
    assert_eq!(outside_now, ["kept.txt"]);
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(store.join("1_read_c1.txt")).unwrap().file_type().is_fifo());
}

/// A FIFO as the input and as the output: the input is read through it, and the output is
/// written into it (a reader gets the conversation), never replaced by a regular file.
#[cfg(unix)]
#[test]
fn fifos_as_input_and_output_are_read_and_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.fifo");
    let output = dir.path().join("out.fifo");
    mkfifo(&input);
    mkfifo(&output);
    let bytes = std::fs::read(sample("haystack/agent-run.json")).unwrap();
    let writer = {
        let (input, bytes) = (input.clone(), bytes.clone());
        std::thread::spawn(move || std::fs::write(input, bytes))
    };
    let reader = {
        let output = output.clone();
        std::thread::spawn(move || std::fs::read(output))
    };
    let child = Command::new(env!("CARGO_BIN_EXE_compaction"))
        .args(["prune", "--target-tokens", "5000", "--min-tokens", "0", "-q", "-o"])
        .arg(&output)
        .arg(&input)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = finish_within(child, 60, "prune between FIFOs");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    writer.join().unwrap().unwrap();
    let through = reader.join().unwrap().unwrap();
    let direct = run(
        &["prune", &sample("haystack/agent-run.json"), "--target-tokens", "5000", "--min-tokens", "0"],
        None,
    );
    assert_eq!(through, direct.stdout, "what came through the FIFO is not the conversation");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&output).unwrap().file_type().is_fifo(), "the FIFO was replaced");
}

/// Transcripts of every kind with bytes deleted, inserted or repeated at random places: each is
/// read or refused with one short line (exit 1), never a panic, and a refused one writes
/// nothing.
#[test]
fn mutated_transcripts_are_read_or_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    const NOISE: &[&[u8]] =
        &[b"{", b"}", b"[", b"]", b"\"", b",", b":", b"\\", b"\n", b"0", b"null", b"\xff", b"\"tool_call\":"];
    let mut runs = 0;
    for file in [
        "haystack/agent-run.json",
        "openai/weather.json",
        "anthropic/search.json",
        "claude-code/fa812bfe-excerpt.jsonl",
        "codex/rollout-2025-10-04T09-00-00-0199a1b2.jsonl",
        "swe-agent/pandas-excerpt.traj",
    ] {
        let original = std::fs::read(sample(file)).unwrap();
        for case in 0..10 {
            let mut bytes = original.clone();
            for _ in 0..1 + next(3) {
                let at = next(bytes.len());
                match next(3) {
                    0 => {
                        let end = (at + 1 + next(40)).min(bytes.len());
                        bytes.drain(at..end);
                    }
                    1 => {
                        let noise = NOISE[next(NOISE.len())];
                        bytes.splice(at..at, noise.iter().copied());
                    }
                    _ => {
                        let end = (at + 1 + next(200)).min(bytes.len());
                        let chunk = bytes[at..end].to_vec();
                        bytes.splice(at..at, chunk);
                    }
                }
            }
            let name = format!("{}-{case}", file.replace('/', "-"));
            let input = dir.path().join(&name);
            std::fs::write(&input, &bytes).unwrap();
            let input = input.display().to_string();
            let output = dir.path().join(format!("{name}.out"));
            let output_arg = output.display().to_string();
            let what = format!("{file} mutation {case}");
            for args in [
                vec!["count", &input],
                vec!["prune", &input, "--target-tokens", "200", "--min-tokens", "0", "-q", "-o", &output_arg],
            ] {
                let done = run(&args, None);
                runs += 1;
                assert!(!done.stderr.contains("panicked"), "{what}: {}", done.stderr);
                if done.code != 0 {
                    assert_eq!(done.code, 1, "{what} {}: {}", args[0], done.stderr);
                    assert_eq!(done.stderr.trim_end().lines().count(), 1, "{what}: {}", done.stderr);
                    assert!(done.stderr.len() < 400, "{what}: a long error line: {}", done.stderr);
                    assert!(!output.exists(), "{what}: a refused input wrote an output");
                    break;
                }
            }
            assert_eq!(partial_files(dir.path()), Vec::<String>::new(), "{what}");
        }
    }
    assert!(runs >= 60);
}
