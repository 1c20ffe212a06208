//! Comparing a message with what comes back from a framework's types, field by field.
//!
//! Every `to_*` conversion converts its output back and hands both sides here, so its loss
//! report is exactly what the round trip does not reproduce.

use compaction_model::{
    FilePart, ImagePart, JsonObject, Message, Part, ResultPart, TextPart, ToolCall, ToolResultContent,
};

use crate::Loss;

/// Appends to `losses` every field of `original` (message `index`) that `back` does not
/// reproduce. `kept` lists, for each part of `back` in order, the index of the part of
/// `original` it was made from; parts of `original` missing from it were dropped.
pub(crate) fn diff_message(
    index: usize,
    original: &Message,
    back: &Message,
    kept: &[usize],
    losses: &mut Vec<Loss>,
) {
    if original.role != back.role {
        losses.push(Loss::message(index, "role"));
    }
    if original.name != back.name {
        losses.push(Loss::message(index, "name"));
    }
    let mut fields = Vec::new();
    diff_map("meta.", &original.meta, &back.meta, &mut fields);
    losses.extend(fields.into_iter().map(|field| Loss::message(index, field)));

    for k in 0..original.parts.len() {
        if !kept.contains(&k) {
            losses.push(Loss::part(index, k, Loss::PART));
        }
    }
    if back.parts.len() > kept.len() {
        // Parts that were not there: an empty text for a message without one, say.
        losses.push(Loss::message(index, Loss::CONTENT));
    }
    if kept.windows(2).any(|pair| pair[0] >= pair[1]) {
        losses.push(Loss::message(index, Loss::PART_ORDER));
    }
    for (j, &k) in kept.iter().enumerate() {
        match (original.parts.get(k), back.parts.get(j)) {
            (Some(before), Some(after)) => {
                let mut fields = Vec::new();
                diff_part(before, after, &mut fields);
                losses.extend(fields.into_iter().map(|field| Loss::part(index, k, field)));
            }
            (Some(_), None) => losses.push(Loss::part(index, k, Loss::PART)),
            (None, _) => {}
        }
    }
}

/// The fields in which `before` and `after` differ, as wire paths.
fn diff_part(before: &Part, after: &Part, fields: &mut Vec<String>) {
    match (before, after) {
        (Part::Text(a), Part::Text(b)) => diff_text("text", a, b, fields),
        (Part::ToolCall(a), Part::ToolCall(b)) => diff_call("tool_call.", a, b, fields),
        (Part::ToolCallResult(a), Part::ToolCallResult(b)) => {
            diff_result(&a.result, &b.result, fields);
            if a.error != b.error {
                fields.push("tool_call_result.error".into());
            }
            diff_call("tool_call_result.origin.", &a.origin, &b.origin, fields);
            diff_map("tool_call_result.", &a.unknown, &b.unknown, fields);
        }
        (Part::Reasoning(a), Part::Reasoning(b)) => {
            if a.reasoning_text != b.reasoning_text {
                fields.push("reasoning.reasoning_text".into());
            }
            if a.extra != b.extra {
                fields.push("reasoning.extra".into());
            }
            diff_map("reasoning.", &a.unknown, &b.unknown, fields);
        }
        (Part::Image(a), Part::Image(b)) => diff_image("image", a, b, fields),
        (Part::File(a), Part::File(b)) => diff_file("file", a, b, fields),
        _ => fields.push(Loss::PART.into()),
    }
}

fn diff_result(a: &ToolResultContent, b: &ToolResultContent, fields: &mut Vec<String>) {
    const RESULT: &str = "tool_call_result.result";
    match (a, b) {
        (ToolResultContent::Text(a), ToolResultContent::Text(b)) if a != b => fields.push(RESULT.into()),
        (ToolResultContent::Parts(a), ToolResultContent::Parts(b)) if a.len() == b.len() => {
            for (j, (a, b)) in a.iter().zip(b).enumerate() {
                let prefix = format!("{RESULT}[{j}].");
                match (a, b) {
                    (ResultPart::Text(a), ResultPart::Text(b)) => {
                        diff_text(&format!("{prefix}text"), a, b, fields)
                    }
                    (ResultPart::Image(a), ResultPart::Image(b)) => {
                        diff_image(&format!("{prefix}image"), a, b, fields)
                    }
                    (ResultPart::File(a), ResultPart::File(b)) => {
                        diff_file(&format!("{prefix}file"), a, b, fields)
                    }
                    _ => fields.push(format!("{RESULT}[{j}]")),
                }
            }
        }
        (ToolResultContent::Text(_), ToolResultContent::Text(_)) => {}
        (ToolResultContent::Parts(_), ToolResultContent::Parts(_)) => fields.push(RESULT.into()),
        // The same text, once as a string and once as a list of one text part.
        (ToolResultContent::Parts(parts), ToolResultContent::Text(text))
        | (ToolResultContent::Text(text), ToolResultContent::Parts(parts)) => match parts.as_slice() {
            [ResultPart::Text(only)] if only.text == *text && only.unknown.is_empty() => {
                fields.push(format!("{RESULT} (a list of one text)"))
            }
            _ => fields.push(RESULT.into()),
        },
    }
}

fn diff_text(kind: &str, a: &TextPart, b: &TextPart, fields: &mut Vec<String>) {
    if a.text != b.text {
        fields.push(kind.to_owned());
    }
    diff_map(&format!("{kind}."), &a.unknown, &b.unknown, fields);
}

fn diff_image(kind: &str, a: &ImagePart, b: &ImagePart, fields: &mut Vec<String>) {
    let checks = [
        ("base64_image", a.base64_image == b.base64_image),
        ("mime_type", a.mime_type == b.mime_type),
        ("detail", a.detail == b.detail),
        ("meta", a.meta == b.meta),
        ("validation", a.validation == b.validation),
    ];
    fields.extend(checks.iter().filter(|(_, same)| !same).map(|(field, _)| format!("{kind}.{field}")));
    diff_map(&format!("{kind}."), &a.unknown, &b.unknown, fields);
}

fn diff_file(kind: &str, a: &FilePart, b: &FilePart, fields: &mut Vec<String>) {
    let checks = [
        ("base64_data", a.base64_data == b.base64_data),
        ("mime_type", a.mime_type == b.mime_type),
        ("filename", a.filename == b.filename),
        ("extra", a.extra == b.extra),
        ("validation", a.validation == b.validation),
    ];
    fields.extend(checks.iter().filter(|(_, same)| !same).map(|(field, _)| format!("{kind}.{field}")));
    diff_map(&format!("{kind}."), &a.unknown, &b.unknown, fields);
}

fn diff_call(prefix: &str, a: &ToolCall, b: &ToolCall, fields: &mut Vec<String>) {
    if a.tool_name != b.tool_name {
        fields.push(format!("{prefix}tool_name"));
    }
    if a.arguments != b.arguments || a.raw_arguments != b.raw_arguments {
        fields.push(format!("{prefix}arguments"));
    }
    if a.id != b.id {
        fields.push(format!("{prefix}id"));
    }
    if a.extra != b.extra {
        fields.push(format!("{prefix}extra"));
    }
    diff_map(prefix, &a.unknown, &b.unknown, fields);
}

/// Keys whose values differ between `a` and `b` (present in one only, or unequal), in `a`'s
/// order and then `b`'s.
fn diff_map(prefix: &str, a: &JsonObject, b: &JsonObject, fields: &mut Vec<String>) {
    for (key, value) in a {
        if b.get(key) != Some(value) {
            fields.push(format!("{prefix}{key}"));
        }
    }
    for key in b.keys() {
        if !a.contains_key(key) {
            fields.push(format!("{prefix}{key}"));
        }
    }
}
