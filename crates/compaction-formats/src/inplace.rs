//! Writing an OpenAI or Anthropic file (or a file of conversations, such as tau-bench's) back
//! over its own bytes: everything around the messages array, and every message a command left
//! alone, is copied from the input; only the messages that changed (and an Anthropic `system`
//! that changed) are written, in the style of the file around them.
//!
//! The JSON tree the file was read into says what the messages are; the input's bytes say how
//! they were spelled. Here the messages array is found again in the bytes with the scans of
//! [`compaction_json::splice`], element by element, and the output is laid out from those places.

use std::io::Write;
use std::ops::Range;

use serde_json::Value;

use crate::document::{Place, Top};
use crate::error::Error;
use crate::kept::Native;
use crate::style::{margin, Style};
use compaction_json::scan::whitespace as skip_whitespace;
use compaction_json::splice::{self, Seg};

/// One element of the messages array to write.
#[derive(Debug)]
pub(crate) enum Element {
    /// Source message `unit` (an index of [`Native::originals`]), as it was read.
    Original(usize),
    /// A message encoded afresh; `unit` is the source message it took the place of, if any.
    Fresh { unit: Option<usize>, value: Value },
}

/// What becomes of the `system` member of the object holding the messages.
pub(crate) enum System<'a> {
    /// Left as it is.
    Keep,
    Set(&'a Value),
    Remove,
}

/// Where the messages sit in the input.
struct Frame {
    /// Each source message's bytes, by unit.
    elements: Vec<Range<usize>>,
    /// The bytes the elements are written over: from the first element's start to the last's
    /// end (an empty range inside the brackets of an empty array).
    region: Range<usize>,
    /// One message a line (JSON Lines): elements are one line each.
    lines: bool,
    /// Where the object holding the messages starts, when they sit under one of its keys.
    container: Option<usize>,
}

/// The keys messages sit under (see [`crate::document::keys`]), as the static strings a path
/// into the bytes takes.
const KEYS: [&str; 4] = ["messages", "traj", "input", "history"];

/// Finds the messages of `native` in `source`; `None` when they cannot be found for sure, and
/// then the file is serialized from its tree instead.
fn frame(source: &[u8], native: &Native) -> Option<Frame> {
    let start = if source.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
    let count = native.originals.len() - usize::from(native.system.is_some());
    let key = |place: &Place| match place {
        Place::Key(key) | Place::Item { key, .. } => KEYS.iter().find(|k| **k == key.as_str()).copied(),
        Place::Root => None,
    };
    let (array, container) = match (&native.top, &native.place) {
        (Top::Lines(_), Place::Root) => {
            let mut elements = Vec::new();
            let mut at = start;
            for line in source[start..].split(|&b| b == b'\n') {
                let first = line.iter().position(|b| !b.is_ascii_whitespace());
                let last = line.iter().rposition(|b| !b.is_ascii_whitespace());
                if let (Some(first), Some(last)) = (first, last) {
                    elements.push(at + first..at + last + 1);
                }
                at += line.len() + 1;
            }
            let region = match (elements.first(), elements.last()) {
                (Some(first), Some(last)) => first.start..last.end,
                _ => return None,
            };
            return (elements.len() == count).then_some(Frame {
                elements,
                region,
                lines: true,
                container: None,
            });
        }
        (Top::Lines(lines), place @ Place::Item { index, .. }) => {
            let number = lines.get(*index)?.number;
            let line_start = if number <= 1 {
                start
            } else {
                source.iter().enumerate().filter(|(_, &b)| b == b'\n').nth(number - 2)?.0 + 1
            };
            let container = skip_whitespace(source, line_start);
            (splice::find_start(source, container, &[Seg::Key(key(place)?)])?, Some(container))
        }
        (Top::Value(_), Place::Root) => (splice::find_start(source, start, &[])?, None),
        (Top::Lines(_), Place::Key(_)) => return None,
        (Top::Value(_), place @ Place::Key(_)) => {
            let container = skip_whitespace(source, start);
            (splice::find_start(source, container, &[Seg::Key(key(place)?)])?, Some(container))
        }
        (Top::Value(_), place @ Place::Item { index, .. }) => {
            let index = u32::try_from(*index).ok()?;
            let container = splice::find_start(source, start, &[Seg::Index(index)])?;
            (splice::find_start(source, container, &[Seg::Key(key(place)?)])?, Some(container))
        }
    };
    // Only where the array starts was found: its elements are its one scan to its end.
    let elements = splice::elements(source, array)?;
    if elements.len() != count {
        return None;
    }
    let region = match (elements.first(), elements.last()) {
        (Some(first), Some(last)) => first.start..last.end,
        _ => {
            let inside = skip_whitespace(source, array + 1);
            inside..inside
        }
    };
    Some(Frame { elements, region, lines: false, container })
}

/// Some bytes of the input and what replaces them.
type Edit = (Range<usize>, Piece);

/// A replacement of some bytes of the input.
enum Piece {
    /// The messages array's elements.
    Elements,
    Bytes(Vec<u8>),
}

/// Writes the file with `elements` in place of its messages and `system` done; `false`, with
/// nothing written, when the messages cannot be found in `source` for sure.
pub(crate) fn write(
    source: &[u8],
    native: &Native,
    elements: &[Element],
    system: System<'_>,
    out: &mut dyn Write,
) -> Result<bool, Error> {
    let Some(frame) = frame(source, native) else { return Ok(false) };
    let mut pieces = vec![(frame.region.clone(), Piece::Elements)];
    match (system, frame.container) {
        (System::Keep, _) => {}
        (system, Some(container)) => match system_pieces(source, container, system)? {
            Some(more) => pieces.extend(more),
            None => return Ok(false),
        },
        (_, None) => return Ok(false),
    }
    // Rendered before the first byte is written, so a failure writes nothing.
    let mut ascii = None;
    let rendered = render(source, &frame, elements, &mut ascii)?;
    pieces.sort_by_key(|(range, _)| range.start);
    let mut at = 0;
    for (range, piece) in pieces {
        out.write_all(&source[at..range.start])?;
        match piece {
            Piece::Bytes(bytes) => out.write_all(&bytes)?,
            Piece::Elements => write_elements(source, &frame, elements, &rendered, out)?,
        }
        at = range.end;
    }
    out.write_all(&source[at..])?;
    Ok(true)
}

/// The bytes of each fresh element (empty for an original), in its neighbours' style.
fn render(
    source: &[u8],
    frame: &Frame,
    elements: &[Element],
    ascii: &mut Option<bool>,
) -> Result<Vec<Vec<u8>>, Error> {
    elements
        .iter()
        .map(|element| {
            let Element::Fresh { unit, value } = element else { return Ok(Vec::new()) };
            // The original it replaces tells its style best; else the first message does.
            let like = unit.and_then(|u| frame.elements.get(u)).or(frame.elements.first()).cloned();
            let (mut style, at) = match like {
                Some(like) => (Style::of(source, like.start), like.start),
                None => (Style::default(), frame.region.start),
            };
            if frame.lines {
                style.indent = None;
            }
            let margin = if style.indent.is_some() { margin(source, at) } else { &[] };
            Ok(styled(source, &style, value, margin, ascii)?)
        })
        .collect()
}

/// `value` in `style`; its characters beyond ASCII escaped when the whole input is ASCII
/// (`ascii` remembers that answer, found only when needed).
fn styled(
    source: &[u8],
    style: &Style,
    value: &Value,
    margin: &[u8],
    ascii: &mut Option<bool>,
) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    style.write(value, margin, &mut bytes)?;
    if !bytes.is_ascii() && *ascii.get_or_insert_with(|| source.is_ascii()) {
        let style = Style { ascii: true, ..style.clone() };
        bytes.clear();
        style.write(value, margin, &mut bytes)?;
    }
    Ok(bytes)
}

/// The unit an element stands in the place of.
fn unit_of(element: &Element) -> Option<usize> {
    match element {
        Element::Original(unit) => Some(*unit),
        Element::Fresh { unit, .. } => *unit,
    }
}

/// The elements, each original as its input bytes, with the input's separators between
/// elements that were neighbours in it.
fn write_elements(
    source: &[u8],
    frame: &Frame,
    elements: &[Element],
    rendered: &[Vec<u8>],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let spans = &frame.elements;
    // The separator before source element `unit`, and a common one for elements that were not
    // neighbours: the input's first, else a comma (a line break between lines).
    let before = |unit: usize| {
        (unit > 0 && unit < spans.len()).then(|| &source[spans[unit - 1].end..spans[unit].start])
    };
    let common: Vec<u8> = match (spans.first(), spans.get(1)) {
        (Some(first), Some(second)) => source[first.end..second.start].to_vec(),
        (Some(_), None) if frame.lines => b"\n".to_vec(),
        (Some(first), None) => {
            // One element: the break and margin before it, after a comma.
            let open = source[..first.start].iter().rposition(|&b| b == b'[').map_or(first.start, |k| k + 1);
            [b",".as_slice(), &source[open..first.start]].concat()
        }
        (None, _) if frame.lines => b"\n".to_vec(),
        (None, _) => b",".to_vec(),
    };
    let mut previous: Option<Option<usize>> = None;
    for (element, bytes) in elements.iter().zip(rendered) {
        let unit = unit_of(element);
        if let Some(previous) = previous {
            let separator =
                unit.and_then(before).or_else(|| previous.and_then(|p| before(p + 1))).unwrap_or(&common);
            out.write_all(separator)?;
        }
        match element {
            Element::Original(unit) => out.write_all(&source[spans[*unit].clone()])?,
            Element::Fresh { .. } => out.write_all(bytes)?,
        }
        previous = Some(unit);
    }
    Ok(())
}

/// The edits that do `system` to the object at `container`; `None` when its members cannot be
/// found for sure.
fn system_pieces(source: &[u8], container: usize, system: System<'_>) -> Result<Option<Vec<Edit>>, Error> {
    let Some(members) = splice::members(source, container) else { return Ok(None) };
    let is_system = |key: &Range<usize>| {
        serde_json::from_slice::<String>(&source[key.clone()]).is_ok_and(|k| k == "system")
    };
    let style = Style::of(source, container);
    let mut pieces = Vec::new();
    match system {
        System::Keep => {}
        System::Set(value) => {
            let mut ascii = None;
            match members.iter().rposition(|(key, _)| is_system(key)) {
                Some(k) => {
                    let (key, range) = &members[k];
                    let bytes = styled(source, &style, value, margin(source, key.start), &mut ascii)?;
                    pieces.push((range.clone(), Piece::Bytes(bytes)));
                }
                None => {
                    let Some((first_key, first_value)) = members.first() else { return Ok(None) };
                    let Some((_, last_value)) = members.last() else { return Ok(None) };
                    // The spacing the object's members have, before a key and after it.
                    let gap = match members.get(1) {
                        Some((second, _)) => {
                            let comma = skip_whitespace(source, first_value.end);
                            source[comma + 1..second.start].to_vec()
                        }
                        None => source[container + 1..first_key.start].to_vec(),
                    };
                    let colon = &source[first_key.end..first_value.start];
                    let mut bytes = [b",".as_slice(), &gap, b"\"system\"", colon].concat();
                    bytes.extend(styled(source, &style, value, margin(source, first_key.start), &mut ascii)?);
                    pieces.push((last_value.end..last_value.end, Piece::Bytes(bytes)));
                }
            }
        }
        System::Remove => {
            // Every `system` goes, with the comma that joined it: the one before it, or for
            // members at the start, the one after.
            let mut kept_before = false;
            for (k, (key, value)) in members.iter().enumerate() {
                if !is_system(key) {
                    kept_before = true;
                    continue;
                }
                let range = if kept_before {
                    members[k - 1].1.end..value.end
                } else {
                    match members.get(k + 1) {
                        Some((next, _)) => key.start..next.start,
                        None => return Ok(None),
                    }
                };
                pieces.push((range, Piece::Bytes(Vec::new())));
            }
        }
    }
    Ok(Some(pieces))
}
