//! Reading settings from JSON, as data: `tests/data/settings/cases.json` holds, for each settings
//! type, an unknown key, missing keys, values of the wrong kind and forms of the wrong class.

use std::path::Path;

use compaction_core::{MaskingSettings, PruningSettings, SlidingWindowSettings, SummarizationSettings};
use serde_json::Value;

/// What `reader` makes of `value`: the settings serialized, or the error's text.
fn read(reader: &str, value: &Value) -> Result<Value, String> {
    fn serialized<T: serde::Serialize, E: ToString>(read: Result<T, E>) -> Result<Value, String> {
        read.map(|settings| serde_json::to_value(settings).expect("serializes")).map_err(|e| e.to_string())
    }
    match reader {
        "PruningSettings" => serialized(PruningSettings::from_value(value)),
        "SlidingWindowSettings" => serialized(SlidingWindowSettings::from_value(value)),
        "SummarizationSettings" => serialized(SummarizationSettings::from_value(value)),
        "MaskingSettings" => serialized(MaskingSettings::from_value(value)),
        other => panic!("no reader {other}"),
    }
}

#[test]
fn settings_read_as_the_cases_say() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/settings/cases.json");
    let cases: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("readable")).expect("JSON");
    let mut wrong = Vec::new();
    for case in cases["cases"].as_array().expect("cases") {
        let reader = case["reader"].as_str().expect("reader");
        let got = read(reader, &case["value"]);
        let ok = match (&got, case.get("error")) {
            (Err(text), Some(expected)) => expected == text,
            (Ok(settings), None) => {
                case["read"].as_object().expect("read").iter().all(|(key, value)| &settings[key] == value)
            }
            _ => false,
        };
        if !ok {
            wrong.push(format!("{reader} {}: got {got:?}", case["value"]));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
