//! Crossing a JSON value without building it, checked as serde_json checks a value it is told to
//! ignore, and faster: most of a log is strings with an escape every few dozen bytes, which
//! serde_json crosses by stopping at each escape and starting over, where this takes eight bytes
//! at a time and handles the escape in line.
//!
//! The check is at least as strict as serde_json's: whatever this accepts, serde_json accepts
//! too (its tests hold the two side by side on mutated text). It assumes the text is UTF-8,
//! which its caller has checked.
//!
//! (Crossing strings from one quote or backslash to the next with `memchr`, after checking the
//! text once for control characters, measured slower: an escape comes every few dozen bytes in
//! a tool's output, and each search costs its setting up.)

/// Deeper than this (counted from the value crossed) is left to serde_json, whose own limit
/// counts from the top of the text.
const DEPTH: usize = 100;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Where the JSON value starting at byte `at` of `bytes` ends (just past it); `None` when it is
/// not valid JSON as serde_json reads it, nested deeper than [`DEPTH`], or cut short.
pub(crate) fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    // Per open container, whether it is an object; a container's members are crossed in this
    // loop, not by recursion, so depth costs no stack.
    let mut open: Vec<bool> = Vec::new();
    let mut at = at;
    loop {
        // A value.
        at = match *bytes.get(at)? {
            b'"' => string_end(bytes, at + 1)?,
            b'{' | b'[' => {
                let object = bytes[at] == b'{';
                if open.len() == DEPTH {
                    return None;
                }
                at = whitespace(bytes, at + 1);
                if bytes.get(at) == Some(if object { &b'}' } else { &b']' }) {
                    at + 1
                } else {
                    open.push(object);
                    if object {
                        at = key_end(bytes, at)?;
                    }
                    continue;
                }
            }
            b't' => literal(bytes, at, b"true")?,
            b'f' => literal(bytes, at, b"false")?,
            b'n' => literal(bytes, at, b"null")?,
            b'-' | b'0'..=b'9' => number_end(bytes, at)?,
            _ => return None,
        };
        // After a value: the next member, or the end of containers.
        loop {
            let Some(&object) = open.last() else { return Some(at) };
            at = whitespace(bytes, at);
            match *bytes.get(at)? {
                b',' => {
                    at = whitespace(bytes, at + 1);
                    if object {
                        at = key_end(bytes, at)?;
                    }
                    break;
                }
                b'}' if object => {}
                b']' if !object => {}
                _ => return None,
            }
            open.pop();
            at += 1;
        }
    }
}

/// Past a key, its colon and the whitespace after it: where its value starts.
fn key_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let at = whitespace(bytes, string_end(bytes, at + 1)?);
    (bytes.get(at) == Some(&b':')).then(|| whitespace(bytes, at + 1))
}

/// Past JSON whitespace.
pub(crate) fn whitespace(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\n' | b'\t' | b'\r')) {
        at += 1;
    }
    at
}

pub(crate) fn literal(bytes: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    (bytes.get(at..at + word.len())? == word).then_some(at + word.len())
}

/// Past a number: `-`, then `0` or digits not starting with `0`, then a fraction and an
/// exponent, each with at least one digit.
pub(crate) fn number_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    let digits =
        |at: usize| bytes.get(at..).map_or(0, |rest| rest.iter().take_while(|b| b.is_ascii_digit()).count());
    if bytes.get(at) == Some(&b'-') {
        at += 1;
    }
    match bytes.get(at)? {
        // One leading zero, never followed by a digit.
        b'0' if bytes.get(at + 1).is_some_and(u8::is_ascii_digit) => return None,
        b'0' => at += 1,
        b'1'..=b'9' => at += digits(at),
        _ => return None,
    }
    if bytes.get(at) == Some(&b'.') {
        let n = digits(at + 1);
        if n == 0 {
            return None;
        }
        at += 1 + n;
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let n = digits(at);
        if n == 0 {
            return None;
        }
        at += n;
    }
    Some(at)
}

/// Past the closing quote of the string whose contents start at `at`: no control character in
/// it, every escape one JSON has (`\u` with four hex digits, which serde_json does not pair when
/// it ignores a string).
pub(crate) fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at = next_stop(bytes, at);
        match *bytes.get(at)? {
            b'"' => return Some(at + 1),
            b'\\' => at = escape_end(bytes, at)?,
            0x00..=0x1F => return None,
            // The last few bytes, which the eight at a time did not cover.
            _ => at += 1,
        }
    }
}

/// The first quote, backslash or control character at or after `at`, looked for eight bytes at
/// a time; or where fewer than eight bytes are left, which the caller looks at one by one.
pub(crate) fn next_stop(bytes: &[u8], mut at: usize) -> usize {
    while let Some(eight) = bytes.get(at..at + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(eight);
        let stops = stops(u64::from_le_bytes(word));
        if stops != 0 {
            return at + (stops.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at
}

/// Past the escape whose backslash is at `at`; `None` when it is not an escape JSON has.
fn escape_end(bytes: &[u8], at: usize) -> Option<usize> {
    Some(
        at + match *bytes.get(at + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
            b'u' if hex4(bytes, at + 2).is_some() => 6,
            _ => return None,
        },
    )
}

/// The code unit of the four hex digits at `at` (a `\u` escape's); `None` when they are not
/// four hex digits.
pub(crate) fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits.iter().try_fold(0, |n, &d| Some(n * 16 + char::from(d).to_digit(16)?))
}

/// The bytes of a word that stop a string's contents (`"`, `\`, control characters), each
/// flagged by its high bit; only the lowest flag is exact (a borrow can flag bytes after it).
fn stops(x: u64) -> u64 {
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x;
    (below(x ^ (ONES * u64::from(b'"')), 1) | below(x ^ (ONES * u64::from(b'\\')), 1) | below(x, 0x20)) & HIGH
}

#[cfg(test)]
mod tests {
    use serde::de::IgnoredAny;

    use super::value_end;

    /// What serde_json says of `text` as one value to ignore, and where it ends.
    fn serde_end(text: &[u8]) -> Option<usize> {
        let mut stream = serde_json::Deserializer::from_slice(text).into_iter::<IgnoredAny>();
        stream.next()?.ok()?;
        Some(stream.byte_offset())
    }

    /// JSON at random, then perhaps spoiled at one place: every kind of value, strings with
    /// escapes of every kind and characters that are not ASCII, nesting, whitespace.
    fn random_text(seed: u64) -> Vec<u8> {
        fn value(next: &mut dyn FnMut(usize) -> usize, depth: usize, out: &mut Vec<u8>) {
            const LEAVES: [&str; 14] = [
                "0",
                "-0",
                "12",
                "1.5",
                "1e9",
                "-2.5E-3",
                "true",
                "false",
                "null",
                r#""""#,
                r#""a\"b\\c\/d\n\t\r\b\f""#,
                r#""\u00e9\uD83D\uDE00\udc00""#,
                "\"é日本😀 text of some length\"",
                r#""xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nyyyyyyyy""#,
            ];
            let space = |next: &mut dyn FnMut(usize) -> usize, out: &mut Vec<u8>| {
                out.extend_from_slice([&b""[..], b" ", b"\n  ", b"\t"][next(4)]);
            };
            match (depth, next(3)) {
                (4.., _) | (_, 0) => out.extend_from_slice(LEAVES[next(LEAVES.len())].as_bytes()),
                (_, 1) => {
                    out.push(b'[');
                    for k in 0..next(4) {
                        if k > 0 {
                            out.push(b',');
                        }
                        space(next, out);
                        value(next, depth + 1, out);
                        space(next, out);
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    for k in 0..next(4) {
                        if k > 0 {
                            out.push(b',');
                        }
                        space(next, out);
                        out.extend_from_slice(["\"k\"", "\"a\\nb\"", "\"ключ\""][next(3)].as_bytes());
                        space(next, out);
                        out.push(b':');
                        space(next, out);
                        value(next, depth + 1, out);
                    }
                    out.push(b'}');
                }
            }
        }
        let mut state = seed;
        let mut next = move |n: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % n
        };
        let mut text = Vec::new();
        value(&mut next, 0, &mut text);
        // Spoiled in two cases out of three: a byte put in, taken out or changed.
        const BYTES: &[u8] = b"\"\\,:{}[]0-.eE+ \x01\x1fatfnu/x\n";
        let at = next(text.len() + 1);
        match next(6) {
            0 | 1 => text.insert(at, BYTES[next(BYTES.len())]),
            2 | 3 if at < text.len() => {
                text.remove(at);
            }
            4 if at < text.len() => text[at] = BYTES[next(BYTES.len())],
            _ => {}
        }
        // Text cut on a character boundary is still UTF-8, as the caller has checked.
        if std::str::from_utf8(&text).is_err() {
            text.retain(u8::is_ascii);
        }
        text
    }

    #[test]
    fn what_is_crossed_is_what_serde_json_accepts() {
        let (mut valid, mut invalid) = (0, 0);
        for seed in 0..20_000 {
            let text = random_text(seed);
            let ours = value_end(&text, 0);
            let theirs = serde_end(&text);
            match ours {
                // A number or literal alone, followed by what cannot follow it: serde_json
                // looks at the byte after it here, where in a container the container refuses
                // that byte.
                Some(end)
                    if theirs.is_none()
                        && matches!(text[0], b'-' | b'0'..=b'9' | b't' | b'f' | b'n')
                        && !matches!(text.get(end), None | Some(b',' | b']' | b'}' | b' ' | b'\n')) => {}
                // Never more lenient than serde_json, and ending where it ends.
                Some(end) => assert_eq!(Some(end), theirs, "{}", String::from_utf8_lossy(&text)),
                None => invalid += 1,
            }
            if theirs.is_some() {
                valid += 1;
                // Nor stricter, on what serde_json accepts (but for numbers serde_json reads
                // past, which a container would refuse after them anyway).
                if text.first().is_some_and(|b| matches!(b, b'{' | b'[' | b'"')) {
                    assert!(ours.is_some(), "{}", String::from_utf8_lossy(&text));
                }
            }
        }
        assert!(valid > 5_000 && invalid > 5_000, "{valid} {invalid}");
    }

    #[test]
    fn nesting_and_ends() {
        assert_eq!(value_end(br#"{"a": [1, {"b": null}], "c": "d"} tail"#, 0), Some(33));
        assert_eq!(value_end(b"[[[]]]", 0), Some(6));
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(value_end(deep.as_bytes(), 0), Some(200));
        let deeper = format!("{}{}", "[".repeat(101), "]".repeat(101));
        assert_eq!(value_end(deeper.as_bytes(), 0), None);
        for bad in [
            &br#"{"a" 1}"#[..],
            b"[1,]",
            b"{,}",
            b"\"\x01\"",
            b"\"\\x\"",
            b"\"\\u12g4\"",
            b"01",
            b"1.",
            b"-",
            b"tru",
        ] {
            assert_eq!(value_end(bad, 0), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
