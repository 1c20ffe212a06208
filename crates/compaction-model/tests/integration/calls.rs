//! Tool calls keep their arguments, members in order, however they are made or copied: made
//! with `ToolCall::new` and cloned, the arguments are rebuilt without spare room (issue 31, item
//! 13), and must come out equal and in the same order.

use compaction_model::{Message, ToolCall};
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
