//! Haystack `ChatMessage.to_dict` JSON, the model's own shape.
//!
//! A file that is one JSON array of messages (what Haystack and our own output write) is read
//! without a JSON tree: messages are read one after another straight from the text, most by
//! [`Message::read_prefix_in`], which takes serde_json's and Python's spellings alike, leaves
//! their texts in the input undecoded until asked for, and tells that the bytes are a faithful
//! spelling of the message; on two cores a second thread reads the second half. The bytes stay with the conversation, and a message a command did not change is
//! written back as them when they spell it; only the others are encoded. Anything else (JSON Lines, another format, invalid
//! JSON, a bad message) is read as a tree, as before, so errors are worded as they always were.

use std::io::Write;
use std::ops::Range;

use compaction_model::{JsonSource, Message};
use serde_json::Value;

use crate::codec::{Codec, TargetCodec, TreeRead};
use crate::conversation::{Decoded, Layout};
use crate::document::{Locator, Place, Top};
use crate::error::Error;
use crate::format::{Format, Target};
use crate::overlay::{self, Shape};
use crate::threads;
use crate::tree::{write_native_rewritten, write_native_to, Native};
use compaction_json::scan::{skip_value, whitespace as skip_whitespace};

/// The keys of a Haystack message; anything else on it is kept when it is written back.
pub(crate) static SHAPE: Shape = Shape {
    known: &["role", "meta", "name", "content", "_role", "_meta", "_name", "_content"],
    nested: &[],
    json_text: &[],
    aliases: &[],
};

pub(crate) fn read(values: &[Value], locator: &Locator) -> Result<Decoded, Error> {
    let mut decoded = Decoded::default();
    for (index, value) in values.iter().enumerate() {
        let message = Message::from_value(value.clone(), index)
            .map_err(|source| Error::Message { at: Box::new(locator.at(index)), source })?;
        decoded.extend(index, vec![message]);
    }
    Ok(decoded)
}

pub(crate) use crate::kept::HaystackSpans as Spans;

/// Inputs smaller than this are parsed on one thread; starting another costs more than it saves.
const PARALLEL_BYTES: usize = 1 << 20;

/// Where the first message of `bytes` starts when they may be read by [`read_spans`]: an array
/// that is not empty and, unless `forced`, holds Haystack messages by the tree path's detection.
pub(crate) fn first_message(bytes: &[u8], forced: bool) -> Option<usize> {
    let body = if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
    let open = skip_whitespace(bytes, body);
    if bytes.get(open) != Some(&b'[') {
        return None;
    }
    let first = skip_whitespace(bytes, open + 1);
    (bytes.get(first) != Some(&b']') && (forced || is_haystack(bytes, first))).then_some(first)
}

/// Reads `source` as a Haystack array of messages, the first at `first`, without a JSON tree,
/// or `None` when the tree path must decide: anything that does not read cleanly, such as
/// invalid JSON or a bad message, whose error the tree path words. The messages' texts stay in
/// `source` (see [`compaction_model::Text`]).
///
/// On two or more cores a second thread starts at what looks like a message near the middle of
/// the file. Its messages are used only when the first thread, reading from the start, reaches
/// that very byte as the start of a message, so a wrong guess costs time, never correctness.
pub(crate) fn read_spans(source: &JsonSource, first: usize) -> Option<(Vec<Message>, Spans)> {
    let bytes = source.as_bytes();
    let guess = (threads::two_cores() && bytes.len() >= PARALLEL_BYTES)
        .then(|| guess_message(bytes, bytes.len() / 2))
        .flatten();
    let (mut run, rest) = two_runs(first, guess, |from, stop| Run::read(source, from, stop));
    if run.end == End::Reached {
        let rest = rest?;
        run.end = rest.end;
        run.messages.extend(rest.messages);
        run.spans.extend(rest.spans);
        run.verbatim.extend(rest.verbatim);
    }
    (run.end == End::Finished).then_some((run.messages, Spans { spans: run.spans, verbatim: run.verbatim }))
}

/// `read(first, Some(guess))` on this thread and `read(guess, None)` on a second, side by side,
/// when there is a `guess` (where a second reader may start); else `read(first, None)` alone.
pub(crate) fn two_runs<R: Send>(
    first: usize,
    guess: Option<usize>,
    read: impl Fn(usize, Option<usize>) -> R + Sync,
) -> (R, Option<R>) {
    match guess {
        Some(guess) if threads::two_cores() => {
            let (run, second) = threads::join(|| read(first, Some(guess)), || read(guess, None));
            (run, Some(second))
        }
        _ => (read(first, None), None),
    }
}

/// What the tree path's detection says of the array: its first element must be a message, and
/// the first message that tells a format decides.
fn is_haystack(bytes: &[u8], mut at: usize) -> bool {
    let mut first = true;
    loop {
        let Some(end) = skip_value(bytes, at) else { return false };
        let Ok(value) = compaction_model::value_from_slice(&bytes[at..end]) else { return false };
        if first && !value.as_object().is_some_and(|o| o.contains_key("role") || o.contains_key("_role")) {
            // The tree path looks further for an object; rare enough to leave to it.
            return false;
        }
        first = false;
        if let Some(format) = value.as_object().and_then(crate::shapes::message_format) {
            return format == Format::Haystack;
        }
        at = skip_whitespace(bytes, end);
        if bytes.get(at) != Some(&b',') {
            return false;
        }
        at = skip_whitespace(bytes, at + 1);
    }
}

/// The start of what looks like a message at or after `from`: `{"role":` (or `{"role" :`, as
/// spaced-out JSON has it) after a comma.
pub(crate) fn guess_message(bytes: &[u8], from: usize) -> Option<usize> {
    const START: &[u8] = b"{\"role\"";
    let mut at = from;
    for _ in 0..64 {
        at += bytes.get(at..)?.windows(START.len()).position(|w| w == START)?;
        let before = bytes[..at].iter().rposition(|b| !b.is_ascii_whitespace())?;
        if bytes[before] == b',' && bytes.get(skip_whitespace(bytes, at + START.len())) == Some(&b':') {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// How a run of messages ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// At the closing bracket, with nothing but whitespace after it.
    Finished,
    /// At the byte it was told to stop at, the start of a message.
    Reached,
    /// At something it could not read.
    Failed,
}

/// Messages read one after another from a position in the array.
struct Run {
    messages: Vec<Message>,
    spans: Vec<Range<usize>>,
    verbatim: Vec<bool>,
    end: End,
}

impl Run {
    fn read(source: &JsonSource, mut at: usize, stop: Option<usize>) -> Run {
        let bytes = source.as_bytes();
        let mut run = Run { messages: Vec::new(), spans: Vec::new(), verbatim: Vec::new(), end: End::Failed };
        loop {
            if stop == Some(at) {
                run.end = End::Reached;
                return run;
            }
            let Some((message, end, verbatim)) = read_message(source, at, run.messages.len()) else {
                return run;
            };
            run.messages.push(message);
            run.spans.push(at..end);
            run.verbatim.push(verbatim);
            at = skip_whitespace(bytes, end);
            match bytes.get(at) {
                Some(b',') => at = skip_whitespace(bytes, at + 1),
                Some(b']') => {
                    if skip_whitespace(bytes, at + 1) == bytes.len() {
                        run.end = End::Finished;
                    }
                    return run;
                }
                _ => return run,
            }
        }
    }
}

/// The message starting at `at`, where it ends, and whether its bytes spell its encoding.
fn read_message(source: &JsonSource, at: usize, index: usize) -> Option<(Message, usize, bool)> {
    if let Some(read) = Message::read_prefix_in(source, at) {
        return Some((read.message, at + read.len, true));
    }
    let bytes = source.as_bytes();
    let end = skip_value(bytes, at)?;
    let raw = &bytes[at..end];
    // Errors are left to the tree path, which words them; the index is only used in them.
    let message = Message::from_slice(raw, index).ok()?;
    let verbatim = message.is_spelled_by(raw);
    Some((message, end, verbatim))
}

/// Writes a conversation read by [`read_spans`] back as an array.
pub(crate) fn write_spans(
    source: &[u8],
    spans: &Spans,
    messages: &[Message],
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    if messages.len() != spans.spans.len() {
        // Messages were dropped or added: match them to those read, as the tree path does.
        let native = tree_native(source, spans)?;
        return write_native_to(&native, &Haystack, Target::Haystack, messages, None, out);
    }
    let mut unchanged = vec![changed.is_some(); messages.len()];
    for &index in changed.unwrap_or_default() {
        if let Some(slot) = unchanged.get_mut(index) {
            *slot = false;
        }
    }
    // Each message left alone, and spelled as its encoding, is written as its input bytes; the
    // others are encoded, ahead of their turn on another thread when the file is large.
    let encoded: Vec<usize> = (0..messages.len()).filter(|&i| !(spans.verbatim[i] && unchanged[i])).collect();
    let encode = |&index: &usize| -> Result<Vec<u8>, Error> {
        let message = &messages[index];
        if spans.verbatim[index] {
            // The original has exactly the keys of the encoding, in its order, so laying the
            // encoding over it gives the encoding.
            return Ok(serde_json::to_vec(message)?);
        }
        let original: Value = compaction_model::value_from_slice(&source[spans.spans[index].clone()])?;
        Ok(serde_json::to_vec(&overlay::overlay(&original, message.to_value(), &SHAPE))?)
    };
    let parallel = threads::two_cores() && source.len() >= PARALLEL_BYTES;
    threads::made_ahead(&encoded, parallel, encode, |made| {
        out.write_all(b"[")?;
        // A run of messages left alone goes out as one piece of the input, with the separators
        // between them as they were: a copy, without a pass over each message.
        let run = |from: usize, to: usize, out: &mut dyn Write| -> std::io::Result<()> {
            if from < to {
                if from > 0 {
                    out.write_all(b",")?;
                }
                out.write_all(&source[spans.spans[from].start..spans.spans[to - 1].end])?;
            }
            Ok(())
        };
        let mut next = 0;
        for (&index, bytes) in encoded.iter().zip(made) {
            run(next, index, out)?;
            if index > 0 {
                out.write_all(b",")?;
            }
            out.write_all(&bytes?)?;
            next = index + 1;
        }
        run(next, messages.len(), out)?;
        out.write_all(b"]\n")?;
        Ok(())
    })
}

/// [`write_spans`] for messages dropped, added or moved, each with the message read it came
/// from in `origin` (`None` for one put in).
pub(crate) fn write_spans_rewritten(
    source: &[u8],
    spans: &Spans,
    messages: &[Message],
    origin: &[Option<usize>],
    out: &mut dyn Write,
) -> Result<(), Error> {
    let native = tree_native(source, spans)?;
    write_native_rewritten(&native, &Haystack, Target::Haystack, messages, origin, out)
}

/// The tree path's view of a conversation read by [`read_spans`].
fn tree_native(source: &[u8], spans: &Spans) -> Result<Native, Error> {
    let mut originals = Vec::with_capacity(spans.spans.len());
    let mut read = Vec::with_capacity(spans.spans.len());
    for (index, span) in spans.spans.iter().enumerate() {
        let raw = &source[span.clone()];
        // These bytes were read as this very message before; failing now would be a bug.
        let again = |reason: String| Error::WriteBack { reason: format!("message {index}: {reason}") };
        originals.push(compaction_model::value_from_slice(raw).map_err(|e| again(e.to_string()))?);
        read.push(Message::from_slice(raw, index).map_err(|e| again(e.to_string()))?);
    }
    Ok(Native {
        top: Top::Value(Value::Array(Vec::new())),
        place: Place::Root,
        units: (0..originals.len()).collect(),
        originals,
        system: None,
        read,
        hidden: 0,
    })
}

/// Writes messages in Haystack's shape, in `layout`.
pub(crate) fn write_messages(messages: &[Message], layout: Layout, out: &mut dyn Write) -> Result<(), Error> {
    match layout {
        Layout::Array => {
            serde_json::to_writer(&mut *out, messages)?;
            out.write_all(b"\n")?;
        }
        Layout::Lines => {
            for message in messages {
                serde_json::to_writer(&mut *out, message)?;
                out.write_all(b"\n")?;
            }
        }
    }
    Ok(())
}

/// Haystack `ChatMessage` JSON.
pub(crate) struct Haystack;

impl Codec for Haystack {
    fn read_tree(&self, values: &[Value], tree: &TreeRead<'_>) -> Result<Decoded, Error> {
        read(values, tree.locator)
    }
}

impl TargetCodec for Haystack {
    fn encode(
        &self,
        messages: &[&Message],
        _unit: Option<usize>,
        _originals: &[Value],
    ) -> (Vec<Value>, &'static Shape) {
        (messages.iter().map(|m| m.to_value()).collect(), &SHAPE)
    }

    fn convert(&self, messages: &[Message], layout: Layout, out: &mut dyn Write) -> Result<(), Error> {
        write_messages(messages, layout, out)
    }
}
