//! Observation masking against SWE-agent's own `LastNObservations`: the fixtures in
//! `tests/data/masking/` are what SWE-agent's processor made of a real trajectory's history (see
//! the README there); the trajectory is read through compaction-formats, as a user's would be.

use std::collections::BTreeMap;
use std::path::PathBuf;

use compaction_core::{
    Compactor, MaskingSettings, ObservationMaskingCompactor, STRATEGY_OBSERVATION_MASKING,
};
use compaction_model::{CompactionMarker, ImagePart, Message, Part, ToolCall, ToolResultContent};
use compaction_tokens::ApproximateTokenCounter;
use serde_json::{json, Value};

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/masking")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(data().join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("expected.json is JSON")
}

fn read(name: &str) -> (compaction_formats::Conversation, Vec<Message>) {
    let path = data().join(name);
    let bytes = std::fs::read(&path).expect("fixture input");
    let conversation = compaction_formats::read(bytes, &compaction_formats::ReadOptions::named(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let messages = conversation.messages.clone();
    (conversation, messages)
}

/// The one text a masked message holds: its tool result's, or its text's.
fn masked_text(message: &Message) -> &str {
    match message.tool_call_result() {
        Some(result) => match &result.result {
            ToolResultContent::Text(text) => text.as_str(),
            ToolResultContent::Parts(_) => panic!("a masked result is one text"),
        },
        None => {
            assert_eq!(message.parts.len(), 1, "a masked message is one text");
            message.text().expect("a text")
        }
    }
}

fn compactor(case: &Value) -> ObservationMaskingCompactor {
    let n = case["n"].as_u64().expect("n") as usize;
    let polling = case["polling"].as_u64().expect("polling") as usize;
    ObservationMaskingCompactor::new(MaskingSettings::new(n).with_polling(polling)).expect("valid settings")
}

fn indices(value: &Value) -> Vec<usize> {
    value.as_array().expect("indices").iter().map(|k| k.as_u64().expect("index") as usize).collect()
}

#[test]
fn masking_matches_swe_agents_last_n_observations_on_a_real_trajectory() {
    let expected = expected();
    let counter = ApproximateTokenCounter::default();
    let mut inputs: BTreeMap<String, Vec<Message>> = BTreeMap::new();
    let mut checked = 0;
    for case in expected["cases"].as_array().expect("cases") {
        let name = case["input"].as_str().expect("input");
        let messages = inputs.entry(name.to_owned()).or_insert_with(|| read(name).1);
        let length = case["length"].as_u64().expect("length") as usize;
        let mut prefix = messages[..length].to_vec();
        if let Some(tags) = case.get("tags").and_then(Value::as_object) {
            for (index, names) in tags {
                prefix[index.parse::<usize>().expect("index")].meta.insert("tags".into(), names.clone());
            }
        }
        let want = indices(&case["masked"]);
        let label = format!("{name} n={} polling={} length={length}", case["n"], case["polling"]);
        let compactor = compactor(case);
        assert_eq!(compactor.masked_indices(&prefix), want, "{label}");
        let Some(compaction) = compactor.try_compact(&prefix, 0, &counter).unwrap() else {
            assert!(want.is_empty(), "{label}: nothing masked");
            continue;
        };
        assert_eq!(compaction.report.changed_indices(), want, "{label}");
        assert!(compaction.report.tokens_after < compaction.report.tokens_before, "{label}");
        let after = compaction.messages(&prefix);
        for (index, (old, new)) in prefix.iter().zip(&after).enumerate() {
            if want.contains(&index) {
                let text = &expected["replaced"][name][index.to_string()];
                assert_eq!(masked_text(new), text.as_str().expect("a text"), "{label}: message {index}");
                assert_eq!(new.role, old.role, "{label}: message {index} keeps its role");
                let marker = CompactionMarker::read(&new.meta).expect("a marker");
                assert_eq!(marker.strategy, STRATEGY_OBSERVATION_MASKING);
            } else {
                assert_eq!(new, old, "{label}: message {index} is left as it was");
            }
        }
        checked += 1;
    }
    assert!(checked > 500, "only {checked} cases masked anything");
}

/// A conversation compacted in place at each model call, as the compaction hook does, is at
/// each call what SWE-agent sends then: a masked observation stays masked and is still counted.
#[test]
fn masking_in_place_call_after_call_is_what_swe_agent_sends_at_each_call() {
    let expected = expected();
    let counter = ApproximateTokenCounter::default();
    let cases = expected["cases"].as_array().expect("cases");
    let mut runs: BTreeMap<(String, u64, u64), Vec<&Value>> = BTreeMap::new();
    for case in cases.iter().filter(|c| c.get("tags").is_none()) {
        let key = (
            case["input"].as_str().expect("input").to_owned(),
            case["n"].as_u64().unwrap(),
            case["polling"].as_u64().unwrap(),
        );
        runs.entry(key).or_default().push(case);
    }
    assert_eq!(runs.len(), 18);
    for ((name, n, polling), calls) in runs {
        let messages = read(&name).1;
        let compactor = compactor(calls[0]);
        let mut conversation: Vec<Message> = Vec::new();
        for call in calls {
            let length = call["length"].as_u64().expect("length") as usize;
            conversation.extend_from_slice(&messages[conversation.len()..length]);
            if let Some(compaction) = compactor.try_compact(&conversation, 0, &counter).unwrap() {
                compaction.apply(&mut conversation).expect("applies");
            }
            let masked: Vec<usize> = (0..conversation.len())
                .filter(|&k| CompactionMarker::read(&conversation[k].meta).is_some())
                .collect();
            assert_eq!(masked, indices(&call["masked"]), "{name} n={n} polling={polling} length={length}");
            for &k in &masked {
                assert_eq!(
                    masked_text(&conversation[k]),
                    expected["replaced"][&name][k.to_string()].as_str().unwrap()
                );
            }
        }
    }
}

#[test]
fn a_masked_swe_agent_trajectory_is_written_with_its_notes() {
    let (conversation, messages) = read("pandas.tool-calls.traj");
    let compactor = ObservationMaskingCompactor::new(MaskingSettings::new(5)).expect("valid");
    let compaction =
        compactor.try_compact(&messages, 0, &ApproximateTokenCounter::default()).unwrap().expect("masks");
    let changes = compaction.changes(&messages);
    assert!(changes.changed().is_some(), "in place");
    let mut masked = messages.clone();
    compaction.apply(&mut masked).expect("applies");
    let mut out = Vec::new();
    compaction_formats::write(&conversation, &masked, None, &changes, &mut out).expect("written");
    let written: Value = serde_json::from_slice(&out).expect("JSON");
    let written = written.as_array().expect("OpenAI messages");
    assert_eq!(written.len(), messages.len());
    assert_eq!(written[3]["role"], "tool");
    assert_eq!(written[3]["content"], "Old environment output: (25 lines omitted)");
    assert_eq!(
        written[3]["tool_call_id"],
        messages[3].tool_call_result().unwrap().origin.id.as_deref().unwrap()
    );
    assert_ne!(written[75]["content"], written[3]["content"], "the newest observations are kept");
}

fn user(text: &str) -> Message {
    Message::user(text)
}

#[test]
fn a_mini_swe_agent_run_masks_its_user_messages_but_the_task() {
    // mini-swe-agent: no message types, no tool calls; every user message after the task carries
    // an action's output.
    let messages = vec![
        Message::system("You are a helpful assistant."),
        user("<pr_description>Fix it.</pr_description>"),
        Message::assistant("THOUGHT: look.\n\n```bash\nls\n```"),
        user("<returncode>0</returncode>\n<output>\na.py\nb.py\n</output>"),
        Message::assistant("```bash\ncat a.py\n```"),
        user("<returncode>0</returncode>\n<output>\nprint(1)\n</output>"),
        Message::assistant("```bash\ncat b.py\n```"),
        user("<returncode>0</returncode>\n<output>\nprint(2)\n</output>"),
    ];
    let compactor = ObservationMaskingCompactor::new(MaskingSettings::new(1)).expect("valid");
    assert_eq!(ObservationMaskingCompactor::observations(&messages), vec![1, 3, 5, 7]);
    let compaction =
        compactor.try_compact(&messages, 0, &ApproximateTokenCounter::default()).unwrap().expect("masks");
    assert_eq!(compaction.report.changed_indices(), vec![3, 5]);
    let after = compaction.messages(&messages);
    assert_eq!(after[3].text(), Some("Old environment output: (5 lines omitted)"));
    assert_eq!(after[5].text(), Some("Old environment output: (4 lines omitted)"));
    // With polling 3, four observations move the cut to 3 - 1 = 2: only the second is masked.
    let polled = ObservationMaskingCompactor::new(MaskingSettings::new(1).with_polling(3)).expect("valid");
    assert_eq!(polled.masked_indices(&messages), vec![3]);
}

#[test]
fn images_are_counted_and_a_tool_result_keeps_its_call() {
    let image = || ImagePart::new("iVBORw0KGgo=", Some("image/png".into()));
    let call = |id: &str| ToolCall::new("screenshot", serde_json::Map::new()).with_id(id);
    let mut shot = Message::user("two\nlines");
    shot.parts.push(Part::Image(image()));
    shot.parts.push(Part::Image(image()));
    let messages = vec![
        user("Look at the page."),
        Message::assistant_with_calls(None, vec![call("c1")]),
        Message::tool("a\nb\nc\n".repeat(50), call("c1"), false),
        Message::assistant_with_calls(None, vec![call("c2")]),
        Message::tool("x\n".repeat(50), call("c2"), true),
        shot,
        Message::assistant_with_calls(None, vec![call("c3")]),
        Message::tool("new", call("c3"), false),
    ];
    // A tool-calling run: the task and the tool results are the observations, not the user's
    // later message.
    assert_eq!(ObservationMaskingCompactor::observations(&messages), vec![0, 2, 4, 7]);
    let compactor = ObservationMaskingCompactor::new(MaskingSettings::new(1)).expect("valid");
    let after = compactor
        .try_compact(&messages, 0, &ApproximateTokenCounter::default())
        .unwrap()
        .expect("masks")
        .messages(&messages);
    let result = after[4].tool_call_result().expect("the result stays");
    assert_eq!(result.origin.id.as_deref(), Some("c2"));
    assert!(result.error, "its error flag too");
    assert!(
        matches!(&result.result, ToolResultContent::Text(t) if t.as_str() == "Old environment output: (50 lines omitted)")
    );
    assert_eq!(masked_text(&after[2]), "Old environment output: (150 lines omitted)");

    // SWE-agent's image note, on a text-action observation made of text and images.
    let text_action = vec![
        user("task"),
        Message::assistant("look"),
        messages[5].clone(),
        Message::assistant("ok"),
        user("done"),
    ];
    let compaction =
        compactor.try_compact(&text_action, 0, &ApproximateTokenCounter::default()).unwrap().expect("masks");
    assert_eq!(
        compaction.messages(&text_action)[2].text(),
        Some("Old environment output: (2 lines omitted) (2 images omitted)")
    );
}

#[test]
fn demonstrations_and_compacted_messages_are_left_alone() {
    let mut demo = user("Here is a demonstration.\nls\na.py");
    demo.meta.insert("is_demo".into(), json!(true));
    let messages = vec![
        demo,
        user("task"),
        Message::assistant("ls"),
        user(&"a line of output\n".repeat(8)),
        Message::assistant("cat a"),
        user(&"another line\n".repeat(8)),
        Message::assistant("cat b"),
        user("x"),
    ];
    let compactor = ObservationMaskingCompactor::new(MaskingSettings::new(1)).expect("valid");
    assert_eq!(ObservationMaskingCompactor::observations(&messages), vec![1, 3, 5, 7]);
    let counter = ApproximateTokenCounter::default();
    let mut conversation = messages.clone();
    compactor
        .try_compact(&conversation, 0, &counter)
        .unwrap()
        .expect("masks")
        .apply(&mut conversation)
        .expect("applies");
    assert_eq!(conversation[3].text(), Some("Old environment output: (8 lines omitted)"));
    // Masked once, a message is not masked again: its note is not its output.
    assert!(compactor.try_compact(&conversation, 0, &counter).unwrap().is_none());
}

#[test]
fn settings_are_checked_and_read_in_swe_agents_words() {
    assert!(ObservationMaskingCompactor::new(MaskingSettings::new(0)).is_err());
    assert!(ObservationMaskingCompactor::new(MaskingSettings::new(1).with_polling(0)).is_err());
    let read = MaskingSettings::from_value(&json!({"n": 3, "polling": 2})).expect("valid");
    assert_eq!(read, MaskingSettings::new(3).with_polling(2));
    let back: MaskingSettings =
        serde_json::from_value(serde_json::to_value(&read).unwrap()).expect("round trip");
    assert_eq!(back, read);
    assert!(MaskingSettings::from_value(&json!({"keep": 3})).is_err());
    assert!(MaskingSettings::from_value(&json!({"n": -1})).is_err());
    assert!(MaskingSettings::from_value(&json!({"n": 0})).is_err());
}
