//! Any HuggingFace `tokenizer.json`, through the tokenizers crate.

use std::path::Path;

use compaction_model::{Message, ToolSpec};
use tokenizers::Tokenizer;

use crate::counter::{Counts, TokenCounter};
use crate::error::Error;
use crate::parallel;
use crate::render::{char_len, rendered_text, NonText};

/// Counts tokens with a HuggingFace tokenizer loaded from a `tokenizer.json`.
///
/// Counts without special tokens, and with the file's truncation and padding turned off: a
/// counter must neither cap nor pad what it measures. Nothing is fetched from a hub.
pub struct HuggingFaceTokenCounter {
    tokenizer: Tokenizer,
    source: String,
    tokens_per_image: usize,
    tokens_per_file: usize,
}

impl std::fmt::Debug for HuggingFaceTokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HuggingFaceTokenCounter").field("source", &self.source).finish_non_exhaustive()
    }
}

impl HuggingFaceTokenCounter {
    /// Loads `tokenizer.json` from a path.
    ///
    /// # Errors
    ///
    /// When the file cannot be read or is not a tokenizer the `tokenizers` crate loads.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let source = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|error| Error::Tokenizer {
            source_name: source.clone(),
            what: "cannot be read",
            source: Box::new(error),
        })?;
        Self::build(&bytes, source)
    }

    /// Loads a tokenizer from the bytes of a `tokenizer.json`.
    ///
    /// # Errors
    ///
    /// When the bytes are not a tokenizer the `tokenizers` crate loads.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        Self::build(bytes, "<bytes>".to_owned())
    }

    fn build(bytes: &[u8], source: String) -> Result<Self, Error> {
        let invalid = |what: &'static str, error: tokenizers::Error| Error::Tokenizer {
            source_name: source.clone(),
            what,
            source: error,
        };
        let mut tokenizer =
            Tokenizer::from_bytes(bytes).map_err(|e| invalid("not a valid tokenizer.json", e))?;
        tokenizer.with_truncation(None).map_err(|e| invalid("cannot turn truncation off", e))?;
        tokenizer.with_padding(None);
        Ok(HuggingFaceTokenCounter { tokenizer, source, tokens_per_image: 85, tokens_per_file: 1000 })
    }

    /// The same counter charging `tokens_per_image` per image and `tokens_per_file` per file, as
    /// every counter's `with_charges` does.
    #[must_use]
    pub fn with_charges(mut self, tokens_per_image: usize, tokens_per_file: usize) -> Self {
        self.tokens_per_image = tokens_per_image;
        self.tokens_per_file = tokens_per_file;
        self
    }

    /// Tokens of a piece of text, without special tokens.
    pub fn count_text(&self, text: &str) -> usize {
        // Without offsets: only the number of tokens is wanted.
        match self.tokenizer.encode_fast(text, false) {
            Ok(encoding) => encoding.len(),
            // With truncation off, encoding does not fail on any tokenizer we know of; should one
            // fail anyway, a four-characters-per-token estimate beats stopping the agent.
            Err(_) => char_len(text).div_ceil(4),
        }
    }
}

impl TokenCounter for HuggingFaceTokenCounter {
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, Error> {
        if messages.is_empty() && tools.is_empty() {
            return Ok(0);
        }
        let text = rendered_text(messages, tools);
        Ok(self.count_text(&text)
            + NonText::of_messages(messages).tokens(self.tokens_per_image, self.tokens_per_file))
    }

    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, Error> {
        // A tokenizer may need the whole text at once (a pre-tokenizer such as Metaspace sees
        // where each message starts), so the total is one tokenization of the whole and each
        // message another of its own. They are independent: the whole runs beside the messages,
        // which spread over the cores. The counts are those of counting one after the other.
        let own = |message: &Message| self.count(std::slice::from_ref(message), &[]);
        let work = parallel::work_estimate(messages);
        if work < parallel::PARALLEL_THRESHOLD {
            return Ok(Counts { total: self.count(messages, &[]), each: messages.iter().map(own).collect() });
        }
        let (total, each) = compaction_model::parallel::join(
            || self.count(messages, &[]),
            || parallel::map(messages, work, own),
        );
        Ok(Counts { total, each })
    }

    fn describe(&self) -> String {
        format!("huggingface:{}", self.source)
    }
}
