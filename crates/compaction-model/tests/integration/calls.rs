//! Tool calls keep their arguments, members in order, however they are made or copied: the
//! arguments are held as their compact JSON text (issue 31, item 13), and must come out equal, in
//! the same order, and written as writing the object they stand for writes it.

use compaction_model::{Arguments, Message, ToolCall};
use serde_json::{json, Value};

#[test]
fn arguments_made_or_cloned_are_kept_whole_and_in_order() {
    let cases = [
        json!({}),
        json!({"path": "src/lib.rs"}),
        serde_json::from_str(r#"{"z": 1, "a": [1, {"y": null, "b": "x"}, []], "m": {"k": {"j": 2.50, "i": 12345678901234567890123}}}"#)
            .unwrap(),
        json!({"command": "cargo test", "timeout": 119.5, "env": {}, "tags": ["a", "b", "c", "d", "e"]}),
    ];
    for arguments in cases {
        let Value::Object(object) = arguments.clone() else { unreachable!() };
        let call = ToolCall::new("run", object.clone()).with_id("c1");
        assert_eq!(Value::from(call.arguments.clone()), arguments);
        let written = serde_json::to_string(&arguments).unwrap();
        assert_eq!(serde_json::to_string(&call.arguments).unwrap(), written, "members in order");
        let copy = call.clone();
        assert_eq!(copy, call);
        assert_eq!(serde_json::to_string(&copy.arguments).unwrap(), written, "members in order");
        // A result's origin is such a copy.
        let message = Message::tool("done", call.clone(), false);
        let origin = &message.tool_call_result().unwrap().origin;
        assert_eq!(serde_json::to_string(&origin.arguments).unwrap(), written);
        assert_eq!(message.clone(), message);
    }
    let raw = ToolCall::with_raw_arguments("run", "{\"truncated\": ");
    assert_eq!(raw.clone(), raw);
    assert_eq!(raw.clone().raw_arguments.as_deref(), Some("{\"truncated\": "));
}

/// Arguments read from text hold the text writing the parsed object gives: the text itself when
/// it already is that, else the object's canonical form (spaces gone, the last of a repeated key
/// in the first one's place, escapes as serde_json writes them), as before they were kept as text.
#[test]
fn arguments_read_from_text_are_the_objects_compact_text() {
    let cases = [
        (r#"{"query":"функция","limit":29,"filters":{"lang":"rust","recent":true}}"#, None),
        (
            r#"{"timeout":29.5,"n":-0,"big":12345678901234567890123,"e":1E5}"#,
            Some(r#"{"timeout":29.5,"n":-0,"big":12345678901234567890123,"e":1e+5}"#),
        ),
        (r#"{"a": 1, "b" : [ 1, 2 ] }"#, Some(r#"{"a":1,"b":[1,2]}"#)),
        (r#"{"a":1,"b":2,"a":3}"#, Some(r#"{"a":3,"b":2}"#)),
        (r#"{"s":"\u00e9\/\u0041\n\t\"\\"}"#, Some(r#"{"s":"é/A\n\t\"\\"}"#)),
        (r#"{"x":NaN,"y":[-Infinity]}"#, None),
        // A lone surrogate is held as its stand-in, which writers write back as the escape.
        (r#"{"half":"\ud83d!"}"#, Some("{\"half\":\"\u{10f03d}!\"}")),
        ("{}", None),
    ];
    for (text, canonical) in cases {
        let arguments = Arguments::from_json(text).expect("an object");
        let map = match compaction_model::value_from_slice(text.as_bytes()).expect("JSON") {
            Value::Object(map) => map,
            _ => unreachable!("the cases are objects"),
        };
        let expected = serde_json::to_string(&map).unwrap();
        assert_eq!(arguments.as_json(), canonical.unwrap_or(text), "{text}");
        assert_eq!(arguments.as_json(), expected, "{text}");
        // Written, compared and parsed as the object it stands for.
        assert_eq!(serde_json::to_string(&arguments).unwrap(), expected, "{text}");
        assert_eq!(arguments.to_map(), map, "{text}");
        assert_eq!(Arguments::from_json(arguments.as_json()).unwrap().as_json(), expected, "a fixed point");
        assert_eq!(arguments, Arguments::from(map.clone()), "{text}");
        assert_eq!(ToolCall::new("run", map), ToolCall::with_arguments("run", arguments));
    }
}
