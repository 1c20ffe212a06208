//! Conformance with the reference: the request conversions against fixtures that Haystack 3.4.1
//! wrote (`cargo xtask fixtures`, script `xtask/reference/generate_llm.py`): each message as
//! `_convert_chat_message_to_responses_api_format` and `to_openai_dict_format` convert it, and
//! the whole bodies its `OpenAITokenCounter` and `OpenAIChatGenerator` sent. Where we deviate on
//! purpose the fixture says so and holds what we expect instead.

use std::path::Path;

use compaction_llm::{to_chat_completions_messages, to_responses_input, ClientSettings, OpenAITokenCounter};
use compaction_model::{messages_from_value, Message, ToolSpec};
use compaction_testkit::{fixture_files, python_equal};
use serde_json::Value;

fn load(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn messages(fixture: &Value) -> Vec<Message> {
    messages_from_value(fixture["messages"].clone()).unwrap()
}

/// Checks each message's conversion against the fixture's entries; `Ok` of each message alone.
fn check_entries(
    name: &str,
    messages: &[Message],
    entries: &[Value],
    convert: fn(&[Message]) -> Result<Vec<Value>, compaction_llm::Error>,
    each_is_list: bool,
) -> usize {
    assert_eq!(messages.len(), entries.len(), "{name}");
    let mut deviations = 0;
    for (index, (message, entry)) in messages.iter().zip(entries).enumerate() {
        let ours = convert(std::slice::from_ref(message));
        deviations += usize::from(entry.get("deviation").is_some());
        match entry.get("expected") {
            None | Some(Value::Null) => {
                assert!(ours.is_err(), "{name}, message {index}: expected an error ({entry}), got {ours:?}");
            }
            Some(expected) => {
                let ours = ours.unwrap_or_else(|e| panic!("{name}, message {index}: {e}"));
                let ours = if each_is_list { Value::Array(ours) } else { ours.into_iter().next().unwrap() };
                assert!(
                    python_equal(&ours, expected),
                    "{name}, message {index}:\n ours:     {ours}\n expected: {expected}"
                );
            }
        }
    }
    deviations
}

#[test]
fn conformance_responses_input_items() {
    let files = fixture_files(env!("CARGO_MANIFEST_DIR"), "responses");
    assert!(files.len() > 30, "the responses fixtures are missing");
    let counter = OpenAITokenCounter::new(
        "gpt-test",
        ClientSettings::default().with_api_key("unused").with_base_url("http://127.0.0.1:9/v1"),
    )
    .unwrap();
    let (mut requests, mut deviations) = (0, 0);
    for (_, path) in files {
        let fixture = load(&path);
        let name = fixture["name"].as_str().unwrap().to_owned();
        let messages = messages(&fixture);
        let tools: Vec<ToolSpec> = serde_json::from_value(fixture["tools"].clone()).unwrap();
        let entries = fixture["items"].as_array().unwrap();
        deviations += check_entries(&name, &messages, entries, to_responses_input, true);
        let ours = counter.request_body(&messages, &tools);
        match &fixture["request"] {
            Value::Null if entries.iter().any(|e| e.get("expected").is_none_or(Value::is_null)) => {
                assert!(ours.is_err(), "{name}: the reference could not send this conversation")
            }
            Value::Null => assert!(messages.is_empty() && tools.is_empty(), "{name}"),
            expected => {
                requests += 1;
                let ours = ours.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(python_equal(&ours, expected), "{name}:\n ours:     {ours}\n expected: {expected}");
            }
        }
    }
    assert!(requests > 20 && deviations > 0, "{requests} requests, {deviations} deviations checked");
}

#[test]
fn conformance_chat_completions_messages() {
    let files = fixture_files(env!("CARGO_MANIFEST_DIR"), "chat");
    assert!(files.len() > 30, "the chat fixtures are missing");
    let mut requests = 0;
    for (_, path) in files {
        let fixture = load(&path);
        let name = fixture["name"].as_str().unwrap().to_owned();
        let messages = messages(&fixture);
        let entries = fixture["entries"].as_array().unwrap();
        check_entries(&name, &messages, entries, to_chat_completions_messages, false);
        let ours = to_chat_completions_messages(&messages);
        match &fixture["request"] {
            Value::Null => {
                assert!(messages.is_empty() || ours.is_err(), "{name}: the reference could not send this")
            }
            expected => {
                requests += 1;
                let ours = Value::Array(ours.unwrap_or_else(|e| panic!("{name}: {e}")));
                assert!(
                    python_equal(&ours, &expected["messages"]),
                    "{name}:\n ours:     {ours}\n expected: {}",
                    expected["messages"]
                );
                assert_eq!(expected["model"], "gpt-test");
            }
        }
    }
    assert!(requests > 10, "only {requests} whole requests checked");
}
