//! The conversions where no reference fixture can speak: `raw_arguments` (a notion the
//! reference lacks), and Anthropic's format (the reference has no Anthropic client).

use compaction_llm::{
    to_anthropic_messages, to_chat_completions_messages, to_responses_input, Error, Provider,
};
use compaction_model::{
    FilePart, ImagePart, Message, Part, ReasoningPart, ResultPart, TextPart, ToolCall, ToolResultContent,
};
use serde_json::{json, Map};

const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

#[test]
fn raw_arguments_are_sent_as_they_came() {
    let raw = ToolCall::with_raw_arguments("read", "{\"path\": \"a").with_id("c1");
    let message = Message::assistant_with_calls(None, vec![raw]);
    let items = to_responses_input(std::slice::from_ref(&message)).unwrap();
    assert_eq!(items[0]["arguments"], "{\"path\": \"a");
    let chat = to_chat_completions_messages(&[message]).unwrap();
    assert_eq!(chat[0]["tool_calls"][0]["function"]["arguments"], "{\"path\": \"a");
}

#[test]
fn anthropic_blocks_for_images_documents_and_thinking() {
    let text_file = FilePart::new("aGVsbG8gd29ybGQ=", Some("text/plain".into()), Some("notes.txt".into()));
    let pdf = FilePart::new("JVBERi0xLjQK", None, Some("a.pdf".into()));
    let image = ImagePart::new(PNG, None);
    let user = Message::user_parts(vec![
        Part::Text(TextPart::new("see")),
        Part::Image(image),
        Part::File(pdf),
        Part::File(text_file),
        Part::Text(TextPart::new("")),
    ]);
    let mut signed = ReasoningPart { reasoning_text: "step".into(), ..Default::default() };
    signed.extra.insert("signature".into(), json!("sig"));
    let unsigned = ReasoningPart { reasoning_text: "lost anyway".into(), ..Default::default() };
    let mut assistant = Message::assistant("ok");
    assistant.parts.insert(0, Part::Reasoning(signed));
    assistant.parts.insert(1, Part::Reasoning(unsigned));

    let converted = to_anthropic_messages(&[user, assistant, Message::system("late system")]).unwrap();
    assert_eq!(converted.system, vec![json!({"type": "text", "text": "late system"})]);
    assert_eq!(
        converted.messages,
        vec![
            json!({"role": "user", "content": [
                {"type": "text", "text": "see"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}, "title": "a.pdf"},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello world"}, "title": "notes.txt"}
            ]}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "step", "signature": "sig"},
                {"type": "text", "text": "ok"}
            ]}),
        ]
    );
}

#[test]
fn anthropic_merges_turns_and_puts_tool_results_first() {
    let (a, b) = (ToolCall::new("f", Map::new()).with_id("t1"), ToolCall::new("g", Map::new()).with_id("t2"));
    let parts = ToolResultContent::Parts(vec![
        ResultPart::Text(TextPart::new("chart:")),
        ResultPart::Image(ImagePart::new(PNG, Some("image/png".into()))),
    ]);
    let conversation = vec![
        Message::user("run both"),
        Message::assistant_with_calls(Some("running".into()), vec![a.clone(), b.clone()]),
        Message::user("also, hurry"),
        Message::tool("done f", a, false),
        Message::tool(parts, b, false),
    ];
    let converted = to_anthropic_messages(&conversation).unwrap();
    assert_eq!(converted.messages.len(), 3);
    let last: Vec<&str> = converted.messages[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(last, ["tool_result", "tool_result", "text"]);
    assert_eq!(converted.messages[2]["content"][1]["content"][1]["type"], "image");
    assert_eq!(
        converted.messages[1]["content"][1],
        json!({"type": "tool_use", "id": "t1", "name": "f", "input": {}})
    );
}

#[test]
fn anthropic_refuses_what_it_cannot_take() {
    let unsupported = |messages: &[Message]| match to_anthropic_messages(messages) {
        Err(Error::UnsupportedMessage { provider: Provider::Anthropic, index, reason }) => (index, reason),
        other => panic!("expected an unsupported message, got {other:?}"),
    };
    let zip = FilePart::new("UEsDBA==", Some("application/zip".into()), Some("a.zip".into()));
    let (index, reason) = unsupported(&[Message::user("a"), Message::user_parts(vec![Part::File(zip)])]);
    assert_eq!(index, 1);
    assert!(reason.contains("application/zip"), "{reason}");
    let mut system = Message::system("s");
    system.parts.push(Part::Image(ImagePart::new(PNG, None)));
    assert_eq!(unsupported(&[system]).0, 0);
    let no_id = Message::tool("r", ToolCall::new("f", Map::new()), false);
    assert!(unsupported(&[no_id]).1.contains("id"));
}

#[test]
fn openai_refuses_what_it_would_drop() {
    let mut assistant = Message::assistant("look");
    assistant.parts.push(Part::Image(ImagePart::new(PNG, None)));
    assert!(to_responses_input(std::slice::from_ref(&assistant)).is_err());
    assert!(to_chat_completions_messages(&[assistant]).is_err());

    let mut user = Message::user("x");
    user.parts.push(Part::ToolCall(ToolCall::new("f", Map::new()).with_id("1")));
    let error = to_chat_completions_messages(&[Message::user("ok"), user]).unwrap_err();
    assert!(matches!(error, Error::UnsupportedMessage { index: 1, provider: Provider::OpenAI, .. }));

    let mut two_texts = Message::assistant("one");
    two_texts.parts.push(Part::Text(TextPart::new("two")));
    let chat = to_chat_completions_messages(&[two_texts]).unwrap();
    assert_eq!(chat[0]["content"], json!([{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]));
}
