//! Small readers for settings in JSON: objects, Haystack component dicts, integers and floats.
//!
//! A leaf module: it depends on nothing of this crate but the error type.

use serde_json::{Map, Value};

use crate::error::Error;

/// The `init_parameters` of a Haystack `to_dict` form of `expected`, or the plain object itself.
pub(crate) fn init_parameters<'a>(value: &'a Value, expected: &str) -> Result<&'a Map<String, Value>, Error> {
    let object = as_object("settings", value)?;
    if !object.contains_key("type") && !object.contains_key("init_parameters") {
        return Ok(object);
    }
    let found = object.get("type").and_then(Value::as_str).unwrap_or_default();
    if found != expected {
        return Err(Error::UnsupportedComponent { key: "type".into(), type_name: found.into() });
    }
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    match object.get("init_parameters") {
        None => Ok(EMPTY.get_or_init(Map::new)),
        Some(params) => as_object("init_parameters", params),
    }
}

pub(crate) fn invalid(key: &str, reason: &str) -> Error {
    Error::InvalidSetting { key: key.to_owned(), reason: reason.to_owned() }
}

pub(crate) fn as_object<'a>(key: &str, value: &'a Value) -> Result<&'a Map<String, Value>, Error> {
    value.as_object().ok_or_else(|| invalid(key, "expected a JSON object"))
}

/// The `type` of a Haystack component dict.
pub(crate) fn component<'a>(key: &str, value: &'a Value) -> Result<&'a str, Error> {
    as_object(key, value)?
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(key, "expected a component with a `type`"))
}

pub(crate) enum Integer {
    NonNegative(usize),
    Negative(i128),
}

/// An integer setting. Python integers have no size limit; one too large for `usize` is taken
/// as `usize::MAX`.
pub(crate) fn integer(key: &str, value: &Value) -> Result<Integer, Error> {
    let Value::Number(number) = value else { return Err(invalid(key, "expected an integer")) };
    let text = number.to_string();
    let digits = text.strip_prefix('-').unwrap_or(&text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(key, "expected an integer"));
    }
    if text.starts_with('-') && !digits.bytes().all(|b| b == b'0') {
        return Ok(Integer::Negative(text.parse().unwrap_or(i128::MIN)));
    }
    Ok(Integer::NonNegative(digits.parse().unwrap_or(usize::MAX)))
}

/// A non-negative integer setting.
pub(crate) fn count(key: &str, value: &Value) -> Result<usize, Error> {
    match integer(key, value)? {
        Integer::NonNegative(n) => Ok(n),
        Integer::Negative(_) => Err(invalid(key, "must be at least 0")),
    }
}
