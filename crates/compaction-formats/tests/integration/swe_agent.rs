//! SWE-agent trajectories of both generations and mini-swe-agent's.

use compaction_formats::Format;
use serde_json::json;

use crate::{read, roles};

#[test]
fn a_swe_agent_0x_trajectory_holds_observations_as_user_messages() {
    let text = json!({
        "environment": "swe_main",
        "trajectory": [{"action": "ls", "observation": "a.py", "response": "DISCUSSION\nLook.\n```\nls\n```", "thought": "Look."}],
        "history": [
            {"role": "system", "content": "SETTING: You are an autonomous programmer.", "agent": "primary"},
            {"role": "user", "content": "Here is a demonstration...", "agent": "primary", "is_demo": true},
            {"role": "user", "content": "We're currently solving the following issue.", "agent": "primary"},
            {"role": "assistant", "content": "DISCUSSION\nLook.\n```\nls\n```", "thought": "Look.", "action": "ls\n", "agent": "primary"},
            {"role": "user", "content": "a.py\n(Open file: n/a)", "agent": "primary"}
        ],
        "info": {"exit_status": "submitted", "model_stats": {"tokens_sent": 1000, "api_calls": 1}}
    })
    .to_string();
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::SweAgent);
    assert_eq!(roles(&conversation.messages), "suuau");
    assert!(conversation.usage.is_empty(), "per-call usage is not in the log");
}

#[test]
fn a_swe_agent_1x_trajectory_pairs_tool_calls() {
    let text = json!({
        "trajectory": [],
        "history": [
            {"role": "system", "content": "You are a helpful assistant.", "agent": "main", "message_type": "system_prompt"},
            {"role": "user", "content": [{"type": "text", "text": "Fix the bug."}], "agent": "main", "message_type": "observation"},
            {"role": "assistant", "content": "Let me look.", "thought": "Let me look.", "action": "ls",
             "agent": "main", "message_type": "action",
             "tool_calls": [{"index": 1, "function": {"arguments": "{\"command\": \"ls\"}", "name": "bash"}, "id": "toolu_1", "type": "function"}]},
            {"role": "tool", "content": [{"type": "text", "text": "OBSERVATION:\na.py"}], "agent": "main",
             "message_type": "observation", "tool_call_ids": ["toolu_1"]}
        ],
        "info": {"exit_status": "submitted"}
    })
    .to_string();
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::SweAgent);
    assert_eq!(roles(&conversation.messages), "suat");
    assert_eq!(conversation.messages[3].tool_call_result().unwrap().origin.id.as_deref(), Some("toolu_1"));
}

#[test]
fn a_mini_swe_agent_trajectory_is_its_messages() {
    let text = json!({
        "info": {"exit_status": "Submitted", "model_stats": {"instance_cost": 0.01, "api_calls": 2}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
            {"role": "user", "content": "<pr_description>Fix it.</pr_description>"},
            {"role": "assistant", "content": "THOUGHT: look.\n\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"}
        ],
        "trajectory_format": "mini-swe-agent-1"
    })
    .to_string();
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::OpenAi);
    assert_eq!(roles(&conversation.messages), "suau");
}

#[test]
fn a_swe_agent_history_keeps_what_observation_masking_reads_in_meta() {
    // SWE-agent's `LastNObservations` tells observations by `message_type`, leaves out
    // demonstrations (`is_demo`) and reads `tags`; the messages keep them in their meta.
    let text = json!({
        "history": [
            {"role": "system", "content": "You are a helpful assistant.", "agent": "main", "message_type": "system_prompt"},
            {"role": "user", "content": "A demonstration.", "agent": "main", "is_demo": true, "message_type": "demonstration"},
            {"role": "user", "content": "Fix the bug.", "agent": "main", "message_type": "observation"},
            {"role": "assistant", "content": "ls", "agent": "main", "message_type": "action", "tags": ["keep_output"]},
            {"role": "user", "content": "a.py", "agent": "main", "message_type": "observation", "tags": ["remove_output"]}
        ]
    })
    .to_string();
    let conversation = read(&text);
    let meta = |k: usize| serde_json::Value::from(conversation.messages[k].meta.clone());
    assert_eq!(meta(0), json!({"message_type": "system_prompt"}));
    assert_eq!(meta(1), json!({"message_type": "demonstration", "is_demo": true}));
    assert_eq!(meta(2), json!({"message_type": "observation"}));
    assert_eq!(meta(3), json!({"message_type": "action", "tags": ["keep_output"]}));
    assert_eq!(meta(4), json!({"message_type": "observation", "tags": ["remove_output"]}));
    // An OpenAI request keeps such keys for writing back, not in meta.
    let openai = read(
        &json!({"messages": [{"role": "user", "content": "hi", "message_type": "observation"}]}).to_string(),
    );
    assert!(openai.messages[0].meta.is_empty());
}
