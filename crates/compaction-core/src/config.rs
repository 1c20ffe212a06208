//! Reading a compactor's settings from a plain JSON object or from Haystack's `to_dict` form
//! (`{"type": CLASS, "init_parameters": {...}}`), shared by the compactors added after pruning.

use serde_json::{Map, Value};

use crate::error::Error;
use crate::settings::{as_object, integer, invalid, Integer};

/// The parameters in `value`: its `init_parameters` when it is Haystack's form of `expected`
/// (an empty map when they are missing), or the plain object itself.
pub(crate) fn parameters<'v>(
    value: &'v Value,
    expected: &'static str,
) -> Result<&'v Map<String, Value>, Error> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    let object = as_object(value)?;
    if !object.contains_key("init_parameters") && !object.contains_key("type") {
        return Ok(object);
    }
    let found = object.get("type").and_then(Value::as_str).unwrap_or_default();
    if found != expected {
        return Err(Error::WrongType { found: found.to_owned(), expected });
    }
    if let Some(extra) = object.keys().find(|k| *k != "type" && *k != "init_parameters") {
        return Err(Error::UnknownSetting(extra.clone()));
    }
    match object.get("init_parameters") {
        None => Ok(EMPTY.get_or_init(Map::new)),
        Some(params) => as_object(params),
    }
}

/// A count that may be 0 (`min_keep_steps` of the strategies that allow it).
pub(crate) fn min_keep_steps(key: &str, value: &Value) -> Result<usize, Error> {
    match integer(key, value)? {
        Integer::NonNegative(n) => Ok(n),
        Integer::Negative(n) => Err(Error::NegativeMinKeepSteps(n)),
    }
}

/// `true` or `false`.
pub(crate) fn boolean(key: &str, value: &Value) -> Result<bool, Error> {
    value.as_bool().ok_or_else(|| invalid(key, "expected true or false"))
}
