//! Writing a JSON value the way the file around it is written: indented by the same unit from
//! the same margin, `": "` or `":"` between a key and its value, characters beyond ASCII escaped
//! when the file escapes them (Python's `json.dumps` does by default).
//!
//! A message a command changed is written in its neighbours' style, so a file written back
//! differs from its input only inside the messages that changed.

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

use compaction_json::scan::{skip_value, whitespace as skip_whitespace};

/// How the values of one file are spelled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Style {
    /// One level of indentation, when values are written on several lines.
    pub indent: Option<Vec<u8>>,
    /// `": "` and `", "` between members on one line (Python's default), rather than `:` and `,`.
    pub spaced: bool,
    /// Characters beyond ASCII written as `\uXXXX` escapes.
    pub ascii: bool,
}

impl Style {
    /// The style of the value starting at `at` in `source`: its indentation unit taken from the
    /// line break right after its opening bracket (where an indented value breaks its first
    /// line) against the margin of the line it starts on, its spacing from its first member.
    /// Only the value's first few bytes are looked at.
    pub(crate) fn of(source: &[u8], at: usize) -> Style {
        let indent = match source.get(at) {
            Some(b'{' | b'[') => {
                let gap = &source[at + 1..skip_whitespace(source, at + 1)];
                gap.iter().rposition(|&b| b == b'\n').and_then(|newline| {
                    let line = &gap[newline + 1..];
                    let margin = margin(source, at);
                    (line.len() > margin.len() && line.starts_with(margin))
                        .then(|| line[margin.len()..].to_vec())
                })
            }
            _ => None,
        };
        Style { indent, spaced: spaced(source, at), ascii: false }
    }

    /// `value` in this style, every line after the first starting with `margin`.
    pub(crate) fn write<T: Serialize + ?Sized>(
        &self,
        value: &T,
        margin: &[u8],
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        if self.indent.is_none() && !self.spaced && !self.ascii {
            // serde_json's own compact writing: the same bytes, without a formatter to consult.
            return serde_json::to_writer(out, value).map_err(io::Error::other);
        }
        let formatter = Styled { style: self, margin, level: 0, has_value: false };
        let mut serializer = serde_json::Serializer::with_formatter(out, formatter);
        value.serialize(&mut serializer).map_err(io::Error::other)
    }
}

/// How far back [`margin`] looks for the start of a line: an indented file's lines are short,
/// and a compact file's one line can be the whole file, which must not be crossed for each
/// message written.
const LINE_REACH: usize = 1 << 16;

/// The whitespace that starts the line holding `at`, up to the first other byte; empty when the
/// line starts more than [`LINE_REACH`] bytes before `at`.
pub(crate) fn margin(source: &[u8], at: usize) -> &[u8] {
    let at = at.min(source.len());
    let from = at.saturating_sub(LINE_REACH);
    let line_start = match source[from..at].iter().rposition(|&b| b == b'\n') {
        Some(k) => from + k + 1,
        None if from == 0 => 0,
        None => return &[],
    };
    let rest = &source[line_start..];
    let width = rest.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &rest[..width]
}

/// Whether the first member of the object at `at` has a space after its colon.
fn spaced(source: &[u8], at: usize) -> bool {
    if source.get(at) != Some(&b'{') {
        return false;
    }
    let key = skip_whitespace(source, at + 1);
    if source.get(key) != Some(&b'"') {
        return false;
    }
    let Some(key_end) = skip_value(source, key) else { return false };
    let colon = skip_whitespace(source, key_end);
    source.get(colon) == Some(&b':') && source.get(colon + 1) == Some(&b' ')
}

/// serde_json's formatter for a [`Style`].
struct Styled<'a> {
    style: &'a Style,
    margin: &'a [u8],
    level: usize,
    has_value: bool,
}

impl Styled<'_> {
    fn new_line<W: ?Sized + io::Write>(&self, out: &mut W) -> io::Result<()> {
        if let Some(unit) = &self.style.indent {
            out.write_all(b"\n")?;
            out.write_all(self.margin)?;
            for _ in 0..self.level {
                out.write_all(unit)?;
            }
        }
        Ok(())
    }

    fn separator<W: ?Sized + io::Write>(&self, out: &mut W, first: bool) -> io::Result<()> {
        if !first {
            out.write_all(b",")?;
            if self.style.indent.is_none() && self.style.spaced {
                out.write_all(b" ")?;
            }
        }
        self.new_line(out)
    }
}

impl Formatter for Styled<'_> {
    fn begin_array<W: ?Sized + io::Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        out.write_all(b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.new_line(out)?;
        }
        out.write_all(b"]")
    }

    fn begin_array_value<W: ?Sized + io::Write>(&mut self, out: &mut W, first: bool) -> io::Result<()> {
        self.separator(out, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, _out: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        out.write_all(b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.new_line(out)?;
        }
        out.write_all(b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(&mut self, out: &mut W, first: bool) -> io::Result<()> {
        self.separator(out, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, out: &mut W) -> io::Result<()> {
        let spaced = self.style.indent.is_some() || self.style.spaced;
        out.write_all(if spaced { b": " } else { b":" })
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _out: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        out: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if !self.style.ascii || fragment.is_ascii() {
            return out.write_all(fragment.as_bytes());
        }
        for c in fragment.chars() {
            if c.is_ascii() {
                out.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(out, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn styled(style: &Style, margin: &str, value: &serde_json::Value) -> String {
        let mut out = Vec::new();
        style.write(value, margin.as_bytes(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Each style is what Python's `json.dumps` writes with the matching settings.
    #[test]
    fn values_are_written_in_the_style_found() {
        let value = serde_json::json!({"role": "tool", "content": "café 🎉", "a": [], "b": {}, "c": [1, {"d": null}]});
        let python_indented = "{\n    \"role\": \"tool\",\n    \"content\": \"caf\\u00e9 \\ud83c\\udf89\",\n    \"a\": [],\n    \"b\": {},\n    \"c\": [\n      1,\n      {\n        \"d\": null\n      }\n    ]\n  }";
        let style = Style { indent: Some(b"  ".to_vec()), spaced: false, ascii: true };
        assert_eq!(styled(&style, "  ", &value), python_indented);
        let style = Style { indent: None, spaced: true, ascii: false };
        assert_eq!(
            styled(&style, "", &value),
            r#"{"role": "tool", "content": "café 🎉", "a": [], "b": {}, "c": [1, {"d": null}]}"#
        );
        assert_eq!(styled(&Style::default(), "", &value), serde_json::to_string(&value).unwrap());
    }

    #[test]
    fn the_style_is_read_from_a_value_in_place() {
        let source = b"{\n  \"messages\": [\n    {\n      \"role\": \"user\"\n    }\n  ]\n}";
        let start = source.iter().rposition(|&b| b == b'{').unwrap();
        assert_eq!(
            Style::of(source, start),
            Style { indent: Some(b"  ".to_vec()), spaced: true, ascii: false }
        );
        assert_eq!(margin(source, start), b"    ");
        let compact = br#"[{"role":"user"},{"role": "x"}]"#;
        assert_eq!(Style::of(compact, 1), Style::default());
        assert!(Style::of(compact, 17).spaced);
    }
}
