//! The pruning compactor's settings, and reading them from Haystack's `to_dict` form.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::error::Error;

/// The class path Haystack writes as `type` in `ToolResultPruningCompactor.to_dict()`.
pub const HAYSTACK_PRUNING_TYPE: &str =
    "haystack.hooks.compaction.tool_result_pruning.ToolResultPruningCompactor";

/// The placeholder a pruned result gets unless another is set. `{tool_name}` is filled in.
pub const DEFAULT_PLACEHOLDER: &str =
    "[Tool result removed to free up context. Call `{tool_name}` again if you need it.]";

/// What [`ToolResultPruningCompactor`](crate::ToolResultPruningCompactor) prunes and what it keeps.
///
/// The first four fields are the reference's parameters with its defaults. The rest go beyond
/// it; each is off by default, so the defaults behave exactly as Haystack does.
///
/// Serializes in a plain form (the fields as keys; options that are off are left out).
/// [`PruningSettings::from_value`] and `Deserialize` read that form and Haystack's
/// `{"type": ..., "init_parameters": {...}}` form alike, and reject what the reference rejects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PruningSettings {
    /// How many of the newest agent steps that have tool results are never pruned. At least 1.
    pub min_keep_steps: usize,
    /// Only messages whose own count is above this are pruned.
    pub min_tokens: usize,
    /// The text a pruned result is replaced with. Only `{tool_name}` is filled in; every other
    /// brace is kept as written.
    pub placeholder: String,
    /// Results whose meta holds any of these keys are never pruned.
    pub skip_meta_keys: Vec<String>,
    /// Beyond the reference: results of these tools are never pruned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exclude_tools: Vec<String>,
    /// Beyond the reference: do nothing unless at least this many tokens would be freed. A
    /// rewrite invalidates the provider's prompt cache from the first changed message on, so a
    /// small saving can cost more than it frees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clear_at_least: Option<usize>,
    /// Beyond the reference: also replace the arguments of the calls whose results were pruned
    /// with `{}` (and drop any raw argument text), keeping call ids and names.
    #[serde(skip_serializing_if = "is_false")]
    pub clear_tool_inputs: bool,
    /// Beyond the reference: protect the newest this-many tool-result messages, counted one by
    /// one, instead of whole agent steps (`min_keep_steps` is then not used). At least 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_tool_results: Option<usize>,
    /// Beyond the reference: keep the first and last this-many characters of each pruned
    /// result's text around the placeholder, so the model still sees how it began and ended.
    /// 0 (the default) keeps none.
    #[serde(skip_serializing_if = "is_zero")]
    pub preview_chars: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for PruningSettings {
    fn default() -> Self {
        PruningSettings {
            min_keep_steps: 1,
            min_tokens: 200,
            placeholder: DEFAULT_PLACEHOLDER.to_owned(),
            skip_meta_keys: vec![compaction_model::TOOL_RESULT_OFFLOADED.to_owned()],
            exclude_tools: Vec::new(),
            clear_at_least: None,
            clear_tool_inputs: false,
            keep_tool_results: None,
            preview_chars: 0,
        }
    }
}

impl PruningSettings {
    /// The same settings never pruning the newest `min_keep_steps` agent steps with tool results.
    #[must_use]
    pub fn with_min_keep_steps(mut self, min_keep_steps: usize) -> Self {
        self.min_keep_steps = min_keep_steps;
        self
    }

    /// The same settings pruning only messages whose own count is above `min_tokens`.
    #[must_use]
    pub fn with_min_tokens(mut self, min_tokens: usize) -> Self {
        self.min_tokens = min_tokens;
        self
    }

    /// The same settings with another placeholder (`{tool_name}` is filled in).
    #[must_use]
    pub fn with_placeholder(mut self, placeholder: impl Into<String>) -> Self {
        self.placeholder = placeholder.into();
        self
    }

    /// The same settings never pruning results whose meta holds any of `keys`.
    #[must_use]
    pub fn with_skip_meta_keys<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.skip_meta_keys = keys.into_iter().map(Into::into).collect();
        self
    }

    /// The same settings never pruning results of the tools named in `tools`.
    #[must_use]
    pub fn with_exclude_tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.exclude_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// The same settings doing nothing unless at least this many tokens would be freed (`None`:
    /// any saving will do).
    #[must_use]
    pub fn with_clear_at_least(mut self, tokens: Option<usize>) -> Self {
        self.clear_at_least = tokens;
        self
    }

    /// The same settings clearing, or not, the arguments of the calls whose results were pruned.
    #[must_use]
    pub fn with_clear_tool_inputs(mut self, clear: bool) -> Self {
        self.clear_tool_inputs = clear;
        self
    }

    /// The same settings protecting the newest this-many tool-result messages instead of whole
    /// steps (`None`: steps, as the reference does).
    #[must_use]
    pub fn with_keep_tool_results(mut self, results: Option<usize>) -> Self {
        self.keep_tool_results = results;
        self
    }

    /// The same settings keeping this many characters of each end of a pruned result's text.
    #[must_use]
    pub fn with_preview_chars(mut self, chars: usize) -> Self {
        self.preview_chars = chars;
        self
    }

    /// Checks the rules the reference's constructor enforces, and those of the new options.
    ///
    /// # Errors
    ///
    /// When `min_keep_steps` is 0 or `keep_tool_results` is `Some(0)`.
    pub fn validate(&self) -> Result<(), Error> {
        if self.min_keep_steps < 1 {
            return Err(Error::MinKeepStepsTooSmall(self.min_keep_steps as i128));
        }
        if self.keep_tool_results == Some(0) {
            return Err(Error::KeepToolResultsTooSmall(0));
        }
        Ok(())
    }

    /// Reads settings in the plain form or in Haystack's `to_dict` form (see [`InitParameters`]).
    /// Missing keys take their defaults; unknown keys, values of the wrong kind and values the
    /// reference rejects (such as `min_keep_steps: 0` or a negative `min_tokens`) are errors.
    ///
    /// # Errors
    ///
    /// For an unknown key, a value of the wrong kind, a value the reference rejects, or a
    /// `type` other than the pruning compactor's.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        const KNOWN: &[&str] = &[
            "min_keep_steps",
            "min_tokens",
            "placeholder",
            "skip_meta_keys",
            "exclude_tools",
            "clear_at_least",
            "clear_tool_inputs",
            "keep_tool_results",
            "preview_chars",
        ];
        let params = InitParameters::read(value, HAYSTACK_PRUNING_TYPE, KNOWN)?;
        let mut settings = PruningSettings::default();
        if let Some(n) = params.integer("min_keep_steps")? {
            settings.min_keep_steps = match n {
                IntegerSetting::NonNegative(n) if n >= 1 => n,
                IntegerSetting::NonNegative(_) => return Err(Error::MinKeepStepsTooSmall(0)),
                IntegerSetting::Negative(n) => return Err(Error::MinKeepStepsTooSmall(n)),
            };
        }
        if let Some(n) = params.integer("min_tokens")? {
            settings.min_tokens = match n {
                IntegerSetting::NonNegative(n) => n,
                IntegerSetting::Negative(n) => return Err(Error::NegativeMinTokens(n)),
            };
        }
        if let Some(text) = params.string("placeholder")? {
            settings.placeholder = text.to_owned();
        }
        if let Some(keys) = params.strings("skip_meta_keys")? {
            settings.skip_meta_keys = keys;
        }
        if let Some(tools) = params.strings("exclude_tools")? {
            settings.exclude_tools = tools;
        }
        if params.get("clear_at_least").is_some_and(|v| !v.is_null()) {
            settings.clear_at_least = params.count("clear_at_least")?;
        }
        if let Some(clear) = params.boolean("clear_tool_inputs")? {
            settings.clear_tool_inputs = clear;
        }
        if params.get("keep_tool_results").is_some_and(|v| !v.is_null()) {
            settings.keep_tool_results = match params.integer("keep_tool_results")? {
                Some(IntegerSetting::NonNegative(n)) if n >= 1 => Some(n),
                Some(IntegerSetting::NonNegative(_)) => return Err(Error::KeepToolResultsTooSmall(0)),
                Some(IntegerSetting::Negative(n)) => return Err(Error::KeepToolResultsTooSmall(n)),
                None => None,
            };
        }
        if let Some(chars) = params.count("preview_chars")? {
            settings.preview_chars = chars;
        }
        settings.validate()?;
        Ok(settings)
    }

    /// The settings in Haystack's `to_dict` form, which its `from_dict` reads. Fails when an
    /// option beyond the reference is on, since Haystack would reject or ignore it.
    ///
    /// # Errors
    ///
    /// When an option beyond the reference is on.
    pub fn to_haystack_value(&self) -> Result<Value, Error> {
        if !self.exclude_tools.is_empty() {
            return Err(Error::NotInReference("exclude_tools"));
        }
        if self.clear_at_least.is_some() {
            return Err(Error::NotInReference("clear_at_least"));
        }
        if self.clear_tool_inputs {
            return Err(Error::NotInReference("clear_tool_inputs"));
        }
        if self.keep_tool_results.is_some() {
            return Err(Error::NotInReference("keep_tool_results"));
        }
        if self.preview_chars != 0 {
            return Err(Error::NotInReference("preview_chars"));
        }
        let mut params = Map::new();
        params.insert("min_keep_steps".into(), Value::from(self.min_keep_steps));
        params.insert("min_tokens".into(), Value::from(self.min_tokens));
        params.insert("placeholder".into(), Value::String(self.placeholder.clone()));
        params.insert(
            "skip_meta_keys".into(),
            Value::Array(self.skip_meta_keys.iter().cloned().map(Value::String).collect()),
        );
        let mut dict = Map::new();
        dict.insert("type".into(), Value::String(HAYSTACK_PRUNING_TYPE.into()));
        dict.insert("init_parameters".into(), Value::Object(params));
        Ok(Value::Object(dict))
    }
}

impl<'de> Deserialize<'de> for PruningSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        PruningSettings::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// The parameters of settings read from JSON: a plain object of them, or the `init_parameters`
/// of Haystack's `to_dict` form, `{"type": CLASS, "init_parameters": {...}}`.
///
/// The one reader of serialized settings in the workspace: this crate's compactors, the hooks of
/// compaction-hook and the store, policies, hook and compactor of compaction-offload all read
/// through it, with Haystack 3.4.1's rule (`default_from_dict`, then the class's constructor):
///
/// - a key the class does not take is an error naming the key and the class
///   ([`Error::UnknownSetting`]), as the constructor rejects an unexpected keyword argument;
/// - a missing key takes its default, or is an error when the class requires it;
/// - a `type` other than the class's is an error ([`Error::WrongType`]); keys beside `type` and
///   `init_parameters` are ignored, and a missing `init_parameters` means none, as
///   `default_from_dict` does.
///
/// A value of the wrong kind is an error naming the key ([`Error::InvalidSetting`]), where the
/// reference would hand it to the constructor as it is.
///
/// ```
/// use compaction_core::{Error, InitParameters};
///
/// let form = serde_json::json!({"type": "my.Class", "init_parameters": {"size": 3, "colour": "red"}});
/// let error = InitParameters::read(&form, "my.Class", &["size"]).unwrap_err();
/// assert_eq!(error.to_string(), "Class has no setting `colour`");
/// let params = InitParameters::read(&form, "my.Class", &["size", "colour"])?;
/// assert_eq!(params.count("size")?, Some(3));
/// assert_eq!(params.count("weight")?, None);
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct InitParameters<'v> {
    params: &'v Map<String, Value>,
}

/// An integer setting: Python integers have no size limit, so one too large for `usize` is
/// taken as `usize::MAX`, and one below 0 is kept for the error that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntegerSetting {
    /// 0 or more (`-0` included).
    NonNegative(usize),
    /// Below 0; one below `i128::MIN` is taken as `i128::MIN`.
    Negative(i128),
}

impl<'v> InitParameters<'v> {
    /// The parameters of `value`, settings of the Haystack class `class` (its full path, as
    /// `to_dict` writes it under `type`) that takes the keys `known`.
    ///
    /// # Errors
    ///
    /// When `value` or its `init_parameters` is not an object, its `type` is not `class`, or a
    /// parameter is not in `known`.
    pub fn read(value: &'v Value, class: &'static str, known: &[&str]) -> Result<Self, Error> {
        static NONE: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let object = as_object(value)?;
        let params = if object.contains_key("type") || object.contains_key("init_parameters") {
            let found = object.get("type").and_then(Value::as_str).unwrap_or_default();
            if found != class {
                return Err(Error::WrongType { found: found.to_owned(), expected: class });
            }
            match object.get("init_parameters") {
                None => NONE.get_or_init(Map::new),
                Some(params) => as_object(params)?,
            }
        } else {
            object
        };
        Self::check(params, short_name(class), known)?;
        Ok(InitParameters { params })
    }

    /// The parameters of `value`, a plain object of settings of `name` that takes the keys
    /// `known`: for settings that have no Haystack form, a `type` is a key like any other.
    ///
    /// # Errors
    ///
    /// When `value` is not an object or holds a key not in `known`.
    pub fn read_plain(value: &'v Value, name: &'static str, known: &[&str]) -> Result<Self, Error> {
        let params = as_object(value)?;
        Self::check(params, name, known)?;
        Ok(InitParameters { params })
    }

    fn check(params: &Map<String, Value>, name: &'static str, known: &[&str]) -> Result<(), Error> {
        match params.keys().find(|key| !known.contains(&key.as_str())) {
            Some(key) => Err(Error::UnknownSetting { key: key.clone(), of: name }),
            None => Ok(()),
        }
    }

    /// The value under `key`, `null` included; `None` when the key is missing.
    pub fn get(&self, key: &str) -> Option<&'v Value> {
        self.params.get(key)
    }

    /// The value under `key`, which the class requires.
    ///
    /// # Errors
    ///
    /// When `key` is missing.
    pub fn required(&self, key: &str) -> Result<&'v Value, Error> {
        self.get(key).ok_or_else(|| Self::missing(key))
    }

    /// The error for a required `key` that is missing (or `null` where a value is needed).
    pub fn missing(key: &str) -> Error {
        invalid(key, "is required")
    }

    /// The integer under `key`, if any.
    ///
    /// # Errors
    ///
    /// When the value is not an integer.
    pub fn integer(&self, key: &str) -> Result<Option<IntegerSetting>, Error> {
        self.get(key).map(|value| integer(key, value)).transpose()
    }

    /// The count (an integer of 0 or more) under `key`, if any.
    ///
    /// # Errors
    ///
    /// When the value is not an integer, or is below 0.
    pub fn count(&self, key: &str) -> Result<Option<usize>, Error> {
        match self.integer(key)? {
            None => Ok(None),
            Some(IntegerSetting::NonNegative(n)) => Ok(Some(n)),
            Some(IntegerSetting::Negative(_)) => Err(invalid(key, "must be at least 0")),
        }
    }

    /// The number under `key`, if any; an integer is taken as a float, as Python compares them.
    ///
    /// # Errors
    ///
    /// When the value is not a number.
    pub fn float(&self, key: &str) -> Result<Option<f64>, Error> {
        self.get(key).map(|value| float(key, value)).transpose()
    }

    /// The boolean under `key`, if any.
    ///
    /// # Errors
    ///
    /// When the value is not `true` or `false`.
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, Error> {
        self.get(key)
            .map(|value| value.as_bool().ok_or_else(|| invalid(key, "expected true or false")))
            .transpose()
    }

    /// The string under `key`, if any.
    ///
    /// # Errors
    ///
    /// When the value is not a string.
    pub fn string(&self, key: &str) -> Result<Option<&'v str>, Error> {
        self.get(key).map(|value| value.as_str().ok_or_else(|| invalid(key, "expected a string"))).transpose()
    }

    /// The list of strings under `key`, if any.
    ///
    /// # Errors
    ///
    /// When the value is not a list of strings.
    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>, Error> {
        self.get(key).map(|value| strings(key, value)).transpose()
    }

    /// The component under `key` (a Haystack form with a `type`, such as a hook's compactor) and
    /// its `type`; `None` when the key is missing or `null`.
    ///
    /// # Errors
    ///
    /// When the value is not an object with a string `type`.
    pub fn component(&self, key: &str) -> Result<Option<(&'v str, &'v Value)>, Error> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => Ok(Some((component_type(key, value)?, value))),
        }
    }
}

/// The `type` of the component `value`, found under `key` (a hook's `compactor`, a policy under
/// its tool's name).
///
/// # Errors
///
/// When `value` is not an object with a string `type`.
pub fn component_type<'v>(key: &str, value: &'v Value) -> Result<&'v str, Error> {
    value
        .as_object()
        .and_then(|object| object.get("type"))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(key, "expected a component with a `type`"))
}

/// A class's name without its module path, for messages.
fn short_name(class: &'static str) -> &'static str {
    class.rsplit('.').next().unwrap_or(class)
}

fn as_object(value: &Value) -> Result<&Map<String, Value>, Error> {
    match value {
        Value::Object(object) => Ok(object),
        Value::Null => Err(Error::NotAnObject("null")),
        Value::Bool(_) => Err(Error::NotAnObject("a boolean")),
        Value::Number(_) => Err(Error::NotAnObject("a number")),
        Value::String(_) => Err(Error::NotAnObject("a string")),
        Value::Array(_) => Err(Error::NotAnObject("an array")),
    }
}

fn invalid(key: &str, reason: &str) -> Error {
    Error::InvalidSetting { key: key.to_owned(), reason: reason.to_owned() }
}

fn integer(key: &str, value: &Value) -> Result<IntegerSetting, Error> {
    let Value::Number(number) = value else { return Err(invalid(key, "expected an integer")) };
    let text = number.to_string();
    let digits = text.strip_prefix('-').unwrap_or(&text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(key, "expected an integer"));
    }
    if text.starts_with('-') && !digits.bytes().all(|b| b == b'0') {
        return Ok(IntegerSetting::Negative(text.parse().unwrap_or(i128::MIN)));
    }
    Ok(IntegerSetting::NonNegative(digits.parse().unwrap_or(usize::MAX)))
}

fn float(key: &str, value: &Value) -> Result<f64, Error> {
    match value {
        Value::Number(number) => number.to_string().parse().map_err(|_| invalid(key, "expected a number")),
        _ => Err(invalid(key, "expected a number")),
    }
}

fn strings(key: &str, value: &Value) -> Result<Vec<String>, Error> {
    let Value::Array(items) = value else { return Err(invalid(key, "expected a list of strings")) };
    items
        .iter()
        .map(|item| {
            item.as_str().map(str::to_owned).ok_or_else(|| invalid(key, "expected a list of strings"))
        })
        .collect()
}
