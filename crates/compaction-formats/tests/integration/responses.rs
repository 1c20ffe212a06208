//! OpenAI Responses item lists: messages, calls paired by `call_id`, reasoning, `compaction`
//! items kept opaque and in place, and write-back that changes only pruned outputs.

use compaction_formats::{Format, Target};
use compaction_model::{Part, Role};
use serde_json::{json, Value};

use crate::{read, roles, written_back};

fn items() -> Value {
    json!([
        {"role": "developer", "content": "Answer with the weather."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris and Oslo?"}]},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-opaque-summary"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two lookups."}], "encrypted_content": "gAAAAB-r"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "weather", "arguments": "{\"city\": \"Oslo\""},
        {"type": "function_call_output", "call_id": "call_1", "output": "Paris: 21C, sunny. ".repeat(50)},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "Oslo: 9C, rain."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Paris is warm; Oslo rains."}]}
    ])
}

#[test]
fn items_become_messages_with_calls_paired_by_call_id() {
    let text = serde_json::to_string_pretty(&items()).unwrap();
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::Responses);
    assert_eq!(roles(&conversation.messages), "suatta");
    let reply = &conversation.messages[2];
    // The compaction item stays where it was, as a text part holding the item.
    let (_, item) = compaction_formats::provider_item(&reply.parts[0]).expect("opaque compaction");
    assert_eq!(item["id"], "cmp_1");
    assert_eq!(reply.text(), Some("gAAAAB-opaque-summary"));
    assert!(matches!(reply.parts[1], Part::Reasoning(_)));
    let calls: Vec<_> = reply.tool_calls().collect();
    assert_eq!(calls[1].raw_arguments.as_deref(), Some("{\"city\": \"Oslo\""));
    let oslo = conversation.messages[4].tool_call_result().unwrap();
    assert_eq!(oslo.origin.id.as_deref(), Some("call_2"));
    assert!(conversation.messages.iter().all(|m| m.role != Role::Tool || m.parts.len() == 1));
}

#[test]
fn a_pruned_output_is_written_back_in_place() {
    for text in [
        serde_json::to_string_pretty(&items()).unwrap(),
        json!({"model": "gpt-5", "input": items()}).to_string(),
    ] {
        let conversation = read(&text);
        assert_eq!(written_back(&conversation, &conversation.messages, &[]), text.as_bytes());
        let mut messages = conversation.messages.clone();
        crate::prune(&mut messages, 3, "[pruned]");
        crate::prune(&mut messages, 4, "[gone]");
        let out = String::from_utf8(written_back(&conversation, &messages, &[3, 4])).unwrap();
        let expected =
            text.replace(&json!("Paris: 21C, sunny. ".repeat(50)).to_string(), "\"[pruned]\"").replace(
                r#"[{"type":"input_text","text":"Oslo: 9C, rain."}]"#,
                r#"[{"type":"input_text","text":"[gone]"}]"#,
            );
        let pretty_oslo = "[\n      {\n        \"type\": \"input_text\",\n        \"text\": \"Oslo: 9C, rain.\"\n      }\n    ]";
        let expected = expected.replace(pretty_oslo, r#"[{"type":"input_text","text":"[gone]"}]"#);
        assert_eq!(out, expected);
    }
}

#[test]
fn items_one_a_line_are_read_and_written_back() {
    let text: String = items().as_array().unwrap().iter().map(|i| format!("{i}\n")).collect();
    let conversation = read(&text);
    assert_eq!(conversation.format, Format::Responses);
    assert_eq!(roles(&conversation.messages), "suatta");
    assert_eq!(written_back(&conversation, &conversation.messages, &[]), text.as_bytes());
    // Converted to Chat Completions, the compaction item becomes its text.
    let openai = crate::converted(&conversation, Target::OpenAi);
    assert!(openai.contains("gAAAAB-opaque-summary"));
}

#[test]
fn a_list_after_a_byte_order_mark_is_written_back_with_it() {
    for text in [items().to_string(), json!({"model": "gpt-5", "input": items()}).to_string()] {
        let text = format!("\u{FEFF}{text}");
        let conversation = read(&text);
        assert_eq!(written_back(&conversation, &conversation.messages, &[]), text.as_bytes());
        let mut messages = conversation.messages.clone();
        crate::prune(&mut messages, 3, "[pruned]");
        let out = String::from_utf8(written_back(&conversation, &messages, &[3])).unwrap();
        let expected = text.replace(&json!("Paris: 21C, sunny. ".repeat(50)).to_string(), "\"[pruned]\"");
        assert_eq!(out, expected);
    }
}

/// A Codex-shaped request's items, each with the message it is read into.
fn codex_items() -> Vec<(usize, Value)> {
    let call = |n: usize| {
        json!({"type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
               "name": "shell", "arguments": format!("{{\"command\":[\"cat\",\"f{n}.rs\"]}}")})
    };
    let output = |n: usize, text: &str| json!({"type": "function_call_output", "call_id": format!("call_{n}"), "output": text});
    let reasoning = |n: usize| {
        json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [{"type": "summary_text", "text": format!("Step {n}.")}],
               "content": null, "encrypted_content": format!("gAAAAB-encrypted-{n}")})
    };
    vec![
        (
            0,
            json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>on-request</permissions>"}]}),
        ),
        (
            1,
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]}),
        ),
        (2, reasoning(1)),
        (2, call(1)),
        (3, output(1, &"fn one() {}\n".repeat(40))),
        (4, reasoning(2)),
        (4, call(2)),
        (5, output(2, "fn two() {}\n")),
        (
            6,
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Both files read.", "annotations": []}]}),
        ),
        (
            7,
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Now run the tests."}]}),
        ),
        (8, reasoning(3)),
        (8, call(3)),
        (9, output(3, &"test result: FAILED. ".repeat(30))),
    ]
}

/// The request's bytes: an object with `input` between settings (compact or pretty), or the
/// bare array of items.
fn codex_requests() -> Vec<(&'static str, String)> {
    let input: Vec<Value> = codex_items().into_iter().map(|(_, item)| item).collect();
    let request = json!({
        "model": "gpt-5-codex",
        "instructions": "You are Codex, a coding agent.",
        "input": input,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
        "tool_choice": "auto",
        "reasoning": {"effort": "medium", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "session-1",
        "stream": true
    });
    vec![
        ("compact request", request.to_string()),
        ("pretty request", serde_json::to_string_pretty(&request).unwrap()),
        ("bare array", Value::Array(input.clone()).to_string()),
        ("bare array after a byte-order mark", format!("\u{FEFF}{}", Value::Array(input))),
        ("request after a byte-order mark", format!("\u{FEFF}{request}")),
    ]
}

/// A change set: which message read each message written stands for (`None`: put in), and the
/// messages, made from those read.
type Rewrite = fn(&[compaction_model::Message]) -> (Vec<Option<usize>>, Vec<compaction_model::Message>);

fn rewrites() -> Vec<(&'static str, Rewrite)> {
    use compaction_model::Message;
    fn kept(
        read: &[Message],
        origin: Vec<Option<usize>>,
        put: &[Message],
    ) -> (Vec<Option<usize>>, Vec<Message>) {
        let mut put = put.iter();
        let messages = origin
            .iter()
            .map(|o| o.map_or_else(|| put.next().unwrap().clone(), |i| read[i].clone()))
            .collect();
        (origin, messages)
    }
    vec![
        ("a run dropped, a note in its place", |read| {
            kept(
                read,
                vec![Some(0), Some(1), None, Some(6), Some(7), Some(8), Some(9)],
                &[Message::user("[4 earlier messages were removed]")],
            )
        }),
        ("a run dropped, a summary in its place", |read| {
            kept(
                read,
                vec![Some(0), Some(1), None, Some(7), Some(8), Some(9)],
                &[Message::assistant("Summary: both files read; f1.rs is long.")],
            )
        }),
        ("all kept", |read| kept(read, (0..read.len()).map(Some).collect(), &[])),
        ("a run dropped and a later result pruned", |read| {
            let (origin, mut messages) = kept(
                read,
                vec![Some(0), Some(1), None, Some(4), Some(5), Some(6), Some(7), Some(8), Some(9)],
                &[Message::user("[2 earlier messages were removed]")],
            );
            crate::prune(&mut messages, 8, "[pruned]");
            (origin, messages)
        }),
        ("a run dropped and a kept reply's reasoning cleared", |read| {
            let (origin, mut messages) = kept(
                read,
                vec![Some(0), Some(1), None, Some(7), Some(8), Some(9)],
                &[Message::user("[note]")],
            );
            messages[4].parts.retain(|part| !matches!(part, Part::Reasoning(_)));
            (origin, messages)
        }),
    ]
}

#[test]
fn a_request_takes_messages_dropped_or_put_in_back() {
    use compaction_json::splice::{elements, find, Seg};
    use compaction_model::Changes;
    let owners: Vec<usize> = codex_items().into_iter().map(|(owner, _)| owner).collect();
    for (shape, text) in codex_requests() {
        let source = text.as_bytes();
        let at = if text.starts_with('\u{FEFF}') { 3 } else { 0 };
        let array = match source[at] {
            b'[' => at..source.len(),
            _ => find(source, at, &[Seg::Key("input")]).unwrap(),
        };
        let spans = elements(source, array.start).unwrap();
        let conversation = crate::read_with(
            &text,
            compaction_formats::ReadOptions::named("t").with_format(Format::Responses),
        )
        .unwrap();
        assert!(conversation.takes_back_rewrites(), "{shape}");
        assert_eq!(roles(&conversation.messages), "suatatauat", "{shape}");
        for (change, rewrite) in rewrites() {
            let (origin, messages) = rewrite(&conversation.messages);
            let mut out = Vec::new();
            let written = compaction_formats::write(
                &conversation,
                &messages,
                None,
                &Changes::rewritten(origin.clone()),
                &mut out,
            );
            if change.contains("reasoning cleared") {
                // Its call's item has an `id`, which encoding afresh would not give back.
                let error = written.expect_err(change).to_string();
                assert!(error.contains("a `function_call` item's `id`"), "{shape}: {error}");
                assert!(out.is_empty(), "{shape}: nothing written");
                continue;
            }
            written.unwrap_or_else(|e| panic!("{shape}, {change}: {e}"));
            let back = crate::read(std::str::from_utf8(&out).unwrap());
            assert_eq!(back.messages, messages, "{shape}, {change}");
            // Every byte outside `input` as it was.
            let after = source.len() - array.end;
            assert_eq!(out[..array.start], source[..array.start], "{shape}, {change}");
            assert_eq!(out[out.len() - after..], source[array.end..], "{shape}, {change}");
            // Every item of a message kept as it was read, byte for byte.
            for (k, read) in origin.iter().enumerate() {
                let Some(read) = *read else { continue };
                if messages[k] != conversation.messages[read] {
                    continue;
                }
                for (item, _) in owners.iter().enumerate().filter(|(_, &owner)| owner == read) {
                    let bytes = &source[spans[item].clone()];
                    assert!(out.windows(bytes.len()).any(|w| w == bytes), "{shape}, {change}: item {item}");
                }
            }
            if change == "all kept" {
                assert_eq!(out, source, "{shape}: byte-identical");
            }
            if shape == "compact request" && change.contains("note") {
                let note = br#"{"type":"message","role":"user","content":[{"type":"input_text","text":"[4 earlier messages were removed]"}]}"#;
                assert!(out.windows(note.len()).any(|w| w == note), "{}", String::from_utf8_lossy(&out));
            }
        }
    }
}

/// A kept message changed beyond its results and inputs is encoded afresh when its items hold
/// nothing encoding leaves out (here the calls without an `id`), and reads back as written.
#[test]
fn a_kept_message_changed_beyond_its_results_is_encoded_afresh_when_nothing_is_lost() {
    use compaction_model::Changes;
    let input: Vec<Value> = codex_items()
        .into_iter()
        .map(|(_, mut item)| {
            if item["type"] == "function_call" {
                item.as_object_mut().unwrap().remove("id");
            }
            item
        })
        .collect();
    let text = json!({"model": "gpt-5-codex", "input": input}).to_string();
    let conversation =
        crate::read_with(&text, compaction_formats::ReadOptions::named("t").with_format(Format::Responses))
            .unwrap();
    let (_, cleared) =
        rewrites().into_iter().find(|(change, _)| change.contains("reasoning cleared")).unwrap();
    let (origin, messages) = cleared(&conversation.messages);
    let mut out = Vec::new();
    compaction_formats::write(&conversation, &messages, None, &Changes::rewritten(origin), &mut out).unwrap();
    assert_eq!(crate::read(std::str::from_utf8(&out).unwrap()).messages, messages);
    assert!(!String::from_utf8_lossy(&out).contains("encrypted-3"), "the cleared reasoning is gone");
}

#[test]
fn items_of_no_message_stay_between_kept_neighbours_and_go_with_a_dropped_run() {
    use compaction_model::{Changes, Message};
    let ghost = json!({"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}});
    let request = json!({"model": "gpt-5-codex", "input": [
        ghost,
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]},
        {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{}"},
        ghost,
        {"type": "function_call", "call_id": "call_2", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "one"},
        ghost,
        {"type": "function_call_output", "call_id": "call_2", "output": "two"},
        ghost,
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Again."}]},
        ghost
    ], "store": false})
    .to_string();
    let conversation = read(&request);
    assert_eq!(roles(&conversation.messages), "uattu");
    let ghosts = |out: &[u8]| out.windows(14).filter(|w| w == b"ghost_snapshot").count();
    let note = Message::user("[note]");
    // (what, origin, ghosts written): a ghost inside a model call's items stays with them; one
    // between two messages written one after the other stays; one beside a dropped run, or before
    // a message put in (the last message read followed by a note, too), goes.
    // The last message read changed beyond its results (encoded afresh) is still the last.
    let cases: [(&str, Vec<Option<usize>>, bool, usize); 4] = [
        ("a note put in last", vec![Some(0), Some(1), Some(2), Some(3), Some(4), None], false, 4),
        ("a note put in first", vec![None, Some(0), Some(1), Some(2), Some(3), Some(4)], false, 4),
        ("the call and its results dropped", vec![Some(0), None, Some(4)], false, 2),
        ("the last message read changed", vec![None, Some(0), Some(1), Some(2), Some(3), Some(4)], true, 4),
    ];
    for (what, origin, change_last, written) in cases {
        let mut messages: Vec<Message> = origin
            .iter()
            .map(|o| o.map_or_else(|| note.clone(), |i| conversation.messages[i].clone()))
            .collect();
        if change_last {
            *messages.last_mut().unwrap() = Message::user("Again, please.");
        }
        let mut out = Vec::new();
        compaction_formats::write(&conversation, &messages, None, &Changes::rewritten(origin), &mut out)
            .unwrap();
        assert_eq!(ghosts(&out), written, "{what}: {}", String::from_utf8_lossy(&out));
        assert_eq!(read(std::str::from_utf8(&out).unwrap()).messages, messages, "{what}");
    }
}

#[test]
fn a_rewrite_a_request_cannot_read_back_is_refused_and_nothing_written() {
    use compaction_model::{Changes, Message};
    let text = codex_requests().remove(0).1;
    let conversation = read(&text);
    let read = &conversation.messages;
    type Case = (&'static str, Vec<Option<usize>>, Vec<Message>, &'static str);
    let cases: [Case; 4] = [
        (
            "an output whose call was dropped",
            vec![Some(0), Some(1), None, Some(3)],
            vec![read[0].clone(), read[1].clone(), Message::user("[note]"), read[3].clone()],
            "message 3 answers call call_1, which no message before it makes",
        ),
        (
            "two assistant messages in a row",
            vec![Some(0), Some(1), Some(2), None],
            vec![read[0].clone(), read[1].clone(), read[2].clone(), Message::assistant("x")],
            "messages 2 and 3 are both assistant messages",
        ),
        (
            "a message read written twice",
            vec![Some(0), Some(1), Some(1)],
            vec![read[0].clone(), read[1].clone(), read[1].clone()],
            "message 1 read is written twice",
        ),
        (
            "an origin past those read",
            vec![Some(0), Some(10)],
            vec![read[0].clone(), read[1].clone()],
            "origins",
        ),
    ];
    for (what, origin, messages, expected) in cases {
        let mut out = Vec::new();
        let error =
            compaction_formats::write(&conversation, &messages, None, &Changes::rewritten(origin), &mut out)
                .unwrap_err();
        assert!(error.to_string().contains(expected), "{what}: {error}");
        assert!(out.is_empty(), "{what}");
    }
    // A Codex rollout, an event log, keeps refusing.
    let rollout =
        include_str!("../../../../examples/transcripts/codex/rollout-2025-10-04T09-00-00-0199a1b2.jsonl");
    let conversation = crate::read(rollout);
    assert!(!conversation.takes_back_rewrites());
    let messages = conversation.messages[1..].to_vec();
    let origin = (1..conversation.messages.len()).map(Some).collect();
    let error = compaction_formats::write(
        &conversation,
        &messages,
        None,
        &Changes::rewritten(origin),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(error.to_string().contains("log can take back only"), "{error}");
}

#[test]
fn a_note_put_in_an_ascii_request_is_escaped_as_the_request_is() {
    use compaction_model::{Changes, Message};
    for (request, escaped) in [
        (json!({"input": [{"role": "user", "content": "Go."}, {"role": "user", "content": "On."}]}), true),
        (json!({"input": [{"role": "user", "content": "Go…"}, {"role": "user", "content": "On."}]}), false),
    ] {
        let text = request.to_string();
        let responses = || compaction_formats::ReadOptions::named("t").with_format(Format::Responses);
        let conversation = crate::read_with(&text, responses()).unwrap();
        let messages = vec![Message::user("[1 message removed…]"), conversation.messages[1].clone()];
        let mut out = Vec::new();
        compaction_formats::write(
            &conversation,
            &messages,
            None,
            &Changes::rewritten(vec![None, Some(1)]),
            &mut out,
        )
        .unwrap();
        assert_eq!(out.is_ascii(), escaped, "{}", String::from_utf8_lossy(&out));
        let back = crate::read_with(std::str::from_utf8(&out).unwrap(), responses()).unwrap();
        assert_eq!(back.messages, messages);
    }
}

/// A long request cut and every kept result pruned is written in one pass over its items: no
/// message kept, changed or not, is looked for from the request's start (which for 2000 steps
/// took some 30 s of a debug build, against some 50 ms).
#[test]
fn a_long_request_is_rewritten_without_walking_it_for_every_message() {
    use compaction_model::{Changes, Message};
    let mut input = vec![json!({"role": "user", "content": "Go."})];
    for n in 0..2000 {
        input.push(
            json!({"type": "function_call", "call_id": format!("c{n}"), "name": "shell", "arguments": "{}"}),
        );
        input.push(
            json!({"type": "function_call_output", "call_id": format!("c{n}"), "output": "x".repeat(500)}),
        );
    }
    let text = json!({"model": "m", "input": input}).to_string();
    let responses = compaction_formats::ReadOptions::named("t").with_format(Format::Responses);
    let conversation = crate::read_with(&text, responses.clone()).unwrap();
    let n = conversation.messages.len();
    for prune in [false, true] {
        let mut messages = vec![conversation.messages[0].clone(), Message::user("[note]")];
        messages.extend(conversation.messages[201..].iter().cloned());
        if prune {
            for index in (3..messages.len()).step_by(2) {
                crate::prune(&mut messages, index, "[pruned]");
            }
        }
        let mut origin = vec![Some(0), None];
        origin.extend((201..n).map(Some));
        let start = std::time::Instant::now();
        let mut out = Vec::new();
        compaction_formats::write(&conversation, &messages, None, &Changes::rewritten(origin), &mut out)
            .unwrap();
        let took = start.elapsed();
        assert!(took < std::time::Duration::from_secs(5), "pruned: {prune}: {took:?}");
        let back = crate::read_with(std::str::from_utf8(&out).unwrap(), responses.clone()).unwrap();
        assert_eq!(back.messages, messages, "pruned: {prune}");
    }
}
