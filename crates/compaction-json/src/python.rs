//! JSON printed as Python's `json.dumps` prints it, with its options: `sort_keys`,
//! `ensure_ascii`, the separators, and numbers as Python reads and prints them.
//!
//! The reference (Python Haystack) measures and hashes tool arguments and payloads by printing
//! them with `json.dumps(value, sort_keys=True, default=str)`, and sends a tool call's arguments
//! as `json.dumps(arguments, ensure_ascii=False)`; a Haystack user's file is spelled by
//! `json.dump`. To reproduce those texts a [`serde_json::Value`] is printed character for
//! character the way CPython does, which differs from serde_json's own output:
//!
//! * separators are `", "` and `": "` by default ([`PythonJson::separators`]), and with
//!   [`PythonJson::sort_keys`] object keys are sorted by code point at every depth, whatever
//!   order the map keeps;
//! * with `ensure_ascii` (Python's default) every character outside the printable ASCII range
//!   `0x20..=0x7e` is written as a lowercase `\uXXXX` escape (a UTF-16 surrogate pair above
//!   U+FFFF, one escape for a lone surrogate's stand-in, see [`lone_surrogate`]), but for the
//!   short escapes `\n`, `\r`, `\t`, `\b` and `\f`; without it only `"`, `\` and control
//!   characters are escaped;
//! * numbers follow `json.loads` ([`PythonJson::float_repr`], on by default): a token holding
//!   `.`, `e` or `E` is a float printed with Python's `repr(float)` (shortest round-trip digits,
//!   Python's choice between fixed and scientific notation, `Infinity` / `-Infinity` / `NaN`
//!   for non-finite values); any other token is an integer printed digit for digit (`-0`
//!   becomes `0`). Off, numbers are written as serde_json holds them (their text, under
//!   `arbitrary_precision`).
//!
//! [`PythonJson::char_len`] gives the length of the printed text without building it; the
//! approximate token counter calls it on its hot path.

use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use crate::string::lone_surrogate;

/// How [`PythonJson`] prints: `json.dumps`'s options. Start from [`PythonJson::new`]
/// (`json.dumps`'s defaults) and change what differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonJson {
    sort_keys: bool,
    ensure_ascii: bool,
    item_separator: &'static str,
    key_separator: &'static str,
    float_repr: bool,
}

impl Default for PythonJson {
    fn default() -> Self {
        Self::new()
    }
}

impl PythonJson {
    /// `json.dumps`'s defaults: keys in the map's order, `ensure_ascii`, `", "` and `": "`, and
    /// numbers as `json.loads` reads them.
    #[must_use]
    pub const fn new() -> Self {
        PythonJson {
            sort_keys: false,
            ensure_ascii: true,
            item_separator: ", ",
            key_separator: ": ",
            float_repr: true,
        }
    }

    /// `sort_keys`: object keys sorted by code point at every depth.
    #[must_use]
    pub const fn sort_keys(mut self, on: bool) -> Self {
        self.sort_keys = on;
        self
    }

    /// `ensure_ascii`: every character outside `' '..='~'` written as `\uXXXX`.
    #[must_use]
    pub const fn ensure_ascii(mut self, on: bool) -> Self {
        self.ensure_ascii = on;
        self
    }

    /// `separators=(item, key)`.
    #[must_use]
    pub const fn separators(mut self, item: &'static str, key: &'static str) -> Self {
        self.item_separator = item;
        self.key_separator = key;
        self
    }

    /// Numbers as `json.loads` reads them and `json.dumps` prints them (on), or as serde_json
    /// holds them (off).
    #[must_use]
    pub const fn float_repr(mut self, on: bool) -> Self {
        self.float_repr = on;
        self
    }

    /// `json.dumps(value, ...)` with these options.
    pub fn dumps(&self, value: &Value) -> String {
        let mut out = String::new();
        self.write(value, &mut out);
        out
    }

    /// Appends `json.dumps(value, ...)` to `out`.
    pub fn write(&self, value: &Value, out: &mut String) {
        match value {
            Value::Null => out.push_str("null"),
            Value::Bool(true) => out.push_str("true"),
            Value::Bool(false) => out.push_str("false"),
            Value::Number(n) => self.write_number(n, out),
            Value::String(s) => self.write_str(s, out),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(self.item_separator);
                    }
                    self.write(item, out);
                }
                out.push(']');
            }
            Value::Object(map) => self.write_object(map, out),
        }
    }

    /// Appends an object, its keys sorted with `sort_keys`.
    pub fn write_object(&self, map: &Map<String, Value>, out: &mut String) {
        out.push('{');
        if !self.sort_keys || map.len() <= 1 {
            for (i, (key, value)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(self.item_separator);
                }
                self.write_member(key, value, out);
            }
        } else {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // Keys are unique, so an unstable sort is deterministic. `str` ordering is byte-wise
            // on UTF-8, which equals code point order, but for the stand-ins of lone surrogates
            // (U+10F000 on, after everything else), which Python orders as the surrogates they
            // are: only keys holding one (a `0xF4` byte) are compared by hand.
            if entries.iter().any(|(key, _)| key.as_bytes().contains(&0xF4)) {
                entries.sort_unstable_by(|a, b| python_order(a.0, b.0));
            } else {
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            }
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(self.item_separator);
                }
                self.write_member(key, value, out);
            }
        }
        out.push('}');
    }

    /// Appends `"key": value`.
    fn write_member(&self, key: &str, value: &Value, out: &mut String) {
        self.write_str(key, out);
        out.push_str(self.key_separator);
        self.write(value, out);
    }

    /// Appends a string literal for `s`.
    pub fn write_str(&self, s: &str, out: &mut String) {
        if self.ensure_ascii {
            write_ascii_str(s, out);
        } else {
            write_unicode_str(s, out);
        }
    }

    /// Appends a number.
    pub fn write_number(&self, n: &Number, out: &mut String) {
        if self.float_repr {
            write_number(n, out);
        } else {
            out.push_str(&n.to_string());
        }
    }

    /// The number of characters [`PythonJson::write`] appends for `value`, without building the
    /// text when `ensure_ascii` is on (the text is then ASCII, so this is its length in bytes
    /// too).
    pub fn char_len(&self, value: &Value) -> usize {
        if !self.ensure_ascii || !self.float_repr {
            return self.dumps(value).chars().count();
        }
        match value {
            Value::Null | Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => number_len(n),
            Value::String(s) => ascii_str_len(s),
            Value::Array(items) => {
                // Brackets, one separator between neighbours, then the items.
                let seps = self.item_separator.len() * items.len().saturating_sub(1);
                items.iter().fold(2 + seps, |acc, item| acc + self.char_len(item))
            }
            Value::Object(map) => self.object_char_len(map),
        }
    }

    /// The number of characters [`PythonJson::write_object`] appends (key order does not change
    /// the length).
    pub fn object_char_len(&self, map: &Map<String, Value>) -> usize {
        if !self.ensure_ascii || !self.float_repr {
            let mut out = String::new();
            self.write_object(map, &mut out);
            return out.chars().count();
        }
        let entries: usize = map
            .iter()
            .map(|(key, value)| ascii_str_len(key) + self.key_separator.len() + self.char_len(value))
            .sum();
        2 + entries + self.item_separator.len() * map.len().saturating_sub(1)
    }

    /// The number of characters [`PythonJson::write`] appends for the value `json` is the text
    /// of, read from that text without building the value: `None` when that cannot be told so
    /// (without `ensure_ascii` or `float_repr`, or text this does not read), and then the value
    /// is to be parsed and given to [`PythonJson::char_len`].
    ///
    /// It reads JSON as serde_json writes it (the text a tool call's arguments are held as),
    /// and Python's non-finite words (`NaN`, `Infinity`, `-Infinity`); it does not check that
    /// the text is well-formed, only reads the tokens it is made of.
    pub fn text_char_len(&self, json: &str) -> Option<usize> {
        if !self.ensure_ascii || !self.float_repr {
            return None;
        }
        let bytes = json.as_bytes();
        let mut at = 0;
        let mut len = 0;
        while let Some(&b) = bytes.get(at) {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => at += 1,
                b'{' | b'}' | b'[' | b']' => {
                    len += 1;
                    at += 1;
                }
                b',' => {
                    len += self.item_separator.len();
                    at += 1;
                }
                b':' => {
                    len += self.key_separator.len();
                    at += 1;
                }
                b'"' => {
                    let end = crate::scan::string_end(bytes, at + 1)?;
                    let contents = &json[at + 1..end - 1];
                    len += if contents.as_bytes().contains(&b'\\') {
                        ascii_str_len(&crate::string::decode(&json[at..end]).ok()?)
                    } else {
                        ascii_str_len(contents)
                    };
                    at = end;
                }
                b't' | b'n' => {
                    len += 4;
                    at += 4;
                }
                b'f' => {
                    len += 5;
                    at += 5;
                }
                b'-' | b'0'..=b'9' | b'N' | b'I' => {
                    let end = bytes[at..]
                        .iter()
                        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-')))
                        .map_or(bytes.len(), |k| at + k);
                    len += number_text_len(&json[at..end]);
                    at = end;
                }
                _ => return None,
            }
        }
        Some(len)
    }

    /// The number of characters [`PythonJson::write_str`] appends for `s`, quotes included.
    pub fn str_len(&self, s: &str) -> usize {
        if self.ensure_ascii {
            ascii_str_len(s)
        } else {
            let mut out = String::new();
            write_unicode_str(s, &mut out);
            out.chars().count()
        }
    }
}

/// A string literal with `ensure_ascii`.
fn write_ascii_str(s: &str, out: &mut String) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push('"');
    // Start of the current run of bytes that need no escaping.
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if ESCAPED_LEN[usize::from(b)] == 1 {
            i += 1;
            continue;
        }
        out.push_str(&s[run..i]);
        if b < 0x80 {
            match b {
                b'"' => out.push_str("\\\""),
                b'\\' => out.push_str("\\\\"),
                b'\n' => out.push_str("\\n"),
                b'\r' => out.push_str("\\r"),
                b'\t' => out.push_str("\\t"),
                0x08 => out.push_str("\\b"),
                0x0c => out.push_str("\\f"),
                _ => push_u_escape(u32::from(b), out),
            }
            i += 1;
        } else {
            // `i` is at a UTF-8 lead byte, hence on a char boundary.
            let c = s[i..].chars().next().unwrap_or('\u{fffd}');
            let code = u32::from(c);
            if let Some(unit) = lone_surrogate(c) {
                // A lone surrogate read from JSON: Python escapes it alone.
                push_u_escape(u32::from(unit), out);
            } else if code < 0x1_0000 {
                push_u_escape(code, out);
            } else {
                let v = code - 0x1_0000;
                push_u_escape(0xd800 | (v >> 10), out);
                push_u_escape(0xdc00 | (v & 0x3ff), out);
            }
            i += c.len_utf8();
        }
        run = i;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// A string literal without `ensure_ascii`: only `"`, `\` and the control characters below
/// U+0020 are escaped, as Python's encoder does.
fn write_unicode_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => push_u_escape(c as u32, out),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// How Python orders two strings: by code point, a lone surrogate's stand-in as the surrogate.
fn python_order(a: &str, b: &str) -> std::cmp::Ordering {
    let point = |c: char| lone_surrogate(c).map_or(u32::from(c), u32::from);
    a.chars().map(point).cmp(b.chars().map(point))
}

/// The length of a string literal with `ensure_ascii`, quotes included.
fn ascii_str_len(s: &str) -> usize {
    let len = s.as_bytes().iter().fold(2, |acc, &b| acc + usize::from(ESCAPED_LEN[usize::from(b)]));
    // A lone surrogate's stand-in is a four-byte character, counted as a pair of escapes (12);
    // Python writes the surrogate as one (6). Only text with a `0xF4` byte can hold one.
    if s.as_bytes().contains(&0xF4) {
        len - 6 * s.chars().filter(|&c| lone_surrogate(c).is_some()).count()
    } else {
        len
    }
}

/// Appends Python's `repr(x)` for a float: shortest round-trip digits, fixed notation when the
/// decimal point position is in `-3..=16`, scientific otherwise (`1e-05`, `1.5e+16`), `.0` on
/// integral fixed values, and `inf`, `-inf`, `nan` for non-finite values (`json.dumps` prints
/// those as `Infinity`, `-Infinity`, `NaN` instead).
pub fn float_repr(x: f64, out: &mut String) {
    if x.is_nan() {
        out.push_str("nan");
    } else if x.is_infinite() {
        out.push_str(if x < 0.0 { "-inf" } else { "inf" });
    } else {
        FloatParts::new(x).write(out);
    }
}

/// How Python's `json.loads` would read a number token.
#[derive(Debug)]
enum PyNumber<'a> {
    /// An integer, as its decimal text (never `-0`).
    Int(&'a str),
    /// A float.
    Float(f64),
}

/// Classifies a number token the way `json.loads` does.
fn classify(text: &str) -> PyNumber<'_> {
    if text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        // Correctly rounded like Python's `float()`; overflow gives ±inf.
        PyNumber::Float(text.parse().unwrap_or(f64::NAN))
    } else if text == "-0" {
        PyNumber::Int("0")
    } else {
        PyNumber::Int(text)
    }
}

/// Appends a number as `json.dumps` prints what `json.loads` read.
fn write_number(n: &Number, out: &mut String) {
    match classify(n.as_str()) {
        PyNumber::Int(digits) => out.push_str(digits),
        PyNumber::Float(x) => {
            if let Some(special) = non_finite_json(x) {
                out.push_str(special);
            } else {
                float_repr(x, out);
            }
        }
    }
}

/// Length of [`write_number`]'s output.
fn number_len(n: &Number) -> usize {
    number_text_len(n.as_str())
}

/// Length of [`write_number`]'s output for the number whose text is `text`.
fn number_text_len(text: &str) -> usize {
    match classify(text) {
        PyNumber::Int(digits) => digits.len(),
        PyNumber::Float(x) => match non_finite_json(x) {
            Some(special) => special.len(),
            None => FloatParts::new(x).len(),
        },
    }
}

/// `json.dumps`'s spelling of a non-finite float, or `None` if `x` is finite.
fn non_finite_json(x: f64) -> Option<&'static str> {
    if x.is_nan() {
        Some("NaN")
    } else if x.is_infinite() {
        Some(if x < 0.0 { "-Infinity" } else { "Infinity" })
    } else {
        None
    }
}

/// The shortest round-trip decimal form of a finite float, with ties broken
/// as Python does: `value = ±0.DIGITS × 10^decpt`.
#[derive(Debug)]
struct FloatParts {
    /// Whether the sign bit is set (so `-0.0` is negative).
    negative: bool,
    /// Significant decimal digits as ASCII, no trailing zeros (except the
    /// single digit `0` for zero).
    digits: [u8; 17],
    /// Number of used entries in `digits`.
    ndigits: usize,
    /// Position of the decimal point relative to the digits.
    decpt: i32,
}

impl FloatParts {
    /// Decomposes a finite `x`.
    ///
    /// Rust's `{:e}` prints the shortest digit string that round-trips, and
    /// among those the one nearest to `x`, as Python's `repr` does. The two
    /// differ only when `x` lies exactly halfway between two such strings:
    /// Python (David Gay's `dtoa`) then picks the one with an even last digit,
    /// Rust may pick the odd one (`1609006034555203.25` is `...203.2` in
    /// Python, `...203.3` in Rust). [`break_tie_to_even`] fixes
    /// that case.
    fn new(x: f64) -> Self {
        let mut buf = StackBuf::default();
        // `{:e}` of |x| is at most 23 bytes, e.g. `2.2250738585072014e-308`.
        let _ = write!(buf, "{:e}", x.abs());
        let text = &buf.bytes[..buf.len];
        let mut mantissa: u64 = 0;
        let mut ndigits: usize = 0;
        let mut exp_start = text.len();
        for (i, &b) in text.iter().enumerate() {
            match b {
                b'0'..=b'9' if ndigits < 17 => {
                    mantissa = mantissa * 10 + u64::from(b - b'0');
                    ndigits += 1;
                }
                b'e' => {
                    exp_start = i + 1;
                    break;
                }
                _ => {}
            }
        }
        let mut exp: i32 = 0;
        let mut exp_negative = false;
        for &b in &text[exp_start..] {
            match b {
                b'-' => exp_negative = true,
                b'0'..=b'9' => exp = exp * 10 + i32::from(b - b'0'),
                _ => {}
            }
        }
        let decpt = if exp_negative { 1 - exp } else { exp + 1 };
        // Value = mantissa × 10^last, `last` being the last digit's exponent.
        let last = decpt - ndigits.max(1) as i32;
        let (mantissa, last) = break_tie_to_even(x.abs(), mantissa, last);
        Self::from_integer(x.is_sign_negative(), mantissa, last)
    }

    /// Builds the parts of `±mantissa × 10^last`, dropping trailing zeros.
    fn from_integer(negative: bool, mut mantissa: u64, mut last: i32) -> Self {
        while mantissa != 0 {
            let (quotient, remainder) = (mantissa / 10, mantissa % 10);
            if remainder != 0 {
                break;
            }
            mantissa = quotient;
            last += 1;
        }
        let mut reversed = [b'0'; 20];
        let mut n = 0;
        loop {
            reversed[n] = b'0' + (mantissa % 10) as u8;
            n += 1;
            mantissa /= 10;
            if mantissa == 0 || n == reversed.len() {
                break;
            }
        }
        let ndigits = n.min(17);
        let mut digits = [b'0'; 17];
        for (slot, &d) in digits.iter_mut().zip(reversed[..n].iter().rev()) {
            *slot = d;
        }
        FloatParts { negative, digits, ndigits, decpt: last + n as i32 }
    }

    /// The digits as a string slice.
    fn digits(&self) -> &str {
        // Only ASCII digits are ever stored.
        std::str::from_utf8(&self.digits[..self.ndigits]).unwrap_or("0")
    }

    /// Whether Python's `repr` uses scientific notation.
    fn scientific(&self) -> bool {
        self.decpt <= -4 || self.decpt > 16
    }

    /// Appends the `repr` text.
    fn write(&self, out: &mut String) {
        if self.negative {
            out.push('-');
        }
        let digits = self.digits();
        let nd = self.ndigits as i32;
        if self.scientific() {
            out.push_str(&digits[..1]);
            if self.ndigits > 1 {
                out.push('.');
                out.push_str(&digits[1..]);
            }
            let exp = self.decpt - 1;
            out.push('e');
            out.push(if exp < 0 { '-' } else { '+' });
            let abs = exp.unsigned_abs();
            if abs < 10 {
                out.push('0');
            }
            let _ = write!(out, "{abs}");
        } else if self.decpt <= 0 {
            out.push_str("0.");
            for _ in 0..-self.decpt {
                out.push('0');
            }
            out.push_str(digits);
        } else if self.decpt < nd {
            let point = self.decpt as usize;
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        } else {
            out.push_str(digits);
            for _ in 0..self.decpt - nd {
                out.push('0');
            }
            out.push_str(".0");
        }
    }

    /// Length of [`FloatParts::write`]'s output.
    fn len(&self) -> usize {
        let sign = usize::from(self.negative);
        let nd = self.ndigits;
        let body = if self.scientific() {
            let abs = (self.decpt - 1).unsigned_abs();
            let exp_digits = if abs >= 100 { 3 } else { 2 };
            // Mantissa, optional point, `e`, exponent sign, exponent digits.
            nd + usize::from(nd > 1) + 2 + exp_digits
        } else if self.decpt <= 0 {
            2 + self.decpt.unsigned_abs() as usize + nd
        } else if (self.decpt as usize) < nd {
            nd + 1
        } else {
            self.decpt as usize + 2
        };
        sign + body
    }
}

/// Python's tie rule for shortest digits. Given the shortest digits of the
/// finite, non-negative `x` as `mantissa × 10^last`, returns them unchanged
/// unless `x` is exactly halfway between `mantissa` and a neighbour
/// `mantissa ± 1`, `mantissa` is odd, and the neighbour also reads back as
/// `x`; then it returns the (even) neighbour.
fn break_tie_to_even(x: f64, mantissa: u64, last: i32) -> (u64, i32) {
    if mantissa & 1 == 0 {
        return (mantissa, last);
    }
    let candidates = [
        (mantissa.wrapping_mul(10).wrapping_sub(5), mantissa - 1),
        (mantissa.wrapping_mul(10).wrapping_add(5), mantissa + 1),
    ];
    for (midpoint, neighbour) in candidates {
        if exactly_equals(x, midpoint, last - 1) && reads_back(x, neighbour, last) {
            return (neighbour, last);
        }
    }
    (mantissa, last)
}

/// Whether the finite, positive `x` equals `k × 10^j` exactly, for an odd `k`.
fn exactly_equals(x: f64, k: u64, j: i32) -> bool {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (mut m, mut q) = if biased == 0 { (fraction, -1074) } else { (fraction | (1 << 52), biased - 1075) };
    if m == 0 {
        return false;
    }
    let zeros = m.trailing_zeros();
    m >>= zeros;
    q += zeros as i32;
    // x = m × 2^q with m odd; k × 10^j = (k × 5^j) × 2^j with k odd, so the
    // odd parts and the powers of two must match.
    if q != j {
        return false;
    }
    let five_pow = |e: u32| 5u128.checked_pow(e);
    if j >= 0 {
        five_pow(j as u32).and_then(|p| p.checked_mul(u128::from(k))).is_some_and(|rhs| rhs == u128::from(m))
    } else {
        five_pow(j.unsigned_abs())
            .and_then(|p| p.checked_mul(u128::from(m)))
            .is_some_and(|lhs| lhs == u128::from(k))
    }
}

/// Whether `mantissa × 10^last` parses back to `x`.
fn reads_back(x: f64, mantissa: u64, last: i32) -> bool {
    let mut buf = StackBuf::default();
    if write!(buf, "{mantissa}e{last}").is_err() {
        return false;
    }
    std::str::from_utf8(&buf.bytes[..buf.len])
        .ok()
        .and_then(|text| text.parse::<f64>().ok())
        .is_some_and(|y| y == x)
}

/// A fixed-capacity formatting buffer, so float formatting never allocates.
#[derive(Debug, Default)]
struct StackBuf {
    /// Storage.
    bytes: [u8; 32],
    /// Number of used bytes.
    len: usize,
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.bytes.len() {
            return Err(std::fmt::Error);
        }
        self.bytes[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Appends `\uXXXX` with lowercase hex digits for a UTF-16 code unit.
fn push_u_escape(unit: u32, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\u");
    for shift in [12, 8, 4, 0] {
        out.push(char::from(HEX[((unit >> shift) & 0xf) as usize]));
    }
}

/// Escaped length contributed by each UTF-8 byte: 1 for plain printable
/// ASCII, 2 for short escapes, 6 for `\u00XX` control escapes, 0 for
/// continuation bytes, and for lead bytes the length of the whole character's
/// escape (6 in the BMP, 12 for a surrogate pair).
const ESCAPED_LEN: [u8; 256] = build_escaped_len();

/// Builds [`ESCAPED_LEN`].
const fn build_escaped_len() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b {
            0x22 | 0x5c | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2,
            0x20..=0x7e => 1,
            0x00..=0x1f | 0x7f => 6,
            0x80..=0xbf => 0,
            0xc0..=0xef => 6,
            _ => 12,
        };
        b += 1;
    }
    table
}
