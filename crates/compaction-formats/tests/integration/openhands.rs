//! OpenHands: the 2024 memory dicts and action/observation pairs, the events of today with their
//! tool-call metadata, and condensation.

use compaction_formats::{Format, NoteKind, ReadOptions};
use compaction_model::Role;
use serde_json::{json, Value};

use crate::{read, read_with, roles};

/// A 2024 resolver instance: events without `id` or `source`, arguments beside `action`.
fn resolver_2024() -> Value {
    json!({
        "issue": {"owner": "o", "repo": "r", "number": 5, "title": "Add MIT license"},
        "instruction": "Please fix the following issue: add the MIT license.",
        "history": [
            {"content": "Please fix the following issue: add the MIT license.", "images_urls": null,
             "wait_for_response": false, "action": "message", "security_risk": null},
            {"command": "touch LICENSE", "thought": "I'll create the license file.", "keep_prompt": true,
             "action": "run", "is_confirmed": "confirmed", "security_risk": null},
            {"content": "\r\nroot@box:/workspace # ", "command_id": -1, "command": "touch LICENSE", "exit_code": 0, "observation": "run"},
            {"code": "open('LICENSE', 'w').write('MIT License')", "thought": "Now the text.", "action": "run_ipython",
             "is_confirmed": "confirmed", "kernel_init_code": "from agentskills import *"},
            {"content": "[Jupyter current working directory: /workspace]", "code": "...", "observation": "run_ipython"},
            {"outputs": {}, "thought": "The license is in place.", "action": "finish"}
        ],
        "metrics": {"accumulated_cost": 0.07},
        "success": true
    })
}

#[test]
fn the_2024_resolver_output_keeps_the_task_as_the_users_and_every_command() {
    let text = format!("{}\n{}\n", resolver_2024(), resolver_2024());
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::OpenHands);
    assert_eq!(conversation.conversations, 2);
    assert_eq!(roles(&conversation.messages), "uatata");
    assert_eq!(conversation.messages[0].text(), Some("Please fix the following issue: add the MIT license."));
    let run = conversation.messages[1].tool_calls().next().unwrap();
    assert_eq!(
        (run.tool_name.as_str(), run.arguments.get("command").as_ref().and_then(Value::as_str)),
        ("run", Some("touch LICENSE"))
    );
    assert_eq!(conversation.messages[1].text(), Some("I'll create the license file."));
    assert_eq!(conversation.messages[2].tool_call_result().unwrap().origin.tool_name, "run");
    assert_eq!(conversation.messages[5].text(), Some("The license is in place."));
}

#[test]
fn action_observation_pairs_are_read_as_events() {
    let history = json!([
        [{"id": 0, "source": "user", "action": "message", "args": {"content": "Fix the bug."}},
         {"observation": "null", "content": "", "extras": {}}],
        [{"id": 1, "source": "agent", "action": "run", "args": {"command": "pytest", "thought": "Run the tests."}},
         {"id": 2, "source": "agent", "cause": 1, "observation": "run", "content": "1 failed", "extras": {"exit_code": 1}}],
    ]);
    let text = json!({"instance_id": "x", "history": history}).to_string();
    let conversation = read_with(&text, ReadOptions::named("t").with_format(Format::OpenHands)).unwrap();
    assert_eq!(roles(&conversation.messages), "uat");
    assert_eq!(conversation.messages[2].tool_call_result().unwrap().origin.id.as_deref(), Some("event-1"));
    assert!(
        conversation.notes.iter().any(|n| n.text.contains("null observation")),
        "{:?}",
        conversation.notes
    );
}

fn call(id: i64, call: &str, command: &str) -> Value {
    json!({"id": id, "source": "agent", "action": "run", "args": {"command": command},
           "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": call,
               "model_response": {"id": format!("resp-{id}"), "choices": [{"message": {"content": null,
                   "tool_calls": [{"id": call, "type": "function", "function": {"name": "execute_bash",
                       "arguments": json!({"command": command}).to_string()}}]}}]}}})
}

fn observation(id: i64, call: &str, content: &str) -> Value {
    json!({"id": id, "source": "agent", "cause": id - 1, "observation": "run", "content": content,
           "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": call}})
}

#[test]
fn a_condensation_leaves_out_what_it_forgot_and_puts_its_summary_in_place() {
    let events = json!([
        {"id": 0, "source": "agent", "action": "system", "args": {"content": "You are OpenHands."}},
        {"id": 1, "source": "user", "action": "message", "args": {"content": "Fix ponyc."}},
        call(2, "toolu_01", "ls"), observation(3, "toolu_01", "src tests"),
        call(4, "toolu_02", "cat src/main.c"), observation(5, "toolu_02", "int main() {}"),
        {"id": 6, "source": "agent", "action": "condensation", "args": {"forgotten_events_start_id": 2,
            "forgotten_events_end_id": 5, "summary": "Listed and read src/main.c.", "summary_offset": 2}},
        call(7, "toolu_03", "make"), observation(8, "toolu_03", "ok"),
    ]);
    let text = events.to_string();
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::OpenHands);
    let texts: Vec<(Role, Option<&str>)> = conversation.messages.iter().map(|m| (m.role, m.text())).collect();
    assert_eq!(
        texts,
        [
            (Role::System, Some("You are OpenHands.")),
            (Role::User, Some("Fix ponyc.")),
            (Role::User, Some("Listed and read src/main.c.")),
            (Role::Assistant, None),
            (Role::Tool, None),
        ]
    );
    let note = conversation.notes.iter().find(|n| n.kind == NoteKind::Compacted).unwrap();
    // The four events and the condensation itself.
    assert!(note.text.contains("5 events forgotten"), "{note}");
    let full = read_with(&text, ReadOptions::named("t").with_full_history(true)).unwrap();
    assert_eq!(roles(&full.messages), "suatatat");
}

#[test]
fn a_logged_model_response_gives_the_providers_count() {
    let mut action = call(2, "toolu_01", "ls");
    action["tool_call_metadata"]["model_response"]["usage"] = json!({"prompt_tokens": 5920, "completion_tokens": 128, "prompt_tokens_details": {"cached_tokens": 5000}});
    let events = json!([
        {"id": 1, "source": "user", "action": "message", "args": {"content": "Fix ponyc."}},
        action, observation(3, "toolu_01", "src tests"),
    ]);
    let conversation = read(&events.to_string());
    let usage = conversation.usage[0].clone();
    assert_eq!(usage.message, 1);
    assert_eq!(
        (usage.usage.input_tokens, usage.usage.cache_read_input_tokens, usage.usage.context_tokens()),
        (920, 5000, 6048)
    );
}
