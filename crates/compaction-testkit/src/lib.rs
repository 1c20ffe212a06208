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

/// Whether a message (Haystack `ChatMessage` JSON) holds a tool result beside other parts, or
/// several results: the reference reads only a message's first result and drops the rest of it
/// when it rewrites one, which this project does not (README, "Deviations from the reference").
pub fn holds_result_beside_other_parts(message: &Value) -> bool {
    let parts = message["content"].as_array().map(Vec::as_slice).unwrap_or_default();
    let results = parts.iter().filter(|p| p.get("tool_call_result").is_some()).count();
    results >= 1 && parts.len() >= 2
}

/// Checks a pruned conversation against the reference's where the input holds messages the
/// pruning deviation applies to (see [`holds_result_beside_other_parts`]). Returns what is wrong,
/// empty when it holds.
///
/// Before the first such message the walk is the reference's, and on such a message this
/// project frees at most what the reference frees (it keeps the other results and parts), so
/// its running total is never below the reference's. Hence:
///
/// - every other message is the reference's, except that, when the reference stopped because it
///   reached the target (`reference_reached_target`), a message after the last one it changed
///   may be pruned too, in the reference's form: a tool message with `placeholder` (the tool's
///   name filled in), the same call and error flag, and the meta plus the pruning marker;
/// - a message the deviation applies to keeps its role (a tool message when it holds only
///   results), every part in place, every call id, and each result either as it was or as the
///   placeholder, with the reference's marker when both rewrote it.
pub fn check_pruning_deviation(
    input: &[Value],
    ours: &[Value],
    reference: &[Value],
    placeholder: &str,
    reference_reached_target: bool,
) -> Vec<String> {
    let mut problems = Vec::new();
    if input.len() != ours.len() || input.len() != reference.len() {
        return vec![format!(
            "lengths differ: input {}, ours {}, reference {}",
            input.len(),
            ours.len(),
            reference.len()
        )];
    }
    let last_changed = (0..input.len()).rev().find(|&i| !python_equal(&input[i], &reference[i]));
    let pruned_text = |result: &Value| {
        let name = result["origin"]["tool_name"].as_str().unwrap_or_default();
        Value::String(placeholder.replace("{tool_name}", name))
    };
    for i in 0..input.len() {
        let (before, mine, theirs) = (&input[i], &ours[i], &reference[i]);
        if holds_result_beside_other_parts(before) {
            problems.extend(deviation_problems(i, before, mine, theirs, &pruned_text));
            continue;
        }
        if python_equal(mine, theirs) {
            continue;
        }
        let later = reference_reached_target && last_changed.is_none_or(|last| i > last);
        if later && python_equal(theirs, before) && is_reference_pruned(before, mine, &pruned_text) {
            continue;
        }
        problems.push(format!("message {i} differs from the reference's"));
    }
    problems
}

fn marker_is_pruning(message: &Value) -> bool {
    message["meta"]["context_compaction"]["strategy"] == "tool_result_pruning"
}

/// `after` is `before` pruned as the reference prunes a message of one result.
fn is_reference_pruned(before: &Value, after: &Value, pruned_text: &dyn Fn(&Value) -> Value) -> bool {
    let (Some(result), Some(parts)) =
        (before["content"][0].get("tool_call_result"), after["content"].as_array())
    else {
        return false;
    };
    let Some(new) = parts.first().and_then(|p| p.get("tool_call_result")) else { return false };
    let mut meta = before["meta"].as_object().cloned().unwrap_or_default();
    meta.remove("context_compaction");
    let mut their_meta = after["meta"].as_object().cloned().unwrap_or_default();
    their_meta.remove("context_compaction");
    parts.len() == 1
        && after["role"] == "tool"
        && marker_is_pruning(after)
        && python_equal(&Value::Object(meta), &Value::Object(their_meta))
        && python_equal(&new["origin"], &result["origin"])
        && new["error"] == result["error"]
        && new["result"] == pruned_text(result)
}

fn deviation_problems(
    i: usize,
    before: &Value,
    mine: &Value,
    theirs: &Value,
    pruned_text: &dyn Fn(&Value) -> Value,
) -> Vec<String> {
    let mut problems = Vec::new();
    let (old, new) = (
        before["content"].as_array().cloned().unwrap_or_default(),
        mine["content"].as_array().cloned().unwrap_or_default(),
    );
    if old.len() != new.len() {
        return vec![format!("message {i}: {} parts became {}", old.len(), new.len())];
    }
    let only_results = old.iter().all(|p| p.get("tool_call_result").is_some());
    let mut changed = false;
    for (position, (a, b)) in old.iter().zip(&new).enumerate() {
        match (a.get("tool_call_result"), b.get("tool_call_result")) {
            (Some(a), Some(b)) => {
                if !python_equal(&a["origin"], &b["origin"]) || a["error"] != b["error"] {
                    problems.push(format!("message {i}: result {position} lost its call or error flag"));
                } else if !python_equal(a, b) {
                    changed = true;
                    if b["result"] != pruned_text(a) {
                        problems.push(format!(
                            "message {i}: result {position} is neither kept nor the placeholder"
                        ));
                    }
                }
            }
            _ if python_equal(a, b) => {}
            _ => problems.push(format!("message {i}: part {position} changed")),
        }
    }
    if changed {
        let role_ok = if only_results { mine["role"] == "tool" } else { mine["role"] == before["role"] };
        if !role_ok || !marker_is_pruning(mine) {
            problems.push(format!("message {i}: role or marker wrong"));
        }
        if marker_is_pruning(theirs)
            && mine["meta"]["context_compaction"] != theirs["meta"]["context_compaction"]
        {
            problems.push(format!("message {i}: marker differs from the reference's"));
        }
    } else if !python_equal(mine, before) {
        problems.push(format!("message {i} changed without a pruned result"));
    }
    problems
}

/// `value` as Python's `json.dumps(value)` writes it (`ensure_ascii` true, its default) or
/// `json.dumps(value, ensure_ascii=False)`: `", "` and `": "` between items, the short escapes
/// and `\u00XX` for control characters, and with `ensure_ascii` every character outside
/// `' '..='~'` as `\uXXXX` (lowercase, surrogate pairs above U+FFFF, one escape for a lone
/// surrogate's stand-in). Numbers are written as they were read. The way a Haystack user's file
/// is spelled, for tests of the readers.
pub fn python_dumps(value: &Value, ensure_ascii: bool) -> String {
    compaction_json::python::PythonJson::new().ensure_ascii(ensure_ascii).float_repr(false).dumps(value)
}

#[cfg(test)]
mod tests {
    use super::{python_dumps, python_equal};
    use serde_json::json;

    #[test]
    fn the_deviation_check_catches_what_it_should() {
        use super::check_pruning_deviation;
        let result = |id: &str, text: &str| json!({"tool_call_result": {"result": text, "origin": {"tool_name": "t", "arguments": {}, "id": id}, "error": false}});
        let marker = json!({"context_compaction": {"strategy": "tool_result_pruning", "original_tokens": 9}});
        let input =
            vec![json!({"role": "tool", "content": [result("a", "long"), result("b", "long")], "meta": {}})];
        let reference = vec![json!({"role": "tool", "content": [result("a", "P")], "meta": marker})];
        let kept =
            vec![json!({"role": "tool", "content": [result("a", "P"), result("b", "long")], "meta": marker})];
        assert!(check_pruning_deviation(&input, &kept, &reference, "P", true).is_empty());
        // Dropping a result, or replacing it with something else, is caught.
        assert!(!check_pruning_deviation(&input, &reference, &reference, "P", true).is_empty());
        let other =
            vec![json!({"role": "tool", "content": [result("a", "Q"), result("b", "long")], "meta": marker})];
        assert!(!check_pruning_deviation(&input, &other, &reference, "P", true).is_empty());
        let moved =
            vec![json!({"role": "tool", "content": [result("b", "long"), result("a", "P")], "meta": marker})];
        assert!(!check_pruning_deviation(&input, &moved, &reference, "P", true).is_empty());
        // A plain message pruned where the reference kept it is allowed only after the
        // reference stopped at its target.
        let mut input2 = input.clone();
        input2.push(json!({"role": "tool", "content": [result("c", "long")], "meta": {}}));
        let mut reference2 = reference.clone();
        reference2.push(input2[1].clone());
        let mut ours2 = kept.clone();
        ours2.push(json!({"role": "tool", "content": [result("c", "P")], "meta": marker}));
        assert!(check_pruning_deviation(&input2, &ours2, &reference2, "P", true).is_empty());
        assert!(!check_pruning_deviation(&input2, &ours2, &reference2, "P", false).is_empty());
    }

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
