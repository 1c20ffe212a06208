//! The conversations every adapter is tried on, and the round-trip checks they share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use compaction_adapters::{Conversion, Loss};
use compaction_model::{messages_from_slice, messages_from_value, Message};
use serde_json::Value;

/// A named conversation.
#[derive(Debug)]
pub struct Corpus {
    pub name: String,
    pub messages: Vec<Message>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

/// Every committed Haystack conversation: the model crate's convert fixtures that read without
/// error, the bundled example transcripts, and this crate's excerpts of real runs. With
/// `COMPACTION_ADAPTERS_CORPUS` set to a folder, its `*.json` Haystack files too.
pub fn corpus() -> Vec<Corpus> {
    let mut out = Vec::new();
    let mut files = Vec::new();
    json_files(&workspace().join("crates/compaction-model/tests/data/convert"), &mut files);
    for path in files {
        let fixture: Value =
            serde_json::from_slice(&std::fs::read(&path).expect("fixture readable")).expect("JSON");
        if fixture.get("error").is_some() {
            continue;
        }
        let messages = messages_from_value(fixture["input"].clone()).expect("fixture reads");
        out.push(Corpus {
            name: format!("convert/{}", path.file_name().unwrap().to_string_lossy()),
            messages,
        });
    }
    let mut files = Vec::new();
    json_files(&workspace().join("examples/transcripts/haystack"), &mut files);
    json_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/transcripts"), &mut files);
    if let Some(extra) = std::env::var_os("COMPACTION_ADAPTERS_CORPUS") {
        json_files(Path::new(&extra), &mut files);
    }
    for path in files {
        let bytes = std::fs::read(&path).expect("transcript readable");
        let messages = match messages_from_slice(&bytes) {
            Ok(messages) => messages,
            // JSON Lines, as the command writes Claude Code sessions.
            Err(_) => bytes
                .split(|b| *b == b'\n')
                .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
                .enumerate()
                .map(|(i, line)| Message::from_slice(line, i).expect("a Haystack message a line"))
                .collect(),
        };
        out.push(Corpus { name: path.display().to_string(), messages });
    }
    assert!(out.len() > 60, "expected the committed conversations, found {}", out.len());
    out
}

/// Checks `to` then `from` on `messages` against the losses `to` reports, independently of how
/// the adapter computed them: no loss means the same conversation comes back; a message with no
/// loss comes back as it was (when no message boundary moved); and the framework's messages
/// come back from ours unchanged and lossless. Returns the losses by field, for the caller's
/// expectations.
pub fn assert_round_trip<T: PartialEq + std::fmt::Debug + Clone>(
    name: &str,
    messages: &[Message],
    to: impl Fn(&[Message]) -> Conversion<T>,
    from: impl Fn(&T) -> Vec<Message>,
) -> BTreeMap<String, usize> {
    assert_round_trip_by(name, messages, to, from, T::clone)
}

/// [`assert_round_trip`] for framework types compared through `key` (genai's have no `PartialEq`).
pub fn assert_round_trip_by<T, K: PartialEq + std::fmt::Debug>(
    name: &str,
    messages: &[Message],
    to: impl Fn(&[Message]) -> Conversion<T>,
    from: impl Fn(&T) -> Vec<Message>,
    key: impl Fn(&T) -> K,
) -> BTreeMap<String, usize> {
    let converted = to(messages);
    let back = from(converted.value());
    let losses = converted.losses();
    if losses.is_empty() {
        assert_eq!(back, messages, "{name}: lossless conversion changed the conversation");
    }
    if !losses.iter().any(|l| l.field == Loss::BOUNDARY) {
        assert_eq!(back.len(), messages.len(), "{name}: message count changed without a boundary loss");
        for (i, (a, b)) in messages.iter().zip(&back).enumerate() {
            if !losses.iter().any(|l| l.message == i) {
                assert_eq!(a, b, "{name}: message {i} changed but no loss names it");
            } else if a.parts.len() == b.parts.len()
                && !losses.iter().any(|l| l.message == i && l.part.is_none())
            {
                for (k, (pa, pb)) in a.parts.iter().zip(&b.parts).enumerate() {
                    if !losses.iter().any(|l| l.message == i && l.part == Some(k)) {
                        assert_eq!(pa, pb, "{name}: message {i} part {k} changed but no loss names it");
                    }
                }
            }
        }
    }
    // Theirs → ours → theirs is the identity, without loss.
    let again = to(&back);
    assert!(
        again.is_lossless(),
        "{name}: converting back what came from the framework loses {:?}",
        again.losses()
    );
    assert_eq!(
        key(again.value()),
        key(converted.value()),
        "{name}: theirs → ours → theirs changed the messages"
    );

    let mut by_field = BTreeMap::new();
    for loss in losses {
        *by_field.entry(loss.field.clone()).or_insert(0) += 1;
    }
    by_field
}
