//! Converting a file to its own format gives back the same JSON.

use serde_json::Value;

use crate::{run, sample};

fn assert_round_trip(path: &str, extra: &[&str]) {
    let original = std::fs::read(path).unwrap();
    let mut args = vec!["convert", path];
    args.extend_from_slice(extra);
    let converted = run(&args, None);
    let expected = match serde_json::from_slice::<Value>(&original) {
        Ok(value) => value,
        Err(_) => Value::Array(
            std::str::from_utf8(&original)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
        ),
    };
    assert_eq!(converted.json(), expected, "{path} changed");
}

#[test]
fn openai() {
    assert_round_trip(&sample("openai/weather.json"), &[]);
    assert_round_trip(&sample("openai/weather.json"), &["--to", "openai"]);
}

#[test]
fn openai_tau_bench_keeps_every_conversation() {
    assert_round_trip(&sample("tau-bench/gpt-4o-airline-excerpt.json"), &["--conversation", "1"]);
}

#[test]
fn anthropic() {
    assert_round_trip(&sample("anthropic/search.json"), &[]);
}

#[test]
fn haystack() {
    assert_round_trip(&sample("haystack/read-file.json"), &[]);
}

#[test]
fn haystack_json_lines_stay_lines() {
    let lines = b"{\"role\": \"user\", \"meta\": {\"k\": 1}, \"name\": null, \"content\": [{\"text\": \"a\"}], \"x\": 2}\n\
                  {\"role\": \"assistant\", \"meta\": {}, \"name\": null, \"content\": [{\"text\": \"b\"}]}\n";
    let out = run(&["convert"], Some(lines));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let written: Vec<Value> =
        std::str::from_utf8(&out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let read: Vec<Value> =
        std::str::from_utf8(lines).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(written, read);
}

#[test]
fn anthropic_array_form() {
    let input = br#"[{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
                     {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]}]"#;
    let out = run(&["convert"], Some(input)).json();
    assert_eq!(out, serde_json::from_slice::<Value>(input).unwrap());
}
