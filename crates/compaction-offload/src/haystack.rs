//! Haystack interop: reading and writing the reference's `to_dict` forms of the store, the
//! policies, the offload hook and compactor, and a `CompactionHook` whose compactor offloads.
//!
//! This module depends on the rest of the crate and nothing depends on it, so the serialized
//! forms never shape the types.

use std::sync::Arc;

use compaction_core::{component_type, InitParameters, IntegerSetting};
use compaction_hook::CompactionHook;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::error::Error;
use crate::fs_store::FileSystemToolResultStore;
use crate::offload_compactor::{OffloadCompactorSettings, ToolResultOffloadCompactor};
use crate::offload_hook::ToolResultOffloadHook;
use crate::policy::{BuiltinPolicy, OffloadStrategies, PolicyKey};

/// The class path Haystack writes as `type` in `FileSystemToolResultStore.to_dict()`.
pub const HAYSTACK_FILE_SYSTEM_STORE_TYPE: &str =
    "haystack.hooks.tool_result_offloading.stores.FileSystemToolResultStore";

/// The class path Haystack writes as `type` in `ToolResultOffloadHook.to_dict()`.
pub const HAYSTACK_OFFLOAD_HOOK_TYPE: &str =
    "haystack.hooks.tool_result_offloading.hooks.ToolResultOffloadHook";

/// The class path Haystack writes as `type` in `ToolResultOffloadCompactor.to_dict()`.
pub const HAYSTACK_OFFLOAD_COMPACTOR_TYPE: &str =
    "haystack.hooks.compaction.tool_result_offloading.ToolResultOffloadCompactor";

/// The keys of `ToolResultOffloadCompactor`'s settings.
const OFFLOAD_COMPACTOR_KEYS: &[&str] = &["store", "min_keep_steps", "min_tokens", "preview_chars"];

const ALWAYS_TYPE: &str = "haystack.hooks.tool_result_offloading.policies.AlwaysOffload";
const NEVER_TYPE: &str = "haystack.hooks.tool_result_offloading.policies.NeverOffload";
const OVER_CHARS_TYPE: &str = "haystack.hooks.tool_result_offloading.policies.OffloadOverChars";

impl FileSystemToolResultStore {
    /// Opens the store `{"root": ...}` or Haystack's `to_dict` form names (see
    /// [`FileSystemToolResultStore::new`]).
    ///
    /// # Errors
    ///
    /// For a missing `root`, a `type` other than the file-system store's, or a root the store
    /// cannot use.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let params = InitParameters::read(value, HAYSTACK_FILE_SYSTEM_STORE_TYPE, &["root"])?;
        let root = params.string("root")?.ok_or_else(|| InitParameters::missing("root"))?;
        FileSystemToolResultStore::new(root)
    }

    /// The store in Haystack's `to_dict` form.
    pub fn to_haystack_value(&self) -> Value {
        serde_json::json!({
            "type": HAYSTACK_FILE_SYSTEM_STORE_TYPE,
            "init_parameters": {"root": self.root().to_string_lossy()},
        })
    }
}

impl BuiltinPolicy {
    /// The policy in Haystack's `to_dict` form.
    pub fn to_haystack_value(&self) -> Value {
        match self {
            BuiltinPolicy::Always => serde_json::json!({"type": ALWAYS_TYPE, "init_parameters": {}}),
            BuiltinPolicy::Never => serde_json::json!({"type": NEVER_TYPE, "init_parameters": {}}),
            BuiltinPolicy::OverChars(threshold) => {
                serde_json::json!({"type": OVER_CHARS_TYPE, "init_parameters": {"threshold": threshold}})
            }
        }
    }

    /// Reads one of the reference's three policies from its `to_dict` form, found under `key`.
    ///
    /// # Errors
    ///
    /// When the form is none of the reference's three policies, or a threshold is missing or
    /// not a count.
    pub fn from_value(key: &str, value: &Value) -> Result<Self, Error> {
        match component_type(key, value)? {
            ALWAYS_TYPE => Ok(InitParameters::read(value, ALWAYS_TYPE, &[]).map(|_| BuiltinPolicy::Always)?),
            NEVER_TYPE => Ok(InitParameters::read(value, NEVER_TYPE, &[]).map(|_| BuiltinPolicy::Never)?),
            OVER_CHARS_TYPE => {
                let params = InitParameters::read(value, OVER_CHARS_TYPE, &["threshold"])?;
                let threshold =
                    params.count("threshold")?.ok_or_else(|| InitParameters::missing("threshold"))?;
                Ok(BuiltinPolicy::OverChars(threshold))
            }
            other => Err(Error::UnsupportedComponent { key: key.to_owned(), type_name: other.to_owned() }),
        }
    }
}

impl PolicyKey {
    /// The key as the reference serializes it: the name, `*`, or a JSON array string for a set.
    pub fn to_haystack_key(&self) -> String {
        match self {
            PolicyKey::Tool(name) => name.clone(),
            PolicyKey::Any => "*".to_owned(),
            // Python's json.dumps of a list of strings: `["a", "b"]`.
            PolicyKey::Tools(names) => {
                compaction_json::python::PythonJson::new().dumps(&serde_json::Value::from(names.clone()))
            }
        }
    }

    /// Reads a key as the reference serializes it: a string starting with `[` is a JSON array of
    /// names, `*` is the wildcard, anything else a tool name.
    ///
    /// # Errors
    ///
    /// When a key starting with `[` is not a JSON list of names.
    pub fn from_haystack_key(key: &str) -> Result<Self, Error> {
        if key == "*" {
            return Ok(PolicyKey::Any);
        }
        if key.starts_with('[') {
            let names: Vec<String> = serde_json::from_str(key).map_err(|e| Error::InvalidSetting {
                key: key.to_owned(),
                reason: format!("expected a JSON list of names: {e}"),
            })?;
            return Ok(PolicyKey::Tools(names));
        }
        Ok(PolicyKey::Tool(key.to_owned()))
    }
}

impl OffloadStrategies {
    /// Reads the reference's serialized `offload_strategies` mapping.
    ///
    /// # Errors
    ///
    /// When the value is not an object, or a key or policy in it cannot be read.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let object = value.as_object().ok_or_else(|| Error::InvalidSetting {
            key: "offload_strategies".into(),
            reason: "expected a JSON object".into(),
        })?;
        let mut strategies = OffloadStrategies::new();
        for (key, policy) in object {
            strategies.insert(
                PolicyKey::from_haystack_key(key)?,
                BuiltinPolicy::from_value(key, policy)?.into_policy(),
            );
        }
        Ok(strategies)
    }

    /// The mapping in the reference's serialized form; `None` when a policy has no such form.
    pub fn to_haystack_value(&self) -> Option<Value> {
        let mut object = serde_json::Map::new();
        for (key, policy) in self.iter() {
            object.insert(key.to_haystack_key(), policy.builtin()?.to_haystack_value());
        }
        Some(Value::Object(object))
    }
}

impl ToolResultOffloadHook {
    /// Builds a hook from Haystack's `ToolResultOffloadHook.to_dict()` output (a
    /// `FileSystemToolResultStore`, which is opened, and the reference's three policies).
    ///
    /// # Errors
    ///
    /// When the form is not the hook's, its store cannot be opened, or its strategies cannot be
    /// read.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        const KEYS: &[&str] = &["store", "offload_strategies", "preview_chars"];
        let params = InitParameters::read(value, HAYSTACK_OFFLOAD_HOOK_TYPE, KEYS)?;
        let store = FileSystemToolResultStore::from_value(params.required("store")?)?;
        let strategies = OffloadStrategies::from_value(params.required("offload_strategies")?)?;
        let mut hook = ToolResultOffloadHook::new(Arc::new(store), strategies);
        if let Some(chars) = params.count("preview_chars")? {
            hook = hook.with_preview_chars(chars);
        }
        Ok(hook)
    }
}

impl OffloadCompactorSettings {
    /// Reads the plain form or Haystack's `to_dict` form; missing keys take their defaults.
    ///
    /// # Errors
    ///
    /// For an unknown key, a value of the wrong kind, settings that fail
    /// [`OffloadCompactorSettings::validate`], or a `type` other than the compactor's.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let params = InitParameters::read(value, HAYSTACK_OFFLOAD_COMPACTOR_TYPE, OFFLOAD_COMPACTOR_KEYS)?;
        let mut settings = OffloadCompactorSettings::default();
        match params.integer("min_keep_steps")? {
            None => {}
            Some(IntegerSetting::NonNegative(n)) => settings.min_keep_steps = n,
            Some(IntegerSetting::Negative(n)) => return Err(Error::MinKeepStepsTooSmall(n)),
        }
        if let Some(tokens) = params.count("min_tokens")? {
            settings.min_tokens = tokens;
        }
        if let Some(chars) = params.count("preview_chars")? {
            settings.preview_chars = chars;
        }
        settings.validate()?;
        Ok(settings)
    }
}

impl<'de> Deserialize<'de> for OffloadCompactorSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        OffloadCompactorSettings::from_value(&value).map_err(serde::de::Error::custom)
    }
}

impl ToolResultOffloadCompactor {
    /// Builds a compactor from Haystack's `ToolResultOffloadCompactor.to_dict()` output, opening
    /// its `FileSystemToolResultStore`.
    ///
    /// # Errors
    ///
    /// As [`OffloadCompactorSettings::from_value`], and when its store cannot be opened.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let settings = OffloadCompactorSettings::from_value(value)?;
        let store = InitParameters::read(value, HAYSTACK_OFFLOAD_COMPACTOR_TYPE, OFFLOAD_COMPACTOR_KEYS)?
            .required("store")?;
        ToolResultOffloadCompactor::new(Arc::new(FileSystemToolResultStore::from_value(store)?), settings)
    }
}

/// A `CompactionHook` read from Haystack's form, and its offload compactor when it has one.
#[derive(Debug)]
pub struct HaystackCompactionHook {
    /// The hook.
    pub hook: CompactionHook,
    /// The hook's compactor when it is a `ToolResultOffloadCompactor`, shared with the hook, so
    /// that the caller can take its failures
    /// ([`ToolResultOffloadCompactor::take_failures`]) after each run.
    pub offload_compactor: Option<Arc<ToolResultOffloadCompactor>>,
}

/// Builds a `CompactionHook` from Haystack's `CompactionHook.to_dict()` output, whose compactor
/// may be a `ToolResultPruningCompactor` or a `ToolResultOffloadCompactor` with a
/// `FileSystemToolResultStore` (compaction-hook alone reads only the former).
///
/// # Errors
///
/// When the form is not the hook's or its compactor's, or a store cannot be opened.
pub fn compaction_hook_from_value(value: &Value) -> Result<HaystackCompactionHook, Error> {
    // The hook's own settings first, so that a form that is not a hook's opens no store.
    compaction_hook::CompactionHookSettings::from_value(value)?;
    // Its parameters: those of Haystack's form, or the plain object (the settings read above).
    let params = match value.get("type").is_some() || value.get("init_parameters").is_some() {
        true => value.get("init_parameters"),
        false => Some(value),
    };
    let spec = params.and_then(|params| params.get("compactor"));
    if let Some(spec) =
        spec.filter(|s| component_type("compactor", s).ok() == Some(HAYSTACK_OFFLOAD_COMPACTOR_TYPE))
    {
        let compactor = Arc::new(ToolResultOffloadCompactor::from_value(spec)?);
        let hook = CompactionHook::from_value_with_compactor(value, Box::new(Arc::clone(&compactor)))?;
        return Ok(HaystackCompactionHook { hook, offload_compactor: Some(compactor) });
    }
    Ok(HaystackCompactionHook { hook: CompactionHook::from_value(value)?, offload_compactor: None })
}

#[cfg(test)]
mod tests {
    use super::PolicyKey;

    /// A set of tools is keyed as Python's `json.dumps` of the list writes it (the expected
    /// texts are what haystack-ai 3.4.1's Python printed).
    #[test]
    fn a_set_of_tools_is_keyed_as_python_writes_the_list() {
        let cases: &[(&[&str], &str)] = &[
            (&["read_file", "é", "a\"b"], r#"["read_file", "\u00e9", "a\"b"]"#),
            (&["x"], r#"["x"]"#),
            (&[], "[]"),
        ];
        for (names, expected) in cases {
            let key = PolicyKey::Tools(names.iter().map(|n| (*n).to_owned()).collect());
            assert_eq!(key.to_haystack_key(), *expected, "{names:?}");
        }
    }
}
