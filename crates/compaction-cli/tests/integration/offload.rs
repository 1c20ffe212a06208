//! `compaction offload`: store files hold the original results, pointers stay, bad policies are
//! usage errors.

use serde_json::Value;

use crate::{haystack, run, sample};

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("compaction-offload-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The first 30 messages of the bundled agent run: they end with a batch of four results
/// (run_tests 3223 characters, search_code 79, query_db 3689, list_dir 1834), after the eighth
/// assistant message.
fn step_with_four_results(dir: &std::path::Path) -> (String, Vec<Value>) {
    let messages: Vec<Value> = haystack(&[&sample("haystack/agent-run.json")]).into_iter().take(30).collect();
    let path = dir.join("run.json");
    std::fs::write(&path, serde_json::to_vec(&messages).unwrap()).unwrap();
    (path.display().to_string(), messages)
}

fn result(message: &Value) -> &Value {
    &message["content"][0]["tool_call_result"]
}

#[test]
fn offload_writes_the_results_to_the_store_and_leaves_pointers() {
    let dir = scratch("policies");
    let (input, original) = step_with_four_results(&dir);
    let store = dir.join("store");
    let out = dir.join("out.json");
    let args = [
        "offload",
        &input,
        "--store",
        store.to_str().unwrap(),
        "--policy",
        "run_tests,query_db=over:3000",
        "--policy",
        "list_dir=never",
        "--policy",
        "*=over:5000",
        "-o",
        out.to_str().unwrap(),
    ];
    let done = run(&args, None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(done.stderr.contains("2 of 4 trailing tool results offloaded"), "{}", done.stderr);
    assert!(done.stderr.contains("run_tests (message 26)"), "{}", done.stderr);

    let written: Vec<Value> = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(written.len(), original.len());
    // The step in the keys defaults to the number of assistant messages: 8.
    let mut files: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["8_query_db_call_7_2.txt", "8_run_tests_call_7_0.txt"]);
    for index in [26, 28] {
        let pointer = result(&written[index]);
        let text = pointer["result"].as_str().unwrap();
        assert!(text.starts_with("Tool result offloaded to text ("), "{text}");
        assert_eq!(pointer["origin"], result(&original[index])["origin"], "the pointer keeps its call");
        let references = written[index]["meta"]["tool_result_offloaded"].as_array().unwrap();
        assert_eq!(references.len(), 1);
        let file = references[0].as_str().unwrap();
        assert!(text.contains(file), "the pointer names {file}: {text}");
        let stored = std::fs::read_to_string(file).unwrap();
        assert_eq!(stored, result(&original[index])["result"].as_str().unwrap(), "{file}");
    }
    for index in (0..26).chain([27, 29]) {
        assert_eq!(written[index], original[index], "message {index} is unchanged");
    }
}

#[test]
fn step_names_the_files() {
    let dir = scratch("step");
    let (input, _) = step_with_four_results(&dir);
    let store = dir.join("store");
    let done = run(&["offload", &input, "--store", store.to_str().unwrap(), "--step", "41"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    // No --policy: every result goes.
    assert!(done.stderr.contains("4 of 4"), "{}", done.stderr);
    assert!(store.join("41_list_dir_call_7_3.txt").is_file());
    assert!(store.join("41_search_code_call_7_1.txt").is_file());
}

#[test]
fn nothing_offloaded_writes_the_input_unchanged() {
    let dir = scratch("unchanged");
    let input = sample("haystack/agent-run.json");
    let store = dir.join("store");
    let done =
        run(&["offload", &input, "--store", store.to_str().unwrap(), "--policy", "*=over:1000000"], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.stdout, std::fs::read(&input).unwrap());
    assert!(done.stderr.contains("0 of 1") && done.stderr.contains("1 kept"), "{}", done.stderr);
    // The store is made (and checked) before any work, and nothing was written to it.
    assert_eq!(std::fs::read_dir(&store).unwrap().count(), 0);
}

#[test]
fn a_store_that_cannot_be_made_is_an_error_before_any_work() {
    let dir = scratch("unusable");
    let input = sample("haystack/agent-run.json");
    let afile = dir.join("afile");
    std::fs::write(&afile, "").unwrap();
    let out = dir.join("out.json");
    for store in [afile.clone(), afile.join("x")] {
        let store = store.to_str().unwrap();
        for args in [
            vec!["offload", &input, "--store", store, "-o", out.to_str().unwrap()],
            vec![
                "prune",
                &input,
                "--target-tokens",
                "10",
                "--offload-to",
                store,
                "-o",
                out.to_str().unwrap(),
            ],
            vec![
                "prune",
                &input,
                "--context-window",
                "1000",
                "--offload-to",
                store,
                "-o",
                out.to_str().unwrap(),
            ],
            vec!["simulate", &input, "--context-window", "1000", "--offload-store", store],
        ] {
            let done = run(&args, None);
            assert_eq!(done.code, 1, "{args:?}: {}", done.stderr);
            assert!(
                done.stderr.contains(&format!("cannot use {store} as the offload store")),
                "{}",
                done.stderr
            );
            assert!(
                done.stderr.contains("not a directory") || done.stderr.contains("Not a directory"),
                "{}",
                done.stderr
            );
            assert!(done.stdout.is_empty(), "{args:?} wrote output");
            assert!(!out.exists(), "{args:?} wrote output");
        }
    }
    assert_eq!(std::fs::read(&afile).unwrap(), b"");
}

/// A conversation ending with one step whose tool's name is too long for a file name: its
/// write fails with the system's error.
fn unwritable_step(dir: &std::path::Path) -> String {
    let long = "t".repeat(300);
    let messages = serde_json::json!([
        {"role": "user", "content": [{"text": "go"}]},
        {"role": "assistant", "content": [
            {"tool_call": {"tool_name": long, "arguments": {}, "id": "c1"}},
            {"tool_call": {"tool_name": "ok", "arguments": {}, "id": "c2"}}]},
        {"role": "tool", "content": [{"tool_call_result": {"result": "x".repeat(3000),
            "origin": {"tool_name": long, "arguments": {}, "id": "c1"}, "error": false}}]},
        {"role": "tool", "content": [{"tool_call_result": {"result": "y".repeat(3000),
            "origin": {"tool_name": "ok", "arguments": {}, "id": "c2"}, "error": false}}]}
    ]);
    let path = dir.join("run.json");
    std::fs::write(&path, serde_json::to_vec(&messages).unwrap()).unwrap();
    path.display().to_string()
}

#[test]
fn a_failed_write_keeps_the_result_is_named_and_exits_3() {
    let dir = scratch("failure");
    let input = unwritable_step(&dir);
    let store = dir.join("store");
    let out = dir.join("out.json");
    let done =
        run(&["offload", &input, "--store", store.to_str().unwrap(), "-o", out.to_str().unwrap()], None);
    assert_eq!(done.code, 3, "{}", done.stderr);
    let key = format!("1_{}_c1.txt", "t".repeat(300));
    assert!(
        done.stderr
            .contains(&format!("could not store the result of {} (message 2) under {key}", "t".repeat(300))),
        "{}",
        done.stderr
    );
    assert!(done.stderr.contains("File name too long (os error 36)"), "{}", done.stderr);
    assert!(
        done.stderr.contains("1 of 2 trailing tool results offloaded") && done.stderr.contains("1 failed"),
        "{}",
        done.stderr
    );
    // The output is written: the failed result as it was, the other one offloaded.
    let written: Vec<Value> = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(result(&written[2])["result"], Value::String("x".repeat(3000)));
    assert!(result(&written[3])["result"].as_str().unwrap().starts_with("Tool result offloaded to"));

    // prune --offload-to says the same, lists it in the report, and exits 3 too. The newest
    // step is protected, so a step is added after it.
    let report = dir.join("report.json");
    let pruned = dir.join("pruned.json");
    let mut messages: Vec<Value> = serde_json::from_slice(&std::fs::read(&input).unwrap()).unwrap();
    messages.push(serde_json::json!({"role": "assistant", "content": [{"tool_call": {"tool_name": "ok", "arguments": {}, "id": "c3"}}]}));
    messages.push(serde_json::json!({"role": "tool", "content": [{"tool_call_result": {"result": "z",
        "origin": {"tool_name": "ok", "arguments": {}, "id": "c3"}, "error": false}}]}));
    let longer = dir.join("longer.json");
    std::fs::write(&longer, serde_json::to_vec(&messages).unwrap()).unwrap();
    let done = run(
        &[
            "prune",
            longer.to_str().unwrap(),
            "--target-tokens",
            "10",
            "--offload-to",
            store.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "-o",
            pruned.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(done.code, 3, "{}", done.stderr);
    assert!(done.stderr.contains("(message 2) under compacted_"), "{}", done.stderr);
    assert!(done.stderr.contains("File name too long"), "{}", done.stderr);
    let document: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let failures = document["store_failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0]["index"], 2);
    assert!(failures[0]["key"].as_str().unwrap().starts_with("compacted_t"));
    assert!(failures[0]["error"].as_str().unwrap().contains("File name too long"));
    let written: Vec<Value> = serde_json::from_slice(&std::fs::read(&pruned).unwrap()).unwrap();
    assert_eq!(result(&written[2])["result"], Value::String("x".repeat(3000)));
    assert_eq!(document["pruned"], serde_json::json!([3]));

    // simulate --offload-store: named, counted, exit 3.
    let done = run(
        &["simulate", &input, "--context-window", "100000", "--offload-store", store.to_str().unwrap()],
        None,
    );
    assert_eq!(done.code, 3, "{}", done.stderr);
    assert!(done.stderr.contains("File name too long"), "{}", done.stderr);
    assert!(
        String::from_utf8_lossy(&done.stdout).contains("offload failures     1"),
        "{}",
        String::from_utf8_lossy(&done.stdout)
    );
}

#[test]
fn colliding_keys_and_reruns_never_replace_a_stored_result() {
    // `read_file` with call id `x` and `read` with call id `file_x` in one step make the same
    // key; a second run of the same step into the same store makes it again.
    let dir = scratch("collide");
    let messages = serde_json::json!([
        {"role": "user", "content": [{"text": "go"}]},
        {"role": "assistant", "content": [
            {"tool_call": {"tool_name": "read_file", "arguments": {}, "id": "x"}},
            {"tool_call": {"tool_name": "read", "arguments": {}, "id": "file_x"}}]},
        {"role": "tool", "content": [{"tool_call_result": {"result": "first",
            "origin": {"tool_name": "read_file", "arguments": {}, "id": "x"}, "error": false}}]},
        {"role": "tool", "content": [{"tool_call_result": {"result": "second",
            "origin": {"tool_name": "read", "arguments": {}, "id": "file_x"}, "error": false}}]}
    ]);
    let input = dir.join("run.json");
    std::fs::write(&input, serde_json::to_vec(&messages).unwrap()).unwrap();
    let store = dir.join("st");
    for round in 0..2 {
        let done = run(
            &["offload", input.to_str().unwrap(), "--store", store.to_str().unwrap(), "--policy", "*=always"],
            None,
        );
        assert_eq!(done.code, 0, "{}", done.stderr);
        let written = done.json();
        for (index, text) in [(2, "first"), (3, "second")] {
            let file = written[index]["meta"]["tool_result_offloaded"][0].as_str().unwrap().to_owned();
            assert!(result(&written[index])["result"].as_str().unwrap().contains(&file));
            assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "round {round}: {file}");
        }
    }
    let mut files: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["1_read_file_x.txt", "1_read_file_x_2.txt", "1_read_file_x_3.txt", "1_read_file_x_4.txt"]
    );
}

#[test]
fn eight_processes_offloading_into_one_store_lose_nothing() {
    // Every process offloads the same step (same keys) of its own copy of the run, with its own
    // results, into one store, all at once.
    let dir = scratch("processes");
    let store = dir.join("shared");
    let mut children = Vec::new();
    for p in 0..8 {
        let mut messages = vec![serde_json::json!({"role": "user", "content": [{"text": "go"}]})];
        let calls: Vec<Value> = (0..25).map(|i| serde_json::json!({"tool_call": {"tool_name": "fetch", "arguments": {}, "id": format!("call_{i}")}})).collect();
        messages.push(serde_json::json!({"role": "assistant", "content": calls}));
        for i in 0..25 {
            messages.push(serde_json::json!({"role": "tool", "content": [{"tool_call_result": {
                "result": format!("process {p} result {i}"),
                "origin": {"tool_name": "fetch", "arguments": {}, "id": format!("call_{i}")}, "error": false}}]}));
        }
        let input = dir.join(format!("run{p}.json"));
        std::fs::write(&input, serde_json::to_vec(&messages).unwrap()).unwrap();
        let out = dir.join(format!("out{p}.json"));
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_compaction"))
            .args([
                "offload",
                input.to_str().unwrap(),
                "--store",
                store.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
                "-q",
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        children.push((p, out, child));
    }
    let mut files = std::collections::HashSet::new();
    for (p, out, child) in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let written: Vec<Value> = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        for (i, message) in written[2..].iter().enumerate() {
            let file = message["meta"]["tool_result_offloaded"][0].as_str().unwrap().to_owned();
            assert_eq!(std::fs::read_to_string(&file).unwrap(), format!("process {p} result {i}"));
            assert!(files.insert(file), "two pointers name one file");
        }
    }
    assert_eq!(files.len(), 200);
    assert_eq!(std::fs::read_dir(&store).unwrap().count(), 200, "nothing else left in the store");
}

#[test]
fn bad_policies_are_usage_errors() {
    let input = sample("haystack/agent-run.json");
    for bad in ["always", "*=sometimes", "read_file=over:lots", "a,,b=never", "=always"] {
        let done = run(&["offload", &input, "--store", "unused", "--policy", bad], None);
        assert_eq!(done.code, 2, "{bad}: {}", done.stderr);
        assert!(done.stderr.contains("--policy"), "{bad}: {}", done.stderr);
    }
    let done = run(&["offload", &input], None);
    assert_eq!(done.code, 2, "--store is required: {}", done.stderr);
}

#[test]
fn help_has_an_example() {
    let done = run(&["offload", "--help"], None);
    assert_eq!(done.code, 0);
    let text = String::from_utf8(done.stdout).unwrap();
    assert!(text.contains("Examples:") && text.contains("compaction offload "), "{text}");
}
