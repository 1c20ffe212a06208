//! Codex CLI rollouts (`~/.codex/sessions/…/rollout-*.jsonl`): one `{"timestamp", "type",
//! "payload"}` line per record.
//!
//! - `response_item` lines carry the Responses items the model saw or produced (read as
//!   [`crate::responses`] reads them);
//! - `compacted` lines replace the conversation: with their `replacement_history` when they have
//!   one, else with the user messages so far and the summary (`message`), as Codex rebuilds it;
//! - `event_msg` lines of type `token_count` carry the provider's count of the call that just
//!   ended (`info.last_token_usage`), and `thread_rolled_back` drops the last user turns;
//! - `session_meta`, `turn_context` and other events are bookkeeping, skipped and counted.
//!
//! Older rollouts have no envelope: a first line of session metadata, then one bare Responses
//! item a line (and `record_type` lines). Both are read.

use compaction_model::ToolResultContent;
use serde_json::{Map, Value};

use crate::codec::{not_a_tree, Codec, LineRead, TreeRead};
use crate::conversation::Decoded;
use crate::conversation::ProviderCompaction;
use crate::document::json_type;
use crate::error::{Error, Location};
use crate::eventlog::{Event, LogDecoded};
use crate::format::Format;
use crate::notes::{plural, Note, NoteKind};
use crate::responses::output_content;
use crate::responses::{is_item, Items};
use crate::usage::{rfc3339_millis, MessageUsage, Usage};
use compaction_json::splice::Seg;

/// Record types of a rollout line's envelope (for detection).
pub(crate) const RECORD_TYPES: &[&str] =
    &["session_meta", "response_item", "event_msg", "turn_context", "compacted"];

/// Reads a Codex rollout line by line.
#[derive(Debug)]
pub(crate) struct Reader {
    name: String,
    full_history: bool,
    items: Items,
    lines: usize,
    compactions: Vec<(usize, bool)>,
    rolled_back: usize,
    /// The model of the latest `turn_context`, for the usage of the calls that follow.
    model: Option<std::sync::Arc<str>>,
}

impl Reader {
    pub(crate) fn new(name: &str, full_history: bool) -> Self {
        Reader {
            name: name.to_owned(),
            full_history,
            items: Items::default(),
            lines: 0,
            compactions: Vec::new(),
            rolled_back: 0,
            model: None,
        }
    }

    fn invalid(&self, number: usize, problem: impl Into<String>) -> Error {
        let at = Location::file(&self.name).with_line(number).with_item("record", self.lines);
        Error::Invalid { at: Box::new(at), problem: problem.into() }
    }

    pub(crate) fn line(&mut self, number: usize, base: u32, record: &Value) -> Result<(), Error> {
        self.lines += 1;
        let Some(object) = record.as_object() else {
            return Err(
                self.invalid(number, format!("expected a record object, found {}", json_type(record)))
            );
        };
        let Some(payload) = object.get("payload") else {
            // An older rollout: bare items, metadata and state lines.
            if is_item(object) {
                return self.items.item(record, base, &[]).map_err(|e| self.invalid(number, e));
            }
            let kind = if object.contains_key("record_type") { "state" } else { "session metadata" };
            self.items.skipped.add(kind);
            return Ok(());
        };
        let kind = object.get("type").and_then(Value::as_str).unwrap_or("untyped");
        match kind {
            "response_item" => self
                .items
                .item(payload, base, &[Seg::Key("payload")])
                .map_err(|e| self.invalid(number, format!("`payload`: {e}")))?,
            "compacted" => self.compacted(number, base, payload)?,
            "event_msg" => match payload.get("type").and_then(Value::as_str) {
                Some("token_count") => {
                    let at = object.get("timestamp").and_then(Value::as_str).and_then(rfc3339_millis);
                    self.token_count(payload, at);
                }
                Some("thread_rolled_back") => {
                    let turns = payload.get("num_turns").and_then(Value::as_u64).unwrap_or(0);
                    self.roll_back(usize::try_from(turns).unwrap_or(usize::MAX));
                }
                Some(other) => self.items.skipped.add(&format!("event_msg/{other}")),
                None => self.items.skipped.add("event_msg"),
            },
            other => {
                if other == "turn_context" {
                    let model = payload.get("model").and_then(Value::as_str);
                    self.model = model.map(std::sync::Arc::from).or(self.model.take());
                }
                self.items.skipped.add(other);
            }
        }
        Ok(())
    }

    /// The provider's count of the call that just ended belongs to the latest assistant message.
    fn token_count(&mut self, payload: &Value, at: Option<i64>) {
        self.items.end_turn();
        let Some(last) = payload.get("info").and_then(|i| i.get("last_token_usage")) else { return };
        let Some(message) = self.items.last_assistant else { return };
        let count = |key: &str| last.get(key).and_then(Value::as_u64).unwrap_or(0);
        // OpenAI counts cached tokens inside `input_tokens`.
        let cached = count("cached_input_tokens").min(count("input_tokens"));
        let usage = Usage::new(count("input_tokens") - cached, count("output_tokens")).with_cache(cached, 0);
        if usage.is_zero() {
            return;
        }
        let list = &mut self.items.decoded.usage;
        match list.last_mut() {
            Some(entry) if entry.message == message => entry.usage = usage,
            _ => list.push(MessageUsage::new(message, usage).with_call(at, self.model.clone())),
        }
    }

    fn compacted(&mut self, number: usize, base: u32, payload: &Value) -> Result<(), Error> {
        let replacement = payload.get("replacement_history").and_then(Value::as_array);
        let summary = payload.get("message").and_then(Value::as_str).unwrap_or_default();
        if self.full_history {
            // The whole history stays; the summary the model then saw follows it.
            self.items.decoded.compactions.push(ProviderCompaction {
                message: self.items.decoded.messages.len(),
                line: Some(number),
                tokens_before: None,
            });
            self.compactions.push((number, replacement.is_some()));
            return Ok(());
        }
        let users = self.items.user_texts();
        let initial = self.initial_context();
        self.items.reset();
        // The notes count what follows the compaction; what came before is said once.
        self.items.skipped = Default::default();
        match replacement {
            Some(items) => {
                for (j, item) in items.iter().enumerate() {
                    let path = [Seg::Key("payload"), Seg::Key("replacement_history"), Seg::Index(j as u32)];
                    self.items
                        .item(item, base, &path)
                        .map_err(|e| self.invalid(number, format!("`replacement_history[{j}]`: {e}")))?;
                }
            }
            None => {
                for message in initial {
                    self.items.decoded.push(message, Default::default());
                }
                for text in users {
                    self.items.decoded.push(compaction_model::Message::user(text), Default::default());
                }
                let text = if summary.is_empty() { "(no summary available)" } else { summary };
                self.items.decoded.push(compaction_model::Message::user(text), Default::default());
            }
        }
        self.items.end_turn();
        self.items.decoded.compactions.push(ProviderCompaction {
            message: 0,
            line: Some(number),
            tokens_before: None,
        });
        self.compactions.push((number, replacement.is_some()));
        Ok(())
    }

    /// The messages before the first user message: instructions and context Codex puts first.
    fn initial_context(&self) -> Vec<compaction_model::Message> {
        let messages = &self.items.decoded.messages;
        let first_user =
            messages.iter().position(|m| m.role == compaction_model::Role::User).unwrap_or(messages.len());
        messages[..first_user].to_vec()
    }

    fn roll_back(&mut self, turns: usize) {
        if turns == 0 {
            return;
        }
        let messages = &self.items.decoded.messages;
        let users: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == compaction_model::Role::User)
            .map(|(i, _)| i)
            .collect();
        let Some(&first) = users.first() else { return };
        let cut = if turns >= users.len() { first } else { users[users.len() - turns] };
        let decoded = &mut self.items.decoded;
        self.rolled_back += decoded.messages.len() - cut;
        decoded.messages.truncate(cut);
        decoded.slots.truncate(cut);
        decoded.usage.retain(|u| u.message < cut);
        self.items.end_turn();
        if self.items.last_assistant.is_some_and(|a| a >= cut) {
            self.items.last_assistant = None;
        }
    }

    pub(crate) fn finish(mut self) -> Result<LogDecoded, Error> {
        let mut notes = Vec::new();
        if let Some(&(line, replaced)) = self.compactions.last() {
            let how = if replaced {
                "its replacement history"
            } else {
                "the user messages before it and its summary, as Codex rebuilds it (without Codex's \
                 summary prefix and length limits)"
            };
            let text = if self.full_history {
                format!(
                    "Codex compacted this session {}, the last at line {line}; read with the full history",
                    plural(self.compactions.len(), "time")
                )
            } else {
                format!(
                    "Codex compacted this session at line {line}: read what the model saw after it ({how}); \
                     the full history keeps what came before"
                )
            };
            notes.push(Note::new(NoteKind::Compacted, self.compactions.len(), text));
        }
        if self.rolled_back > 0 {
            notes.push(Note::new(
                NoteKind::Skipped,
                self.rolled_back,
                format!("left out {} the user rolled back", plural(self.rolled_back, "message")),
            ));
        }
        notes.extend(self.items.skipped.note("line", "the model never saw"));
        notes.extend(self.items.opaque_note());
        let mut decoded = std::mem::take(&mut self.items.decoded);
        // An empty assistant message is a model call that produced nothing readable; keep it only
        // if it carries usage, so the call still counts.
        decoded.notes = notes;
        Ok(decoded)
    }
}

/// What a file read as a Codex rollout holds when it yields no message, for the error.
pub(crate) fn why_empty(source: &[u8]) -> String {
    let types = crate::eventlog::first_types(source);
    if types.iter().any(|t| matches!(t.as_str(), "user" | "assistant" | "summary" | "file-history-snapshot"))
    {
        return "its lines look like a Claude Code session (`type` user/assistant with a `message`); try \
                --format claude-code"
            .into();
    }
    "no `response_item` or `compacted` line holds a message".into()
}

/// Codex CLI rollouts.
pub(crate) struct Codex;

impl Codec for Codex {
    fn is_log_record(&self, object: &Map<String, Value>) -> bool {
        let kind = object.get("type").and_then(Value::as_str);
        object.contains_key("payload") && kind.is_some_and(|k| RECORD_TYPES.contains(&k))
    }

    fn line_reader(&self, name: &str, full_history: bool) -> Option<Box<dyn LineRead>> {
        Some(Box::new(Reader::new(name, full_history)))
    }

    fn read_tree(&self, _values: &[Value], tree: &TreeRead<'_>) -> Result<Decoded, Error> {
        Err(not_a_tree(tree.name, Format::Codex.label()))
    }

    fn result_content(&self, value: &Value) -> Option<ToolResultContent> {
        output_content(value).ok()
    }

    fn why_empty(&self, source: &[u8]) -> String {
        why_empty(source)
    }
}

impl LineRead for Reader {
    fn line(&mut self, number: usize, base: u32, event: Event) -> Result<(), Error> {
        Reader::line(self, number, base, &event.value)
    }

    fn finish(self: Box<Self>) -> Result<LogDecoded, Error> {
        Reader::finish(*self)
    }
}
