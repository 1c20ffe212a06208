//! A text as serde_json spells it between a JSON string's quotes (its canonical spelling),
//! handed over in blocks of a fixed size: what hashing a text needs to give the same hash
//! however the text is held (owned, or still in a JSON source, spelled with any escapes) without
//! decoding it, for a hasher whose result depends on how its input is cut into writes.
//!
//! A text left in its source whose spelling is already the canonical one (most of what JSON
//! writers produce: serde_json, JavaScript's `JSON.stringify`, Python's `json.dumps` with
//! `ensure_ascii=False`) is handed over as it lies there; any other is decoded and spelled again
//! as it goes.

/// The size of the blocks, but the last.
pub(crate) const BLOCK: usize = 512;

/// Gathers bytes into blocks of [`BLOCK`] bytes for `block`, taking whole blocks from where they
/// lie when nothing is gathered.
pub(crate) struct Blocks<F: FnMut(&[u8])> {
    gathered: [u8; BLOCK],
    len: usize,
    block: F,
}

impl<F: FnMut(&[u8])> Blocks<F> {
    pub(crate) fn new(block: F) -> Self {
        Blocks { gathered: [0; BLOCK], len: 0, block }
    }

    /// Adds `bytes` as they are.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        if self.len > 0 {
            let take = bytes.len().min(BLOCK - self.len);
            self.gathered[self.len..self.len + take].copy_from_slice(&bytes[..take]);
            self.len += take;
            bytes = &bytes[take..];
            if self.len < BLOCK {
                return;
            }
            (self.block)(&self.gathered);
            self.len = 0;
        }
        let mut whole = bytes.chunks_exact(BLOCK);
        whole.by_ref().for_each(|block| (self.block)(block));
        let rest = whole.remainder();
        self.gathered[..rest.len()].copy_from_slice(rest);
        self.len = rest.len();
    }

    /// Adds the UTF-8 bytes `text` as serde_json escapes them inside a string: `"` and `\`
    /// with a backslash, the control characters as `\b`, `\t`, `\n`, `\f`, `\r` or `\u00xx`
    /// (lowercase), everything else as it is.
    pub(crate) fn push_escaped(&mut self, mut text: &[u8]) {
        while let Some(at) = text.iter().position(|&b| b < 0x20 || b == b'"' || b == b'\\') {
            self.push(&text[..at]);
            let byte = text[at];
            match byte {
                b'"' | b'\\' => self.push(&[b'\\', byte]),
                0x08 => self.push(b"\\b"),
                b'\t' => self.push(b"\\t"),
                b'\n' => self.push(b"\\n"),
                0x0c => self.push(b"\\f"),
                b'\r' => self.push(b"\\r"),
                _ => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.push(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[usize::from(byte >> 4)],
                        HEX[usize::from(byte & 0xf)],
                    ]);
                }
            }
            text = &text[at + 1..];
        }
        self.push(text);
    }

    /// Hands over what is gathered, the last block (shorter than [`BLOCK`], possibly empty).
    pub(crate) fn finish(mut self) {
        (self.block)(&self.gathered[..self.len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block handed over by `fill`, in order, and their lengths.
    fn blocks(fill: impl FnOnce(&mut Blocks<&mut dyn FnMut(&[u8])>)) -> (Vec<u8>, Vec<usize>) {
        let mut all = Vec::new();
        let mut lengths = Vec::new();
        let mut take = |block: &[u8]| {
            all.extend_from_slice(block);
            lengths.push(block.len());
        };
        let mut gathered = Blocks::new(&mut take as &mut dyn FnMut(&[u8]));
        fill(&mut gathered);
        gathered.finish();
        (all, lengths)
    }

    #[test]
    fn blocks_are_cut_alike_however_the_bytes_come() {
        let bytes: Vec<u8> = (0..3_000u32).map(|n| (n % 251) as u8).collect();
        let (whole, cuts) = blocks(|b| b.push(&bytes));
        assert_eq!(whole, bytes);
        assert_eq!(cuts, [512, 512, 512, 512, 512, 440]);
        for piece in [1, 7, 511, 512, 513, 1_000] {
            let (again, again_cuts) = blocks(|b| bytes.chunks(piece).for_each(|p| b.push(p)));
            assert_eq!((again, again_cuts), (whole.clone(), cuts.clone()), "{piece}");
        }
        assert_eq!(blocks(|_| {}), (Vec::new(), vec![0]));
    }

    #[test]
    fn escaping_and_the_canonical_check_agree_with_serde_json() {
        let mut texts: Vec<String> =
            (0u32..0x80).map(|c| char::from_u32(c).expect("a char").to_string()).collect();
        texts.extend(["déjà \"vu\"\n\t\\ 🎉 \u{7f}\u{1f}/".to_owned(), String::new(), "a/b".to_owned()]);
        for text in &texts {
            let spelled = serde_json::to_string(text).expect("a JSON string");
            let raw = &spelled.as_bytes()[1..spelled.len() - 1];
            assert_eq!(blocks(|b| b.push_escaped(text.as_bytes())).0, raw, "{text:?}");
            assert!(compaction_json::string::is_canonical(raw), "{spelled}");
        }
    }
}
