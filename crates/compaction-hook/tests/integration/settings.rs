//! Reading the hooks' settings from JSON, as data: `tests/data/settings/cases.json` holds, for
//! each reader, an unknown key, missing keys, values of the wrong kind and forms of the wrong
//! class.

use std::path::Path;

use compaction_hook::{CompactionHook, CompactionHookSettings, TokenBudgetHook};
use serde_json::{json, Value};

/// What `reader` makes of `value`, or the error's text.
fn read(reader: &str, value: &Value) -> Result<Value, String> {
    match reader {
        "CompactionHookSettings" => CompactionHookSettings::from_value(value)
            .map(|settings| serde_json::to_value(settings).expect("serializes"))
            .map_err(|e| compaction_core::error_chain(&e)),
        "CompactionHook" => CompactionHook::from_value(value)
            .map(|hook| json!({"compactor": hook.compactor().name()}))
            .map_err(|e| compaction_core::error_chain(&e)),
        "TokenBudgetHook" => TokenBudgetHook::from_value(value)
            .map(|hook| json!({"max_total_tokens": hook.max_total_tokens(), "add_final_message": hook.add_final_message()}))
            .map_err(|e| compaction_core::error_chain(&e)),
        other => panic!("no reader {other}"),
    }
}

#[test]
fn settings_read_as_the_cases_say() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/settings/cases.json");
    let cases = crate::read_json(&path);
    let mut wrong = Vec::new();
    for case in cases["cases"].as_array().expect("cases") {
        let reader = case["reader"].as_str().expect("reader");
        let got = read(reader, &case["value"]);
        let ok = match (&got, case.get("error")) {
            (Err(text), Some(expected)) => expected == text,
            (Ok(read), None) => &case["read"] == read,
            _ => false,
        };
        if !ok {
            wrong.push(format!("{reader} {}: got {got:?}", case["value"]));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The thresholds in tokens truncate the float products, as Python's `int(window * fraction)`:
/// (window, compact_at, compact_to, threshold, budget).
#[test]
fn threshold_and_budget_truncate_as_python_int() {
    let cases: &[(usize, f64, f64, usize, usize)] = &[
        (200_000, 0.7, 0.4, 140_000, 80_000),
        (10, 0.7, 0.29, 7, 2),
        (3, 0.7, 0.4, 2, 1),
        (20_000, 0.85, 0.55, 17_000, 11_000),
        (1, 1.0, 0.5, 1, 0),
    ];
    for &(window, at, to, threshold, budget) in cases {
        let settings = CompactionHookSettings::new(window).with_compact_at(at).with_compact_to(to);
        assert_eq!((settings.threshold(), settings.budget()), (threshold, budget), "{window} {at} {to}");
    }
}
