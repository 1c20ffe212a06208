//! What a reader did on purpose that a user should know: lines it skipped, history a provider
//! compacted away, values it kept as opaque text. Returned as data; a program says them once.

use std::collections::BTreeMap;
use std::fmt;

/// Something the reader (or writer) did on purpose that changes what a user sees, said once.
///
/// Its [`Display`](fmt::Display) is one line for a person: `skipped 405 sidechain lines`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Note {
    /// What kind of thing happened.
    pub kind: NoteKind,
    /// How many lines, events, blocks or messages it concerns.
    pub count: usize,
    /// The line for a person.
    pub text: String,
}

/// The kinds of [`Note`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum NoteKind {
    /// Lines or events the model never saw (bookkeeping, progress, sidechains) were skipped.
    Skipped,
    /// The provider compacted the conversation; what came before is not in the view read.
    Compacted,
    /// Items kept as opaque text (provider compaction items, blocks of kinds this crate does not
    /// model), counted as their text and written back as they were.
    Opaque,
    /// Something the target format cannot hold was left out of the output.
    Dropped,
    /// A JSON object repeated a key; the last value was read.
    DuplicateKey,
    /// Something the target format requires that the input lacks was made up (tool-call ids).
    Added,
}

impl Note {
    pub(crate) fn new(kind: NoteKind, count: usize, text: impl Into<String>) -> Self {
        Note { kind, count, text: text.into() }
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `1,234`: counts in notes are read by people.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1 line`, `2 lines`.
pub(crate) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", thousands(n))
    }
}

/// Counts of things skipped, by kind, turned into one note.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    kinds: BTreeMap<String, usize>,
}

impl Tally {
    pub(crate) fn add(&mut self, kind: &str) {
        *self.kinds.entry(kind.to_owned()).or_default() += 1;
    }

    pub(crate) fn total(&self) -> usize {
        self.kinds.values().sum()
    }

    /// `skipped 1,363 lines the model never saw (1,332 progress, 27 file-history-snapshot)`, or
    /// nothing when nothing was skipped. Kinds are listed most frequent first.
    pub(crate) fn note(&self, noun: &str, why: &str) -> Option<Note> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let mut kinds: Vec<(&String, &usize)> = self.kinds.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let shown: Vec<String> =
            kinds.iter().take(8).map(|(kind, n)| format!("{} {kind}", thousands(**n))).collect();
        let more = if kinds.len() > 8 { ", …" } else { "" };
        let text = format!("skipped {} {why} ({}{more})", plural(total, noun), shown.join(", "));
        Some(Note::new(NoteKind::Skipped, total, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_well() {
        assert_eq!(thousands(1_363), "1,363");
        assert_eq!(thousands(999), "999");
        assert_eq!(plural(1, "line"), "1 line");
        let mut tally = Tally::default();
        for _ in 0..3 {
            tally.add("progress");
        }
        tally.add("system");
        let note = tally.note("line", "the model never saw").unwrap();
        assert_eq!(note.to_string(), "skipped 4 lines the model never saw (3 progress, 1 system)");
        assert_eq!(note.count, 4);
        assert!(Tally::default().note("line", "x").is_none());
    }
}
