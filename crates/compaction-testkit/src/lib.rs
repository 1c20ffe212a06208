//! Helpers the conformance tests of every crate share: finding the reference fixtures (committed,
//! and those of a differential run) and comparing JSON as Python would.
//!
//! A dev-dependency only; it depends on nothing of ours, so any crate can use it without a cycle.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The environment variable naming a differential run's output root (`cargo xtask differential`).
pub const EXTRA_FIXTURES: &str = "COMPACTION_EXTRA_FIXTURES";

/// Every `*.json` fixture of `kind` for the crate at `manifest_dir` (its `tests/data/KIND`), plus
/// those of a differential run when [`EXTRA_FIXTURES`] is set, each with the data folder it came
/// from, sorted.
pub fn fixture_files(manifest_dir: &str, kind: &str) -> Vec<(PathBuf, PathBuf)> {
    let manifest_dir = Path::new(manifest_dir);
    let mut roots = vec![manifest_dir.join("tests/data")];
    if let (Some(extra), Some(name)) = (std::env::var_os(EXTRA_FIXTURES), manifest_dir.file_name()) {
        roots.push(PathBuf::from(extra).join("crates").join(name).join("tests/data"));
    }
    let mut files = Vec::new();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(root.join(kind)) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                files.push((root.clone(), path));
            }
        }
    }
    files.sort();
    files
}

/// Equality as Python sees two JSON documents: floats by value (`1e-5` equals `1e-05`), integers
/// digit for digit (`-0` equals `0`), and object keys in the same order.
pub fn python_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let float = |s: &str| s.contains(['.', 'e', 'E']);
            let (x, y) = (x.to_string(), y.to_string());
            match (float(&x), float(&y)) {
                (true, true) => x.parse::<f64>().ok() == y.parse::<f64>().ok(),
                (false, false) => {
                    x == y || (x.trim_start_matches('-') == "0" && y.trim_start_matches('-') == "0")
                }
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| python_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((ka, va), (kb, vb))| ka == kb && python_equal(va, vb))
        }
        _ => a == b,
    }
}

/// `value` as Python's `json.dumps(value)` writes it (`ensure_ascii` true, its default) or
/// `json.dumps(value, ensure_ascii=False)`: `", "` and `": "` between items, the short escapes
/// and `\u00XX` for control characters, and with `ensure_ascii` every character outside
/// `' '..='~'` as `\uXXXX` (lowercase, surrogate pairs above U+FFFF). Numbers are written as
/// they were read. The way a Haystack user's file is spelled, for tests of the readers.
pub fn python_dumps(value: &Value, ensure_ascii: bool) -> String {
    let mut out = String::new();
    python_value(value, ensure_ascii, &mut out);
    out
}

fn python_value(value: &Value, ascii: bool, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => python_string(s, ascii, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_value(item, ascii, out);
            }
            out.push(']');
        }
        Value::Object(object) => {
            out.push('{');
            for (i, (key, item)) in object.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_string(key, ascii, out);
                out.push_str(": ");
                python_value(item, ascii, out);
            }
            out.push('}');
        }
    }
}

fn python_string(s: &str, ascii: bool, out: &mut String) {
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
            c if c < ' ' || (ascii && c > '~') => {
                let mut units = [0; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::{python_dumps, python_equal};
    use serde_json::json;

    #[test]
    fn python_spelling_is_pythons() {
        // What Python 3.11's json.dumps writes for this value, with and without ensure_ascii.
        let value = json!({"a": "\u{e9}\u{1f600}\n\u{1}\u{7f}\"", "b": [1, 2.5, null, true], "c": {}});
        assert_eq!(
            python_dumps(&value, true),
            r#"{"a": "\u00e9\ud83d\ude00\n\u0001\u007f\"", "b": [1, 2.5, null, true], "c": {}}"#
        );
        assert_eq!(
            python_dumps(&value, false),
            "{\"a\": \"\u{e9}\u{1f600}\\n\\u0001\u{7f}\\\"\", \"b\": [1, 2.5, null, true], \"c\": {}}"
        );
    }

    #[test]
    fn numbers_compare_as_python_reads_them() {
        let parse = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        assert!(python_equal(&parse("[1e-5, -0, 10]"), &parse("[1e-05, 0, 10]")));
        assert!(!python_equal(&parse("[1.0]"), &parse("[1]")));
        assert!(!python_equal(&json!({"a": 1, "b": 2}), &json!({"b": 2, "a": 1})));
    }
}
