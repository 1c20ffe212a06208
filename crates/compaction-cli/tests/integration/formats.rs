//! Each format is read into the right messages.

use serde_json::json;

use crate::{haystack, roles, run, sample};

#[test]
fn haystack_is_read_as_it_is() {
    let messages = haystack(&[&sample("haystack/read-file.json")]);
    assert_eq!(roles(&messages), "suata");
    assert_eq!(messages[3]["content"][0]["tool_call_result"]["origin"]["id"], "c1");
}

#[test]
fn openai_roles_calls_and_repeated_ids() {
    let messages = haystack(&[&sample("openai/weather.json")]);
    assert_eq!(roles(&messages), "suattata");
    // `developer` is a system message.
    assert_eq!(messages[0]["content"][0]["text"], "You are a concise assistant. Use tools when they help.");
    let result = |i: usize| &messages[i]["content"][0]["tool_call_result"];
    assert_eq!(result(3)["origin"]["arguments"], json!({"city": "Paris"}));
    // Arguments that are not valid JSON are kept as they were: Haystack writes them as a string.
    assert_eq!(result(4)["origin"]["arguments"], "{\"city\": \"Oslo\"");
    // `call_1` is used twice: the second result answers the nearest open call, the retry.
    assert_eq!(result(6)["origin"]["arguments"], json!({"city": "Oslo"}));
    assert_eq!(result(6)["result"], json!([{"text": "{\"temp_c\": 9, \"sky\": \"rain\"}"}]));
}

#[test]
fn openai_tools_are_counted() {
    let path = sample("openai/weather.json");
    let with_tools = run(&["count", &path], None).count();
    let messages = run(&["convert", &path, "--to", "openai"], None).json()["messages"].clone();
    let bare = serde_json::to_vec(&messages).unwrap();
    let without = run(&["count", "--format", "openai"], Some(&bare)).count();
    assert!(with_tools > without, "{with_tools} <= {without}");
}

#[test]
fn anthropic_results_thinking_and_system() {
    let messages = haystack(&[&sample("anthropic/search.json")]);
    // system, user, assistant, two tool results of one user message, then its text.
    assert_eq!(roles(&messages), "suattua");
    assert_eq!(messages[0]["content"][0]["text"], "You search a code base and answer briefly.");
    let assistant = &messages[2]["content"];
    assert_eq!(assistant[0]["reasoning"]["extra"]["signature"], "c2lnbmF0dXJl");
    assert_eq!(assistant[2]["tool_call"]["id"], "toolu_01");
    let failed = &messages[4]["content"][0]["tool_call_result"];
    assert_eq!(failed["error"], true);
    assert_eq!(failed["origin"]["tool_name"], "read_file");
    assert_eq!(failed["result"], json!([{"text": "No such file: config/missing.toml"}]));
    assert_eq!(messages[5]["content"][0]["text"], "Also, is it configurable?");
}

#[test]
fn anthropic_tool_messages_are_written_as_one_user_message() {
    let haystack = run(&["convert", &sample("anthropic/search.json"), "--to", "haystack"], None);
    let back = run(&["convert", "-", "--to", "anthropic"], Some(&haystack.stdout)).json();
    let user = &back["messages"][2];
    assert_eq!(user["role"], "user");
    let kinds: Vec<&str> =
        user["content"].as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tool_result", "tool_result", "text"]);
    assert_eq!(user["content"][1]["is_error"], true);
    assert_eq!(back["system"], "You search a code base and answer briefly.");
}

#[test]
fn claude_code_is_written_back_as_the_session_it_was() {
    let path = sample("claude-code/fa812bfe-excerpt.jsonl");
    let out = run(&["convert", &path], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout == std::fs::read(&path).unwrap(), "convert changed the session");
}

#[test]
fn claude_code_turns_are_merged_and_written_as_anthropic() {
    let path = sample("claude-code/fa812bfe-excerpt.jsonl");
    let messages = haystack(&[&path]);
    // The first assistant turn is logged as four events (text, thinking, two tool uses).
    assert_eq!(roles(&messages), "uattat");
    let calls =
        messages[1]["content"].as_array().unwrap().iter().filter(|p| p.get("tool_call").is_some()).count();
    assert_eq!(calls, 2);
    let anthropic = run(&["convert", &path, "--to", "anthropic"], None).json();
    let turns = anthropic["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 5);
    let results = turns[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["type"], "tool_result");
}

#[test]
fn swe_agent_history_is_read() {
    let messages = haystack(&[&sample("swe-agent/pandas-excerpt.traj")]);
    assert_eq!(roles(&messages), "suatatata");
    let result = &messages[3]["content"][0]["tool_call_result"];
    assert_eq!(result["origin"]["tool_name"], "bash");
}

#[test]
fn openhands_instances_are_conversations() {
    let path = sample("openhands/multi-swe-bench-excerpt.jsonl");
    let first = haystack(&[&path]);
    let second = haystack(&[&path, "--conversation", "1"]);
    assert_eq!(first.len(), 10);
    assert_eq!(roles(&first[..3]), "sua");
    assert_ne!(first[1], second[1]);
    let result = &first[3]["content"][0]["tool_call_result"];
    assert_eq!(result["origin"]["tool_name"], "execute_bash");
    assert_eq!(result["origin"]["id"], "toolu_01");
}

#[test]
fn tau_bench_conversations_are_chosen() {
    let path = sample("tau-bench/gpt-4o-airline-excerpt.json");
    let first = run(&["count", &path], None);
    assert!(first.stderr.contains("2 conversations"), "{}", first.stderr);
    let second = run(&["count", &path, "--conversation", "1"], None);
    assert!(!second.stderr.contains("conversations;"), "{}", second.stderr);
    assert_ne!(first.count(), second.count());
}

#[test]
fn format_flag_overrides_detection() {
    // Plain string messages read as OpenAI by default; as Haystack they come back in its shape.
    let input = br#"[{"role": "user", "content": "hi"}]"#;
    let openai = run(&["convert"], Some(input)).json();
    assert_eq!(openai, json!([{"role": "user", "content": "hi"}]));
    let haystack = run(&["convert", "--format", "haystack"], Some(input)).json();
    assert_eq!(haystack, json!([{"role": "user", "meta": {}, "name": null, "content": [{"text": "hi"}]}]));
}

#[test]
fn convert_names_what_the_target_cannot_hold() {
    let path = sample("openai/weather.json");
    let out = run(&["convert", &path, "--to", "anthropic"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("not a JSON object left out") && out.stderr.contains("message 2"),
        "{}",
        out.stderr
    );
    let out = run(&["convert", &path, "--to", "haystack"], None);
    assert!(!out.stderr.contains("left out"), "{}", out.stderr);
    let back = run(&["convert", "-", "--to", "openai"], Some(&out.stdout)).json();
    assert_eq!(back[2]["tool_calls"][1]["function"]["arguments"], "{\"city\": \"Oslo\"");
}

#[test]
fn a_tool_message_with_calls_keeps_them() {
    let input = br#"[{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "a", "content": "x", "tool_calls": [{"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}]"#;
    let messages = match run(&["convert", "--to", "haystack"], Some(input)).json() {
        serde_json::Value::Array(messages) => messages,
        other => panic!("{other}"),
    };
    assert_eq!(messages[1]["content"][1]["tool_call"]["id"], "b");
    let out = run(&["convert", "--to", "anthropic"], Some(input));
    assert!(out.stderr.is_empty() || !out.stderr.contains("tool calls"), "{}", out.stderr);
    let haystack = serde_json::to_vec(&messages).unwrap();
    let out = run(&["convert", "-", "--to", "openai"], Some(&haystack));
    assert!(out.stderr.contains("tool calls on a tool message left out: message 1"), "{}", out.stderr);
}
