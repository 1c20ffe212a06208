//! How large the model's values are: a long log holds hundreds of thousands of messages, so a
//! field that makes every part larger, or a copy a result makes of its call, is a regression in
//! what `count` and `simulate` need (BENCHMARKS.md, section (k)).

use std::mem::size_of;

use compaction_model::{Arguments, Message, Part, SharedObject, ToolCall, ToolCallResult};
use serde_json::json;

#[test]
fn a_message_and_a_part_stay_small() {
    assert_eq!(size_of::<SharedObject>(), size_of::<usize>(), "an object field is one pointer");
    assert_eq!(size_of::<Arguments>(), size_of::<usize>(), "a call's arguments are one pointer");
    assert!(size_of::<Message>() <= 64, "a message is {} bytes", size_of::<Message>());
    assert!(size_of::<Part>() <= 112, "a part is {} bytes", size_of::<Part>());
    assert!(size_of::<ToolCallResult>() <= 96, "a result is {} bytes", size_of::<ToolCallResult>());
}

#[test]
fn a_result_shares_its_calls_arguments() {
    let arguments = json!({"path": "src/main.rs", "limit": 40}).as_object().cloned().unwrap_or_default();
    let call = ToolCall::new("read_file", arguments).with_id("call_1");
    let message = Message::tool("fn main() {}", call.clone(), false);
    let origin = &message.tool_call_result().expect("a result").origin;
    // The same text, not an equal copy.
    assert!(std::ptr::eq(origin.arguments.as_json(), call.arguments.as_json()));
    assert_eq!(**origin, call);
}

#[test]
fn changing_a_copy_leaves_the_original() {
    let arguments = json!({"q": "x"}).as_object().cloned().unwrap_or_default();
    let call = ToolCall::new("search", arguments);
    let mut copy = call.clone();
    let mut changed = copy.arguments.to_map();
    changed.insert("q".into(), json!("y"));
    copy.arguments = changed.into();
    assert_eq!(call.arguments.get("q"), Some(json!("x")));
    assert_eq!(copy.arguments.get("q"), Some(json!("y")));
    let _ = Part::ToolCall(copy);
}
