//! Token usage as the reference's agent keeps it: each reply's `meta["usage"]` summed into a
//! running total, and read back by the keys the providers use.
//!
//! Usage payloads differ by provider (`prompt_tokens` / `completion_tokens`, `input_tokens` /
//! `output_tokens`, `total_tokens`, nested details), so they are kept as JSON and read the way
//! the reference reads them.

use compaction_model::{JsonObject, Message};
use serde_json::{Number, Value};

/// The keys a provider reports its input tokens under, in the order they are looked for.
pub(crate) const INPUT_TOKEN_KEYS: &[&str] = &["prompt_tokens", "input_tokens"];
/// The keys a provider reports its output tokens under, in the order they are looked for.
pub(crate) const OUTPUT_TOKEN_KEYS: &[&str] = &["completion_tokens", "output_tokens"];

/// The first number (not a boolean) under `keys` in `usage`, truncated toward zero as Python's
/// `int()` does; 0 when there is none.
///
/// Python's integers have no bounds; one beyond `i128` stops at its bound here, and a float too
/// large for a float (`1e400`) reads as the largest count instead of raising as `int(inf)` does.
pub(crate) fn first_numeric(usage: &JsonObject, keys: &[&str]) -> i128 {
    keys.iter()
        .find_map(|key| match usage.get(*key) {
            Some(Value::Number(n)) => Some(python_int(n)),
            _ => None,
        })
        .unwrap_or(0)
}

/// The input plus output tokens one usage payload reports.
pub(crate) fn context_tokens_from_usage(usage: &JsonObject) -> i128 {
    first_numeric(usage, INPUT_TOKEN_KEYS).saturating_add(first_numeric(usage, OUTPUT_TOKEN_KEYS))
}

/// The total a cumulative usage payload reports: `total_tokens` when it is there and not 0,
/// otherwise input plus output tokens.
pub fn total_tokens(usage: &JsonObject) -> i128 {
    match first_numeric(usage, &["total_tokens"]) {
        0 => context_tokens_from_usage(usage),
        total => total,
    }
}

fn is_float(n: &Number) -> bool {
    n.to_string().contains(['.', 'e', 'E'])
}

fn as_f64(n: &Number) -> f64 {
    // Correctly rounded, as Python's `float()` of an int or a float literal; overflow gives ±inf.
    n.to_string().parse().unwrap_or(f64::NAN)
}

fn python_int(n: &Number) -> i128 {
    if is_float(n) {
        // Truncates toward zero and stops at the bounds, as `as` does.
        return as_f64(n) as i128;
    }
    let text = n.to_string();
    text.parse().unwrap_or(if text.starts_with('-') { i128::MIN } else { i128::MAX })
}

/// Sums `new` into `current` as the reference's agent does: objects merged key by key (new keys
/// at the end), numbers added (booleans count as 0 and 1, as Python's `bool` is an `int`), and
/// anything else replaced by the new value.
pub(crate) fn accumulate(current: &Value, new: &Value) -> Value {
    match (current, new) {
        (Value::Object(current), Value::Object(new)) => {
            let mut merged = current.clone();
            for (key, value) in new {
                let value = match merged.get(key) {
                    Some(existing) => accumulate(existing, value),
                    None => value.clone(),
                };
                merged.insert(key.clone(), value);
            }
            Value::Object(merged)
        }
        (a, b) if is_numeric(a) && is_numeric(b) => add(a, b).unwrap_or_else(|| new.clone()),
        _ => new.clone(),
    }
}

fn is_numeric(value: &Value) -> bool {
    matches!(value, Value::Number(_) | Value::Bool(_))
}

/// `a + b` in Python's arithmetic: integers exactly (within `i128`), floats when either is one.
/// `None` when the sum has no JSON form (not finite).
fn add(a: &Value, b: &Value) -> Option<Value> {
    let float = |v: &Value| matches!(v, Value::Number(n) if is_float(n));
    let to_f64 = |v: &Value| match v {
        Value::Number(n) => as_f64(n),
        Value::Bool(b) => f64::from(u8::from(*b)),
        _ => 0.0,
    };
    let to_int = |v: &Value| match v {
        Value::Number(n) => n.to_string().parse::<i128>().ok(),
        Value::Bool(b) => Some(i128::from(*b)),
        _ => None,
    };
    if !float(a) && !float(b) {
        if let Some(sum) = to_int(a).zip(to_int(b)).and_then(|(x, y)| x.checked_add(y)) {
            return Some(Value::Number(sum.to_string().parse().ok()?));
        }
    }
    Number::from_f64(to_f64(a) + to_f64(b)).map(Value::Number)
}

/// Records the usage of one model call's replies, as the reference's agent does after every
/// call: each reply's `meta["usage"]` object is summed into `token_usage`, and the last reply's
/// input plus output tokens, when not 0, become `context_tokens` (a negative count, which no
/// provider reports, is taken as unknown: 0).
pub(crate) fn record(token_usage: &mut JsonObject, context_tokens: &mut usize, replies: &[Message]) {
    for reply in replies {
        if let Some(usage @ Value::Object(_)) = reply.meta.get("usage") {
            if let Value::Object(sum) = accumulate(&Value::Object(std::mem::take(token_usage)), usage) {
                *token_usage = sum;
            }
        }
    }
    let last = replies.last().and_then(|reply| reply.meta.get("usage")).and_then(Value::as_object);
    if let Some(usage) = last {
        let tokens = context_tokens_from_usage(usage);
        if tokens != 0 {
            *context_tokens = usize::try_from(tokens).unwrap_or(if tokens < 0 { 0 } else { usize::MAX });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn totals_read_as_python_reads_them() {
        assert_eq!(total_tokens(&object(json!({"total_tokens": 12, "prompt_tokens": 5}))), 12);
        // 0.5 truncates to 0, which falls back to input plus output.
        assert_eq!(
            total_tokens(&object(json!({"total_tokens": 0.5, "input_tokens": 3, "output_tokens": 4}))),
            7
        );
        // Booleans are skipped, strings are not numbers.
        assert_eq!(total_tokens(&object(json!({"prompt_tokens": true, "input_tokens": 9}))), 9);
        assert_eq!(total_tokens(&object(json!({"prompt_tokens": "9"}))), 0);
        assert_eq!(total_tokens(&object(json!({"total_tokens": -3, "prompt_tokens": 5}))), -3);
        let huge: Value = serde_json::from_str(r#"{"total_tokens": 1e400}"#).unwrap();
        assert_eq!(total_tokens(&object(huge)), i128::MAX);
    }

    #[test]
    fn context_counts_no_provider_sends_are_clamped() {
        let reply = |usage: Value| Message::assistant("r").with_meta(object(json!({"usage": usage})));
        let (mut usage, mut context) = (JsonObject::new(), 7);
        record(&mut usage, &mut context, &[reply(json!({"input_tokens": -5, "output_tokens": 1}))]);
        assert_eq!(context, 0, "a negative count is unknown");
        record(&mut usage, &mut context, &[reply(json!({"input_tokens": 0, "output_tokens": 0}))]);
        assert_eq!(context, 0, "0 leaves the count as it was");
        let huge: Value = serde_json::from_str(r#"{"prompt_tokens": 1e400}"#).unwrap();
        record(&mut usage, &mut context, &[reply(huge)]);
        assert_eq!(context, usize::MAX);
        let beyond: Value =
            serde_json::from_str(r#"{"total_tokens": 1000000000000000000000000000000000000000000}"#).unwrap();
        assert_eq!(total_tokens(&object(beyond)), i128::MAX);
    }

    #[test]
    fn usage_accumulates_as_python_adds() {
        let sum = accumulate(
            &json!({"a": 1, "b": true, "c": {"d": 2.5}}),
            &json!({"b": true, "c": {"d": 1}, "e": "x"}),
        );
        assert_eq!(sum, json!({"a": 1, "b": 2, "c": {"d": 3.5}, "e": "x"}));
        assert_eq!(accumulate(&json!({"a": "s"}), &json!({"a": 3})), json!({"a": 3}));
    }
}
