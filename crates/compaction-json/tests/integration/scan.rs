//! The checked scan held beside serde_json: on random and spoiled JSON it accepts only what
//! serde_json accepts, and ends where serde_json ends.

use serde::de::IgnoredAny;

use compaction_json::scan::value_end;

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
