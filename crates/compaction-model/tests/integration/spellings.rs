//! Every spelling of a message reads as the same message: serde_json's compact encoding, Python's
//! `json.dumps` with and without `ensure_ascii`, and pretty-printed JSON. What
//! `Message::read_prefix` takes, it takes exactly, says truly whether the text is canonical, and
//! the text is a faithful spelling of the message.

use compaction_model::{messages_from_slice, messages_from_value, JsonSource, Message, Part};
use compaction_testkit::python_dumps;
use serde_json::{json, Value};

use crate::fixture_files;

/// The spellings of `value` a transcript may come in, by name.
fn spellings(value: &Value) -> Vec<(&'static str, String)> {
    vec![
        ("compact", serde_json::to_string(value).expect("serializable")),
        ("python", python_dumps(value, false)),
        ("python ascii", python_dumps(value, true)),
        ("pretty", serde_json::to_string_pretty(value).expect("serializable")),
    ]
}

/// Checks one message's spellings; returns what went wrong.
fn check_message(name: &str, item: &Value, index: usize, failures: &mut Vec<String>) {
    let expected = Message::from_value(item.clone(), index);
    for (spelling, text) in spellings(item) {
        let Some(read) = Message::read_prefix(&text) else { continue };
        let Ok(expected) = &expected else {
            failures.push(format!("{name}[{index}] {spelling}: read_prefix reads what from_value refuses"));
            continue;
        };
        if &read.message != expected {
            failures.push(format!("{name}[{index}] {spelling}: read_prefix reads another message"));
        }
        if read.len != text.len() {
            failures.push(format!("{name}[{index}] {spelling}: took {} of {} bytes", read.len, text.len()));
        }
        let encoding = serde_json::to_string(expected).expect("serializable");
        if read.canonical != (text == encoding) {
            failures.push(format!("{name}[{index}] {spelling}: canonical is {} wrongly", read.canonical));
        }
        if !expected.is_spelled_by(text.as_bytes()) {
            failures.push(format!("{name}[{index}] {spelling}: not a spelling of the message"));
        }
        if Message::from_slice(text.as_bytes(), index).as_ref() != Ok(expected) {
            failures.push(format!("{name}[{index}] {spelling}: from_slice disagrees"));
        }
        // Read in place from a shared source: the same message, its texts left undecoded until
        // asked for, with their lengths right.
        let source = JsonSource::new(format!("[ {text} ]").into_bytes());
        match Message::read_prefix_in(&source, 2) {
            Some(shared) => {
                if (&shared.message, shared.len, shared.canonical) != (expected, read.len, read.canonical) {
                    failures.push(format!("{name}[{index}] {spelling}: read_prefix_in disagrees"));
                }
                let lengths = |m: &Message| {
                    m.parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::Text(t) => Some(t.text.char_len()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                };
                if lengths(&shared.message) != lengths(expected) {
                    failures.push(format!("{name}[{index}] {spelling}: text lengths differ in place"));
                }
            }
            None => failures.push(format!("{name}[{index}] {spelling}: read_prefix_in refuses")),
        }
    }
}

#[test]
fn every_spelling_of_the_fixtures_reads_the_same() {
    let files = fixture_files("convert");
    let mut failures = Vec::new();
    let mut read_python = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("fixture readable");
        let fixture: Value = serde_json::from_str(&text).expect("fixture is JSON");
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        for key in ["input", "output"] {
            let Some(conversation) = fixture.get(key).filter(|v| !v.is_null()) else { continue };
            let expected = messages_from_value(conversation.clone());
            for (spelling, text) in spellings(conversation) {
                if messages_from_slice(text.as_bytes()) != expected {
                    failures.push(format!("{name}: {key}, {spelling}: messages_from_slice disagrees"));
                }
            }
            for (index, item) in conversation.as_array().into_iter().flatten().enumerate() {
                check_message(&format!("{name}:{key}"), item, index, &mut failures);
                read_python += usize::from(Message::read_prefix(&python_dumps(item, true)).is_some());
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(read_python > 100, "the fast reader took only {read_python} Python-spelled messages");
}

#[test]
fn escapes_and_spacing_read_exactly() {
    let message = json!({"role": "tool", "meta": {"k": [1, {"z": "é"}]}, "name": null, "content": [
        {"tool_call_result": {"result": "a\"b\\c\n\t\r\u{8}\u{c}\u{1}\u{7f}/é中😀𝔘", "origin":
            {"tool_name": "t", "arguments": {"q": "x y"}, "id": "c1", "extra": null}, "error": false}}
    ]});
    let mut failures = Vec::new();
    check_message("escapes", &message, 0, &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for text in [python_dumps(&message, false), python_dumps(&message, true)] {
        let read = Message::read_prefix(&text).expect("Python's spelling reads");
        assert!(!read.canonical);
    }
    let compact = serde_json::to_string(&message).unwrap();
    assert!(Message::read_prefix(&compact).expect("reads").canonical);
}

#[test]
fn odd_escapes_are_read_and_marked() {
    let base =
        |text: &str| format!(r#"{{"role":"user","meta":{{}},"name":null,"content":[{{"text":"{text}"}}]}}"#);
    // (string contents as written, what they read as, canonical)
    let cases = [
        (r"plain", Some("plain"), true),
        (r"\u0001", Some("\u{1}"), true),
        (r"\u001F", Some("\u{1f}"), false),
        (r"\u000a", Some("\n"), false),
        (r"\/", Some("/"), false),
        (r"\u0041", Some("A"), false),
        (r"\ud83d\ude00", Some("😀"), false),
        (r"\uD83D\uDE00", Some("😀"), false),
        // Lone surrogates, as Python's json.loads keeps them: each read as its stand-in.
        (r"\ud83d", Some("\u{10F03D}"), false),
        (r"\ud83dx", Some("\u{10F03D}x"), false),
        (r"\ude00", Some("\u{10F600}"), false),
        (r"\ud83d\u0041", Some("\u{10F03D}A"), false),
        (r"\uDE00\uD83D", Some("\u{10F600}\u{10F03D}"), false),
        (r"\x", None, false),
        (r"\u12", None, false),
        ("tab\there", None, false),
    ];
    for (written, reads, canonical) in cases {
        let text = base(written);
        let read = Message::read_prefix(&text);
        assert_eq!(read.as_ref().map(|r| r.message.text().unwrap_or_default()), reads, "{written}");
        if let Some(read) = read {
            assert_eq!(read.canonical, canonical, "{written}");
            assert_eq!(Message::from_slice(text.as_bytes(), 0), Ok(read.message), "{written}");
        } else {
            // Refused here; the other readers decide (and refuse what is not JSON).
            let value = serde_json::from_str::<Value>(&text);
            assert_eq!(
                Message::from_slice(text.as_bytes(), 0).ok(),
                value.ok().and_then(|v| Message::from_value(v, 0).ok()),
                "{written}"
            );
        }
    }
}

#[test]
fn nested_json_with_a_key_twice_is_not_taken() {
    let text = r#"{"role": "user", "meta": {"a": 1, "a": 2}, "name": null, "content": [{"text": "x"}]}"#;
    assert_eq!(Message::read_prefix(text), None);
    let message = Message::from_slice(text.as_bytes(), 0).expect("reads");
    assert_eq!(message.meta["a"], json!(2));
    assert!(!message.is_spelled_by(text.as_bytes()));
    let once = r#"{"role": "user", "meta": {"a": 2}, "name": null, "content": [{"text": "x"}]}"#;
    assert!(message.is_spelled_by(once.as_bytes()));
}

/// Texts read in place behave as owned ones: compared, hashed, cloned, edited and taken apart
/// as their characters, which are decoded only once asked for.
#[test]
fn texts_read_in_place_are_texts() {
    use std::collections::HashSet;

    let message = json!({"role": "tool", "meta": {}, "name": null, "content": [
        {"tool_call_result": {"result": "line\n\tcaf\u{e9} \u{1f680} \"q\"", "origin":
            {"tool_name": "t", "arguments": {}, "id": null, "extra": null}, "error": false}}
    ]});
    let plain = json!({"role": "user", "meta": {}, "name": null, "content": [{"text": "plain words"}]});
    for item in [message, plain] {
        let expected = Message::from_value(item.clone(), 0).expect("reads");
        for (_, text) in spellings(&item) {
            let source = JsonSource::new(text.clone().into_bytes());
            let read = Message::read_prefix_in(&source, 0).expect("reads in place").message;
            assert_eq!(read, expected);
            let (ours, theirs) = match (&read.parts[0], &expected.parts[0]) {
                (Part::Text(a), Part::Text(b)) => (a.text.clone(), b.text.clone()),
                (Part::ToolCallResult(a), Part::ToolCallResult(b)) => match (&a.result, &b.result) {
                    (
                        compaction_model::ToolResultContent::Text(a),
                        compaction_model::ToolResultContent::Text(b),
                    ) => (a.clone(), b.clone()),
                    _ => panic!("string results"),
                },
                _ => panic!("same kind of part"),
            };
            assert_eq!(ours.char_len(), theirs.char_len());
            assert!(HashSet::from([ours.clone()]).contains(theirs.as_str()));
            assert_eq!(ours.clone().into_string(), theirs.as_str());
            let mut edited = ours.clone();
            edited.edit(|s| s.push('é'));
            assert_eq!(edited.char_len(), theirs.char_len() + 1);
            assert_eq!(edited.as_str(), format!("{}é", theirs.as_str()));
            assert_eq!(serde_json::to_string(&ours).unwrap(), serde_json::to_string(&theirs).unwrap());
            drop(read);
        }
    }
}

/// Bytes that are not UTF-8, wherever they are in a message, are not read in place: the other
/// readers refuse them with serde_json's error, as they always have.
#[test]
fn bytes_that_are_not_utf8_are_not_read_in_place() {
    let cases: [&[u8]; 4] = [
        b"{\"role\":\"user\",\"meta\":{},\"name\":null,\"content\":[{\"text\":\"caf\xe9\"}]}",
        b"{\"role\":\"user\",\"meta\":{\"k\":\"\xff\"},\"name\":null,\"content\":[{\"text\":\"x\"}]}",
        b"{\"role\":\"user\",\"meta\":{},\"name\":\"\xc3\",\"content\":[{\"text\":\"x\"}]}",
        b"{\"role\":\"user\",\"meta\":{},\"name\":null,\"content\":[{\"text\":\"\xed\xa0\x80 is a surrogate\"}]}",
    ];
    for bytes in cases {
        let source = JsonSource::new(bytes.to_vec());
        assert_eq!(Message::read_prefix_in(&source, 0), None, "{bytes:?}");
        let whole = [b"[", bytes, b"]"].concat();
        let expected = serde_json::from_slice::<Value>(&whole)
            .map_err(|e| compaction_model::Error::Json { source: std::sync::Arc::new(e) })
            .and_then(messages_from_value);
        assert!(expected.is_err());
        assert_eq!(messages_from_slice(&whole), expected);
    }
}
