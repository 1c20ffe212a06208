//! The reference's answers for the sliding window and summarization: Haystack's own output on
//! each conversation, settings and target, and for summarization every prompt it sent to a
//! deterministic stand-in model, which [`StandIn`] answers as the fixture generator's does.

use std::sync::{Arc, Mutex};

use compaction_core::{
    AsyncChatGenerator, ChatGenerator, Compaction, Compactor, Error, GenerateFuture, GeneratorError,
    SlidingWindowCompactor, SlidingWindowSettings, SummarizationCompactor, SummarizationSettings,
};
use compaction_model::{messages_from_value, messages_to_value, Message, ToolCall};
use compaction_testkit::python_equal;
use compaction_tokens::TokenCounter as _;
use serde_json::Value;

use crate::{block_on, counter_from_fixture, fixture_files};

fn read(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    serde_json::from_str(&text).expect("fixture is JSON")
}

/// Both ways of getting the compacted conversation agree; the report's removed and inserted
/// messages account for its length.
fn built(messages: &[Message], compaction: &Compaction) -> Value {
    let mut applied = messages.to_vec();
    compaction.clone().apply(&mut applied).expect("fits the conversation it was made from");
    let built = compaction.messages(messages);
    assert_eq!(applied, built, "apply and messages differ");
    let report = &compaction.report;
    assert_eq!(
        built.len() + report.removed.len(),
        messages.len() + report.inserted.len(),
        "report miscounts"
    );
    messages_to_value(&built)
}

#[test]
fn conformance_window_matches_reference() {
    let files = fixture_files("window");
    assert!(!files.is_empty(), "no window fixtures found");
    let mut failures = Vec::new();
    let mut deviations = 0;
    for path in &files {
        let fixture = read(path);
        let messages = messages_from_value(fixture["messages"].clone()).expect("messages parse");
        let counter = counter_from_fixture(&fixture["counter"]);
        let settings = SlidingWindowSettings::from_value(&fixture["settings"]).expect("settings parse");
        let compactor = SlidingWindowCompactor::new(settings);
        let target = fixture["target_tokens"].as_u64().expect("target") as usize;
        let got =
            compactor.try_compact(&messages, target, counter.as_ref()).expect("local counters never fail");
        // The one deviation: where the reference's result is not smaller than its input, this
        // compactor declines.
        let mut expected = fixture["output"].clone();
        if let Ok(output) = messages_from_value(expected.clone()) {
            if counter.count(&output, &[]) >= counter.count(&messages, &[]) {
                expected = Value::Null;
                deviations += 1;
            }
        }
        let matches = match (&expected, &got) {
            (Value::Null, None) => true,
            (expected, Some(compaction)) if !expected.is_null() => {
                python_equal(&built(&messages, compaction), expected)
            }
            _ => false,
        };
        if !matches {
            failures.push(path.display().to_string());
        }
    }
    assert!(failures.is_empty(), "{} of {} fixtures differ: {failures:#?}", failures.len(), files.len());
    eprintln!(
        "{} window fixtures match the reference ({deviations} where it would have grown the conversation)",
        files.len()
    );
}

/// The fixture generator's stand-in model: see `StandIn` in `xtask/reference/generate_family.py`.
#[derive(Debug)]
pub struct StandIn {
    keep_chars: usize,
    fail_round: Option<usize>,
    failure: String,
    /// Every prompt it was sent.
    pub requests: Mutex<Vec<Vec<Message>>>,
}

impl StandIn {
    /// The stand-in a fixture's `stand_in` object describes.
    pub fn new(spec: &Value) -> Self {
        StandIn {
            keep_chars: spec["keep_chars"].as_u64().expect("keep_chars") as usize,
            fail_round: spec["fail_round"].as_u64().map(|r| r as usize),
            failure: spec["failure"].as_str().unwrap_or_default().to_owned(),
            requests: Mutex::new(Vec::new()),
        }
    }

    fn answer(&self, messages: &[Message]) -> Result<Message, GeneratorError> {
        let mut requests = self.requests.lock().expect("not poisoned");
        requests.push(messages.to_vec());
        let round = requests.len() - 1;
        let prompt = messages.last().and_then(Message::text).unwrap_or_default();
        let transcript = &prompt["<conversation_to_summarize>\n".len()..];
        if Some(round) == self.fail_round {
            return match self.failure.as_str() {
                "raise" => Err("the stand-in was told to fail".into()),
                "empty" => Ok(Message::assistant("")),
                "blank" => Ok(Message::assistant(" \n\t\u{1c}\u{3000} ")),
                "no_text" => {
                    Ok(Message::assistant_with_calls(None, vec![ToolCall::new("x", Default::default())]))
                }
                "bloat" => Ok(Message::assistant(format!("{transcript}{transcript}"))),
                other => panic!("unknown stand-in failure {other:?}"),
            };
        }
        let kept: String = transcript.chars().take(self.keep_chars).collect();
        Ok(Message::assistant(format!(" \u{1f} Summary {round}: {kept} \n")))
    }

    /// The prompts as Haystack `to_dict` values.
    pub fn requests_value(&self) -> Value {
        let requests = self.requests.lock().expect("not poisoned");
        Value::Array(requests.iter().map(|r| messages_to_value(r)).collect())
    }
}

impl ChatGenerator for StandIn {
    fn generate(&self, messages: &[Message]) -> Result<Message, GeneratorError> {
        self.answer(messages)
    }
}

impl AsyncChatGenerator for StandIn {
    fn generate<'a>(&'a self, messages: &'a [Message]) -> GenerateFuture<'a> {
        Box::pin(async move { self.answer(messages) })
    }
}

/// The fixture's name for a summarization error.
pub fn error_kind(error: &Error) -> &'static str {
    match error {
        Error::Generate(_) => "generator",
        Error::EmptySummary { .. } => "empty",
        Error::SummaryNotSmaller { .. } => "not_smaller",
        other => panic!("unexpected error {other}"),
    }
}

#[test]
fn conformance_summarize_matches_reference() {
    let files = fixture_files("summarize");
    assert!(!files.is_empty(), "no summarize fixtures found");
    let mut failures = Vec::new();
    for path in &files {
        let fixture = read(path);
        let messages = messages_from_value(fixture["messages"].clone()).expect("messages parse");
        let counter = counter_from_fixture(&fixture["counter"]);
        let settings = SummarizationSettings::from_value(&fixture["settings"]).expect("settings parse");
        let target = fixture["target_tokens"].as_u64().expect("target") as usize;
        let expected_error = fixture["error"].as_str();

        // Synchronously, through the trait, with the generator given to the compactor.
        let stand_in = Arc::new(StandIn::new(&fixture["stand_in"]));
        let compactor = SummarizationCompactor::new(settings.clone())
            .expect("valid settings")
            .with_generator(stand_in.clone());
        let got = compactor.try_compact(&messages, target, counter.as_ref());
        let requests_match = python_equal(&stand_in.requests_value(), &fixture["requests"]);
        let sync_matches =
            requests_match && outcome_matches(&messages, &got, expected_error, &fixture["output"]);

        // Asynchronously, with a fresh stand-in.
        let stand_in = Arc::new(StandIn::new(&fixture["stand_in"]));
        let compactor =
            SummarizationCompactor::new(settings).expect("valid settings").with_async_generator(stand_in);
        let got = block_on(compactor.compact_async(&messages, target, counter.as_ref()));
        let async_matches = outcome_matches(&messages, &got, expected_error, &fixture["output"]);

        if !(sync_matches && async_matches) {
            failures.push(format!(
                "{} (requests {requests_match}, sync {sync_matches}, async {async_matches})",
                path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} fixtures differ: {failures:#?}", failures.len(), files.len());
    eprintln!("{} summarize fixtures match the reference", files.len());
}

fn outcome_matches(
    messages: &[Message],
    got: &Result<Option<Compaction>, Error>,
    expected_error: Option<&str>,
    expected: &Value,
) -> bool {
    match (got, expected_error) {
        (Err(error), Some(kind)) => error_kind(error) == kind && expected.is_null(),
        (Ok(None), None) => expected.is_null(),
        (Ok(Some(compaction)), None) => {
            !expected.is_null() && python_equal(&built(messages, compaction), expected)
        }
        _ => false,
    }
}
