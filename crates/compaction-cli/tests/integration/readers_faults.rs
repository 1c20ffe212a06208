//! Faults the readers once had, run as the command: a panic on a file cut short, a byte-order
//! mark that broke write-back, a Codex shell call whose input could not be cleared, and a
//! report whose `tokens_after` was not what `count` says of the output.

use serde_json::{json, Value};

use crate::run;

fn file_with(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

fn count(path: &str) -> u64 {
    run(&["count", "-q", path], None).count()
}

/// A Codex rollout of `items` (Responses items), one `response_item` line each.
fn rollout(items: &[Value]) -> Vec<u8> {
    items
        .iter()
        .map(|item| format!("{}\n", json!({"timestamp": "t", "type": "response_item", "payload": item})))
        .collect::<String>()
        .into_bytes()
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

fn output(call: &str, text: &str) -> Value {
    json!({"type": "function_call_output", "call_id": call, "output": text})
}

/// Three steps whose calls are of the kinds `--clear-tool-inputs` clears, then a last one.
fn steps(with_shell: bool) -> Vec<Value> {
    let mut items = vec![
        user("Fix it."),
        json!({"type": "custom_tool_call", "status": "completed", "call_id": "c1", "name": "apply_patch",
               "input": "*** Begin Patch\n*** Update File: a.rs\n@@\n-x\n+y\n*** End Patch"}),
        json!({"type": "custom_tool_call_output", "call_id": "c1", "output": "Success. ".repeat(200)}),
        json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "c2"}),
        output("c2", &"a.rs ".repeat(300)),
    ];
    if with_shell {
        items.push(json!({"type": "local_shell_call", "call_id": "c3", "status": "completed",
            "action": {"type": "exec", "command": ["bash", "-lc", "cat a.rs"], "timeout_ms": 10000,
                       "working_directory": null, "env": null, "user": null}}));
        items.push(output("c3", &"fn main() {} ".repeat(300)));
    }
    items.push(json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "c4"}));
    items.push(output("c4", "done"));
    items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]}));
    items
}

#[test]
fn a_request_cut_inside_a_message_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let whole = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
    for end in 0..whole.len() {
        let path = file_with(&dir, "p.json", &whole[..end]);
        let run = run(&["count", &path], None);
        assert_eq!(run.code, 1, "{:?}: {}", String::from_utf8_lossy(&whole[..end]), run.stderr);
        assert!(run.stderr.contains("p.json"), "{}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
}

#[test]
fn a_responses_item_list_with_a_byte_order_mark_is_pruned_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut items = vec![user("Weather?")];
    for call in ["c0", "c1", "c2"] {
        items.push(json!({"type": "function_call", "call_id": call, "name": "w", "arguments": "{}"}));
        items.push(output(call, &"sunny ".repeat(300)));
    }
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(serde_json::to_vec(&items).unwrap());
    let input = file_with(&dir, "items.json", &bytes);
    let out = dir.path().join("out.json").display().to_string();
    let report = dir.path().join("r.json").display().to_string();
    let run = run(&["prune", "-q", &input, "--target-tokens", "100", "-o", &out, "--report", &report], None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = std::fs::read(&out).unwrap();
    assert!(written.starts_with(b"\xEF\xBB\xBF"), "the mark is kept");
    let value: Value = serde_json::from_slice(&written[3..]).unwrap();
    assert!(value[2]["output"].as_str().unwrap().contains("removed"), "{value}");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["tokens_after"].as_u64(), Some(count(&out)));
}

#[test]
fn a_codex_shell_call_has_its_input_cleared_as_codex_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = file_with(&dir, "rollout.jsonl", &rollout(&steps(true)));
    let out = dir.path().join("out.jsonl").display().to_string();
    let report = dir.path().join("r.json").display().to_string();
    let args = [
        "prune",
        "-q",
        &input,
        "--target-tokens",
        "100",
        "--clear-tool-inputs",
        "-o",
        &out,
        "--report",
        &report,
    ];
    let run = run(&args, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = std::fs::read_to_string(&out).unwrap();
    let shell: Value = written
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["payload"]["type"] == "local_shell_call")
        .unwrap();
    // An `exec` of no command: Codex's `LocalShellAction` needs its tag and `command`.
    assert_eq!(shell["payload"]["action"], json!({"type": "exec", "command": []}));
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["tokens_after"].as_u64(), Some(count(&out)));
}

#[test]
fn tokens_after_is_what_count_says_of_a_rollout_with_cleared_custom_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let input = file_with(&dir, "rollout.jsonl", &rollout(&steps(false)));
    let out = dir.path().join("out.jsonl").display().to_string();
    let report = dir.path().join("r.json").display().to_string();
    let args = [
        "prune",
        "-q",
        &input,
        "--target-tokens",
        "100",
        "--clear-tool-inputs",
        "-o",
        &out,
        "--report",
        &report,
    ];
    let run = run(&args, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains(r#""name":"apply_patch","input":"{}""#), "{written}");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["tokens_after"].as_u64(), Some(count(&out)));
    // And again on what was written: nothing more to clear, the same count.
    let again = dir.path().join("again.jsonl").display().to_string();
    let run = crate::run(
        &["prune", "-q", &out, "--target-tokens", "100", "--clear-tool-inputs", "-o", &again],
        None,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(count(&again), count(&out));
}
