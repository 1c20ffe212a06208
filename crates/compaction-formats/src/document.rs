//! The file as JSON: one value or JSON Lines, where a conversation's messages sit in it, and
//! how to name a place in it in errors.

use compaction_model::ToolSpec;
use serde_json::{Map, Value};

use crate::error::{Error, Location};
use crate::format::Format;
use crate::threads;

pub(crate) use crate::kept::{Line, Place, Top};

/// Names a message's position in errors: `file: line 7`, `file: conversation 3: message 12`.
#[derive(Debug, Clone)]
pub(crate) struct Locator {
    base: Location,
    noun: &'static str,
    lines: Option<Vec<usize>>,
}

impl Locator {
    /// A locator for messages listed without lines: `name: message 3`.
    pub(crate) fn messages(name: &str) -> Self {
        Locator { base: Location::file(name), noun: "message", lines: None }
    }

    /// Where message (or event) `index` is.
    pub(crate) fn at(&self, index: usize) -> Location {
        let at = self.base.clone().with_item(self.noun, index);
        match &self.lines {
            Some(lines) => at.with_line(lines.get(index).copied().unwrap_or(index + 1)),
            None => at,
        }
    }

    /// The conversation as a whole.
    pub(crate) fn whole(&self) -> Location {
        self.base.clone()
    }

    /// An error about message `index`.
    pub(crate) fn invalid(&self, index: usize, problem: impl Into<String>) -> Error {
        Error::Invalid { at: Box::new(self.at(index)), problem: problem.into() }
    }

    /// An error about the conversation as a whole.
    pub(crate) fn invalid_whole(&self, problem: impl Into<String>) -> Error {
        Error::Invalid { at: Box::new(self.whole()), problem: problem.into() }
    }
}

pub(crate) fn parse_top(bytes: &[u8], name: &str) -> Result<Top, Error> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let empty = || Error::Empty { name: name.to_owned() };
    let Some(start) = bytes.iter().position(|b| !b.is_ascii_whitespace()) else {
        return Err(empty());
    };
    let json = |line: Option<usize>, source| Error::Json { name: name.to_owned(), line, source };
    let whole = |bytes: &[u8]| -> Result<Top, Error> {
        compaction_model::value_from_slice(bytes).map(Top::Value).map_err(|source| json(None, source))
    };
    if bytes[start] == b'[' {
        return whole(bytes);
    }
    let [first, second] = first_two_lines(bytes);
    let Some((first_number, first)) = first else {
        return Err(empty());
    };
    match compaction_model::value_from_slice(first) {
        Ok(value) => {
            let Some(second) = second else {
                return Ok(match value {
                    // A single message is a JSON Lines file of one line.
                    Value::Object(ref object)
                        if object.contains_key("role") || object.contains_key("_role") =>
                    {
                        Top::Lines(vec![Line { number: first_number, value }])
                    }
                    value => Top::Value(value),
                });
            };
            let mut out = vec![Line { number: first_number, value }];
            // The rest of the file, from the second line on (a piece of `bytes`, so its place in
            // it is its distance from the start).
            let (second_number, second) = second;
            let offset = second.as_ptr() as usize - bytes.as_ptr() as usize;
            let (rest, failed) = parse_lines(&bytes[offset..], second_number);
            out.extend(rest);
            match failed {
                Some((number, source)) => Err(json(Some(number), source)),
                None => Ok(Top::Lines(out)),
            }
        }
        Err(error) => {
            // A pretty-printed object spans lines; JSON Lines have a value on each.
            let looks_like_lines = second.is_some_and(|(_, line)| line.first() == Some(&b'{'));
            if bytes[start] == b'{' && !looks_like_lines {
                whole(bytes)
            } else {
                Err(json(Some(first_number), error))
            }
        }
    }
}

/// The first two lines of `bytes` (split at `\n`) that are not blank (all ASCII whitespace),
/// each with its number (1 for the first line of `bytes`, blank lines counted). Line breaks are
/// found with `memchr`, a vector at a time: a large body is one line, and only the start of each
/// line is looked at to tell it is not blank.
pub(crate) fn first_two_lines(bytes: &[u8]) -> [Option<(usize, &[u8])>; 2] {
    let mut found = [None, None];
    let mut slot = 0;
    let mut number = 0;
    let mut start = 0;
    while slot < 2 {
        number += 1;
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |k| start + k);
        let line = &bytes[start..end];
        if !line.iter().all(u8::is_ascii_whitespace) {
            found[slot] = Some((number, line));
            slot += 1;
        }
        if end == bytes.len() {
            break;
        }
        start = end + 1;
    }
    found
}

/// Parsed lines, and the first line that is not JSON with its number and error.
type Parsed = (Vec<Line>, Option<(usize, serde_json::Error)>);

/// Below this many bytes JSON Lines are parsed on one thread; starting another costs more.
const PARALLEL_LINES: usize = 1 << 20;

/// The JSON values of the lines of `text`, the first numbered `first_number`, blank lines
/// skipped, up to the first that is not JSON (with its number and error). On two or more cores
/// large texts are cut at a line break near the middle and the halves parsed side by side: most
/// of reading a log is parsing its lines, which are independent. The lines and the error are
/// those parsing line by line gives.
fn parse_lines(text: &[u8], first_number: usize) -> Parsed {
    let middle = (threads::two_cores() && text.len() >= PARALLEL_LINES)
        .then(|| text[text.len() / 2..].iter().position(|&b| b == b'\n').map(|k| text.len() / 2 + k))
        .flatten();
    let Some(middle) = middle else {
        return parse_run(text, first_number).0;
    };
    // The first half ends before the line break at `middle` and the second starts after it, so
    // the second's lines are numbered on from the first half's last.
    let (first, second) =
        threads::join(|| parse_run(&text[..middle], first_number), || parse_run(&text[middle + 1..], 0));
    let ((mut lines, failed), count) = first;
    if failed.is_some() {
        return (lines, failed);
    }
    let ((rest, failed), _) = second;
    let offset = first_number + count;
    lines.extend(rest.into_iter().map(|line| Line { number: line.number + offset, value: line.value }));
    (lines, failed.map(|(number, error)| (number + offset, error)))
}

/// [`parse_lines`] on one thread, with how many lines (blank ones too) `text` holds.
fn parse_run(text: &[u8], first_number: usize) -> (Parsed, usize) {
    let mut lines = Vec::new();
    let mut count = 0;
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        count = index + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let number = first_number + index;
        match compaction_model::value_from_slice(line) {
            Ok(value) => lines.push(Line { number, value }),
            Err(error) => return ((lines, Some((number, error))), count),
        }
    }
    ((lines, None), count)
}

pub(crate) fn items(top: &Top) -> Option<Vec<&Value>> {
    match top {
        Top::Lines(lines) => Some(lines.iter().map(|line| &line.value).collect()),
        Top::Value(Value::Array(items)) => Some(items.iter().collect()),
        Top::Value(_) => None,
    }
}

/// The keys a conversation's messages sit under in an object of `format`.
pub(crate) fn keys(format: Format) -> &'static [&'static str] {
    match format {
        Format::Haystack | Format::ClaudeCode | Format::Codex => &[],
        Format::Responses => &["input"],
        Format::OpenAi => &["messages", "traj"],
        Format::Anthropic => &["messages"],
        Format::SweAgent | Format::OpenHands => &["history"],
    }
}

/// Where the messages of `format` sit in the file, and how many conversations it holds.
pub(crate) fn locate(top: &Top, format: Format, name: &str) -> Result<(Place, usize), Error> {
    let keys = keys(format);
    let key_of = |value: &Value| keys.iter().find(|k| value.get(**k).is_some_and(Value::is_array)).copied();
    let unrecognized = |reason: String| Error::Unrecognized { name: name.to_owned(), reason };
    if let Top::Value(value @ Value::Object(object)) = top {
        return match key_of(value) {
            Some(key) => Ok((Place::Key(key.into()), 1)),
            None => Err(unrecognized(format!(
                "a {} file needs {}, found an object with keys {}",
                format.label(),
                expected_keys(format),
                key_list(object)
            ))),
        };
    }
    let Some(items) = items(top) else {
        return Err(unrecognized(format!(
            "expected a JSON array, an object or JSON Lines, found {}",
            json_type_of(top)
        )));
    };
    let conversation_key = items.first().and_then(|first| {
        let is_message = first.get("role").is_some() || first.get("source").is_some();
        if is_message {
            None
        } else {
            key_of(first)
        }
    });
    match conversation_key {
        Some(key) => Ok((Place::Item { index: 0, key: key.into() }, items.len())),
        None if matches!(format, Format::SweAgent) => {
            Err(unrecognized("a SWE-agent trajectory is an object with `history`".into()))
        }
        None => Ok((Place::Root, 1)),
    }
}

fn expected_keys(format: Format) -> String {
    let keys = keys(format);
    if keys.is_empty() {
        return "an array of messages or JSON Lines".into();
    }
    keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(" or ")
}

/// At most a dozen of an object's keys, comma-separated, each cut short.
pub(crate) fn key_list(object: &Map<String, Value>) -> String {
    if object.is_empty() {
        return "none".into();
    }
    let mut keys: Vec<String> = object.keys().take(12).map(|k| short_key(k)).collect();
    if object.len() > 12 {
        keys.push(format!("… ({} keys)", object.len()));
    }
    keys.join(", ")
}

fn short_key(key: &str) -> String {
    if key.chars().count() <= 40 {
        return key.to_owned();
    }
    crate::error::snippet(key)
}

pub(crate) fn locator(top: &Top, place: &Place, name: &str, format: Format, conversations: usize) -> Locator {
    let noun = match format {
        Format::ClaudeCode | Format::OpenHands => "event",
        _ => "message",
    };
    let file = Location::file(name);
    match (top, place) {
        (Top::Lines(lines), Place::Root) => {
            Locator { base: file, noun, lines: Some(lines.iter().map(|line| line.number).collect()) }
        }
        (Top::Lines(lines), Place::Item { index, key }) => {
            let number = lines.get(*index).map_or(index + 1, |line| line.number);
            Locator { base: file.with_line(number).with_key(key), noun, lines: None }
        }
        (_, Place::Item { index, .. }) if conversations > 1 => {
            Locator { base: file.with_conversation(*index), noun, lines: None }
        }
        _ => Locator { base: file, noun, lines: None },
    }
}

/// The object holding the conversation's messages, if they are not the whole file.
pub(crate) fn container<'a>(top: &'a Top, place: &Place) -> Option<&'a Map<String, Value>> {
    match (top, place) {
        (Top::Value(Value::Object(object)), Place::Key(_)) => Some(object),
        (Top::Value(Value::Array(items)), Place::Item { index, .. }) => items.get(*index)?.as_object(),
        (Top::Lines(lines), Place::Item { index, .. }) => lines.get(*index)?.value.as_object(),
        _ => None,
    }
}

pub(crate) fn take_messages(top: &mut Top, place: &Place, locator: &Locator) -> Result<Vec<Value>, Error> {
    let missing = |key: &str| locator.invalid_whole(format!("no `{key}`"));
    let slot: &mut Value = match (top, place) {
        (Top::Lines(lines), Place::Root) => {
            return Ok(std::mem::take(lines).into_iter().map(|line| line.value).collect())
        }
        (Top::Value(value), Place::Root) => value,
        (Top::Value(Value::Object(object)), Place::Key(key)) => {
            object.get_mut(key).ok_or_else(|| missing(key))?
        }
        (Top::Value(Value::Array(items)), Place::Item { index, key }) => {
            items.get_mut(*index).and_then(|item| item.get_mut(key.as_str())).ok_or_else(|| missing(key))?
        }
        (Top::Lines(lines), Place::Item { index, key }) => lines
            .get_mut(*index)
            .and_then(|line| line.value.get_mut(key.as_str()))
            .ok_or_else(|| missing(key))?,
        _ => return Err(locator.invalid_whole("the messages are not where this format keeps them")),
    };
    match std::mem::take(slot) {
        Value::Array(values) => Ok(values),
        other => {
            let found = json_type(&other);
            *slot = other;
            Err(locator.invalid_whole(format!("expected an array of messages, found {found}")))
        }
    }
}

pub(crate) fn read_tools(container: &Map<String, Value>, locator: &Locator) -> Result<Vec<ToolSpec>, Error> {
    let Some(Value::Array(tools)) = container.get("tools") else {
        return Ok(Vec::new());
    };
    tools
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            // OpenAI nests the spec under `function`; Anthropic calls the schema `input_schema`.
            let spec = tool.get("function").unwrap_or(tool);
            let name = spec.get("name").and_then(Value::as_str);
            let Some(name) = name else {
                return Err(locator.invalid_whole(format!("tools[{index}]: no `name`")));
            };
            let description = spec.get("description").and_then(Value::as_str).unwrap_or_default();
            let parameters = spec
                .get("parameters")
                .or_else(|| spec.get("input_schema"))
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            Ok(ToolSpec::new(name, description, parameters))
        })
        .collect()
}

/// The value of `key` in `object`, found by comparing its keys one by one. The objects a reader
/// looks into per line or block have a handful of keys, and serde_json's map would hash `key`
/// with SipHash to look it up, which costs more than the comparisons (a tenth of reading a
/// Claude Code session went to those hashes).
pub(crate) fn member_of<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.iter().find_map(|(k, value)| (k == key).then_some(value))
}

/// [`member_of`] for a value that may be an object.
pub(crate) fn member<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    member_of(value.as_object()?, key)
}

/// The values of `keys` in `object`, each taken out (`None` when absent) in one pass over its
/// members, without hashing (see [`member_of`]). The object keeps its keys, with `null` where a
/// value was taken, so an error can still list them.
pub(crate) fn take_members<const N: usize>(
    object: &mut Map<String, Value>,
    keys: [&str; N],
) -> [Option<Value>; N] {
    let mut taken = [const { None }; N];
    for (key, value) in object.iter_mut() {
        if let Some(k) = keys.iter().position(|wanted| wanted == key) {
            taken[k] = Some(std::mem::take(value));
        }
    }
    taken
}

/// A string taken out of an object at `key` (see [`take_members`]).
pub(crate) fn string_member(value: Option<Value>, key: &str) -> Result<String, String> {
    match value {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("`{key}` must be a string, found {}", json_type(&other))),
        None => Err(format!("`{key}` is missing")),
    }
}

pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn json_type_of(top: &Top) -> &'static str {
    match top {
        Top::Value(value) => json_type(value),
        Top::Lines(_) => "JSON Lines",
    }
}

#[cfg(test)]
mod tests {
    use super::{
        first_two_lines, member, member_of, parse_lines, parse_run, parse_top, string_member, take_members,
        PARALLEL_LINES,
    };

    /// The first two non-blank lines found a line break at a time are those a split at every
    /// byte finds (the way they were found before), numbers included, and the file reads the same.
    #[test]
    fn the_first_two_lines_are_those_a_byte_by_byte_split_finds() {
        let cases: &[&[u8]] = &[
            b"",
            b"\n",
            b" \t\r\n\n  \n",
            b"{\"a\": 1}",
            b"{\"a\": 1}\n",
            b"\n\n  {\"a\": 1}  \n\n",
            b"{\"role\": \"user\"}\n{\"role\": \"user\"}\n",
            b"{\"role\": \"user\"}\r\n\r\n{\"role\": \"user\"}\r\n",
            b"\r\n \r\n{\"a\":\r\n 1}\r\n",
            b"{\n  \"model\": \"m\",\n  \"messages\": []\n}\n",
            b"{\"model\":\"m\",\"messages\":[\n{\"role\":\"user\",\"content\":\"a\"}\n]}",
            b"{\"a\": 1}\n   \n\t\n{not json\n",
            b"{not json\n{\"a\": 1}\n",
            b"\x0c\n\x0b\n[1]\n",
            b"\n\n\n\n\n\n\n\n\n\nx\n\n\n\ny",
        ];
        for &bytes in cases {
            let by_bytes: Vec<(usize, &[u8])> = bytes
                .split(|&b| b == b'\n')
                .enumerate()
                .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
                .map(|(number, line)| (number + 1, line))
                .take(2)
                .collect();
            let found: Vec<(usize, &[u8])> = first_two_lines(bytes).into_iter().flatten().collect();
            assert_eq!(found, by_bytes, "{}", String::from_utf8_lossy(bytes));
            // The same slices of the input, not copies: the rest of the file is found from them.
            for ((_, a), (_, b)) in found.iter().zip(&by_bytes) {
                assert_eq!(a.as_ptr(), b.as_ptr());
            }
        }
        // What the file reads as, with the line numbers its errors and lines carry.
        let read: &[(&[u8], &str)] = &[
            (b" \r\n\n", "empty"),
            (b"\n\n  {\"a\": 1}  \n\n", "value"),
            (b"\n{\"role\": \"user\"}\r\n\r\n{\"role\": \"user\"}\r\n", "lines 2 4"),
            (b"\n  {\"role\": \"user\"}", "lines 2"),
            (b"{\n  \"model\": \"m\",\n  \"messages\": []\n}\n", "value"),
            (b"{\"model\":\"m\",\"messages\":[\n{\"role\":\"user\",\"content\":\"a\"}\n]}", "error 1"),
            (b"{\"a\": 1}\n   \n\t\n{not json\n", "error 4"),
            (b"\n\n{not json\n{\"a\": 1}\n", "error 3"),
        ];
        for &(bytes, expected) in read {
            let got = match parse_top(bytes, "t") {
                Ok(super::Top::Value(_)) => "value".to_owned(),
                Ok(super::Top::Lines(lines)) => {
                    let numbers: Vec<String> = lines.iter().map(|l| l.number.to_string()).collect();
                    format!("lines {}", numbers.join(" "))
                }
                Err(crate::error::Error::Empty { .. }) => "empty".to_owned(),
                Err(crate::error::Error::Json { line, .. }) => format!("error {}", line.unwrap_or(0)),
                Err(other) => format!("{other}"),
            };
            assert_eq!(got, expected, "{}", String::from_utf8_lossy(bytes));
        }
    }

    /// Finding members by comparing keys answers as serde_json's own lookups do, and taking
    /// them leaves the keys, so an error can still list them.
    #[test]
    fn members_are_found_and_taken_as_serde_json_finds_them() {
        let value = serde_json::json!({"type": "text", "text": "hi", "n": 1, "": null, "é": [2]});
        let object = value.as_object().expect("an object");
        for key in ["type", "text", "n", "", "é", "missing", "Type", "tex"] {
            assert_eq!(member_of(object, key), object.get(key), "{key}");
            assert_eq!(member(&value, key), value.get(key), "{key}");
        }
        assert_eq!(member(&serde_json::json!([1, 2]), "0"), None);

        let mut object = object.clone();
        let [text, missing, n] = take_members(&mut object, ["text", "missing", "n"]);
        assert_eq!(string_member(text, "text"), Ok("hi".to_owned()));
        assert_eq!(string_member(missing, "missing"), Err("`missing` is missing".to_owned()));
        assert_eq!(string_member(n, "n"), Err("`n` must be a string, found a number".to_owned()));
        let keys: Vec<&str> = object.keys().map(String::as_str).collect();
        assert_eq!(keys, ["type", "text", "n", "", "é"]);
        assert_eq!(object["text"], serde_json::Value::Null);
        assert_eq!(object["type"], "text");
    }

    /// Lines parsed on two threads are those parsed one after another, numbered alike, and the
    /// first bad line is the one reported, wherever it is.
    #[test]
    fn lines_parsed_side_by_side_are_lines_parsed_in_order() {
        let mut text = String::new();
        let mut number = 0;
        while text.len() < 2 * PARALLEL_LINES {
            number += 1;
            if number % 97 == 0 {
                text.push_str("  \n");
            } else {
                text.push_str(&format!("{{\"n\":{number},\"text\":\"{}\"}}\n", "x".repeat(number % 50)));
            }
        }
        let summary = |(lines, failed): super::Parsed| {
            let numbers: Vec<(usize, String)> =
                lines.iter().map(|l| (l.number, l.value.to_string())).collect();
            (numbers, failed.map(|(n, e)| (n, e.to_string())))
        };
        let bad_lines = [None, Some(10), Some(number / 2 + 3), Some(number - 2)];
        for bad in bad_lines {
            let mut text = text.clone();
            if let Some(bad) = bad {
                let mut lines: Vec<&str> = text.split('\n').collect();
                lines[bad - 1] = "{not json";
                text = lines.join("\n");
            }
            let together = summary(parse_lines(text.as_bytes(), 1));
            let in_order = summary(parse_run(text.as_bytes(), 1).0);
            assert_eq!(together, in_order, "bad line {bad:?}");
            assert_eq!(together.1.map(|(n, _)| n), bad);
        }
    }
}
