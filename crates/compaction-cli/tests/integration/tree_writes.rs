//! The bytes the JSON-tree path writes back (OpenAI and Anthropic files, JSON Lines): the file
//! as it was, compact, with only what the command changed changed.
//!
//! The inputs are compact, so every part the command leaves alone comes out as the same bytes,
//! and the expected output is the input with the pruned result's text replaced.

use crate::run;

const PLACEHOLDER: &str = "[Tool result removed to free up context. Call `ls` again if you need it.]";

/// A tool result long enough to be worth pruning, as JSON string text: with escapes and
/// characters beyond ASCII.
fn listing() -> String {
    (0..120).map(|i| format!(r#"line {i} of a \"long\" listing, café\n"#)).collect::<Vec<_>>().join(" ")
}

/// `prune` with a target only the long result's removal reaches.
fn pruned(input: &str, extra: &[&str]) -> String {
    let mut args = vec!["prune", "--target-tokens", "100", "--min-tokens", "0"];
    args.extend_from_slice(extra);
    let out = run(&args, Some(input.as_bytes()));
    assert_eq!(out.code, 0, "{}", out.stderr);
    String::from_utf8(out.stdout).unwrap()
}

fn converted(input: &str, extra: &[&str]) -> String {
    let mut args = vec!["convert"];
    args.extend_from_slice(extra);
    let out = run(&args, Some(input.as_bytes()));
    assert_eq!(out.code, 0, "{}", out.stderr);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn an_anthropic_envelope_keeps_its_keys_system_and_unknown_fields() {
    let input = format!(
        concat!(
            r#"{{"model":"claude","system":[{{"type":"text","text":"You list files.","cache_control":{{"type":"ephemeral"}}}}],"#,
            r#""messages":[{{"role":"user","content":"List the files.","id":"u1"}},"#,
            r#"{{"role":"assistant","content":[{{"type":"text","text":"Listing."}},{{"type":"tool_use","id":"t1","name":"ls","input":{{"path":"."}}}}]}},"#,
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"{}","cache_control":{{"type":"ephemeral"}}}},{{"type":"text","text":"And now?"}}]}},"#,
            r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"t2","name":"ls","input":{{"path":"src"}}}}]}},"#,
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t2","content":"main.rs"}}]}}],"max_tokens":1024}}"#,
            "\n"
        ),
        listing()
    );
    let expected = input.replace(&listing(), PLACEHOLDER);
    assert_ne!(expected, input);
    assert_eq!(pruned(&input, &[]), expected);
    assert_eq!(converted(&input, &[]), input);
    assert_eq!(converted(&input, &["--to", "anthropic"]), input);
}

#[test]
fn openai_json_lines_come_back_line_for_line() {
    let input = format!(
        concat!(
            r#"{{"role":"system","content":"You list files."}}"#,
            "\n",
            r#"{{"role":"user","content":"List the files.","x":1}}"#,
            "\n",
            r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"c1","type":"function","function":{{"name":"ls","arguments":"{{\"path\": \".\"}}"}}}}],"refusal":null}}"#,
            "\n",
            r#"{{"role":"tool","tool_call_id":"c1","content":"{}","x":2}}"#,
            "\n",
            r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"c2","type":"function","function":{{"name":"ls","arguments":"{{\"path\":\"src\"}}"}}}}]}}"#,
            "\n",
            r#"{{"role":"tool","tool_call_id":"c2","content":"main.rs"}}"#,
            "\n"
        ),
        listing()
    );
    let expected = input.replace(&listing(), PLACEHOLDER);
    assert_ne!(expected, input);
    assert_eq!(pruned(&input, &[]), expected);
    assert_eq!(converted(&input, &["--to", "openai"]), input);
}

#[test]
fn a_json_lines_file_of_conversations_changes_only_the_one_chosen() {
    let input = format!(
        concat!(
            r#"{{"task_id":0,"traj":[{{"role":"user","content":"a"}}],"reward":1}}"#,
            "\n",
            r#"{{"task_id":1,"traj":[{{"role":"user","content":"List."}},"#,
            r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"c1","type":"function","function":{{"name":"ls","arguments":"{{}}"}}}}]}},"#,
            r#"{{"role":"tool","tool_call_id":"c1","content":"{}"}},"#,
            r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"c2","type":"function","function":{{"name":"ls","arguments":"{{}}"}}}}]}},"#,
            r#"{{"role":"tool","tool_call_id":"c2","content":"x"}}],"reward":0.5}}"#,
            "\n"
        ),
        listing()
    );
    let expected = input.replace(&listing(), PLACEHOLDER);
    assert_ne!(expected, input);
    assert_eq!(pruned(&input, &["--conversation", "1"]), expected);
    assert_eq!(converted(&input, &["--conversation", "1", "--to", "openai"]), input);
}

#[test]
fn an_anthropic_system_is_set_where_insert_puts_it_and_removed_when_null() {
    // A system message among the messages moves to the envelope: to the end of an envelope
    // without `system`, in place of one that has it. The rest is the input's bytes, which end
    // without a line break here.
    let tools = r#""tools":[{"name":"x","input_schema":{}}]"#;
    let input = format!(
        r#"{{"model":"m","messages":[{{"role":"system","content":"Be brief."}},{{"role":"user","content":"hi"}},{{"role":"assistant","content":"hello"}}],{tools}}}"#
    );
    assert_eq!(
        converted(&input, &[]),
        r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}],"tools":[{"name":"x","input_schema":{}}],"system":"Be brief."}"#
    );
    let input = r#"{"model":"m","system":"old","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}"#;
    assert_eq!(
        converted(input, &[]),
        r#"{"model":"m","system":[{"type":"text","text":"old"},{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}"#
    );
    let input = r#"{"system":null,"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}"#;
    assert_eq!(
        converted(input, &["--format", "anthropic"]),
        r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}"#
    );
}

#[test]
fn an_anthropic_array_without_system_keeps_its_last_message_as_it_was() {
    // Without a `system`, the last message is a message like any other: its unknown fields
    // come back, and a pruned result is laid over its original.
    let input = format!(
        concat!(
            r#"[{{"role":"user","content":"List the files."}},"#,
            r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"t1","name":"ls","input":{{"path":"."}}}}]}},"#,
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"{}"}}]}},"#,
            r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"t2","name":"ls","input":{{"path":"src"}}}}]}},"#,
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t2","content":"main.rs"}}],"extra":2}},"#,
            r#"{{"role":"assistant","content":[{{"type":"text","text":"Done."}}],"extra":3}}]"#,
            "\n"
        ),
        listing()
    );
    assert_eq!(converted(&input, &[]), input);
    let expected = input.replace(&listing(), PLACEHOLDER);
    assert_eq!(pruned(&input, &[]), expected);
}

/// An Anthropic-style list holding a `{"role": "system"}` message, as some logs do.
fn with_inline_system() -> Vec<String> {
    vec![
        r#"{"role":"system","content":"You list files."}"#.to_owned(),
        r#"{"role":"user","content":"List the files."}"#.to_owned(),
        r#"{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{"path":"."}}]}"#.to_owned(),
        format!(
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"{}","cache_control":{{"type":"ephemeral"}}}},{{"type":"text","text":"more"}}],"x":1}}"#,
            listing()
        ),
        r#"{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"ls","input":{"path":"src"}}]}"#.to_owned(),
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"main.rs"}]}"#.to_owned(),
    ]
}

#[test]
fn a_system_message_in_an_anthropic_list_stays_in_place() {
    let input = format!("[{}]\n", with_inline_system().join(","));
    assert_eq!(converted(&input, &["--format", "anthropic"]), input);
    let expected = input.replace(&listing(), PLACEHOLDER);
    assert_ne!(expected, input);
    assert_eq!(pruned(&input, &["--format", "anthropic"]), expected);
}

#[test]
fn a_system_message_in_an_envelope_joins_its_system_and_the_rest_is_kept() {
    let messages = with_inline_system();
    let input = format!(r#"{{"system":"Be brief.","messages":[{}]}}"#, messages.join(",")) + "\n";
    let output = pruned(&input, &[]);
    let written: serde_json::Value = serde_json::from_str(&output).unwrap();
    let list = written["messages"].as_array().unwrap();
    // The inline system message went to `system`; every other message is as it was, the
    // pruned result laid over its original (its cache_control, text block and `x` kept).
    assert_eq!(list.len(), messages.len() - 1);
    let system = written["system"].to_string();
    assert!(system.contains("Be brief.") && system.contains("You list files."), "{system}");
    let rest = format!("[{}]", messages[1..].join(",")).replace(&listing(), PLACEHOLDER);
    assert_eq!(written["messages"], serde_json::from_str::<serde_json::Value>(&rest).unwrap());
}
