//! Writing a conversation: back in the format read, through what the read kept of the file, or
//! converted to a target.

use std::io::Write;

use compaction_model::{Changes, Message, Part, Role, SurrogateEscapes};

use crate::conversation::{Back, Conversation, ReadOptions};
use crate::error::Error;
use crate::format::{Format, Target};
use crate::kept::{EventLog, Native};
use crate::notes::{Note, NoteKind};
use crate::provider::provider_item;
use crate::read::read_tree;
use crate::tree::{write_tree_rewritten, write_tree_to};
use crate::{formats, haystack, ids, itemsback, logback, messages, request};

/// Writes `messages` (the conversation's, or a changed version of them) to `out`: in `target`
/// when one is given, else back in the format read.
///
/// Written back, the rest of the file is kept as it was: OpenAI, Anthropic and Haystack files
/// keep their envelope and every message not changed; Claude Code sessions, Codex rollouts and
/// Responses item lists keep every byte but those of the tool results (and tool inputs) that
/// changed, and take back nothing else in place. SWE-agent and OpenHands conversations are written as
/// [`Format::default_target`].
///
/// `changes` says how `messages` came from those read (see [`Changes`]). Changed in place
/// ([`Changes::InPlace`]), `messages` is as long as the conversation and every message not named
/// is taken to be the one read; a Haystack message among those named is written as its input
/// bytes when those spell what encoding it gives (the same JSON value, keys in the same order).
/// With messages dropped or put in ([`Changes::Rewritten`]: a sliding window's omission note, a
/// summary in place of what it summarizes), each message written back lands on its own original,
/// so the fields the model does not know stay with the message they belong to and an unchanged
/// message is written as it was read; the originals of dropped messages are left out. Guessing
/// instead (what [`Changes::Unknown`] leaves to the writer when the count changed) can lay a
/// message over another's original when the count happens to come out the same. A Responses
/// request (an `input` array, or a bare array of items) keeps every byte outside the array, the
/// items of each message kept as they were (its changed results and inputs edited in place), and
/// encodes afresh the items of a message put in or changed beyond those. Event logs (Claude Code
/// sessions, Codex rollouts, Responses items one a line) cannot take such a change back: that is
/// an error naming a target to write instead. Converted to another format, `changes` is not needed.
///
/// Returns what the output could not hold (a [`NoteKind::Dropped`] note per kind, naming the
/// messages): reasoning, and calls or text on tool messages, in Chat Completions; tool-call
/// arguments that are not a JSON object in Anthropic's `tool_use`; provider items of another
/// format, written as their text. Written back in its own format, nothing is lost.
///
/// # Errors
///
/// [`Error::WriteBack`] when the file cannot take `messages` back as `changes` describes them:
/// a rewrite's origin not as long as `messages` or naming a message that was not read, messages
/// dropped or put in, or changed beyond their tool results and inputs, in an event log; in a
/// Responses request, a message read written twice, or messages it would not read back as they
/// are (two assistant messages in a row, a part no item holds); what
/// writing to `out` returns.
pub fn write(
    conversation: &Conversation,
    messages: &[Message],
    target: Option<Target>,
    changes: &Changes,
    out: &mut dyn Write,
) -> Result<Vec<Note>, Error> {
    escaping_lone_surrogates(conversation, out, |out| match changes {
        Changes::InPlace(changed) => write_unescaped(conversation, messages, target, Some(changed), out),
        Changes::Rewritten(origin) => write_rewritten_unescaped(conversation, messages, target, origin, out),
        Changes::Unknown => write_unescaped(conversation, messages, target, None, out),
    })
}

/// Runs `write` on `out`, through [`SurrogateEscapes`] when the input may hold a lone surrogate
/// escape (`\ud83d`, read as a stand-in character: see `compaction_model::lone_surrogate`), so
/// that every message written gives it back as the escape it was; an input without one (no `\ud`
/// or `\uD` in it) cannot have given a stand-in, and its output is passed on as it is made.
fn escaping_lone_surrogates<T>(
    conversation: &Conversation,
    out: &mut dyn Write,
    write: impl FnOnce(&mut dyn Write) -> Result<T, Error>,
) -> Result<T, Error> {
    let source = conversation.source();
    // A log read line by line keeps no input to look in.
    let streamed = matches!(conversation.back, Back::Streamed);
    if !streamed
        && memchr::memmem::find(source, b"\\ud").is_none()
        && memchr::memmem::find(source, b"\\uD").is_none()
    {
        return write(out);
    }
    let mut escapes = SurrogateEscapes::new(out);
    let written = write(&mut escapes)?;
    escapes.into_inner()?;
    Ok(written)
}

/// [`write()`], its output as it is made.
fn write_unescaped(
    conversation: &Conversation,
    messages: &[Message],
    target: Option<Target>,
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<Vec<Note>, Error> {
    let format = conversation.format;
    let own = match target {
        None => format.writes_back(),
        Some(target) => format.native_target() == Some(target),
    };
    let target = target.unwrap_or_else(|| format.default_target());
    let written = match &conversation.back {
        Back::Spans(spans) if own => {
            haystack::write_spans(conversation.source(), spans, messages, changed, out)
        }
        Back::Tree(native) if own => write_tree_to(
            conversation.source(),
            native,
            formats::of_target(target),
            target,
            messages,
            changed,
            out,
        ),
        Back::Request(spans) if own => {
            let over = match format {
                Format::Anthropic => messages::write(conversation.source(), spans, messages, changed, out)?,
                _ => request::write(conversation.source(), spans, messages, changed, out)?,
            };
            if over {
                Ok(())
            } else {
                write_tree_to(
                    conversation.source(),
                    &*request_tree(conversation)?,
                    formats::of_target(target),
                    target,
                    messages,
                    changed,
                    out,
                )
            }
        }
        Back::Log(log) if own => {
            let codec = formats::of(format);
            let log = logback::write_back(conversation.source(), log, format, codec, messages, changed, out);
            return log.map(|()| Vec::new());
        }
        Back::Streamed if own => {
            return Err(Error::WriteBack {
                reason: format!(
                "the {} log was read line by line without keeping it; it can only be converted to a target",
                format.label()
            ),
            })
        }
        Back::Unkept if own => {
            return Err(Error::WriteBack {
                reason: format!(
                    "the {} conversation was read without what writing it back needs; it can only be \
                     converted to another format",
                    format.label()
                ),
            })
        }
        _ => {
            // Checked before a byte is written: an output the target's readers refuse is not made.
            let (messages, made) = ids::complete(messages, target)?;
            let mut notes: Vec<Note> = made.into_iter().collect();
            formats::of_target(target).convert(&messages, conversation.layout, out)?;
            notes.extend(losses(&messages, target));
            return Ok(notes);
        }
    };
    written.map(|()| if own { Vec::new() } else { losses(messages, target) })
}

/// [`write()`] of messages dropped or put in ([`Changes::Rewritten`]), its output as it is made.
fn write_rewritten_unescaped(
    conversation: &Conversation,
    messages: &[Message],
    target: Option<Target>,
    origin: &[Option<usize>],
    out: &mut dyn Write,
) -> Result<Vec<Note>, Error> {
    let format = conversation.format;
    let own = match target {
        None => format.writes_back(),
        Some(target) => format.native_target() == Some(target),
    };
    let in_place = origin.len() == conversation.messages.len()
        && origin.iter().enumerate().all(|(index, read)| *read == Some(index));
    match &conversation.back {
        Back::Spans(spans) if own => {
            haystack::write_spans_rewritten(conversation.source(), spans, messages, origin, out)?;
            Ok(Vec::new())
        }
        Back::Tree(native) if own => {
            let target = target.unwrap_or_else(|| format.default_target());
            write_tree_rewritten(
                conversation.source(),
                native,
                formats::of_target(target),
                target,
                messages,
                origin,
                out,
            )?;
            Ok(Vec::new())
        }
        Back::Request(_) if own => {
            let target = target.unwrap_or_else(|| format.default_target());
            write_tree_rewritten(
                conversation.source(),
                &*request_tree(conversation)?,
                formats::of_target(target),
                target,
                messages,
                origin,
                out,
            )?;
            Ok(Vec::new())
        }
        Back::Log(log @ EventLog { items: Some(owners), .. }) if own && !in_place => {
            let codec = formats::of(format);
            let read = &conversation.messages;
            itemsback::write_rewritten(
                conversation.source(),
                log,
                owners,
                read,
                codec,
                messages,
                origin,
                out,
            )?;
            Ok(Vec::new())
        }
        Back::Log(_) if own && !in_place => Err(Error::WriteBack {
            reason: format!(
                "{} messages were read and {} are to be written, with messages dropped or put in; a {} \
                 log can take back only changed tool results and tool inputs (write another format \
                 with a target)",
                conversation.messages.len(),
                messages.len(),
                format.label()
            ),
        }),
        _ => write_unescaped(conversation, messages, target, None, out),
    }
}

/// What the tree path keeps to write back a request (OpenAI or Anthropic) read without a tree,
/// for the writes that need to decode the messages read again (messages dropped, added or
/// moved, or changed without a marker).
fn request_tree(conversation: &Conversation) -> Result<Box<Native>, Error> {
    let options = ReadOptions::named("the input").with_format(conversation.format);
    match read_tree(conversation.source(), &options)?.back {
        Back::Tree(native) => Ok(native),
        _ => Err(Error::WriteBack { reason: "the request no longer reads as one".into() }),
    }
}

/// What writing `messages` as `target` cannot hold as it is: one [`NoteKind::Dropped`] note per
/// kind of loss, naming the messages.
pub fn losses(messages: &[Message], target: Target) -> Vec<Note> {
    let mut found: Vec<(&'static str, Vec<usize>)> = Vec::new();
    let mut add = |what: &'static str, index: usize| match found.iter_mut().find(|(w, _)| *w == what) {
        Some((_, indices)) => {
            if indices.last() != Some(&index) {
                indices.push(index);
            }
        }
        None => found.push((what, vec![index])),
    };
    for (index, message) in messages.iter().enumerate() {
        // A tool message as Chat Completions writes it; a result anywhere else is refused before
        // writing (`ids::complete`), and text beside it kept.
        let tool = message.role == Role::Tool && message.has_tool_call_result();
        for part in &message.parts {
            let foreign = provider_item(part).is_some_and(|(format, _)| match target {
                Target::Anthropic => format != "anthropic",
                Target::OpenAi => true,
                Target::Haystack => false,
            });
            match part {
                Part::Reasoning(_) if target == Target::OpenAi => {
                    add("reasoning left out (Chat Completions has no place for it)", index)
                }
                Part::Text(_) if foreign => add("provider items written as their text", index),
                Part::Text(_) | Part::Image(_) | Part::File(_) if tool && target == Target::OpenAi => {
                    add("text, images or files beside a tool result left out", index)
                }
                Part::ToolCall(_) if tool && target == Target::OpenAi => {
                    add("tool calls on a tool message left out", index)
                }
                Part::ToolCall(call) if target == Target::Anthropic && call.raw_arguments.is_some() => add(
                    "tool-call arguments that are not a JSON object left out (`tool_use` input must be one)",
                    index,
                ),
                _ => {}
            }
        }
    }
    found
        .into_iter()
        .map(|(what, indices)| {
            let mut shown: Vec<String> = indices.iter().take(8).map(ToString::to_string).collect();
            if indices.len() > 8 {
                shown.push(format!("… ({} in all)", indices.len()));
            }
            let noun = if indices.len() == 1 { "message" } else { "messages" };
            let text = format!("written as {target}: {what}: {noun} {}", shown.join(", "));
            Note::new(NoteKind::Dropped, indices.len(), text)
        })
        .collect()
}
