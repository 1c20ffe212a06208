//! Python-compatible JSON printing.
//!
//! The reference implementation (Python Haystack) measures and hashes tool
//! arguments and structured payloads by serialising them with
//! `json.dumps(value, sort_keys=True, default=str)`. To reproduce its numbers
//! exactly we must print a [`serde_json::Value`] character for character the
//! way CPython does, which differs from `serde_json`'s own output:
//!
//! * separators are `", "` and `": "`, and object keys are sorted (by code
//!   point) at every depth, whatever order the map keeps;
//! * with the default `ensure_ascii=True`, every character outside the
//!   printable ASCII range `0x20..=0x7e` is written as a lowercase `\uXXXX`
//!   escape (a UTF-16 surrogate pair above U+FFFF), except for the short
//!   escapes `\n`, `\r`, `\t`, `\b` and `\f`;
//! * numbers follow `json.loads` semantics: a token containing `.`, `e` or
//!   `E` is a float printed with Python's `repr(float)` (shortest round-trip
//!   digits, Python's choice between fixed and scientific notation, and
//!   `Infinity`/`-Infinity`/`NaN` for non-finite values); any other token is
//!   an integer printed digit for digit (`-0` becomes `0`).
//!
//! The workspace enables `serde_json`'s `arbitrary_precision` feature, so a
//! [`serde_json::Number`] still holds the original token text and big
//! integers survive unchanged.
//!
//! [`python_json_char_len`] computes the length of the printed text without
//! building it; it is used on the hot path of the approximate token counter.

use serde_json::{Map, Number, Value};
use std::fmt::Write as _;

/// Appends `json.dumps(value, sort_keys=True, default=str)` of `value` to `out`.
pub fn write_python_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_python_json_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => write_python_json_object(map, out),
    }
}

/// Returns the number of characters [`write_python_json`] would append for
/// `value`, without building the text.
///
/// The printed text is pure ASCII, so this is also its length in bytes.
pub fn python_json_char_len(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_len(n),
        Value::String(s) => python_json_str_len(s),
        Value::Array(items) => {
            // Brackets, one ", " between neighbours, then the items.
            let seps = 2 * items.len().saturating_sub(1);
            items.iter().fold(2 + seps, |acc, item| acc + python_json_char_len(item))
        }
        Value::Object(map) => python_json_object_char_len(map),
    }
}

/// Appends a JSON string literal for `s`, escaped as Python's `json.dumps`
/// does with `ensure_ascii=True`.
pub fn write_python_json_str(s: &str, out: &mut String) {
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
            if let Some(unit) = compaction_model::lone_surrogate(c) {
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

/// Appends Python's `repr(x)` for a float: shortest round-trip digits, fixed
/// notation when the decimal point position is in `-3..=16`, scientific
/// otherwise (`1e-05`, `1.5e+16`), `.0` on integral fixed values, and `inf`,
/// `-inf`, `nan` for non-finite values (`json.dumps` prints those as
/// `Infinity`, `-Infinity`, `NaN` instead).
pub fn python_float_repr(x: f64, out: &mut String) {
    if x.is_nan() {
        out.push_str("nan");
    } else if x.is_infinite() {
        out.push_str(if x < 0.0 { "-inf" } else { "inf" });
    } else {
        FloatParts::new(x).write(out);
    }
}

/// Appends a JSON object as `json.dumps(obj, sort_keys=True)` prints it: keys sorted by code point.
pub fn write_python_json_object(map: &Map<String, Value>, out: &mut String) {
    out.push('{');
    if map.len() <= 1 {
        for (k, v) in map {
            write_member(k, v, out);
        }
    } else {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        // Keys are unique, so an unstable sort is deterministic. `str`
        // ordering is byte-wise on UTF-8, which equals code point order, but for the stand-ins
        // of lone surrogates (U+10F000 on, after everything else), which Python orders as the
        // surrogates they are: only keys holding one (a `0xF4` byte) are compared by hand.
        if entries.iter().any(|(key, _)| key.as_bytes().contains(&0xF4)) {
            entries.sort_unstable_by(|a, b| python_order(a.0, b.0));
        } else {
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        }
        for (i, (k, v)) in entries.into_iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_member(k, v, out);
        }
    }
    out.push('}');
}

/// How Python orders two strings: by code point, a lone surrogate's stand-in as the surrogate.
fn python_order(a: &str, b: &str) -> std::cmp::Ordering {
    let point = |c: char| compaction_model::lone_surrogate(c).map_or(u32::from(c), u32::from);
    a.chars().map(point).cmp(b.chars().map(point))
}

/// Appends `"key": value`.
fn write_member(key: &str, value: &Value, out: &mut String) {
    write_python_json_str(key, out);
    out.push_str(": ");
    write_python_json(value, out);
}

/// Returns the number of characters [`write_python_json_str`] would append
/// for `s` (quotes included), without building the text.
pub fn python_json_str_len(s: &str) -> usize {
    let len = s.as_bytes().iter().fold(2, |acc, &b| acc + usize::from(ESCAPED_LEN[usize::from(b)]));
    // A lone surrogate's stand-in is a four-byte character, counted as a pair of escapes (12);
    // Python writes the surrogate as one (6). Only text with a `0xF4` byte can hold one.
    if s.as_bytes().contains(&0xF4) {
        len - 6 * s.chars().filter(|&c| compaction_model::lone_surrogate(c).is_some()).count()
    } else {
        len
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

/// Appends a number as Python's `json.dumps` prints what `json.loads` read from its text:
/// integers digit for digit (`-0` as `0`), floats as `repr` (`1e-05`, `1e+16`, `0.1`), non-finite
/// ones as `Infinity`, `-Infinity`, `NaN`. For other crates that must print JSON as the reference
/// does (compaction-llm writes tool-call arguments with `json.dumps(..., ensure_ascii=False)`).
pub fn write_python_json_number(n: &Number, out: &mut String) {
    write_number(n, out);
}

/// Appends a number as `json.dumps` prints what `json.loads` read.
fn write_number(n: &Number, out: &mut String) {
    match classify(n.as_str()) {
        PyNumber::Int(digits) => out.push_str(digits),
        PyNumber::Float(x) => {
            if let Some(special) = non_finite_json(x) {
                out.push_str(special);
            } else {
                python_float_repr(x, out);
            }
        }
    }
}

/// Length of [`write_number`]'s output.
fn number_len(n: &Number) -> usize {
    match classify(n.as_str()) {
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

/// Returns the number of characters [`write_python_json_object`] would append, without building
/// the text (key order does not change the length).
pub fn python_json_object_char_len(map: &Map<String, Value>) -> usize {
    let entries: usize =
        map.iter().map(|(key, value)| python_json_str_len(key) + 2 + python_json_char_len(value)).sum();
    2 + entries + 2 * map.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(input JSON, json.dumps(json.loads(input), sort_keys=True, default=str))`,
    /// expected outputs generated by CPython 3.11.
    const CASES: &[(&str, &str)] = &[
        (r##"null"##, r##"null"##),
        (r##"true"##, r##"true"##),
        (r##"false"##, r##"false"##),
        (r##"0"##, r##"0"##),
        (r##"-0"##, r##"0"##),
        (r##"7"##, r##"7"##),
        (r##"-42"##, r##"-42"##),
        (r##"123456789012345678901234567890"##, r##"123456789012345678901234567890"##),
        (r##"-98765432109876543210987654321098765"##, r##"-98765432109876543210987654321098765"##),
        (r##"18446744073709551616"##, r##"18446744073709551616"##),
        (r##"-9223372036854775809"##, r##"-9223372036854775809"##),
        (r##"0.0"##, r##"0.0"##),
        (r##"-0.0"##, r##"-0.0"##),
        (r##"0e0"##, r##"0.0"##),
        (r##"-0E0"##, r##"-0.0"##),
        (r##"1.0"##, r##"1.0"##),
        (r##"3.0"##, r##"3.0"##),
        (r##"1E2"##, r##"100.0"##),
        (r##"1e5"##, r##"100000.0"##),
        (r##"0.1"##, r##"0.1"##),
        (r##"0.30000000000000004"##, r##"0.30000000000000004"##),
        (r##"123456.789"##, r##"123456.789"##),
        (r##"0.0001"##, r##"0.0001"##),
        (r##"0.00001"##, r##"1e-05"##),
        (r##"1e-05"##, r##"1e-05"##),
        (r##"1.5e-7"##, r##"1.5e-07"##),
        (r##"1e16"##, r##"1e+16"##),
        (r##"1.5e16"##, r##"1.5e+16"##),
        (r##"9999999999999998.0"##, r##"9999999999999998.0"##),
        (r##"12345678901234567.0"##, r##"1.2345678901234568e+16"##),
        (r##"1e21"##, r##"1e+21"##),
        (r##"1e22"##, r##"1e+22"##),
        (r##"1e100"##, r##"1e+100"##),
        (r##"-1e-100"##, r##"-1e-100"##),
        (r##"5e-324"##, r##"5e-324"##),
        (r##"2e-324"##, r##"0.0"##),
        (r##"1e-400"##, r##"0.0"##),
        (r##"1.7976931348623157e308"##, r##"1.7976931348623157e+308"##),
        (r##"1e400"##, r##"Infinity"##),
        (r##"-1e400"##, r##"-Infinity"##),
        (r##"1609006034555203.25"##, r##"1609006034555203.2"##),
        (r##"1609006034555203.75"##, r##"1609006034555203.8"##),
        (r##"2.5"##, r##"2.5"##),
        (r##"100.5e-2"##, r##"1.005"##),
        (r##"0.000123"##, r##"0.000123"##),
        (r##"12345678901234567890.5"##, r##"1.2345678901234567e+19"##),
        (r##""""##, r##""""##),
        (r##""plain ascii ~""##, r##""plain ascii ~""##),
        (r##""quote \" backslash \\ slash /""##, r##""quote \" backslash \\ slash /""##),
        (r##""\n\r\t\b\f""##, r##""\n\r\t\b\f""##),
        (r##""\u0000\u0001\u001f \u007f""##, r##""\u0000\u0001\u001f \u007f""##),
        (r##""café \u00a0 € 中 \ufeff \uffff""##, r##""caf\u00e9 \u00a0 \u20ac \u4e2d \ufeff \uffff""##),
        (r##""😀 𐀀 \udbff\udfff""##, r##""\ud83d\ude00 \ud800\udc00 \udbff\udfff""##),
        (r##""\ud83d\ude00""##, r##""\ud83d\ude00""##),
        (r##""mixed éa😀b\u0007c""##, r##""mixed \u00e9a\ud83d\ude00b\u0007c""##),
        (r##"[]"##, r##"[]"##),
        (r##"{}"##, r##"{}"##),
        (r##"[[]]"##, r##"[[]]"##),
        (r##"{"a": {}}"##, r##"{"a": {}}"##),
        (r##"[1, "two", 3.5, null, true, [false]]"##, r##"[1, "two", 3.5, null, true, [false]]"##),
        (
            r##"{"b": 1, "a": 2, "c": {"z": [], "y": {"k2": 1, "k1": 2}}}"##,
            r##"{"a": 2, "b": 1, "c": {"y": {"k1": 2, "k2": 1}, "z": []}}"##,
        ),
        (
            r##"{"é": 1, "z": 2, "Z": 3, "😀": 4, "\uffff": 5, "": 6, "a b": 7, "_": 8}"##,
            r##"{"": 6, "Z": 3, "_": 8, "a b": 7, "z": 2, "\u00e9": 1, "\uffff": 5, "\ud83d\ude00": 4}"##,
        ),
        (r##"{"ab": 1, "a": 2, "abc": 3, "b": 4}"##, r##"{"a": 2, "ab": 1, "abc": 3, "b": 4}"##),
        (r##"{"a": 1, "a": 2}"##, r##"{"a": 2}"##),
        (
            r##"{"args": {"path": "/tmp/x", "line": 10, "ratio": 0.5, "tags": ["x", "y"]}, "name": "edit"}"##,
            r##"{"args": {"line": 10, "path": "/tmp/x", "ratio": 0.5, "tags": ["x", "y"]}, "name": "edit"}"##,
        ),
        (r##"  [ 1 ,  { "k" : -0 , "j" : -0.0 } ]  "##, r##"[1, {"j": -0.0, "k": 0}]"##),
    ];

    #[test]
    fn matches_python() {
        for &(input, expected) in CASES {
            let value: Value = serde_json::from_str(input).expect(input);
            let mut out = String::new();
            write_python_json(&value, &mut out);
            assert_eq!(out, expected, "input: {input}");
            assert_eq!(python_json_char_len(&value), expected.len(), "{input}");
        }
    }

    #[test]
    fn float_repr() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (9_999_999_999_999_998.0, "9999999999999998.0"),
            (123_456.789, "123456.789"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ];
        for &(x, expected) in cases {
            let mut out = String::new();
            python_float_repr(x, &mut out);
            assert_eq!(out, expected);
        }
    }

    #[test]
    fn numbers_built_from_rust_values() {
        // `serde_json` prints f64s itself under `arbitrary_precision`; the
        // text must still read back as a float.
        let cases = [
            (serde_json::json!(3.0), "3.0"),
            (serde_json::json!(-0.0), "-0.0"),
            (serde_json::json!(1e16), "1e+16"),
            (serde_json::json!(1e-7), "1e-07"),
            (serde_json::json!(0.1), "0.1"),
            (serde_json::json!(u64::MAX), "18446744073709551615"),
            (serde_json::json!(i64::MIN), "-9223372036854775808"),
            (serde_json::json!(f64::NAN), "null"),
        ];
        for (value, expected) in cases {
            let mut out = String::new();
            write_python_json(&value, &mut out);
            assert_eq!(out, expected);
            assert_eq!(python_json_char_len(&value), expected.len());
        }
    }

    #[test]
    fn appends() {
        let mut out = String::from("x=");
        write_python_json_str("a\u{e9}", &mut out);
        assert_eq!(out, "x=\"a\\u00e9\"");
        assert_eq!(python_json_str_len("a\u{e9}"), out.len() - 2);
        assert_eq!(python_json_str_len("\u{1f600}\n"), 16);
    }
}
