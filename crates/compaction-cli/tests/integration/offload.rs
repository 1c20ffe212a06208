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
    assert!(!store.exists(), "nothing was written");
}

#[test]
fn a_failed_write_keeps_the_result_and_is_reported() {
    let dir = scratch("failure");
    let input = sample("haystack/agent-run.json");
    // A store root that is a file cannot hold files.
    let not_a_dir = dir.join("file");
    std::fs::write(&not_a_dir, "").unwrap();
    let done = run(&["offload", &input, "--store", not_a_dir.to_str().unwrap()], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.stderr.contains("1 failed and stayed in context: run_tests (message 37)"),
        "{}",
        done.stderr
    );
    assert_eq!(done.stdout, std::fs::read(&input).unwrap());
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
