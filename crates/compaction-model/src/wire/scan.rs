//! The quick byte scan of JSON text: where a value or a string ends, found from its quotes and
//! brackets without validating it.

/// How deep [`skip_value`] follows nesting; serde_json refuses more than 128 levels, and an
/// element parsed alone sits one level higher than inside its array, so deep input goes the
/// whole-text way, where the limit is the same as ever.
pub(super) const SCAN_DEPTH: usize = 100;

pub(super) fn skip_whitespace(json: &[u8], mut at: usize) -> usize {
    while matches!(json.get(at), Some(b' ' | b'\n' | b'\t' | b'\r')) {
        at += 1;
    }
    at
}

/// The end of the value starting at `at`: a string, a container, or a scalar running up to the
/// next delimiter.
pub(crate) fn skip_value(json: &[u8], at: usize) -> Option<usize> {
    match *json.get(at)? {
        b'"' => skip_string(json, at + 1),
        b'[' | b'{' => {
            let mut depth = 0;
            let mut k = at;
            loop {
                match *json.get(k)? {
                    b'"' => k = skip_string(json, k + 1)?,
                    b'[' | b'{' => {
                        depth += 1;
                        if depth > SCAN_DEPTH {
                            return None;
                        }
                        k += 1;
                    }
                    b']' | b'}' => {
                        depth -= 1;
                        k += 1;
                        if depth == 0 {
                            return Some(k);
                        }
                    }
                    _ => k += 1,
                }
            }
        }
        _ => {
            let len = json[at..]
                .iter()
                .position(|b| matches!(b, b',' | b']' | b'}' | b' ' | b'\n' | b'\t' | b'\r'))
                .unwrap_or(json.len() - at);
            (len > 0).then_some(at + len)
        }
    }
}

/// The index after the closing quote of the string whose contents start at `at`.
pub(crate) fn skip_string(json: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at += find_special(json.get(at..)?, false)?;
        if json[at] == b'"' {
            return Some(at + 1);
        }
        at += 2;
    }
}

/// The position of the first `"` or `\\` in `bytes` (or, with `control`, the first byte below
/// 0x20), looking at eight bytes at a time: strings are most of a transcript.
pub(super) fn find_special(bytes: &[u8], control: bool) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` is flagged when it is zero, or below `ONES * n` for the third test. A
    // borrow can flag bytes after the first true hit, never before it, so the lowest flag is
    // exact.
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x;
    let mut at = 0;
    while let Some(word) = bytes.get(at..at + 8) {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        let word = u64::from_le_bytes(eight);
        let mut hits = below(word ^ (ONES * u64::from(b'"')), 1) | below(word ^ (ONES * u64::from(b'\\')), 1);
        if control {
            hits |= below(word, 0x20);
        }
        let hits = hits & HIGH;
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let special = |b: &u8| *b == b'"' || *b == b'\\' || (control && *b < 0x20);
    bytes[at..].iter().position(special).map(|k| at + k)
}
