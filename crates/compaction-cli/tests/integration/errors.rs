//! Bad input exits with 1 and one line naming the file and the place; bad usage exits with 2.

use crate::{run, Run};

fn assert_input_error(run: &Run, needles: &[&str]) {
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(run.stdout.is_empty(), "something on stdout");
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "not one line: {}", run.stderr);
    for needle in needles {
        assert!(run.stderr.contains(needle), "{needle:?} not in {}", run.stderr);
    }
}

fn file_with(name: &str, bytes: &[u8]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let path = path.display().to_string();
    (dir, path)
}

#[test]
fn truncated_json_names_the_file_and_position() {
    let (_dir, path) = file_with("cut.json", br#"[{"role": "user", "content": "abc"#);
    for command in ["count", "convert"] {
        assert_input_error(&run(&[command, &path], None), &["cut.json", "line 1 column"]);
    }
}

#[test]
fn bad_json_line_names_the_line() {
    let (_dir, path) =
        file_with("s.jsonl", b"{\"role\": \"user\", \"content\": \"a\"}\n\n{\"role\": \"user\", \"con\n");
    assert_input_error(&run(&["count", &path], None), &["s.jsonl", "line 3"]);
}

#[test]
fn invalid_utf8_is_an_error() {
    assert_input_error(
        &run(&["count"], Some(b"[{\"role\": \"user\", \"content\": \"\xff\"}]")),
        &["<stdin>"],
    );
}

#[test]
fn empty_and_non_json_input() {
    assert_input_error(&run(&["count"], Some(b"  \n")), &["<stdin>", "empty"]);
    assert_input_error(&run(&["count"], Some(b"hello")), &["<stdin>", "line 1"]);
    assert_input_error(&run(&["count"], Some(b"{\"model\": \"x\"}")), &["<stdin>", "model"]);
}

#[test]
fn result_without_its_call_is_named() {
    let openai =
        br#"[{"role": "user", "content": "a"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}]"#;
    assert_input_error(&run(&["count"], Some(openai)), &["message 1", "\"nope\""]);
    let anthropic = br#"{"system": "s", "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]}"#;
    assert_input_error(&run(&["count"], Some(anthropic)), &["message 0", "\"t9\"", "content[0]"]);
    let claude = b"{\"type\": \"user\", \"message\": {\"role\": \"user\", \"content\": \"hi\"}}\n\
                   {\"type\": \"progress\", \"data\": {}}\n\
                   {\"type\": \"user\", \"message\": {\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t1\", \"content\": \"x\"}]}}\n";
    assert_input_error(&run(&["count"], Some(claude)), &["line 3", "\"t1\""]);
}

#[test]
fn deep_nesting_does_not_crash() {
    let mut deep = b"[".repeat(100_000);
    deep.extend_from_slice(b"1");
    assert_input_error(&run(&["count"], Some(&deep)), &["<stdin>", "recursion limit"]);
    // Arguments nested past the parser's limit are kept as text, not rejected.
    let arguments = "[".repeat(100_000);
    let message = serde_json::json!([{"role": "assistant", "content": null, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": arguments}}]}]);
    let bytes = serde_json::to_vec(&message).unwrap();
    let out = run(&["convert"], Some(&bytes));
    assert_eq!(out.json(), message);
}

#[test]
fn a_very_long_line_is_read() {
    let text = "x".repeat(20_000_000);
    let bytes = serde_json::to_vec(&serde_json::json!({"role": "user", "content": text})).unwrap();
    assert!(run(&["count"], Some(&bytes)).count() > 1_000_000);
}

#[test]
fn a_message_of_the_wrong_shape_is_named() {
    let input = br#"{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": 5}]}"#;
    assert_input_error(&run(&["count"], Some(input)), &["message 1", "content"]);
    let haystack = br#"[{"role": "user", "meta": {}, "content": [{"bogus": 1}]}]"#;
    assert_input_error(&run(&["count"], Some(haystack)), &["message 0", "content[0]"]);
}

#[test]
fn bad_usage_exits_with_2() {
    for args in [
        &["count", "--no-such-flag"][..],
        &["count", "--format", "xml"],
        &["convert", "--to", "yaml"],
        &["convert", "--conversation", "minus"],
    ] {
        let out = run(args, Some(b"[]"));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty());
    }
    let out = run(&["count", "--conversation", "5"], Some(br#"[{"role": "user", "content": "a"}]"#));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("out of range"));
}

#[test]
fn missing_file_is_bad_input() {
    assert_input_error(&run(&["count", "/no/such/file.json"], None), &["/no/such/file.json"]);
}
