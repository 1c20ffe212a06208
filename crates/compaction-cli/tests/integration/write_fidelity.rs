//! What the command writes, as a user checks it: a file written back is the input but for the
//! messages that changed (indented files, escapes, tau-bench's files of conversations), and an
//! output in another format reads back (tool-call ids made up where Haystack has none, or the
//! command refuses and writes nothing).

use std::path::Path;

use serde_json::{json, Value};

use crate::run;

/// A temporary directory of this test, empty.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("compaction-write-fidelity-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn haystack_call(name: &str, id: Value) -> Value {
    json!({"role": "assistant", "meta": {}, "name": null, "content": [
        {"text": "Looking."},
        {"tool_call": {"tool_name": name, "arguments": {"path": name}, "id": id, "extra": null}}]})
}

fn haystack_result(name: &str, id: Value, text: &str) -> Value {
    json!({"role": "tool", "meta": {}, "name": null, "content": [
        {"tool_call_result": {"result": text, "origin": {"tool_name": name, "arguments": {"path": name}, "id": id, "extra": null}, "error": false}}]})
}

fn haystack_user(text: &str) -> Value {
    json!({"role": "user", "meta": {}, "name": null, "content": [{"text": text}]})
}

/// Haystack calls and results with `"id": null`: converted to OpenAI or Anthropic, each call
/// and its result get one made-up id, said on stderr, and the output reads back.
#[test]
fn null_tool_call_ids_are_made_up_for_the_formats_that_need_them() {
    let input = Value::Array(vec![
        haystack_user("List."),
        haystack_call("ls", Value::Null),
        haystack_result("ls", Value::Null, "a.rs"),
        haystack_call("cat", Value::Null),
        haystack_call("ls", json!("call_compaction_1")),
        haystack_result("cat", Value::Null, "fn main() {}"),
        haystack_result("ls", json!("call_compaction_1"), "b.rs"),
        haystack_user("Thanks."),
    ])
    .to_string();
    let dir = scratch("ids");
    let path = write(&dir, "in.json", &input);
    for target in ["openai", "anthropic", "haystack"] {
        let output = dir.join(format!("out-{target}.json")).display().to_string();
        let out = run(&["convert", &path, "--to", target, "-o", &output], None);
        assert_eq!(out.code, 0, "{target}: {}", out.stderr);
        assert_eq!(out.stderr.contains("call_compaction_"), target != "haystack", "{target}: {}", out.stderr);
        let count = run(&["count", &output], None);
        assert_eq!(count.code, 0, "{target}: {}", count.stderr);
        let text = std::fs::read_to_string(&output).unwrap();
        if target != "haystack" {
            assert!(
                !text.contains("null,\"name\"")
                    && !text.contains("\"id\":null")
                    && !text.contains("\"tool_use_id\":null"),
                "{text}"
            );
            // Each made-up id names one call and its result; the input's own id is not reused.
            assert_eq!(text.matches("call_compaction_0").count(), 2, "{text}");
            assert_eq!(text.matches("call_compaction_2").count(), 2, "{text}");
            assert_eq!(text.matches("call_compaction_1\"").count(), 2, "{text}");
        }
        // Read back, every result follows its call: the conversation's messages as read.
        let back = run(&["convert", &output, "--to", "haystack"], None);
        assert_eq!(back.code, 0, "{target}: {}", back.stderr);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A result placed before its call (or with no call at all): OpenAI and Anthropic cannot hold
/// it, so converting fails, names the messages and writes nothing; Haystack takes it as it is.
#[test]
fn a_result_before_its_call_is_refused_without_writing() {
    let cases = [
        (
            "before",
            vec![
                haystack_user("List."),
                haystack_result("ls", Value::Null, "a.rs"),
                haystack_call("ls", Value::Null),
            ],
            "message 1 holds the result of tool call \"ls\" (no id), which comes after it, in message 2",
        ),
        (
            "before-with-id",
            vec![
                haystack_user("List."),
                haystack_result("ls", json!("c1"), "a.rs"),
                haystack_call("ls", json!("c1")),
            ],
            "message 1 holds the result of tool call \"ls\" (id \"c1\"), which comes after it, in message 2",
        ),
        (
            "orphan",
            vec![
                haystack_user("List."),
                haystack_result("ls", json!("c9"), "a.rs"),
                haystack_user("Thanks."),
            ],
            "which no message before it makes",
        ),
    ];
    let dir = scratch("refused");
    for (name, messages, said) in cases {
        let path = write(&dir, &format!("{name}.json"), &Value::Array(messages).to_string());
        for target in ["openai", "anthropic"] {
            let output = dir.join(format!("{name}-{target}.json"));
            let out = run(&["convert", &path, "--to", target, "-o", &output.display().to_string()], None);
            assert_ne!(out.code, 0, "{name} as {target} was written");
            assert!(out.stderr.contains(said), "{name} as {target}: {}", out.stderr);
            assert!(!output.exists(), "{name} as {target}: an output was left");
            let out = run(&["convert", &path, "--to", target], None);
            assert_ne!(out.code, 0);
            assert!(out.stdout.is_empty(), "{name} as {target}: {}", String::from_utf8_lossy(&out.stdout));
        }
        let out = run(&["convert", &path, "--to", "haystack"], None);
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
    }
    std::fs::remove_dir_all(dir).unwrap();
}
