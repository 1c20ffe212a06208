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

    /// Reads settings in the plain form or in Haystack's `to_dict` form. Missing keys take their
    /// defaults; unknown keys, values of the wrong kind and values the reference rejects (such as
    /// `min_keep_steps: 0` or a negative `min_tokens`) are errors.
    ///
    /// # Errors
    ///
    /// For an unknown key, a value of the wrong kind, a value the reference rejects, or a
    /// `type` other than the pruning compactor's.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let object = as_object(value)?;
        let params = if object.contains_key("init_parameters") || object.contains_key("type") {
            let found = object.get("type").and_then(Value::as_str).unwrap_or_default();
            if found != HAYSTACK_PRUNING_TYPE {
                return Err(Error::WrongType { found: found.to_owned(), expected: HAYSTACK_PRUNING_TYPE });
            }
            if let Some(extra) = object.keys().find(|k| *k != "type" && *k != "init_parameters") {
                return Err(Error::UnknownSetting(extra.clone()));
            }
            match object.get("init_parameters") {
                None => return finish(PruningSettings::default()),
                Some(params) => as_object(params)?,
            }
        } else {
            object
        };
        let mut settings = PruningSettings::default();
        for (key, value) in params {
            match key.as_str() {
                "min_keep_steps" => {
                    settings.min_keep_steps = match integer(key, value)? {
                        Integer::NonNegative(n) if n >= 1 => n,
                        Integer::NonNegative(_) => return Err(Error::MinKeepStepsTooSmall(0)),
                        Integer::Negative(n) => return Err(Error::MinKeepStepsTooSmall(n)),
                    }
                }
                "min_tokens" => {
                    settings.min_tokens = match integer(key, value)? {
                        Integer::NonNegative(n) => n,
                        Integer::Negative(n) => return Err(Error::NegativeMinTokens(n)),
                    }
                }
                "placeholder" => settings.placeholder = string(key, value)?,
                "skip_meta_keys" => settings.skip_meta_keys = strings(key, value)?,
                "exclude_tools" => settings.exclude_tools = strings(key, value)?,
                "clear_at_least" => settings.clear_at_least = optional_count(key, value)?,
                "clear_tool_inputs" => {
                    settings.clear_tool_inputs =
                        value.as_bool().ok_or_else(|| invalid(key, "expected true or false"))?
                }
                "keep_tool_results" => {
                    settings.keep_tool_results = match value {
                        Value::Null => None,
                        _ => match integer(key, value)? {
                            Integer::NonNegative(n) if n >= 1 => Some(n),
                            Integer::NonNegative(_) => return Err(Error::KeepToolResultsTooSmall(0)),
                            Integer::Negative(n) => return Err(Error::KeepToolResultsTooSmall(n)),
                        },
                    }
                }
                "preview_chars" => {
                    settings.preview_chars = match integer(key, value)? {
                        Integer::NonNegative(n) => n,
                        Integer::Negative(_) => return Err(invalid(key, "must be at least 0")),
                    }
                }
                _ => return Err(Error::UnknownSetting(key.clone())),
            }
        }
        finish(settings)
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

fn finish(settings: PruningSettings) -> Result<PruningSettings, Error> {
    settings.validate()?;
    Ok(settings)
}

pub(crate) fn as_object(value: &Value) -> Result<&Map<String, Value>, Error> {
    match value {
        Value::Object(object) => Ok(object),
        Value::Null => Err(Error::NotAnObject("null")),
        Value::Bool(_) => Err(Error::NotAnObject("a boolean")),
        Value::Number(_) => Err(Error::NotAnObject("a number")),
        Value::String(_) => Err(Error::NotAnObject("a string")),
        Value::Array(_) => Err(Error::NotAnObject("an array")),
    }
}

pub(crate) fn invalid(key: &str, reason: &str) -> Error {
    Error::InvalidSetting { key: key.to_owned(), reason: reason.to_owned() }
}

pub(crate) enum Integer {
    NonNegative(usize),
    Negative(i128),
}

/// An integer setting. Python integers have no size limit, so one too large for `usize` is
/// taken as `usize::MAX`, which behaves the same for every setting here.
pub(crate) fn integer(key: &str, value: &Value) -> Result<Integer, Error> {
    let Value::Number(number) = value else { return Err(invalid(key, "expected an integer")) };
    let text = number.to_string();
    let digits = text.strip_prefix('-').unwrap_or(&text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(key, "expected an integer"));
    }
    if text.starts_with('-') {
        if digits.bytes().all(|b| b == b'0') {
            return Ok(Integer::NonNegative(0));
        }
        return Ok(Integer::Negative(text.parse().unwrap_or(i128::MIN)));
    }
    Ok(Integer::NonNegative(text.parse().unwrap_or(usize::MAX)))
}

fn optional_count(key: &str, value: &Value) -> Result<Option<usize>, Error> {
    match value {
        Value::Null => Ok(None),
        _ => match integer(key, value)? {
            Integer::NonNegative(n) => Ok(Some(n)),
            Integer::Negative(_) => Err(invalid(key, "must be at least 0")),
        },
    }
}

pub(crate) fn string(key: &str, value: &Value) -> Result<String, Error> {
    value.as_str().map(str::to_owned).ok_or_else(|| invalid(key, "expected a string"))
}

pub(crate) fn strings(key: &str, value: &Value) -> Result<Vec<String>, Error> {
    let Value::Array(items) = value else { return Err(invalid(key, "expected a list of strings")) };
    items
        .iter()
        .map(|item| {
            item.as_str().map(str::to_owned).ok_or_else(|| invalid(key, "expected a list of strings"))
        })
        .collect()
}
