//! OpenAI's byte-pair encodings through tiktoken-rs.

use compaction_model::{Message, ToolSpec};
use tiktoken_rs::CoreBPE;

use crate::counter::TokenCounter;
use crate::error::Error;
use crate::render::{rendered_text, NonText};

/// A tiktoken encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

    fn bpe(self) -> &'static CoreBPE {
        match self {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
            Encoding::P50kBase => tiktoken_rs::p50k_base_singleton(),
            Encoding::R50kBase => tiktoken_rs::r50k_base_singleton(),
        }
    }
}

/// Counts tokens with one of OpenAI's encodings, as Haystack's `TiktokenCounter` does.
///
/// Text that contains special-token strings such as `<|endoftext|>` is counted as ordinary text
/// (the reference raises on it; a transcript that mentions such a string is not an error).
pub struct TiktokenCounter {
    encoding: Encoding,
    bpe: &'static CoreBPE,
    tokens_per_image: usize,
    tokens_per_file: usize,
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
    pub fn new(encoding_or_model: &str) -> Result<Self, Error> {
        Ok(Self::with_encoding(Encoding::from_name_or_model(encoding_or_model)?))
    }

    /// A counter for `encoding` with the default charges.
    pub fn with_encoding(encoding: Encoding) -> Self {
        Self::with_charges(encoding, 85, 1000)
    }

    /// A counter with every setting given.
    pub fn with_charges(encoding: Encoding, tokens_per_image: usize, tokens_per_file: usize) -> Self {
        TiktokenCounter { encoding, bpe: encoding.bpe(), tokens_per_image, tokens_per_file }
    }

    /// The encoding counted with.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Tokens of a piece of text, special-token strings counted as ordinary text.
    pub fn count_text(&self, text: &str) -> usize {
        self.bpe.encode_ordinary(text).len()
    }
}

impl TokenCounter for TiktokenCounter {
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        if messages.is_empty() && tools.is_empty() {
            return 0;
        }
        let text = rendered_text(messages, tools);
        self.count_text(&text)
            + NonText::of_messages(messages).tokens(self.tokens_per_image, self.tokens_per_file)
    }

    fn describe(&self) -> String {
        format!("tiktoken:{}", self.encoding.name())
    }
}
