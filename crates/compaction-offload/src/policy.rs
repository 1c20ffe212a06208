//! Which tools' results the offload hook moves to the store: [`OffloadPolicy`] and the keys that
//! assign policies to tools.

use std::fmt;

use compaction_hook::AgentState;

/// Decides, per tool result, whether [`ToolResultOffloadHook`](crate::ToolResultOffloadHook)
/// moves it to the store.
pub trait OffloadPolicy: Send + Sync + fmt::Debug {
    /// Whether to offload a result of `tool_name`. `result` is what the result occupies in the
    /// conversation: its text, or for parts the texts and base64 payloads joined together.
    fn should_offload(&self, tool_name: &str, result: &str, state: &AgentState) -> bool;

    /// Which of the reference's policies this is, if it is one (so that it can be written in
    /// Haystack's `to_dict` form); `None`, the default, for a policy of your own.
    fn builtin(&self) -> Option<BuiltinPolicy> {
        None
    }
}

/// The reference's three policies, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuiltinPolicy {
    /// [`AlwaysOffload`].
    Always,
    /// [`NeverOffload`].
    Never,
    /// [`OffloadOverChars`] with its threshold.
    OverChars(usize),
}

impl BuiltinPolicy {
    /// The policy itself.
    pub fn into_policy(self) -> Box<dyn OffloadPolicy> {
        match self {
            BuiltinPolicy::Always => Box::new(AlwaysOffload),
            BuiltinPolicy::Never => Box::new(NeverOffload),
            BuiltinPolicy::OverChars(threshold) => Box::new(OffloadOverChars::new(threshold)),
        }
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
#[non_exhaustive]
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

impl OffloadPolicy for AlwaysOffload {
    fn should_offload(&self, _tool_name: &str, _result: &str, _state: &AgentState) -> bool {
        true
    }
    fn builtin(&self) -> Option<BuiltinPolicy> {
        Some(BuiltinPolicy::Always)
    }
}

impl OffloadPolicy for NeverOffload {
    fn should_offload(&self, _tool_name: &str, _result: &str, _state: &AgentState) -> bool {
        false
    }
    fn builtin(&self) -> Option<BuiltinPolicy> {
        Some(BuiltinPolicy::Never)
    }
}

impl OffloadPolicy for OffloadOverChars {
    fn should_offload(&self, _tool_name: &str, result: &str, _state: &AgentState) -> bool {
        // Python's `len`: code points. Stop counting once over the threshold.
        result.chars().nth(self.threshold).is_some()
    }
    fn builtin(&self) -> Option<BuiltinPolicy> {
        Some(BuiltinPolicy::OverChars(self.threshold))
    }
}

/// Which tools a policy applies to. An exact name wins over a set containing the name, and a
/// set over [`PolicyKey::Any`].
///
/// Deliberately exhaustive: these are the three key forms of Haystack's `offload_strategies`
/// (a name, a tuple of names, `"*"`), and a lookup must rank every one of them.
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
}
