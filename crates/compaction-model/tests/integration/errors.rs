//! Bad input gives a typed error naming the message and the problem; never a panic.

use compaction_model::{messages_from_value, Error, Message, Part};
use serde_json::json;

fn first_error(value: serde_json::Value) -> Error {
    messages_from_value(value).expect_err("input must be rejected")
}

#[test]
fn missing_role_names_the_message() {
    let error = first_error(json!([{"role": "user", "content": "hi"}, {"content": "no role"}]));
    assert!(matches!(error, Error::MissingRole { index: 1, .. }), "{error:?}");
    assert!(error.to_string().starts_with("message 1: "), "{error}");
}

#[test]
fn unknown_role_is_named() {
    let error = first_error(json!([{"role": "robot", "content": "beep"}]));
    assert_eq!(error, Error::UnknownRole { index: 0, role: "robot".into() });
}

#[test]
fn unknown_part_kind_lists_its_keys() {
    let error = first_error(json!([{"role": "user", "content": [{"video": {"url": "x"}}]}]));
    match &error {
        Error::UnknownPart { index: 0, field, keys } => {
            assert_eq!(field, "content[0]");
            assert_eq!(keys, "video");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn tool_result_must_be_string_or_parts() {
    for result in [json!(42), json!({"a": 1}), json!(null), json!(true)] {
        let error = first_error(json!([{"role": "tool", "content": [{"tool_call_result": {
            "result": result, "origin": {"tool_name": "t", "arguments": {}}, "error": false}}]}]));
        assert!(matches!(error, Error::BadToolResult { index: 0, .. }), "{error:?}");
    }
    let error = first_error(json!([{"role": "tool", "content": [{"tool_call_result": {
        "result": [{"tool_call": {"tool_name": "x", "arguments": {}}}],
        "origin": {"tool_name": "t", "arguments": {}}, "error": false}}]}]));
    assert!(matches!(error, Error::BadToolResult { .. }), "{error:?}");
}

#[test]
fn not_an_array_is_an_error() {
    assert_eq!(first_error(json!({"role": "user"})), Error::NotAnArray { found: "an object" });
}

#[test]
fn unknown_fields_of_a_part_survive_a_round_trip() {
    let input = json!([{"role": "user", "meta": {}, "name": null, "content": [
        {"text": "hi", "cache_control": {"type": "ephemeral"}},
        {"tool_call": {"tool_name": "t", "arguments": {}, "id": null, "extra": null, "provider": 1}}
    ]}]);
    let messages = messages_from_value(input.clone()).expect("valid");
    let Part::Text(text) = &messages[0].parts[0] else { panic!("text part") };
    assert_eq!(text.unknown["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(serde_json::to_value(&messages).expect("serializes"), input);
}

#[test]
fn serde_reads_a_single_message() {
    let message: Message = serde_json::from_str(r#"{"role": "assistant", "content": "ok"}"#).expect("valid");
    assert_eq!(message.text(), Some("ok"));
    let error =
        serde_json::from_str::<Message>(r#"{"role": "ghost", "content": "x"}"#).expect_err("bad role");
    assert!(error.to_string().contains("unknown role"), "{error}");
}

#[test]
fn big_integers_keep_every_digit() {
    let input = json!([{"role": "assistant", "content": [{"tool_call": {"tool_name": "t",
        "arguments": {"n": 123456789012345678901234567890_u128}}}]}]);
    let messages = messages_from_value(input).expect("valid");
    let text = serde_json::to_string(&messages).expect("serializes");
    assert!(text.contains("123456789012345678901234567890"), "{text}");
}

/// Shapes the quick byte reader leaves to the `Value` reader, and bad text: both readers agree.
#[test]
fn reading_bytes_agrees_on_odd_shapes() {
    let cases: &[&str] = &[
        r#"[{"role":"user","meta":{},"name":null,"content":[{"text":"a"}]}]"#,
        r#"[{"role":"user","role":"assistant","content":"twice"}]"#,
        r#"[{"content":"first","role":"user"}]"#,
        r#"[{"r\u006fle":"user","c\u006fntent":"escaped keys"}]"#,
        r#"[{"role":"user","meta":false,"content":"falsy meta"}]"#,
        r#"[{"role":"user","meta":{"a":1,"a":2},"content":"duplicate meta key"}]"#,
        r#"[{"role":"user","meta":{"$ref":"1"},"content":"a key like serde_json's markers"}]"#,
        r#"[{"role":"user","content":[{"text":"a","extra":1}]}]"#,
        r#"[{"role":"user","content":[{"text":"a","text":"b"}]}]"#,
        r#"[{"role":"assistant","content":[{"tool_call":{"tool_name":"t","arguments":null}}]}]"#,
        r#"[{"role":"assistant","content":[{"tool_call":{"tool_name":"t","arguments":{},"id":7}}]}]"#,
        r#"[{"role":"tool","content":[{"tool_call_result":{"result":"r","origin":{"tool_name":"t","arguments":{}}}}]}]"#,
        r#"[{"role":"tool","content":[{"tool_call_result":{"result":"r","error":false,"origin":{"tool_name":"t","arguments":{}},"x":1}}]}]"#,
        r#"[{"_role":"user","_content":[{"text":"legacy"}]}]"#,
        r#"[{"role":"robot","content":"beep"}]"#,
        r#"[{"role":"user","content":"a"},{"role":"user","content":"b"}"#,
        r#"[{"role":"user","content":"a"}] x"#,
        r#"[{"role":"user","content":"a"},]"#,
        r#"[{"role":"user","content":"a"} {"role":"user","content":"b"}]"#,
        r#"[{"role":"user","content":"\ud800"}]"#,
        r#"[{"role":"user","meta":{"x":NaN,"y":[Infinity,-Infinity]},"content":[{"text":"\ud83dA"}]}]"#,
        r#"[{"role":"user","meta":{"x":nan},"content":"not Python's spelling"}]"#,
        r#"[{"role":"user","meta":{"x":-NaN},"content":"nor this"}]"#,
        r#"[{"role":"user","content":1e5}]"#,
        r#" [ ] "#,
        r#"[1, "two", null]"#,
        r#"{"role":"user"}"#,
        r#""#,
    ];
    // The key serde_json hands a number under (with `arbitrary_precision`): an object with it
    // reads as a number there. Learned from serde_json, as its name is private.
    let marker = format!(r#"[{{"role":"user","meta":{{"{}":"1"}},"content":"x"}}]"#, number_key());
    for case in cases.iter().copied().chain([marker.as_str()]) {
        let expected = compaction_model::value_from_slice(case.as_bytes())
            .map_err(|e| Error::Json { source: std::sync::Arc::new(e) })
            .and_then(messages_from_value);
        assert_eq!(compaction_model::messages_from_slice(case.as_bytes()), expected, "{case}");
    }
    let deep = format!(
        r#"[{{"role":"user","meta":{{"a":{}1{}}},"content":"deep"}}]"#,
        "[".repeat(126),
        "]".repeat(126)
    );
    let expected = serde_json::from_str(&deep)
        .map_err(|e| Error::Json { source: std::sync::Arc::new(e) })
        .and_then(messages_from_value);
    assert!(expected.is_err());
    assert_eq!(compaction_model::messages_from_slice(deep.as_bytes()), expected);
}

/// Arguments a model sent as text that is not a JSON object are kept as that text, read through
/// either reader, and written back as they came.
#[test]
fn raw_arguments_survive_both_readers() {
    let bytes = br#"[{"role":"assistant","meta":{},"name":null,"content":[{"tool_call":{"tool_name":"edit","arguments":"{\"path\": \"a.py\", \"te","id":"c1","extra":null}}]}]"#;
    let from_bytes = compaction_model::messages_from_slice(bytes).expect("reads");
    let value: serde_json::Value = serde_json::from_slice(bytes).expect("JSON");
    let from_value = compaction_model::messages_from_value(value.clone()).expect("reads");
    assert_eq!(from_bytes, from_value);
    let call = from_bytes[0].tool_calls().next().expect("a call");
    assert_eq!(call.raw_arguments.as_deref(), Some("{\"path\": \"a.py\", \"te"));
    assert!(call.arguments.is_empty());
    assert!(!call.has_no_arguments());
    assert_eq!(serde_json::to_value(&from_bytes).expect("writes"), value);
}

/// Text that is not JSON keeps serde_json's error as its source, with the line and column.
#[test]
fn json_errors_keep_serde_json_as_their_source() {
    let error =
        compaction_model::messages_from_slice(b"[\n  {\"role\": \"user\",\n  oops}]").expect_err("not JSON");
    let Error::Json { source } = &error else { panic!("expected a JSON error, got {error:?}") };
    assert_eq!((source.line(), source.column()), (3, 3), "{source}");
    let chained = std::error::Error::source(&error).expect("a source");
    assert_eq!(chained.to_string(), source.to_string());
    // The message says what failed; where is the source's to say, once.
    assert_eq!(error.to_string(), "invalid JSON");
}

/// A message deserialized through serde, here the third of a `Vec<Message>`, names no made-up
/// position: serde_json says where it is.
#[test]
fn serde_errors_do_not_claim_message_zero() {
    let text = "[\n{\"role\": \"user\", \"content\": \"a\"},\n{\"role\": \"user\", \"content\": \"b\"},\n{\"role\": \"robot\", \"content\": \"c\"}\n]";
    let error = serde_json::from_str::<Vec<Message>>(text).expect_err("unknown role");
    let said = error.to_string();
    assert!(!said.contains("message 0"), "{said}");
    assert!(said.starts_with("a message: unknown role \"robot\""), "{said}");
    // serde_json places it where it stopped reading: just after the bad message (line 4).
    assert_eq!(error.line(), 5, "{said}");
    // The readers of whole conversations know the index.
    let error = compaction_model::messages_from_slice(text.as_bytes()).expect_err("unknown role");
    assert!(matches!(error, Error::UnknownRole { index: 2, .. }), "{error:?}");
}

/// The key of the one-entry map serde_json (with `arbitrary_precision`) hands a number as.
fn number_key() -> String {
    struct FirstKey;
    impl<'de> serde::de::Visitor<'de> for FirstKey {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a number handed as a map")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
            let key: String = map.next_key()?.unwrap_or_default();
            map.next_value::<serde::de::IgnoredAny>()?;
            Ok(key)
        }
    }
    serde::Deserializer::deserialize_any(&mut serde_json::Deserializer::from_str("0.5"), FirstKey)
        .expect("arbitrary_precision hands a number as a map")
}
