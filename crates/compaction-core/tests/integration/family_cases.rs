//! The sliding window's and the summarizer's settings and session rules, case by case: what
//! the fixtures cannot show (settings forms, misuse of a session, where a failure is reported).

use std::sync::Arc;

use compaction_core::{
    ChainCompactor, ChatGenerator, Compactor, Error, GeneratorError, SlidingWindowCompactor,
    SlidingWindowSettings, SummarizationCompactor, SummarizationSettings, SummaryTier, DEFAULT_OMISSION_NOTE,
    DEFAULT_SUMMARY_INSTRUCTION,
};
use compaction_model::{Message, Role};
use compaction_tokens::ApproximateTokenCounter;
use serde_json::json;

use crate::CharCounter;

/// system, then `turns` turns of a user message and an answer of 100 characters each, then the task.
fn turns(turns: usize) -> Vec<Message> {
    let mut messages = vec![Message::system("sys")];
    for t in 0..turns {
        messages.push(Message::user(format!("{t}").repeat(100)));
        messages.push(Message::assistant("a".repeat(100)));
    }
    messages.push(Message::user("task"));
    messages
}

#[test]
fn window_defaults_and_settings_forms_are_the_references() {
    let settings = SlidingWindowSettings::default();
    assert_eq!(settings.min_keep_steps, 1);
    assert_eq!(settings.omission_note.as_deref(), Some(DEFAULT_OMISSION_NOTE));
    let dict = json!({"type": "haystack.hooks.compaction.sliding_window.SlidingWindowCompactor",
                      "init_parameters": {"min_keep_steps": 0, "omission_note": null}});
    let read = SlidingWindowSettings::from_value(&dict).expect("reads");
    assert_eq!(read, SlidingWindowSettings::default().with_min_keep_steps(0).with_omission_note(None));
    assert_eq!(read.to_haystack_value(), dict);
    assert_eq!(
        SlidingWindowSettings::from_value(&json!({"min_keep_steps": -1})),
        Err(Error::NegativeMinKeepSteps(-1))
    );
    assert_eq!(
        SlidingWindowSettings::from_value(&json!({"note": "x"})),
        Err(Error::UnknownSetting { key: "note".into(), of: "SlidingWindowCompactor" })
    );
    assert!(matches!(
        SlidingWindowSettings::from_value(&json!({"type": "other.Compactor"})),
        Err(Error::WrongType { .. })
    ));
}

#[test]
fn the_note_counts_with_replace_and_leaves_other_braces() {
    let messages = turns(4);
    let note = "{num_removed} gone {x} {{num_removed}} {num_removed}";
    let compactor =
        SlidingWindowCompactor::new(SlidingWindowSettings::default().with_omission_note(Some(note.into())));
    let compaction = compactor.try_compact(&messages, 250, &CharCounter).unwrap().expect("over the target");
    let out = compaction.messages(&messages);
    // Kept: the system message, the newest turn (200 characters) and the task; the note goes
    // after the system block.
    assert_eq!(out.len(), 5);
    assert_eq!(out[1].text(), Some("6 gone {x} {6} 6"));
    assert_eq!(out[1].role, Role::User);
    assert_eq!(
        serde_json::Value::from(out[1].meta.clone()),
        json!({"context_compaction": {"strategy": "sliding_window", "removed_messages": 6, "kept_messages": 4}})
    );
    assert_eq!(compaction.report.removed, vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(compaction.report.inserted, vec![1]);
    assert_eq!(
        compaction.report.tokens_freed(),
        compaction.report.tokens_before - compaction.report.tokens_after
    );

    // An empty note, as `None`, removes silently.
    let silent =
        SlidingWindowCompactor::new(SlidingWindowSettings::default().with_omission_note(Some(String::new())));
    let out = silent
        .try_compact(&messages, 250, &CharCounter)
        .unwrap()
        .expect("over the target")
        .messages(&messages);
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|m| !m.meta.contains_key("context_compaction")));
}

#[test]
fn the_window_declines_when_only_its_old_note_would_go() {
    let mut messages = turns(0);
    let note = Message::user("[3 earlier messages were removed]").with_meta(
        json!({"context_compaction": {"strategy": "sliding_window", "removed_messages": 3, "kept_messages": 2}})
            .as_object()
            .cloned()
            .unwrap(),
    );
    messages.insert(1, note);
    assert_eq!(SlidingWindowCompactor::default().try_compact(&messages, 0, &CharCounter).unwrap(), None);
    // Without a note to leave, the old one goes.
    let silent = SlidingWindowCompactor::new(SlidingWindowSettings::default().with_omission_note(None));
    let out =
        silent.try_compact(&messages, 0, &CharCounter).unwrap().expect("the note goes").messages(&messages);
    assert_eq!(out, turns(0));
}

#[test]
fn the_window_declines_where_its_note_would_outweigh_what_it_removes() {
    // The reference returns [user(""), note] here, 28 tokens for 6: a message lost for nothing.
    let messages = vec![Message::user(""), Message::assistant("done")];
    let counter = ApproximateTokenCounter::default();
    let compactor = SlidingWindowCompactor::new(SlidingWindowSettings::default().with_min_keep_steps(0));
    assert_eq!(compactor.try_compact(&messages, 0, &counter).unwrap(), None);
    // Without a note, removing the step does make it smaller.
    let silent = SlidingWindowCompactor::new(
        SlidingWindowSettings::default().with_min_keep_steps(0).with_omission_note(None),
    );
    let out = silent.try_compact(&messages, 0, &counter).unwrap().expect("smaller").messages(&messages);
    assert_eq!(out, vec![Message::user("")]);
}

#[test]
fn summarization_defaults_and_settings_forms_are_the_references() {
    let settings = SummarizationSettings::default();
    assert_eq!(
        (settings.min_keep_steps, settings.approximate_summary_tokens, settings.raise_on_failure),
        (1, 1024, false)
    );
    assert_eq!(settings.summary_instruction, DEFAULT_SUMMARY_INSTRUCTION);
    assert!(DEFAULT_SUMMARY_INSTRUCTION.starts_with("You are compacting one portion of a conversation"));
    assert!(DEFAULT_SUMMARY_INSTRUCTION.ends_with("do not mention that you are summarizing."));
    let dict = json!({"type": "haystack.hooks.compaction.summarization.SummarizationCompactor",
                      "init_parameters": {"chat_generator": {"type": "x.Y", "init_parameters": {}},
                                          "min_keep_steps": 0, "approximate_summary_tokens": 10,
                                          "summary_instruction": "Be brief.", "raise_on_failure": true}});
    let read = SummarizationSettings::from_value(&dict).expect("reads");
    assert_eq!(
        read,
        SummarizationSettings::default()
            .with_min_keep_steps(0)
            .with_approximate_summary_tokens(10)
            .with_summary_instruction("Be brief.")
            .with_raise_on_failure(true)
    );
    assert_eq!(
        SummarizationSettings::from_value(&json!({"approximate_summary_tokens": 0})),
        Err(Error::SummaryTokensTooSmall(0))
    );
    assert!(SummarizationCompactor::new(SummarizationSettings::default().with_approximate_summary_tokens(0))
        .is_err());
    assert_eq!(
        SummarizationSettings::from_value(&json!({"min_keep_steps": -2})),
        Err(Error::NegativeMinKeepSteps(-2))
    );
}

/// Answers with the replies it is given, in order, then fails.
#[derive(Debug)]
struct Scripted(std::sync::Mutex<Vec<Result<Message, String>>>);

impl Scripted {
    fn new(replies: Vec<Result<Message, String>>) -> Self {
        Scripted(std::sync::Mutex::new(replies.into_iter().rev().collect()))
    }
}

impl ChatGenerator for Scripted {
    fn generate(&self, _: &[Message]) -> Result<Message, GeneratorError> {
        match self.0.lock().expect("not poisoned").pop() {
            Some(Ok(reply)) => Ok(reply),
            Some(Err(reason)) => Err(reason.into()),
            None => Err("no more replies".into()),
        }
    }
}

/// A model that remembers whether it was asked, and never answers.
#[derive(Debug, Default)]
struct Unanswering(std::sync::atomic::AtomicBool);

impl ChatGenerator for Unanswering {
    fn generate(&self, _: &[Message]) -> Result<Message, GeneratorError> {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        Err("not answering".into())
    }
}

fn small_summaries() -> SummarizationCompactor {
    SummarizationCompactor::new(SummarizationSettings::default().with_approximate_summary_tokens(1))
        .expect("valid")
}

#[test]
fn a_session_asks_round_by_round_and_refuses_stray_replies() {
    let messages = turns(3);
    let compactor = small_summaries();
    let mut session = compactor.session(&messages, 250, &CharCounter).expect("counts");
    assert!(matches!(session.supply(Ok(Message::assistant("early"))), Err(Error::NoPendingRequest)));
    let first = session.next_request().expect("plans").expect("over the target");
    assert_eq!(first.tier, SummaryTier::HistoricalTurns);
    assert_eq!(first.messages[0].text(), Some(DEFAULT_SUMMARY_INSTRUCTION));
    // Asking again before answering gives the same request.
    assert_eq!(session.next_request().expect("plans"), Some(first.clone()));
    session.supply(Ok(Message::assistant("s"))).expect("was asked");
    assert_eq!(session.rounds().len(), 1);
    while session.next_request().expect("plans").is_some() {
        session.supply(Ok(Message::assistant("s"))).expect("was asked");
    }
    let summarized = session.finish().expect("no failure");
    let compaction = summarized.compaction.expect("summarized");
    assert!(compaction.report.target_reached);
    assert_eq!(compaction.report.strategy, "summarization");
    assert!(summarized.failure.is_none());
}

#[test]
fn a_failed_round_keeps_what_worked_or_fails_when_asked_to() {
    let messages = turns(3);
    // The first round works, the second fails.
    let script = || Scripted::new(vec![Ok(Message::assistant("s")), Err("rate limited".into())]);
    // 607 characters; the first round summarizes the oldest turn, the second the next.
    let summarized = small_summaries().summarize(&messages, 450, &CharCounter, &script()).expect("keeps");
    assert_eq!(summarized.rounds.len(), 1);
    assert!(matches!(summarized.failure, Some(Error::Generate(_))));
    let compaction = summarized.compaction.expect("the first round is kept");
    assert!(compaction.report.failure.as_deref().is_some_and(|f| f.contains("rate limited")));

    let raising = SummarizationCompactor::new(
        SummarizationSettings::default().with_approximate_summary_tokens(1).with_raise_on_failure(true),
    )
    .expect("valid");
    let error = raising.summarize(&messages, 450, &CharCounter, &script()).expect_err("raises");
    // The cause is the error's source, not part of its message.
    assert!(compaction_core::error_chain(&error).contains("rate limited"), "{error}");
    let raising = raising.with_generator(Arc::new(script()));
    assert!(matches!(raising.try_compact(&messages, 450, &CharCounter), Err(Error::Generate(_))));
    // A failure is never "nothing to compact": asked again, it is an error again.
    assert!(raising.try_compact(&messages, 450, &CharCounter).is_err());

    // Blank and bloated replies fail the same way, each with its own error.
    let blank = Scripted::new(vec![Ok(Message::assistant(" \u{1c}\n"))]);
    let summarized = small_summaries().summarize(&messages, 0, &CharCounter, &blank).expect("keeps");
    assert!(matches!(summarized.failure, Some(Error::EmptySummary { .. })));
    assert!(summarized.compaction.is_none());
    let bloated = Scripted::new(vec![Ok(Message::assistant("b".repeat(10_000)))]);
    let summarized = small_summaries().summarize(&messages, 0, &CharCounter, &bloated).expect("keeps");
    assert!(matches!(summarized.failure, Some(Error::SummaryNotSmaller { .. })), "{:?}", summarized.failure);
}

#[test]
fn a_summarizer_without_a_generator_says_so_only_when_it_needs_one() {
    let messages = turns(3);
    let compactor = small_summaries();
    assert_eq!(compactor.try_compact(&messages, 10_000, &CharCounter), Ok(None));
    assert_eq!(compactor.try_compact(&messages, 0, &CharCounter), Err(Error::NoGenerator("sync")));
}

#[test]
fn a_chain_stops_once_the_target_is_met() {
    let messages = turns(4);
    let counter = ApproximateTokenCounter::default();
    let model = Arc::new(Unanswering::default());
    let chain = ChainCompactor::new()
        .then(SlidingWindowCompactor::default())
        .then(small_summaries().with_generator(model.clone()));
    let compaction =
        chain.try_compact(&messages, 150, &counter).expect("the window is enough").expect("compacts");
    assert_eq!(compaction.report.stages.len(), 1);
    assert!(compaction.report.target_reached);
    assert!(!model.0.load(std::sync::atomic::Ordering::SeqCst), "the summarizer was asked");
    // The window does not budget for its own note, as in the reference, so at 80 it stops above
    // the target and the summarizer is asked (and, not answering, changes nothing).
    let compaction = chain.try_compact(&messages, 80, &counter).unwrap().expect("the window compacted");
    assert!(!compaction.report.target_reached);
    assert!(model.0.load(std::sync::atomic::Ordering::SeqCst), "the summarizer was not asked");
    assert_eq!(chain.try_compact(&messages, 100_000, &counter).unwrap(), None);
    assert_eq!(ChainCompactor::new().try_compact(&messages, 0, &counter).unwrap(), None);
}
