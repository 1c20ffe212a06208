//! JSON printed as Python's `json.dumps(value, ensure_ascii=False)` prints it: the text the
//! reference sends as a tool call's `arguments`, so a provider counts the same characters.
//!
//! Keys keep their order (no `sort_keys`), separators are `", "` and `": "`, non-ASCII text is
//! written as is, and numbers as Python reads and prints them (through compaction-tokens, which
//! owns that printing).

use serde_json::Value;

/// `json.dumps(value, ensure_ascii=False)`.
pub(crate) fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => compaction_tokens::write_python_json_number(n, out),
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(key, out);
                out.push_str(": ");
                write(item, out);
            }
            out.push('}');
        }
    }
}

/// A string literal: only `"`, `\` and the control characters below U+0020 are escaped, as
/// Python's encoder does with `ensure_ascii=False`.
fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's truth value of a JSON value: `null`, `false`, `0`, `""`, `[]` and `{}` are false.
pub(crate) fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prints_as_python_does_without_ascii_escapes() {
        let value: Value = serde_json::from_str(
            r#"{"z": 1, "a": [1e-5, 1.0, -0, 1e16, true, null], "ключ": "😀\"\\\n\u0001\u007f"}"#,
        )
        .unwrap();
        assert_eq!(
            dumps(&value),
            "{\"z\": 1, \"a\": [1e-05, 1.0, 0, 1e+16, true, null], \"ключ\": \"😀\\\"\\\\\\n\\u0001\u{7f}\"}"
        );
        assert_eq!(dumps(&json!({})), "{}");
        assert_eq!(dumps(&json!([])), "[]");
    }

    #[test]
    fn truth_values_are_pythons() {
        for falsy in [json!(null), json!(false), json!(0), json!(0.0), json!(""), json!([]), json!({})] {
            assert!(!truthy(&falsy), "{falsy}");
        }
        for true_ in [json!(true), json!(1), json!("x"), json!([0]), json!({"a": null})] {
            assert!(truthy(&true_), "{true_}");
        }
    }
}
