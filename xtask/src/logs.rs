//! Synthetic transcripts in the log formats agents write: a Claude Code session (JSON Lines of
//! events) and an OpenAI Chat Completions request (`model`, `tools`, `messages`), made from a
//! synthetic Haystack transcript so their conversations are the same kind.
//!
//! The Claude Code session is laid out as Claude Code 2.x writes one: every event carries the
//! session's envelope (`parentUuid`, `cwd`, `sessionId`, `version`, `gitBranch`, `uuid`,
//! `timestamp`); each content block of an assistant turn is an event of its own, sharing the API
//! message's `id`; a tool result is a user event whose `toolUseResult` repeats the output; and
//! hook-progress and file-history events (never sent to the model) come in between.

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

/// The log formats `gen-transcript --format` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// The model's own shape: a JSON array of Haystack messages.
    Haystack,
    /// A Claude Code session, one event a line.
    ClaudeCode,
    /// An OpenAI Chat Completions request body.
    OpenAi,
}

impl LogFormat {
    /// The format named `name` (`haystack`, `claude-code`, `openai`).
    pub fn parse(name: &str) -> Result<LogFormat> {
        Ok(match name {
            "haystack" => LogFormat::Haystack,
            "claude-code" => LogFormat::ClaudeCode,
            "openai" => LogFormat::OpenAi,
            other => bail!("unknown format {other:?}; use haystack, claude-code or openai"),
        })
    }

    /// Its name in file names.
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Haystack => "haystack",
            LogFormat::ClaudeCode => "claude-code",
            LogFormat::OpenAi => "openai",
        }
    }

    /// The file extension it is written with.
    pub fn extension(self) -> &'static str {
        match self {
            LogFormat::ClaudeCode => "jsonl",
            _ => "json",
        }
    }
}

/// `haystack` (a transcript's JSON text) written in `format`.
pub fn convert(haystack: &str, format: LogFormat) -> Result<String> {
    let messages: Vec<Value> = serde_json::from_str(haystack).context("the generated transcript is JSON")?;
    match format {
        LogFormat::Haystack => Ok(haystack.to_owned()),
        LogFormat::ClaudeCode => Ok(claude_code(&messages)),
        LogFormat::OpenAi => Ok(openai(&messages)),
    }
}

fn parts(message: &Value) -> &[Value] {
    message["content"].as_array().map(Vec::as_slice).unwrap_or_default()
}

fn text_of(result: &Value) -> String {
    match result {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// A deterministic UUID-shaped id from a counter.
fn uuid(n: u64) -> String {
    let x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5851_F42D_4C95_7F2D;
    let y = x.rotate_left(29).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        x >> 32,
        (x >> 16) & 0xffff,
        x & 0xfff,
        y >> 52,
        y & 0xffff_ffff_ffff
    )
}

fn timestamp(second: u64) -> String {
    format!(
        "2026-02-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        1 + second / 86_400 % 28,
        second / 3600 % 24,
        second / 60 % 60,
        second % 60,
        (second * 37) % 1000
    )
}

struct Session {
    lines: Vec<String>,
    counter: u64,
    parent: Option<String>,
    second: u64,
}

impl Session {
    fn event(&mut self, kind: &str, fields: Map<String, Value>) -> String {
        self.counter += 1;
        self.second += 1 + self.counter % 7;
        let id = uuid(self.counter);
        let mut event = Map::new();
        event.insert("parentUuid".into(), self.parent.clone().map_or(Value::Null, Value::String));
        event.insert("isSidechain".into(), json!(false));
        event.insert("userType".into(), json!("external"));
        event.insert("cwd".into(), json!("/home/user/projects/compaction"));
        event.insert("sessionId".into(), json!("3f2c9a6e-7b1d-4c55-9e0a-52d1b8f4e7a3"));
        event.insert("version".into(), json!("2.1.39"));
        event.insert("gitBranch".into(), json!("main"));
        event.insert("type".into(), json!(kind));
        event.extend(fields);
        event.insert("uuid".into(), json!(id));
        event.insert("timestamp".into(), json!(timestamp(self.second)));
        self.lines.push(Value::Object(event).to_string());
        self.parent = Some(id.clone());
        id
    }

    /// Events Claude Code logs that never reach the model.
    fn noise(&mut self) {
        self.counter += 1;
        if self.counter.is_multiple_of(3) {
            let id = uuid(self.counter);
            self.lines.push(
                json!({"type": "file-history-snapshot", "messageId": id, "snapshot": {"messageId": id,
                    "trackedFileBackups": {}, "timestamp": timestamp(self.second)}, "isSnapshotUpdate": false})
                .to_string(),
            );
        } else {
            let mut fields = Map::new();
            fields.insert(
                "data".into(),
                json!({"type": "hook_progress", "hookEvent": "PostToolUse", "hookName": "PostToolUse:Bash",
                    "command": "/home/user/.claude/hooks/notify.sh"}),
            );
            fields.insert("parentToolUseID".into(), json!(uuid(self.counter + 7)));
            fields.insert("toolUseID".into(), json!(uuid(self.counter + 7)));
            let parent = self.parent.clone();
            self.event("progress", fields);
            self.parent = parent;
        }
    }
}

fn claude_code(messages: &[Value]) -> String {
    let mut session = Session { lines: Vec::new(), counter: 0, parent: None, second: 40_000 };
    let mut turn = 0u64;
    let mut last_assistant = String::new();
    for message in messages {
        match message["role"].as_str() {
            // Claude Code logs no system prompt.
            Some("system") => {}
            Some("user") => {
                let text =
                    parts(message).iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n");
                let mut fields = Map::new();
                fields.insert("message".into(), json!({"role": "user", "content": text}));
                fields.insert("permissionMode".into(), json!("default"));
                session.event("user", fields);
            }
            Some("assistant") => {
                turn += 1;
                let id = format!("msg_01{:022x}", turn.wrapping_mul(0x2545_F491_4F6C_DD1D));
                let request = format!("req_011{:021x}", turn.wrapping_mul(0x9E37_79B9));
                for part in parts(message) {
                    let block = if let Some(text) = part["text"].as_str() {
                        json!({"type": "text", "text": text})
                    } else if let Some(reasoning) = part.get("reasoning") {
                        json!({"type": "thinking", "thinking": reasoning["reasoning_text"], "signature": "REDACTED_SIGNATURE"})
                    } else if let Some(call) = part.get("tool_call") {
                        json!({"type": "tool_use", "id": call["id"], "name": call["tool_name"], "input": call["arguments"]})
                    } else {
                        continue;
                    };
                    let mut fields = Map::new();
                    fields.insert(
                        "message".into(),
                        json!({"model": "claude-opus-4-6", "id": id, "type": "message", "role": "assistant",
                            "content": [block], "stop_reason": null, "stop_sequence": null,
                            "usage": {"input_tokens": 3, "cache_creation_input_tokens": 412 + turn % 900,
                                "cache_read_input_tokens": 20_000 + turn * 37, "output_tokens": 25 + turn % 300,
                                "service_tier": "standard"}}),
                    );
                    fields.insert("requestId".into(), json!(request));
                    last_assistant = session.event("assistant", fields);
                }
                if turn.is_multiple_of(2) {
                    session.noise();
                }
            }
            Some("tool") => {
                for part in parts(message) {
                    let Some(result) = part.get("tool_call_result") else { continue };
                    let text = text_of(&result["result"]);
                    let mut content = vec![json!({"type": "text", "text": text})];
                    if let Some(image) =
                        result["result"].as_array().and_then(|p| p.iter().find_map(|p| p.get("image")))
                    {
                        content.push(json!({"type": "image", "source": {"type": "base64",
                            "media_type": image["mime_type"], "data": image["base64_image"]}}));
                    }
                    let error = result["error"].as_bool().unwrap_or(false);
                    let mut fields = Map::new();
                    fields.insert(
                        "message".into(),
                        json!({"role": "user", "content": [{"tool_use_id": result["origin"]["id"],
                            "type": "tool_result", "content": content, "is_error": error}]}),
                    );
                    fields.insert(
                        "toolUseResult".into(),
                        if error {
                            json!(format!("Error: {text}"))
                        } else {
                            json!({"stdout": text, "stderr": "", "interrupted": false, "isImage": false})
                        },
                    );
                    fields.insert("sourceToolAssistantUUID".into(), json!(last_assistant));
                    session.event("user", fields);
                }
            }
            _ => {}
        }
    }
    let mut out = session.lines.join("\n");
    out.push('\n');
    out
}

fn openai(messages: &[Value]) -> String {
    let mut out = Vec::new();
    let mut tools = std::collections::BTreeSet::new();
    for message in messages {
        let texts =
            || parts(message).iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n");
        match message["role"].as_str() {
            Some("system") => out.push(json!({"role": "system", "content": texts()})),
            Some("user") => {
                let image = parts(message).iter().find_map(|p| p.get("image"));
                out.push(match image {
                    None => json!({"role": "user", "content": texts()}),
                    Some(image) => json!({"role": "user", "content": [
                        {"type": "text", "text": texts()},
                        {"type": "image_url", "image_url": {"url": format!("data:{};base64,{}",
                            image["mime_type"].as_str().unwrap_or("image/png"), image["base64_image"].as_str().unwrap_or_default())}}
                    ]}),
                });
            }
            Some("assistant") => {
                let calls: Vec<Value> = parts(message)
                    .iter()
                    .filter_map(|p| p.get("tool_call"))
                    .map(|call| {
                        tools.insert(call["tool_name"].as_str().unwrap_or_default().to_owned());
                        json!({"id": call["id"], "type": "function", "function": {"name": call["tool_name"],
                            "arguments": call["arguments"].to_string()}})
                    })
                    .collect();
                let text = texts();
                let mut assistant = Map::new();
                assistant.insert("role".into(), json!("assistant"));
                assistant.insert("content".into(), if text.is_empty() { Value::Null } else { json!(text) });
                assistant.insert("refusal".into(), Value::Null);
                if !calls.is_empty() {
                    assistant.insert("tool_calls".into(), Value::Array(calls));
                }
                out.push(Value::Object(assistant));
            }
            Some("tool") => {
                for part in parts(message) {
                    let Some(result) = part.get("tool_call_result") else { continue };
                    out.push(json!({"role": "tool", "tool_call_id": result["origin"]["id"],
                        "content": text_of(&result["result"])}));
                }
            }
            _ => {}
        }
    }
    let tools: Vec<Value> = tools
        .into_iter()
        .map(|name| {
            json!({"type": "function", "function": {"name": name, "description": format!("Runs {name}."),
                "parameters": {"type": "object", "properties": {}, "additionalProperties": true}}})
        })
        .collect();
    let mut text = json!({"model": "gpt-4o", "temperature": 0, "tools": tools, "messages": out}).to_string();
    text.push('\n');
    text
}
