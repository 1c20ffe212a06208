//! `ChatMessage.from_dict` → `to_dict` of the reference, on the committed convert fixtures.

use compaction_model::{messages_from_slice, messages_from_value, messages_to_value, Message};
use serde_json::Value;

use crate::{fixture_files, python_equal};

#[test]
fn conformance_convert_matches_reference() {
    let files = fixture_files("convert");
    assert!(files.len() > 50, "expected the committed convert fixtures, found {}", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("fixture readable");
        let fixture: Value = serde_json::from_str(&text).expect("fixture is JSON");
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let result = messages_from_value(fixture["input"].clone());
        match (&fixture.get("error"), result) {
            (Some(error), Err(ours)) => {
                if ours.index() != error["index"].as_u64().map(|i| i as usize) {
                    failures.push(format!(
                        "{name}: error at message {:?}, reference at {}",
                        ours.index(),
                        error["index"]
                    ));
                }
            }
            (Some(error), Ok(_)) => {
                failures.push(format!("{name}: accepted, reference rejects: {}", error["python"]))
            }
            (None, Err(ours)) => failures.push(format!("{name}: rejected: {ours}")),
            (None, Ok(messages)) => {
                let written = messages_to_value(&messages);
                if !python_equal(&written, &fixture["output"]) {
                    failures.push(format!(
                        "{name}: output differs\n ours: {}\n  ref: {}",
                        serde_json::to_string(&written).unwrap_or_default(),
                        serde_json::to_string(&fixture["output"]).unwrap_or_default()
                    ));
                }
                // Writing and reading back is lossless.
                let again = messages_from_value(written.clone()).map(|m| messages_to_value(&m));
                if again.as_ref() != Ok(&written) {
                    failures.push(format!("{name}: a second round trip changed the conversation"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures disagree:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// Reading from bytes gives what reading the parsed value gives, message for message and error
/// for error, whether the text is compact (the quick path) or spaced out (the `Value` path).
#[test]
fn reading_bytes_agrees_with_reading_values() {
    let files = fixture_files("convert");
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("fixture readable");
        let fixture: Value = serde_json::from_str(&text).expect("fixture is JSON");
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        for key in ["input", "output"] {
            let Some(conversation) = fixture.get(key).filter(|v| !v.is_null()) else { continue };
            let expected = messages_from_value(conversation.clone());
            let compact = serde_json::to_vec(conversation).expect("serializable");
            let pretty = serde_json::to_vec_pretty(conversation).expect("serializable");
            for (layout, bytes) in [("compact", &compact), ("pretty", &pretty)] {
                if messages_from_slice(bytes) != expected {
                    failures.push(format!("{name}: {key}, {layout}: messages_from_slice disagrees"));
                }
            }
            for (index, item) in conversation.as_array().into_iter().flatten().enumerate() {
                let bytes = serde_json::to_vec(item).expect("serializable");
                if Message::from_slice(&bytes, index) != Message::from_value(item.clone(), index) {
                    failures.push(format!("{name}: {key}[{index}]: Message::from_slice disagrees"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
