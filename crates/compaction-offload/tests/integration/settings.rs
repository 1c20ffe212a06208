//! Reading the offload crate's settings from JSON, as data: `tests/data/settings/cases.json`
//! holds, for each reader, an unknown key, missing keys, values of the wrong kind and forms of
//! the wrong class.

use std::path::Path;

use compaction_offload::{
    compaction_hook_from_value, FileSystemToolResultStore, OffloadCompactorSettings, OffloadStrategies,
    ToolResultOffloadHook,
};
use serde_json::{json, Value};

/// What `reader` makes of `value`, or the error's text.
fn read(reader: &str, value: &Value) -> Result<Value, String> {
    let read = match reader {
        "OffloadCompactorSettings" => OffloadCompactorSettings::from_value(value)
            .map(|settings| serde_json::to_value(settings).expect("serializes")),
        "FileSystemToolResultStore" => FileSystemToolResultStore::from_value(value).map(|_| json!({})),
        "ToolResultOffloadHook" => ToolResultOffloadHook::from_value(value)
            .map(|hook| json!({"preview_chars": hook.preview_chars(), "strategies": hook.strategies().iter().count()})),
        "OffloadStrategies" => {
            OffloadStrategies::from_value(value).map(|strategies| json!({"strategies": strategies.iter().count()}))
        }
        "compaction_hook_from_value" => {
            compaction_hook_from_value(value).map(|built| json!({"compactor": built.hook.compactor().name()}))
        }
        other => panic!("no reader {other}"),
    };
    read.map_err(|e| compaction_core::error_chain(&e))
}

#[test]
fn settings_read_as_the_cases_say() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/settings/cases.json");
    let cases = crate::read_json(&path);
    let mut wrong = Vec::new();
    for case in cases["cases"].as_array().expect("cases") {
        let reader = case["reader"].as_str().expect("reader");
        let value = crate::replace_in_strings(&case["value"], "$ROOT", &dir.path().to_string_lossy());
        let got = read(reader, &value);
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
