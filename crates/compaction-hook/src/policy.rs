//! Which tools' results the offload hook moves to the store: [`OffloadPolicy`] and the keys that
//! assign policies to tools.

use std::fmt;

use serde_json::Value;

use crate::error::Error;
use crate::hook::{init_parameters, invalid};
use crate::serial::{component, count};
use crate::state::AgentState;

const ALWAYS_TYPE: &str = "haystack.hooks.tool_result_offloading.policies.AlwaysOffload";
const NEVER_TYPE: &str = "haystack.hooks.tool_result_offloading.policies.NeverOffload";
const OVER_CHARS_TYPE: &str = "haystack.hooks.tool_result_offloading.policies.OffloadOverChars";

/// Decides, per tool result, whether [`ToolResultOffloadHook`](crate::ToolResultOffloadHook)
/// moves it to the store.
pub trait OffloadPolicy: Send + Sync + fmt::Debug {
    /// Whether to offload a result of `tool_name`. `result` is what the result occupies in the
    /// conversation: its text, or for parts the texts and base64 payloads joined together.
    fn should_offload(&self, tool_name: &str, result: &str, state: &AgentState) -> bool;

    /// The policy in Haystack's `to_dict` form, for policies the reference knows; `None` (the
    /// default) for a policy of your own.
    fn to_haystack_value(&self) -> Option<Value> {
        None
    }
}

/// Offloads every result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlwaysOffload;

/// Never offloads; opts a tool out of a `*` default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NeverOffload;

/// Offloads a result longer than `threshold` characters (strictly more), counted as Python
/// counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffloadOverChars {
    /// The largest result, in characters, that stays in context.
    pub threshold: usize,
}

impl OffloadOverChars {
    /// A policy with `threshold`.
    pub fn new(threshold: usize) -> Self {
        OffloadOverChars { threshold }
    }
}

fn plain(type_name: &str) -> Value {
    serde_json::json!({"type": type_name, "init_parameters": {}})
}

impl OffloadPolicy for AlwaysOffload {
    fn should_offload(&self, _tool_name: &str, _result: &str, _state: &AgentState) -> bool {
        true
    }
    fn to_haystack_value(&self) -> Option<Value> {
        Some(plain(ALWAYS_TYPE))
    }
}

impl OffloadPolicy for NeverOffload {
    fn should_offload(&self, _tool_name: &str, _result: &str, _state: &AgentState) -> bool {
        false
    }
    fn to_haystack_value(&self) -> Option<Value> {
        Some(plain(NEVER_TYPE))
    }
}

impl OffloadPolicy for OffloadOverChars {
    fn should_offload(&self, _tool_name: &str, result: &str, _state: &AgentState) -> bool {
        // Python's `len`: code points. Stop counting once over the threshold.
        result.chars().nth(self.threshold).is_some()
    }
    fn to_haystack_value(&self) -> Option<Value> {
        Some(serde_json::json!({"type": OVER_CHARS_TYPE, "init_parameters": {"threshold": self.threshold}}))
    }
}

/// Reads one of the reference's three policies from its `to_dict` form.
pub(crate) fn policy_from_value(key: &str, value: &Value) -> Result<Box<dyn OffloadPolicy>, Error> {
    match component(key, value)? {
        ALWAYS_TYPE => Ok(Box::new(AlwaysOffload)),
        NEVER_TYPE => Ok(Box::new(NeverOffload)),
        OVER_CHARS_TYPE => {
            let params = init_parameters(value, OVER_CHARS_TYPE)?;
            let threshold = params.get("threshold").ok_or_else(|| invalid("threshold", "is required"))?;
            Ok(Box::new(OffloadOverChars::new(count("threshold", threshold)?)))
        }
        other => Err(Error::UnsupportedComponent { key: key.to_owned(), type_name: other.to_owned() }),
    }
}

/// Which tools a policy applies to. An exact name wins over a set containing the name, and a
/// set over [`PolicyKey::Any`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PolicyKey {
    /// One tool, by name.
    Tool(String),
    /// Several tools sharing one policy (Haystack's tuple key).
    Tools(Vec<String>),
    /// Every tool without a more specific key (`*`).
    Any,
}

impl PolicyKey {
    /// A key for several tools.
    pub fn tools<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PolicyKey::Tools(names.into_iter().map(Into::into).collect())
    }

    /// The key as the reference serializes it: the name, `*`, or a JSON array string for a set.
    pub fn to_haystack_key(&self) -> String {
        match self {
            PolicyKey::Tool(name) => name.clone(),
            PolicyKey::Any => "*".to_owned(),
            // Python's json.dumps of a list of strings: `["a", "b"]`.
            PolicyKey::Tools(names) => {
                let items: Vec<String> = names.iter().map(|n| python_string(n)).collect();
                format!("[{}]", items.join(", "))
            }
        }
    }

    /// Reads a key as the reference serializes it: a string starting with `[` is a JSON array of
    /// names, `*` is the wildcard, anything else a tool name.
    pub fn from_haystack_key(key: &str) -> Result<Self, Error> {
        if key == "*" {
            return Ok(PolicyKey::Any);
        }
        if key.starts_with('[') {
            let names: Vec<String> = serde_json::from_str(key)
                .map_err(|e| invalid(key, &format!("expected a JSON list of names: {e}")))?;
            return Ok(PolicyKey::Tools(names));
        }
        Ok(PolicyKey::Tool(key.to_owned()))
    }
}

impl From<&str> for PolicyKey {
    fn from(name: &str) -> Self {
        if name == "*" {
            PolicyKey::Any
        } else {
            PolicyKey::Tool(name.to_owned())
        }
    }
}

impl From<String> for PolicyKey {
    fn from(name: String) -> Self {
        PolicyKey::from(name.as_str())
    }
}

/// A string as Python's `json.dumps` writes it (ASCII only, `\uXXXX` escapes).
fn python_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Tools' policies in the order they were given, resolved most specific first.
#[derive(Debug, Default)]
pub struct OffloadStrategies {
    entries: Vec<(PolicyKey, Box<dyn OffloadPolicy>)>,
}

impl OffloadStrategies {
    /// No policies: nothing is offloaded.
    pub fn new() -> Self {
        OffloadStrategies::default()
    }

    /// Adds `policy` under `key`. A key given twice keeps its place and takes the new policy, as
    /// a Python dict does.
    pub fn insert(&mut self, key: impl Into<PolicyKey>, policy: Box<dyn OffloadPolicy>) {
        let key = key.into();
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = policy,
            None => self.entries.push((key, policy)),
        }
    }

    /// The same strategies with `policy` under `key`.
    pub fn with(mut self, key: impl Into<PolicyKey>, policy: impl OffloadPolicy + 'static) -> Self {
        self.insert(key, Box::new(policy));
        self
    }

    /// The policy for `tool_name`: its exact key, else the first set naming it, else `*`.
    pub fn policy_for(&self, tool_name: &str) -> Option<&dyn OffloadPolicy> {
        let find = |matches: &dyn Fn(&PolicyKey) -> bool| {
            self.entries.iter().find(|(k, _)| matches(k)).map(|(_, p)| p.as_ref())
        };
        find(&|k| matches!(k, PolicyKey::Tool(n) if n == tool_name))
            .or_else(|| find(&|k| matches!(k, PolicyKey::Tools(ns) if ns.iter().any(|n| n == tool_name))))
            .or_else(|| find(&|k| matches!(k, PolicyKey::Any)))
    }

    /// The keys and policies, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&PolicyKey, &dyn OffloadPolicy)> + '_ {
        self.entries.iter().map(|(k, p)| (k, p.as_ref()))
    }

    /// Reads the reference's serialized `offload_strategies` mapping.
    pub fn from_haystack_value(value: &Value) -> Result<Self, Error> {
        let object =
            value.as_object().ok_or_else(|| invalid("offload_strategies", "expected a JSON object"))?;
        let mut strategies = OffloadStrategies::new();
        for (key, policy) in object {
            strategies.insert(PolicyKey::from_haystack_key(key)?, policy_from_value(key, policy)?);
        }
        Ok(strategies)
    }

    /// The mapping in the reference's serialized form; `None` when a policy has no such form.
    pub fn to_haystack_value(&self) -> Option<Value> {
        let mut object = serde_json::Map::new();
        for (key, policy) in &self.entries {
            object.insert(key.to_haystack_key(), policy.to_haystack_value()?);
        }
        Some(Value::Object(object))
    }
}
