//! What the command writes, as a user checks it: a file written back is the input but for the
//! messages that changed (indented files, escapes, tau-bench's files of conversations), and an
//! output in another format reads back (tool-call ids made up where Haystack has none, or the
//! command refuses and writes nothing).

use std::path::Path;

use serde_json::{json, Value};

use crate::{corpus, run};

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

/// `value` as Python's `json.dumps(value, indent=2)` writes it: characters beyond ASCII escaped.
fn python_indented(value: &Value) -> String {
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"  ");
    let mut out = Vec::new();
    serde::Serialize::serialize(value, &mut serde_json::Serializer::with_formatter(&mut out, formatter))
        .unwrap();
    let mut text = String::new();
    for c in String::from_utf8(out).unwrap().chars() {
        if c.is_ascii() {
            text.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                text.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    text + "\n"
}

fn listing() -> String {
    (0..150).map(|i| format!("entrée {i} — \"fichier\"\n")).collect()
}

const PLACEHOLDER: &str = "[Tool result removed to free up context. Call `ls` again if you need it.]";

/// A 2-space-indented Anthropic file with escapes: `prune` changes the pruned result's text and
/// nothing else, every other message byte for byte.
#[test]
fn an_indented_anthropic_file_is_pruned_in_place() {
    let file = json!({
        "model": "claude-sonnet-4-5",
        "system": "Tu listes des fichiers — vite.",
        "messages": [
            {"role": "user", "content": "Liste les fichiers."},
            {"role": "assistant", "content": [{"type": "text", "text": "Je regarde."},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": listing(), "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "ls", "input": {"path": "src"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "main.rs"}]},
            {"role": "assistant", "content": "Voilà, café compris."}
        ],
        "max_tokens": 1024
    });
    let input = python_indented(&file);
    let dir = scratch("anthropic");
    let path = write(&dir, "in.json", &input);
    let out = run(&["prune", &path, "--target-tokens", "100", "--min-tokens", "0"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let escaped_listing = python_indented(&Value::String(listing()));
    let expected = input.replace(escaped_listing.trim_end(), &Value::String(PLACEHOLDER.into()).to_string());
    assert_ne!(expected, input);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
    // Read back, the same conversation but for the pruned text.
    let count = run(&["count", "--counter", "approximate", "-"], Some(expected.as_bytes()));
    assert_eq!(count.code, 0, "{}", count.stderr);
    std::fs::remove_dir_all(dir).unwrap();
}

/// An OpenAI request indented with escapes: untouched messages keep their `\u` escapes.
#[test]
fn an_indented_openai_request_keeps_its_escapes() {
    let file = json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Réponds en français."},
            {"role": "user", "content": "Liste — vite 🎉"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": listing()},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \"src\"}"}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "main.rs"},
            {"role": "assistant", "content": "Voilà."}
        ]
    });
    let input = python_indented(&file);
    let escaped_listing = python_indented(&Value::String(listing()));
    let expected = input.replace(escaped_listing.trim_end(), &Value::String(PLACEHOLDER.into()).to_string());
    assert_ne!(expected, input);
    for extra in [&[][..], &["--format", "openai"], &["--to", "openai"]] {
        let mut args = vec!["prune", "--target-tokens", "100", "--min-tokens", "0"];
        args.extend_from_slice(extra);
        let out = run(&args, Some(input.as_bytes()));
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected, "{extra:?}");
    }
    // A sliding window drops messages: those it keeps, and the envelope, keep their bytes.
    let out =
        run(&["prune", "--strategy", "sliding-window", "--target-tokens", "150"], Some(input.as_bytes()));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_ne!(text, input);
    let head = &input[..input.find("{\n      \"role\": \"system\"").unwrap()];
    let last = &input[input.rfind("{\n      \"role\": \"assistant\"").unwrap()..];
    assert!(text.starts_with(head) && text.ends_with(last), "{text}");
    assert!(text.is_ascii(), "{text}");
    let count = run(&["count", "-"], Some(text.as_bytes()));
    assert_eq!(count.code, 0, "{}", count.stderr);
}

/// The real tau-bench file: pruning one conversation (the fourth, which has tool results)
/// changes bytes inside that trajectory's messages only; every other trajectory is its input
/// bytes.
#[test]
fn a_tau_bench_file_changes_only_the_chosen_trajectory() {
    let Some(corpus) = corpus() else { return };
    let path = corpus.join("tau-bench/gpt-4o-airline.json");
    if !path.exists() {
        eprintln!("skipped: no {}", path.display());
        return;
    }
    let input = std::fs::read_to_string(&path).unwrap();
    let out = run(
        &[
            "prune",
            &path.display().to_string(),
            "--conversation",
            "3",
            "--target-tokens",
            "500",
            "--min-tokens",
            "0",
        ],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let output = String::from_utf8(out.stdout).unwrap();
    assert_ne!(output, input, "nothing was pruned: {}", out.stderr);
    let (before, after) = (trajectories(&input), trajectories(&output));
    assert_eq!(before.len(), after.len());
    for (k, (a, b)) in before.iter().zip(&after).enumerate() {
        if k != 3 {
            assert_eq!(a, b, "trajectory {k} changed");
        }
    }
    // Outside its `traj`, trajectory 3 is as it was too.
    let (a, b) = (&before[3], &after[3]);
    let (ta, tb) = (a.find("\"traj\": [").unwrap(), b.find("\"traj\": [").unwrap());
    assert_eq!(a[..ta], b[..tb]);
    let count = run(&["count", "--conversation", "3", "-"], Some(output.as_bytes()));
    assert_eq!(count.code, 0, "{}", count.stderr);
}

/// The top-level elements of a JSON array, as their text.
fn trajectories(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut at = text.find('[').unwrap() + 1;
    let mut out = Vec::new();
    loop {
        while bytes[at].is_ascii_whitespace() || bytes[at] == b',' {
            at += 1;
        }
        if bytes[at] == b']' {
            return out;
        }
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        values.next().unwrap().unwrap();
        out.push(text[at..at + values.byte_offset()].to_owned());
        at += values.byte_offset();
    }
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

/// Tool calls and results in roles a target has no place for (`tests/data/misplaced/`, issue 31,
/// item 3): as every target, `convert` and `prune` either write an output `count` reads, or
/// refuse, name the message, and write nothing. Chat Completions holds a call only on an
/// assistant message and a result only as a tool message, so OpenAI refuses each of them.
#[test]
fn misplaced_calls_and_results_are_written_readable_or_refused() {
    let cases = [
        (
            "result-on-assistant",
            "message 1 is an assistant message holding the result of tool call \"read_file\"",
        ),
        ("call-on-tool", "message 0 is a tool message without a tool result"),
        ("call-on-user", "message 0 is a user message holding tool call \"read_file\""),
    ];
    let data = crate::repo().join("crates/compaction-cli/tests/data/misplaced");
    let dir = scratch("misplaced");
    for (name, refused_as_openai) in cases {
        let path = data.join(format!("{name}.json")).display().to_string();
        for target in ["haystack", "openai", "anthropic"] {
            let output = dir.join(format!("{name}-{target}.json"));
            let output_arg = output.display().to_string();
            let commands: [&[&str]; 2] = [
                &["convert", &path, "--to", target, "-o", &output_arg],
                &["prune", &path, "--target-tokens", "1", "--to", target, "-o", &output_arg],
            ];
            for args in commands {
                let out = run(args, None);
                let what = format!("{} {name} as {target}", args[0]);
                if target == "openai" {
                    assert_eq!(out.code, 1, "{what} was written: {}", out.stderr);
                    assert!(out.stderr.contains(refused_as_openai), "{what}: {}", out.stderr);
                }
                if out.code == 0 {
                    let count = run(&["count", &output_arg], None);
                    assert_eq!(count.code, 0, "{what} reads back as an error: {}", count.stderr);
                    std::fs::remove_file(&output).unwrap();
                } else {
                    assert_eq!(out.code, 1, "{what}: {}", out.stderr);
                    assert!(!output.exists(), "{what}: an output was left");
                }
            }
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}
