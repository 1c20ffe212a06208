//! OpenAI's byte-pair encodings through tiktoken-rs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;

use compaction_model::{Message, ToolSpec};
use tiktoken_rs::CoreBPE;

use crate::counter::{rewritten_at, Additive, Counts, Measure, TokenCounter};
use crate::error::Error;
use crate::parallel;
use crate::render::{render_tools, rendered_message, NonText};

/// A tiktoken encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, o-series and later models.
    O200kBase,
    /// GPT-4 and GPT-3.5.
    Cl100kBase,
    /// Codex and text-davinci-002/003.
    P50kBase,
    /// GPT-3 (davinci) and GPT-2.
    R50kBase,
}

impl Encoding {
    /// The encoding's name, such as `o200k_base`.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::P50kBase => "p50k_base",
            Encoding::R50kBase => "r50k_base",
        }
    }

    /// An encoding by its name, or the encoding a model name maps to (`gpt-4o` → `o200k_base`).
    ///
    /// # Errors
    ///
    /// When `name` is neither a known encoding nor a model that maps to one.
    pub fn from_name_or_model(name: &str) -> Result<Encoding, Error> {
        use tiktoken_rs::tokenizer::Tokenizer;
        match name {
            "o200k_base" => return Ok(Encoding::O200kBase),
            "cl100k_base" => return Ok(Encoding::Cl100kBase),
            "p50k_base" => return Ok(Encoding::P50kBase),
            "r50k_base" | "gpt2" => return Ok(Encoding::R50kBase),
            _ => {}
        }
        // Special tokens aside, the variants below share their base encoding's ordinary tokens.
        match tiktoken_rs::tokenizer::get_tokenizer(name) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => Ok(Encoding::O200kBase),
            Some(Tokenizer::Cl100kBase) => Ok(Encoding::Cl100kBase),
            Some(Tokenizer::P50kBase | Tokenizer::P50kEdit) => Ok(Encoding::P50kBase),
            Some(Tokenizer::R50kBase | Tokenizer::Gpt2) => Ok(Encoding::R50kBase),
            #[allow(unreachable_patterns)]
            _ => Err(Error::UnknownEncoding(name.to_owned())),
        }
    }

    fn bpe(self) -> Bpe {
        match self {
            Encoding::O200kBase => Bpe::Fast(&O200K_BASE),
            Encoding::Cl100kBase => Bpe::Fast(&CL100K_BASE),
            Encoding::P50kBase => Bpe::Tiktoken(tiktoken_rs::p50k_base_singleton()),
            Encoding::R50kBase => Bpe::Tiktoken(tiktoken_rs::r50k_base_singleton()),
        }
    }
}

// The pre-tokenization patterns bpe-openai 0.3.2 gives these encodings (data, kept in sync with
// it): tiktoken's patterns, with the negative look-ahead `\s+(?!\S)` written as a second
// pattern whose last character is a look-ahead.
const O200K_PATTERNS: [&str; 6] = [
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "\\p{N}{1,3}",
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
    "\\s*[\\r\\n]+",
    "\\s+$",
];
const CL100K_PATTERN: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$";
const LOOKAHEAD_PATTERN: &str = "\\s+\\s";
const WHITESPACE_PATTERN: &str = "\\s+";

static O200K_BASE: LazyLock<Fast> = LazyLock::new(|| {
    let first = O200K_PATTERNS.join("|");
    Fast::new(include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.bpe")), &first, 0)
});

static CL100K_BASE: LazyLock<Fast> = LazyLock::new(|| {
    Fast::new(include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.bpe")), CL100K_PATTERN, 1)
});

/// The most an encoding build.rs made may take decompressed: twice o200k_base's.
const MAX_ENCODING_BYTES: usize = 32 << 20;

/// The index of the look-ahead pattern among the pre-tokenization's patterns (see [`Fast::new`]).
const LOOKAHEAD_INDEX: usize = 1;

/// An encoding bpe-openai counts: its tokenizer, and its pre-tokenization as a lazy DFA that
/// each thread searches with a cache of its own ([`PerThread`]).
///
/// bpe-openai's own pre-tokenizer takes a cache from a pool shared by the threads for each piece
/// it finds (a piece is about four bytes), and encodes each piece afresh; here a thread keeps its
/// cache across pieces and texts, and remembers the counts of the short pieces it has met.
struct Fast {
    tokenizer: bpe_openai::Tokenizer,
    pieces: regex_automata::hybrid::dfa::DFA,
    /// This encoding's place in each thread's [`PerThread`] states.
    slot: usize,
}

impl Fast {
    /// The encoding build.rs made (see there), with its pre-tokenization, whose patterns are
    /// `first_pattern`, [`LOOKAHEAD_PATTERN`] and [`WHITESPACE_PATTERN`], in that order
    /// (bpe-openai's), matched leftmost-first.
    fn new(compressed: &[u8], first_pattern: &str, slot: usize) -> Fast {
        // The encoding was made by this crate's build and cannot be other than valid. Its zstd
        // frame records its size (16.4 MB for o200k_base), which is what gets allocated; the
        // capacity is only the most that would be.
        let bytes =
            zstd::bulk::decompress(compressed, MAX_ENCODING_BYTES).expect("build.rs compressed the encoding");
        let bpe = rmp_serde::from_slice(&bytes).expect("build.rs serialized the encoding");
        let patterns = [(first_pattern, false), (LOOKAHEAD_PATTERN, true), (WHITESPACE_PATTERN, false)];
        let tokenizer =
            bpe_openai::Tokenizer::new_lookahead(bpe, &patterns, false).expect("the patterns are valid");
        use regex_automata::hybrid::dfa::DFA;
        let pieces = DFA::builder()
            .configure(DFA::config().match_kind(regex_automata::MatchKind::LeftmostFirst))
            .build_many(&[first_pattern, LOOKAHEAD_PATTERN, WHITESPACE_PATTERN])
            .expect("the patterns are valid");
        Fast { tokenizer, pieces, slot }
    }

    /// Tokens of `text`: as bpe-openai's `Tokenizer::count`, piece by piece.
    fn count(&self, text: &str) -> usize {
        let mut fresh = None;
        let counted = PER_THREAD.try_with(|states| {
            let Ok(mut states) = states.try_borrow_mut() else {
                return self.count_with(fresh.get_or_insert_with(|| PerThread::new(&self.pieces)), text);
            };
            match states.get_mut(self.slot) {
                Some(state) => {
                    let state = state.get_or_insert_with(|| PerThread::new(&self.pieces));
                    self.count_with(state, text)
                }
                None => self.count_with(fresh.get_or_insert_with(|| PerThread::new(&self.pieces)), text),
            }
        });
        // The thread's states are gone only while the thread ends.
        counted.unwrap_or_else(|_| self.count_with(&mut PerThread::new(&self.pieces), text))
    }

    /// Tokens of `text`, its pieces found (and the short ones remembered) with `state`.
    ///
    /// The pieces are bpe-openai's: each the leftmost-first match of the patterns anchored where
    /// the last one ended, less its last character when the look-ahead pattern matched; no
    /// pattern looks behind, so a search from an offset of `text` finds what a search of the
    /// text from there finds.
    fn count_with(&self, state: &mut PerThread, text: &str) -> usize {
        use regex_automata::{Anchored, Input};
        let bytes = text.as_bytes();
        let mut total = 0;
        let mut at = 0;
        while at < bytes.len() {
            let input = Input::new(text).range(at..).anchored(Anchored::Yes);
            let found = match self.pieces.try_search_fwd(&mut state.cache, &input) {
                Ok(Some(found)) => found,
                // Every character starts a piece; bpe-openai's pre-tokenizer ends where none does.
                Ok(None) => break,
                // The lazy DFA gave up (it does not with these patterns): bpe-openai's own search.
                Err(_) => return total + text.get(at..).map_or(0, |rest| self.tokenizer.count(rest)),
            };
            let mut end = found.offset();
            if found.pattern().as_usize() == LOOKAHEAD_INDEX {
                // Less the look-ahead's character: its continuation bytes and its first byte.
                let piece = bytes.get(at..end).unwrap_or_default();
                end -= piece.iter().rev().take_while(|byte| **byte & 0xC0 == 0x80).count() + 1;
            }
            let Some(piece) = bytes.get(at..end).filter(|piece| !piece.is_empty()) else { break };
            total += state.piece_tokens(&self.tokenizer.bpe, piece);
            at = end;
        }
        total
    }
}

/// The longest piece whose count a thread remembers, in bytes.
const REMEMBERED_PIECE: usize = 64;

/// How many piece counts a thread remembers at most (a few megabytes at most): the first ones it
/// meets, which in text are mostly the common words.
const REMEMBERED_PIECES: usize = 1 << 15;

/// What a thread keeps for counting with one encoding: the lazy DFA's cache, and the counts of
/// the short pieces it has met (a piece's count is a function of its bytes alone), looked up by
/// the piece's bytes as they lie in the text.
struct PerThread {
    cache: regex_automata::hybrid::dfa::Cache,
    remembered: HashMap<Box<[u8]>, u8, foldhash::fast::RandomState>,
}

impl PerThread {
    fn new(pieces: &regex_automata::hybrid::dfa::DFA) -> PerThread {
        PerThread { cache: pieces.create_cache(), remembered: HashMap::default() }
    }

    /// Tokens of one piece.
    fn piece_tokens(
        &mut self,
        bpe: &bpe_openai::byte_pair_encoding::BytePairEncoding,
        piece: &[u8],
    ) -> usize {
        if piece.len() > REMEMBERED_PIECE {
            return bpe.count(piece);
        }
        if let Some(&tokens) = self.remembered.get(piece) {
            return usize::from(tokens);
        }
        let tokens = bpe.count(piece);
        // A piece of at most 64 bytes has at most 64 tokens.
        if let (Ok(small), true) = (u8::try_from(tokens), self.remembered.len() < REMEMBERED_PIECES) {
            self.remembered.insert(piece.into(), small);
        }
        tokens
    }
}

thread_local! {
    /// Each thread's [`PerThread`] state for each encoding [`Fast`] counts (by its `slot`).
    static PER_THREAD: RefCell<[Option<PerThread>; 2]> = const { RefCell::new([None, None]) };
}

/// The encoder behind an encoding: bpe-openai's encoding, counted as [`Fast`] counts, where it
/// has the encoding (it gives tiktoken's counts, faster), tiktoken-rs otherwise.
#[derive(Clone, Copy)]
enum Bpe {
    Fast(&'static Fast),
    Tiktoken(&'static CoreBPE),
}

impl Bpe {
    fn count(self, text: &str) -> usize {
        match self {
            Bpe::Fast(fast) => fast.count(text),
            Bpe::Tiktoken(bpe) => bpe.encode_ordinary(text).len(),
        }
    }
}

/// Counts tokens with one of OpenAI's encodings, as Haystack's `TiktokenCounter` does.
///
/// Text that contains special-token strings such as `<|endoftext|>` is counted as ordinary text
/// (the reference raises on it; a transcript that mentions such a string is not an error).
pub struct TiktokenCounter {
    encoding: Encoding,
    bpe: Bpe,
    tokens_per_image: usize,
    tokens_per_file: usize,
    bracket_tokens: usize,
}

impl std::fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiktokenCounter")
            .field("encoding", &self.encoding)
            .field("tokens_per_image", &self.tokens_per_image)
            .field("tokens_per_file", &self.tokens_per_file)
            .finish()
    }
}

impl TiktokenCounter {
    /// A counter for an encoding name or a model name, with the default image (85) and file
    /// (1000) charges.
    ///
    /// # Errors
    ///
    /// When `encoding_or_model` is neither a known encoding nor a model that maps to one.
    pub fn new(encoding_or_model: &str) -> Result<Self, Error> {
        Ok(Self::from_encoding(Encoding::from_name_or_model(encoding_or_model)?))
    }

    /// A counter for `encoding` with the default charges.
    pub fn from_encoding(encoding: Encoding) -> Self {
        let bpe = encoding.bpe();
        let bracket_tokens = bpe.count("[");
        TiktokenCounter { encoding, bpe, tokens_per_image: 85, tokens_per_file: 1000, bracket_tokens }
    }

    /// The same counter charging `tokens_per_image` per image and `tokens_per_file` per file, as
    /// every counter's `with_charges` does.
    #[must_use]
    pub fn with_charges(mut self, tokens_per_image: usize, tokens_per_file: usize) -> Self {
        self.tokens_per_image = tokens_per_image;
        self.tokens_per_file = tokens_per_file;
        self
    }

    /// The encoding counted with.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Tokens of a piece of text, special-token strings counted as ordinary text.
    pub fn count_text(&self, text: &str) -> usize {
        // Only text with a `0xF4` byte can hold the stand-in of a lone surrogate.
        match text.as_bytes().contains(&0xF4).then(|| as_tiktoken_encodes(text)).flatten() {
            Some(text) => self.bpe.count(&text),
            None => self.bpe.count(text),
        }
    }
}

/// `text` as Python's tiktoken encodes it when it holds the stand-ins of lone surrogates (see
/// `compaction_model::lone_surrogate`); `None` when it holds none. tiktoken cannot encode a
/// surrogate as UTF-8, so it passes the text through UTF-16 (`surrogatepass`) and back
/// (`replace`): a high surrogate followed by a low one becomes the character they encode, and
/// every other surrogate U+FFFD.
fn as_tiktoken_encodes(text: &str) -> Option<String> {
    use compaction_model::lone_surrogate;
    if !text.chars().any(|c| lone_surrogate(c).is_some()) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let Some(unit) = lone_surrogate(c) else {
            out.push(c);
            continue;
        };
        let low =
            chars.peek().copied().and_then(lone_surrogate).filter(|low| (0xDC00..=0xDFFF).contains(low));
        match low {
            Some(low) if unit < 0xDC00 => {
                chars.next();
                let code = 0x1_0000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            _ => out.push(char::REPLACEMENT_CHARACTER),
        }
    }
    Some(out)
}

/// What follows a message that is not the last: the joining newline and the `[` that opens
/// every rendered message.
///
/// A message is counted together with these two characters, minus the tokens of the `[`,
/// because how a message's trailing whitespace splits into pieces depends on whether a
/// non-space character follows the newline (p50k's `\s+(?!\S)` looks ahead).
const NEXT_MESSAGE_START: &str = "\n[";

/// The last position `s` in `text` at which every encoding's pre-tokenizer is certain to start a
/// new piece, whatever follows the end of `text`; 0 when there is none.
///
/// Two kinds of position qualify, for o200k_base, cl100k_base, p50k_base and r50k_base alike:
///
/// - right after a newline, before a character that is neither whitespace nor `/` (no piece
///   pattern carries a newline into a following non-space character; o200k's punctuation
///   pattern may take a `/` after newlines, hence the exclusion);
/// - between an ASCII letter and a space followed by an ASCII letter (a word piece never takes
///   a trailing space; the next word's piece takes its leading one).
///
/// Pieces are matched left to right and no pattern looks behind, so the pieces of `text` from
/// `s` on are exactly the pieces of `text[s..]` on its own, and appending to `text` cannot change
/// the pieces before `s`.
fn last_split_point(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut i = bytes.len();
    while i > 1 {
        i -= 1;
        let (before, at) = (bytes[i - 1], bytes[i]);
        let after_newline = before == b'\n' && !at.is_ascii_whitespace() && at != b'/';
        let between_words = before.is_ascii_alphabetic()
            && at == b' '
            && bytes.get(i + 1).is_some_and(u8::is_ascii_alphabetic);
        if after_newline || between_words {
            return i;
        }
    }
    0
}

impl TiktokenCounter {
    /// Tokens of `text` on its own, and of `text` followed by the newline that joins it to the
    /// next message, from a single encoding of `text` plus a re-encoding of its last few pieces.
    fn own_and_joined(&self, text: &str) -> (usize, usize) {
        let own = self.count_text(text);
        let split = last_split_point(text);
        let tail = &text[split..];
        let mut joined_tail = String::with_capacity(tail.len() + 1);
        joined_tail.push_str(tail);
        joined_tail.push_str(NEXT_MESSAGE_START);
        let tail_own = if split == 0 { own } else { self.count_text(tail) };
        (own, own - tail_own + self.count_text(&joined_tail) - self.next_start_tokens())
    }

    /// Tokens of the `[` of [`NEXT_MESSAGE_START`]: a piece of its own after the newline.
    fn next_start_tokens(&self) -> usize {
        self.bracket_tokens
    }
}

impl TokenCounter for TiktokenCounter {
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, Error> {
        if messages.is_empty() && tools.is_empty() {
            return Ok(0);
        }
        // The conversation is the messages joined by newlines, with the tool schemas right
        // after the last one. Every rendered message starts with `[` after a newline, where a new
        // piece always begins, so each message (with its joining newline) counts on its own.
        // The schemas follow the last message without a newline, so they count with it.
        let Some((last, rest)) = messages.split_last() else {
            let mut text = String::new();
            render_tools(tools, &mut text);
            return Ok(self.count_text(&text));
        };
        let before: Measure =
            parallel::map(rest, parallel::work_estimate(rest), |message| self.measure_joined(message))
                .into_iter()
                .sum();
        Ok(self.count_after(before, last, tools))
    }

    fn describe(&self) -> String {
        format!("tiktoken:{}", self.encoding.name())
    }

    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, Error> {
        Ok(self.count_each_measured(messages).0)
    }

    fn additive(&self) -> Option<&dyn Additive> {
        Some(self)
    }

    // As the default, with the measuring spread over the cores as `try_count` spreads it.
    fn try_count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> Result<usize, Error> {
        if messages.is_empty() {
            return self.try_count(messages, tools);
        }
        Ok(self.count_rewritten(messages, rewritten, tools))
    }
}

impl Additive for TiktokenCounter {
    fn measure_joined(&self, message: &Message) -> Measure {
        let mut text = rendered_message(message);
        text.push_str(NEXT_MESSAGE_START);
        let non_text = NonText::of_message(message);
        Measure {
            text: self.count_text(&text) - self.next_start_tokens(),
            images: non_text.images,
            files: non_text.files,
        }
    }

    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        let mut tail = rendered_message(last);
        render_tools(tools, &mut tail);
        let non_text = NonText { images: before.images, files: before.files } + NonText::of_message(last);
        before.text + self.count_text(&tail) + non_text.tokens(self.tokens_per_image, self.tokens_per_file)
    }

    fn count_each_measured(&self, messages: &[Message]) -> (Counts, Option<Vec<Measure>>) {
        let Some(last_index) = messages.len().checked_sub(1) else {
            return (Counts::default(), Some(Vec::new()));
        };
        let indexed: Vec<(usize, &Message)> = messages.iter().enumerate().collect();
        // Each message's own count, its joined measure (its own for the last), and its images
        // and files.
        let measured: Vec<(usize, Measure)> =
            parallel::map(&indexed, parallel::work_estimate(messages), |&(index, message)| {
                let text = rendered_message(message);
                let kinds = NonText::of_message(message);
                let (own, joined) = match index == last_index {
                    true => {
                        let own = self.count_text(&text);
                        (own, own)
                    }
                    false => self.own_and_joined(&text),
                };
                (own, Measure { text: joined, images: kinds.images, files: kinds.files })
            });
        let non_text = |m: &Measure| {
            NonText { images: m.images, files: m.files }.tokens(self.tokens_per_image, self.tokens_per_file)
        };
        let total = measured.iter().map(|(_, m)| m.text + non_text(m)).sum();
        let each = measured.iter().map(|(own, m)| own + non_text(m)).collect();
        let measures = measured[..last_index].iter().map(|(_, m)| *m).collect();
        (Counts { total, each }, Some(measures))
    }

    // As the default, with the measuring spread over the cores as `try_count` spreads it.
    fn count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> usize {
        let Some(last) = messages.len().checked_sub(1) else {
            return 0;
        };
        let indices: Vec<usize> = (0..last).collect();
        let before: Measure = parallel::map(&indices, parallel::work_estimate(&messages[..last]), |&index| {
            self.measure_joined(rewritten_at(messages, rewritten, index))
        })
        .into_iter()
        .sum();
        self.count_after(before, rewritten_at(messages, rewritten, last), tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encodings build.rs makes count as bpe-openai's prebuilt ones and as tiktoken-rs do.
    #[test]
    fn built_encodings_count_as_the_originals() {
        let samples = [
            "plain words, and more words.\n\n    fn main() { println!(\"{}\", 42); }\n",
            "日本語のテキスト、中文文本，한국어 텍스트 — café naïve Straße 😀🚀 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠜎𠜱",
            "  \t\r\n  trailing   ",
            "'s 've 'LL numbers 1234567 3.14159 1e-5 /path/to/file.rs:12:5",
            "<|endoftext|> is ordinary text here",
        ];
        let pairs = [
            (&*O200K_BASE, bpe_openai::o200k_base(), tiktoken_rs::o200k_base_singleton()),
            (&*CL100K_BASE, bpe_openai::cl100k_base(), tiktoken_rs::cl100k_base_singleton()),
        ];
        for (ours, prebuilt, tiktoken) in pairs {
            for sample in samples {
                for text in [sample.to_owned(), sample.repeat(7)] {
                    let count = ours.count(text.as_str());
                    assert_eq!(count, prebuilt.count(text.as_str()), "{text:?}");
                    assert_eq!(count, tiktoken.encode_ordinary(&text).len(), "{text:?}");
                }
            }
        }
    }

    /// Pieces found with a thread's own cache and counted from what the thread remembers count
    /// as bpe-openai's tokenizer counts them: on a first count and a repeated one, on another
    /// thread, with pieces longer than those remembered, with every pattern's pieces, and with
    /// whitespace that is not ASCII.
    #[test]
    fn remembered_pieces_count_as_bpe_openai() {
        const PIECES: &[&str] = &[
            " ",
            "  ",
            "   ",
            "\n",
            "\n\n",
            "\t",
            "\r\n",
            " \n ",
            "/",
            "[",
            "]",
            "a",
            "Word",
            "WORD",
            "'s",
            "'LL",
            "12",
            "12345",
            "😀",
            ")",
            "}\n",
            "é",
            "x y",
            "Ελληνικά",
            "русский",
            "日本語",
            "\u{301}",
            "supercalifragilisticexpialidocious_and_more_words",
            "0123456789abcdef0123456789abcdef",
            "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij",
            "----------",
            "\u{2028}",
            "\u{85}",
            "\u{a0}",
            "don't",
            "'t",
            "\n/",
            "a\n",
            "\r",
            "x\n\n",
            "我们结果数据的函数令牌问题这个的with响应用户",
        ];
        let mut next = picker(0x2545_f491_4f6c_dd1d);
        let texts: Vec<String> =
            (0..200).map(|_| (0..next(40)).map(|_| PIECES[next(PIECES.len())]).collect()).collect();
        for (ours, prebuilt) in
            [(&*O200K_BASE, bpe_openai::o200k_base()), (&*CL100K_BASE, bpe_openai::cl100k_base())]
        {
            let expected: Vec<usize> = texts.iter().map(|text| prebuilt.count(text.as_str())).collect();
            for _ in 0..2 {
                let counted: Vec<usize> = texts.iter().map(|text| ours.count(text)).collect();
                assert_eq!(counted, expected);
            }
            // On a thread of its own where the machine has two cores (the library's one way to
            // start threads).
            let ((), elsewhere) = compaction_model::parallel::join(
                || (),
                || texts.iter().map(|text| ours.count(text)).collect::<Vec<usize>>(),
            );
            assert_eq!(elsewhere, expected);
        }
    }

    /// A xorshift generator from `seed`: each call picks a number below its argument.
    fn picker(seed: u64) -> impl FnMut(usize) -> usize {
        let mut state = seed;
        move |n| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        }
    }

    #[test]
    fn split_points() {
        assert_eq!(last_split_point("abc"), 0);
        assert_eq!(last_split_point("a\nb"), 2);
        assert_eq!(last_split_point("a\n/b"), 0);
        assert_eq!(last_split_point("a\n b"), 0);
        assert_eq!(last_split_point("ab cd"), 2);
        assert_eq!(last_split_point("ab  cd"), 0);
        assert_eq!(last_split_point("x\nab cd ef!"), 7);
    }

    #[test]
    fn joined_counts_equal_encoding_the_joined_text() {
        let samples = [
            "plain words here",
            "ends with space ",
            "ends with punct)",
            "line\nline\n",
            "a\n\n\n",
            "tab\t",
            "x\n/path/to",
            "emoji 😀😀",
            "it's",
            "dog's\n[tool:x] y",
            "    ",
            "",
            "12345",
            "a\r",
            "}}\n)",
        ];
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase, Encoding::P50kBase, Encoding::R50kBase] {
            let counter = TiktokenCounter::from_encoding(encoding);
            for sample in samples {
                let (own, joined) = counter.own_and_joined(sample);
                assert_eq!(own, counter.count_text(sample), "{encoding:?} {sample:?}");
                let whole = counter.count_text(&format!("{sample}\n[tool:x] y"));
                let next = counter.count_text("[tool:x] y");
                assert_eq!(joined, whole - next, "{encoding:?} {sample:?}");
            }
        }
    }

    #[test]
    fn decomposed_counts_equal_whole_text_counts() {
        use crate::render::rendered_conversation;
        const PIECES: &[&str] = &[
            " ", "  ", "\n", "\n\n", "\t", "/", "[", "]", "a", "Word", "'s", "12", "😀", ")", "}\n", "\r\n",
            "é", "x y",
        ];
        let mut next = picker(0x9e37_79b9_7f4a_7c15);
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase, Encoding::P50kBase, Encoding::R50kBase] {
            let counter = TiktokenCounter::from_encoding(encoding);
            for _ in 0..60 {
                let messages: Vec<Message> = (0..1 + next(6))
                    .map(|_| {
                        let text: String = (0..next(12)).map(|_| PIECES[next(PIECES.len())]).collect();
                        if next(2) == 0 {
                            Message::user(text)
                        } else {
                            Message::tool(
                                text,
                                compaction_model::ToolCall::new("t", Default::default()),
                                false,
                            )
                        }
                    })
                    .collect();
                let whole = counter.count_text(&rendered_conversation(&messages));
                assert_eq!(counter.count(&messages, &[]), whole, "{encoding:?} {messages:?}");
                assert_eq!(counter.count_each(&messages).total, whole, "{encoding:?} {messages:?}");
                let (counts, measures) = counter.count_each_measured(&messages);
                assert_eq!(counts, counter.count_each(&messages));
                let joined: Vec<Measure> =
                    messages[..messages.len() - 1].iter().map(|m| counter.measure_joined(m)).collect();
                assert_eq!(measures, Some(joined), "{encoding:?} {messages:?}");
                // The first message rewritten as the last: counted without building the copy.
                let rewritten = [(0, &messages[messages.len() - 1])];
                let mut copy = messages.clone();
                copy[0] = messages[messages.len() - 1].clone();
                let whole = counter.count_text(&rendered_conversation(&copy));
                assert_eq!(
                    counter.try_count_rewritten(&messages, &rewritten, &[]).unwrap(),
                    whole,
                    "{encoding:?} {copy:?}"
                );
            }
        }
    }
}
