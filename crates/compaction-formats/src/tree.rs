//! Writing a conversation back into the file it was read from.
//!
//! The output goes straight to the writer, one element of the messages array at a time: an
//! original the command left alone is serialized from where it sits in `Native`, and only the
//! elements that changed are built. Nothing holds a second copy of the file, and the messages as
//! read are not kept beside the ones a command works on: `changed` says which messages differ,
//! and only when it cannot tell are the originals decoded again (see `plan_write`).

use std::borrow::Cow;
use std::io::Write;
use std::ops::Range;

use compaction_model::{Message, Role};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use crate::codec::{Codec, TargetCodec, TreeRead};
use crate::document::{Line, Locator, Place, Top};
use crate::error::Error;
use crate::format::Target;
use crate::inplace::{self, Element, System};
use crate::overlay;

pub(crate) use crate::kept::Native;

/// Messages of the output that came from one source message, or a run that came from none.
struct Group {
    unit: Option<usize>,
    /// The group's place in `Plan::order`.
    range: Range<usize>,
    /// Whether the group is exactly what `unit` was read as, so the original is written.
    verbatim: bool,
}

/// What the messages array and the envelope will hold, decided before anything is written.
struct Plan<'a> {
    /// The messages the array is made of, by index: all of them, or all but the system ones
    /// for Anthropic, whose system prompt goes in the envelope.
    order: Vec<usize>,
    groups: Vec<Group>,
    system: SystemEdit<'a>,
}

/// What to do with an Anthropic envelope's `system` when writing back.
enum SystemEdit<'a> {
    Keep,
    Set(Cow<'a, Value>),
    Remove,
}

/// What tells a group the command left alone from one it changed.
enum Baseline<'a> {
    /// The messages as read.
    Read(&'a [Message]),
    /// For each message, whether it may differ from the one read at its index; the output is as
    /// long as the conversation read.
    Changed(Vec<bool>),
}

/// How far ahead to look for a message a command left in place when it changed the count.
const ALIGN_WINDOW: usize = 64;

/// For each output message (`messages`), the source message it came from: by position when the
/// count is unchanged, else by finding each message among those read. `None` when only the
/// messages read could tell.
fn align(
    baseline: &Baseline,
    read: &[usize],
    units: &[usize],
    messages: &[&Message],
) -> Option<Vec<Option<usize>>> {
    if messages.len() == units.len() {
        return Some(units.iter().copied().map(Some).collect());
    }
    let Baseline::Read(all) = baseline else { return None };
    let mut cursor = 0;
    let aligned = messages
        .iter()
        .map(|message| {
            let end = read.len().min(cursor + ALIGN_WINDOW);
            let found = (cursor..end).find(|&k| all.get(read[k]) == Some(*message))?;
            cursor = found + 1;
            Some(units[found])
        })
        .collect();
    Some(aligned)
}

/// Splits positions `0..aligned.len()` into runs that came from the same source message.
fn runs(aligned: &[Option<usize>]) -> Vec<(Option<usize>, Range<usize>)> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in 1..=aligned.len() {
        if end == aligned.len() || aligned[end] != aligned[start] {
            out.push((aligned[start], start..end));
            start = end;
        }
    }
    out
}

/// Where each unit's messages start among those read, and how many there are.
fn unit_spans(native: &Native) -> Vec<Option<Range<usize>>> {
    let mut spans: Vec<Option<Range<usize>>> = vec![None; native.originals.len()];
    for (index, &unit) in native.units.iter().enumerate() {
        match spans.get_mut(unit) {
            // Only the first run of a unit counts: a unit's messages are read one after another.
            Some(Some(span)) if span.end == index => span.end = index + 1,
            Some(slot @ None) => *slot = Some(index..index + 1),
            _ => {}
        }
    }
    spans
}

/// Whether the output messages at `group` are exactly what `unit` was read as; `None` when
/// `baseline` cannot tell.
fn unchanged(
    spans: &[Option<Range<usize>>],
    baseline: &Baseline,
    messages: &[Message],
    unit: usize,
    group: &[usize],
) -> Option<bool> {
    let Some(Some(span)) = spans.get(unit) else {
        return Some(false);
    };
    if span.len() != group.len() {
        return Some(false);
    }
    match baseline {
        Baseline::Read(read) => {
            let Some(read) = read.get(span.clone()) else { return Some(false) };
            Some(read.iter().zip(group).all(|(read, &index)| messages.get(index) == Some(read)))
        }
        Baseline::Changed(changed) => {
            if !group.iter().copied().eq(span.clone()) {
                return None;
            }
            let mut edited = group.iter().filter(|&&index| changed[index]).map(|&index| &messages[index]);
            match edited.next() {
                None => Some(true),
                // OpenAI and Anthropic messages are read without meta, and every command that
                // rewrites a message leaves its marker there: such a message is not the one read.
                Some(first) if !first.meta.is_empty() || edited.any(|m| !m.meta.is_empty()) => Some(false),
                Some(_) => None,
            }
        }
    }
}

/// Decides the output: which source message each group came from, which groups are written as
/// their originals, and the envelope's `system`. `None` when `baseline` cannot tell.
///
/// `origin`, when the command knows it, says which message read each output message stands for
/// (`None` for one it put in); otherwise that is worked out from `baseline`.
fn plan<'a>(
    native: &'a Native,
    codec: &dyn TargetCodec,
    target: Target,
    messages: &[Message],
    baseline: &Baseline,
    origin: Option<&[Option<usize>]>,
) -> Option<Plan<'a>> {
    let spans = unit_spans(native);
    // A file that is only a list of messages has no envelope to hold a system prompt: a system
    // message in it stays where it is, as in OpenAI's lists.
    let envelope = !matches!(native.place, Place::Root);
    let (order, read, system) = match target {
        Target::Anthropic if envelope => {
            let system_unit = native.system.filter(|&u| native.units.contains(&u));
            // System messages go to the envelope's `system`: those read from it, and any
            // `{"role": "system"}` message of the list, whose unit is then left out of the list's.
            let in_system = |unit: usize| {
                Some(unit) == native.system
                    || native.originals.get(unit).and_then(|o| o.get("role")).and_then(Value::as_str)
                        == Some("system")
            };
            let (system_order, order): (Vec<usize>, Vec<usize>) =
                (0..messages.len()).partition(|&index| messages[index].role == Role::System);
            let system = if system_order.is_empty() {
                SystemEdit::Remove
            } else {
                let kept = match system_unit {
                    Some(unit) => unchanged(&spans, baseline, messages, unit, &system_order)?,
                    None => false,
                };
                match system_unit {
                    Some(unit) if kept => SystemEdit::Set(Cow::Borrowed(&native.originals[unit])),
                    _ => {
                        let system_messages: Vec<&Message> =
                            system_order.iter().map(|&i| &messages[i]).collect();
                        SystemEdit::Set(Cow::Owned(
                            codec.encode_system(&system_messages).unwrap_or(Value::Null),
                        ))
                    }
                }
            };
            let read = (0..native.units.len()).filter(|&index| !in_system(native.units[index])).collect();
            (order, read, system)
        }
        Target::Haystack | Target::OpenAi | Target::Anthropic => (
            (0..messages.len()).collect::<Vec<_>>(),
            (0..native.units.len()).collect::<Vec<_>>(),
            SystemEdit::Keep,
        ),
    };
    let units: Vec<usize> = read.iter().map(|&index| native.units[index]).collect();
    let refs: Vec<&Message> = order.iter().map(|&index| &messages[index]).collect();
    let aligned = match origin {
        // Told by the command: no guessing, so a message is never laid over another's original.
        Some(origin) => order
            .iter()
            .map(|&index| {
                origin.get(index).copied().flatten().and_then(|read| native.units.get(read).copied())
            })
            .collect(),
        None => align(baseline, &read, &units, &refs)?,
    };
    let mut groups = Vec::new();
    for (unit, range) in runs(&aligned) {
        // Haystack output is always `ChatMessage.to_dict`'s shape, so older shapes are brought up
        // to date: its groups are never written as they were read.
        let verbatim = match unit {
            Some(unit) if target != Target::Haystack => {
                unchanged(&spans, baseline, messages, unit, &order[range.clone()])?
            }
            _ => false,
        };
        groups.push(Group { unit, range, verbatim });
    }
    Some(Plan { order, groups, system })
}

/// The plan for writing `messages` back, with as little as it takes to tell which are unchanged.
fn plan_write<'a>(
    native: &'a Native,
    codec: &dyn TargetCodec,
    target: Target,
    messages: &[Message],
    changed: Option<&[usize]>,
) -> Result<Plan<'a>, Error> {
    let cannot = || Error::WriteBack { reason: "cannot tell which messages changed".into() };
    // The Haystack span reader keeps the messages read when it falls back to this path.
    if native.read.len() == native.units.len() {
        return plan(native, codec, target, messages, &Baseline::Read(&native.read), None).ok_or_else(cannot);
    }
    if let Some(changed) = changed.filter(|_| messages.len() == native.units.len()) {
        let mut flags = vec![false; messages.len()];
        for &index in changed {
            if let Some(flag) = flags.get_mut(index) {
                *flag = true;
            }
        }
        if let Some(plan) = plan(native, codec, target, messages, &Baseline::Changed(flags), None) {
            return Ok(plan);
        }
    }
    // Messages were dropped, added or moved, or a changed one carries no marker. The messages
    // read are needed then, for as long as planning takes.
    let read = decode_again(native, codec)?;
    plan(native, codec, target, messages, &Baseline::Read(&read), None).ok_or_else(cannot)
}

/// The plan for writing back `messages` that a command made by dropping, adding or moving
/// messages, with `origin` saying where each came from (see
/// [`Changes::Rewritten`](compaction_model::Changes::Rewritten)).
fn plan_rewritten<'a>(
    native: &'a Native,
    codec: &dyn TargetCodec,
    target: Target,
    messages: &[Message],
    origin: &[Option<usize>],
) -> Result<Plan<'a>, Error> {
    if origin.len() != messages.len() || origin.iter().flatten().any(|&read| read >= native.units.len()) {
        return Err(Error::WriteBack {
            reason: "the messages' origins do not match the conversation read".into(),
        });
    }
    let decoded;
    let read = if native.read.len() == native.units.len() {
        &native.read
    } else {
        decoded = decode_again(native, codec)?;
        &decoded
    };
    plan(native, codec, target, messages, &Baseline::Read(read), Some(origin))
        .ok_or_else(|| Error::WriteBack { reason: "cannot tell which messages changed".into() })
}

/// The messages as read, decoded again from the originals by the decoder that read them.
fn decode_again(native: &Native, codec: &dyn Codec) -> Result<Vec<Message>, Error> {
    let locator = Locator::messages("the input");
    // A `system` is kept after the messages.
    let (values, system) = match (native.system, native.originals.split_last()) {
        (Some(_), Some((last, values))) => (values, Some(last)),
        _ => (native.originals.as_slice(), None),
    };
    let tree = TreeRead {
        name: "the input",
        locator: &locator,
        system,
        full_history: native.hidden == 0,
        instruction: None,
    };
    let decoded = codec.read_tree(values, &tree)?;
    if decoded.units != native.units {
        return Err(Error::WriteBack { reason: "the messages read decode differently a second time".into() });
    }
    Ok(decoded.messages)
}

/// The messages array of the output, element by element.
struct Elements<'a> {
    native: &'a Native,
    codec: &'a dyn TargetCodec,
    messages: &'a [Message],
    plan: &'a Plan<'a>,
}

impl<'a> Elements<'a> {
    fn iter(&self) -> impl Iterator<Item = Element> + '_ {
        let hidden = (0..self.native.hidden).map(Element::Original);
        hidden.chain(self.plan.groups.iter().flat_map(|group| self.group(group)))
    }

    /// A group's elements: the original when unchanged, else the fresh encoding laid over the
    /// original when there is one to lay it over.
    fn group(&self, group: &Group) -> Vec<Element> {
        let originals = &self.native.originals;
        if let (Some(unit), true) = (group.unit, group.verbatim) {
            return vec![Element::Original(unit)];
        }
        let messages: Vec<&Message> =
            self.plan.order[group.range.clone()].iter().map(|&index| &self.messages[index]).collect();
        let (fresh, shape) = self.codec.encode(&messages, group.unit, originals);
        match group.unit {
            Some(unit) if fresh.len() == 1 => {
                let fresh = fresh.into_iter().next().unwrap_or(Value::Null);
                let value = overlay::overlay(&originals[unit], fresh, shape);
                vec![Element::Fresh { unit: Some(unit), value }]
            }
            // Only the first takes the original's place among its neighbours.
            unit => fresh
                .into_iter()
                .enumerate()
                .map(|(k, value)| Element::Fresh { unit: unit.filter(|_| k == 0), value })
                .collect(),
        }
    }
}

impl Serialize for Elements<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(|element| match element {
            Element::Original(unit) => Cow::Borrowed(&self.native.originals[unit]),
            Element::Fresh { value, .. } => Cow::Owned(value),
        }))
    }
}

/// The object holding the conversation, with its messages put back under `key` and its
/// `system` edited, keys where `Map::insert` and `Map::shift_remove` would leave them.
struct Container<'a> {
    object: &'a Map<String, Value>,
    key: &'a str,
    elements: &'a Elements<'a>,
}

impl Serialize for Container<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let system = &self.elements.plan.system;
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.object {
            if key == self.key {
                map.serialize_entry(key, self.elements)?;
            } else if key == "system" {
                match system {
                    SystemEdit::Keep => map.serialize_entry(key, value)?,
                    SystemEdit::Set(system) => map.serialize_entry(key, system)?,
                    SystemEdit::Remove => {}
                }
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        // A key the object lacks is inserted at its end: the messages first, then `system`.
        if !self.object.contains_key(self.key) {
            map.serialize_entry(self.key, self.elements)?;
        }
        if let (SystemEdit::Set(system), false) = (system, self.object.contains_key("system")) {
            map.serialize_entry("system", system)?;
        }
        map.end()
    }
}

/// A file's array of conversations, one of them written with its new messages.
struct Items<'a> {
    items: &'a [Value],
    index: usize,
    key: &'a str,
    elements: &'a Elements<'a>,
}

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for (index, item) in self.items.iter().enumerate() {
            match item {
                Value::Object(object) if index == self.index => {
                    seq.serialize_element(&Container { object, key: self.key, elements: self.elements })?
                }
                item => seq.serialize_element(item)?,
            }
        }
        seq.end()
    }
}

/// Writes the file back with `messages` in place of the conversation read, compact, as
/// `serde_json` writes a value, ending in a newline (every line does, in JSON Lines).
pub(crate) fn write_native_to(
    native: &Native,
    codec: &dyn TargetCodec,
    target: Target,
    messages: &[Message],
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let plan = plan_write(native, codec, target, messages, changed)?;
    emit(native, codec, messages, &plan, out)
}

/// [`write_native_to`] for messages dropped, added or moved, each with the message read it came
/// from in `origin` (`None` for one put in).
pub(crate) fn write_native_rewritten(
    native: &Native,
    codec: &dyn TargetCodec,
    target: Target,
    messages: &[Message],
    origin: &[Option<usize>],
    out: &mut dyn Write,
) -> Result<(), Error> {
    let plan = plan_rewritten(native, codec, target, messages, origin)?;
    emit(native, codec, messages, &plan, out)
}

/// [`write_native_to`] over `source`, the bytes the tree was read from: every byte outside the
/// messages that changed is copied from it (see [`crate::inplace`]). Haystack output is always
/// re-encoded, so it goes to [`write_native_to`].
pub(crate) fn write_tree_to(
    source: &[u8],
    native: &Native,
    codec: &dyn TargetCodec,
    target: Target,
    messages: &[Message],
    changed: Option<&[usize]>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let plan = plan_write(native, codec, target, messages, changed)?;
    emit_over(source, native, codec, target, messages, &plan, out)
}

/// [`write_native_rewritten`] over `source`, as [`write_tree_to`].
pub(crate) fn write_tree_rewritten(
    source: &[u8],
    native: &Native,
    codec: &dyn TargetCodec,
    target: Target,
    messages: &[Message],
    origin: &[Option<usize>],
    out: &mut dyn Write,
) -> Result<(), Error> {
    let plan = plan_rewritten(native, codec, target, messages, origin)?;
    emit_over(source, native, codec, target, messages, &plan, out)
}

/// Writes the file as `plan` says over `source` when the messages can be found in it, else
/// from the tree.
fn emit_over(
    source: &[u8],
    native: &Native,
    codec: &dyn TargetCodec,
    target: Target,
    messages: &[Message],
    plan: &Plan<'_>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    if target != Target::Haystack {
        let elements: Vec<Element> = Elements { native, codec, messages, plan }.iter().collect();
        let system = match &plan.system {
            SystemEdit::Keep | SystemEdit::Set(Cow::Borrowed(_)) => System::Keep,
            SystemEdit::Set(Cow::Owned(value)) => System::Set(value),
            SystemEdit::Remove => System::Remove,
        };
        if inplace::write(source, native, &elements, system, out)? {
            return Ok(());
        }
    }
    emit(native, codec, messages, plan, out)
}

/// Writes the file as `plan` says.
fn emit(
    native: &Native,
    codec: &dyn TargetCodec,
    messages: &[Message],
    plan: &Plan<'_>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let elements = Elements { native, codec, messages, plan };
    match (&native.top, &native.place) {
        (Top::Lines(_), Place::Root) => {
            for element in elements.iter() {
                match element {
                    Element::Original(unit) => line(out, &native.originals[unit])?,
                    Element::Fresh { value, .. } => line(out, &value)?,
                }
            }
        }
        (Top::Lines(lines), Place::Item { index, key }) => {
            for (number, Line { value, .. }) in lines.iter().enumerate() {
                match value {
                    Value::Object(object) if number == *index => {
                        line(out, &Container { object, key, elements: &elements })?
                    }
                    value => line(out, value)?,
                }
            }
        }
        (Top::Value(_), Place::Root) => line(out, &elements)?,
        (Top::Value(Value::Object(object)), Place::Key(key)) => {
            line(out, &Container { object, key, elements: &elements })?
        }
        (Top::Value(Value::Array(items)), Place::Item { index, key }) => {
            line(out, &Items { items, index: *index, key, elements: &elements })?
        }
        (Top::Lines(lines), _) => {
            for Line { value, .. } in lines {
                line(out, value)?;
            }
        }
        (Top::Value(value), _) => line(out, value)?,
    }
    Ok(())
}

/// `value` as one line: compact JSON and a newline.
fn line<T: Serialize + ?Sized>(out: &mut dyn Write, value: &T) -> Result<(), Error> {
    serde_json::to_writer(&mut *out, value)?;
    Ok(out.write_all(b"\n")?)
}
