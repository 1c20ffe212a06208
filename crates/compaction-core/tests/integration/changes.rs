//! A compaction's `changes`, handed to the write-back as they are: each example transcript
//! compacted by pruning (in place), by a sliding window (messages dropped and a note put in) and
//! by both, written back in its own format and read again.

use std::path::PathBuf;

use compaction_core::{ChainCompactor, Compactor, SlidingWindowCompactor, ToolResultPruningCompactor};
use compaction_formats::{read, ReadOptions};
use compaction_model::Message;
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};

/// The example transcripts written back in their own format, under `examples/transcripts/`.
const TRANSCRIPTS: &[&str] = &[
    "haystack/agent-run.json",
    "haystack/read-file.json",
    "openai/weather.json",
    "anthropic/search.json",
    "tau-bench/gpt-4o-airline-excerpt.json",
];

/// (name, the compactor, whether it keeps every message in its place: `None` when that depends
/// on whether its window stage ran)
fn compactors() -> Vec<(&'static str, Box<dyn Compactor>, Option<bool>)> {
    vec![
        ("pruning", Box::new(ToolResultPruningCompactor::default()), Some(true)),
        ("sliding window", Box::new(SlidingWindowCompactor::default()), Some(false)),
        (
            "chain",
            Box::new(
                ChainCompactor::new()
                    .then(ToolResultPruningCompactor::default())
                    .then(SlidingWindowCompactor::default()),
            ),
            None,
        ),
    ]
}

fn transcript(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/transcripts").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_compactions_changes_write_each_message_over_its_own_original() {
    let counter = ApproximateTokenCounter::default();
    let mut compacted = 0;
    for name in TRANSCRIPTS {
        let conversation = read(transcript(name), &ReadOptions::named(*name)).expect("reads");
        let messages = conversation.messages.clone();
        for (strategy, compactor, in_place) in compactors() {
            let case = format!("{name}, {strategy}");
            let target = counter.count(&messages, &[]) / 4;
            let Some(compaction) = compactor.try_compact(&messages, target, &counter).expect(&case) else {
                continue;
            };
            compacted += 1;
            let out = compaction.messages(&messages);
            let changes = compaction.changes(&messages);
            let window = compaction.report.stages.iter().any(|stage| stage.strategy == "sliding_window");
            let in_place = in_place.unwrap_or(!window);
            assert_eq!(changes.changed().is_some(), in_place, "{case}: {changes:?}");
            assert!(changes.describes(&messages, &out), "{case}: {changes:?}");
            let origin = changes.origin(out.len()).expect(&case);

            let mut bytes = Vec::new();
            compaction_formats::write(&conversation, &out, None, &changes, &mut bytes).expect(&case);
            let again = read(bytes.clone(), &ReadOptions::named(*name)).expect(&case).messages;
            assert_eq!(again.len(), out.len(), "{case}");
            // Each message the changes say is as read comes back as it was read; so does one
            // changed, from the Haystack format, which holds everything a message is.
            for (written, read) in origin.iter().enumerate() {
                let expected: &Message = match read {
                    Some(read) if !changes.may_differ(written) => &messages[*read],
                    _ if name.starts_with("haystack/") => &out[written],
                    _ => continue,
                };
                assert_eq!(&again[written], expected, "{case}: message {written}");
            }
        }
    }
    assert!(compacted >= 8, "only {compacted} compactions: the transcripts no longer exercise this");
}
