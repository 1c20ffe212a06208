//! Integration tests of compaction-model: conformance with the reference, and bad input.

mod conformance;
mod errors;

use std::path::PathBuf;

/// Every fixture file of one kind: the committed ones, plus those of a differential run when
/// `COMPACTION_EXTRA_FIXTURES` names its output root.
pub fn fixture_files(kind: &str) -> Vec<PathBuf> {
    let mut roots = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(kind)];
    if let Some(extra) = std::env::var_os("COMPACTION_EXTRA_FIXTURES") {
        roots.push(PathBuf::from(extra).join("crates/compaction-model/tests/data").join(kind));
    }
    let mut files: Vec<PathBuf> = roots
        .iter()
        .filter_map(|root| std::fs::read_dir(root).ok())
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// Equality as Python sees two JSON documents: numbers by value (a float `1e-5` equals
/// `1e-05`), integers digit for digit, and object keys in the same order.
pub fn python_equal(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let float = |s: &str| s.contains(['.', 'e', 'E']);
            let (x, y) = (x.as_str(), y.as_str());
            match (float(x), float(y)) {
                (true, true) => x.parse::<f64>().ok() == y.parse::<f64>().ok(),
                (false, false) => {
                    x.trim_start_matches('-') == "0" && y.trim_start_matches('-') == "0" || x == y
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
