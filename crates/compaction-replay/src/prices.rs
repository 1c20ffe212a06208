//! Prices as data: a table of model-name patterns, each row the provider's prices per million
//! tokens and how its prompt cache works.

use serde::Deserialize;

use crate::error::Error;

/// The table bundled with the crate (`src/prices.json`); each row names its source and the date
/// it was read.
const BUNDLED: &str = include_str!("prices.json");

/// How a provider caches prompts, and so how a call's prompt is priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CacheKind {
    /// Anthropic: the prompt up to a cache breakpoint is written (at a surcharge by lifetime)
    /// and read back at a tenth of the input price by a later call within the lifetime.
    Anthropic,
    /// OpenAI: prefixes of 1,024 tokens and more are cached automatically in 128-token steps,
    /// read at the model's discount, with no charge for writing.
    OpenAi,
    /// No cache: every prompt token at the input price.
    None,
}

impl CacheKind {
    /// The kind a word names: `anthropic`, `openai` or `none`.
    pub fn from_name(name: &str) -> Option<CacheKind> {
        match name {
            "anthropic" => Some(CacheKind::Anthropic),
            "openai" => Some(CacheKind::OpenAi),
            "none" => Some(CacheKind::None),
            _ => None,
        }
    }

    /// The word for the kind.
    pub fn name(self) -> &'static str {
        match self {
            CacheKind::Anthropic => "anthropic",
            CacheKind::OpenAi => "openai",
            CacheKind::None => "none",
        }
    }
}

/// One row of a price table: the models it matches and their prices, in dollars per million
/// tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PriceRow {
    /// A model-name pattern: `*` stands for any run of characters (`claude-sonnet-4*`).
    #[serde(rename = "match")]
    pub pattern: String,
    /// Prompt tokens read fresh.
    pub input: f64,
    /// Reply tokens.
    pub output: f64,
    /// Prompt tokens read from the cache; the input price when absent.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Prompt tokens written to the cache for five minutes (Anthropic); 1.25 × input when absent.
    #[serde(default)]
    pub cache_write_5m: Option<f64>,
    /// Prompt tokens written to the cache for an hour (Anthropic); 2 × input when absent.
    #[serde(default)]
    pub cache_write_1h: Option<f64>,
    /// How the provider caches prompts.
    pub cache: CacheKind,
    /// The shortest prompt prefix the provider caches, in tokens; 1,024 when absent.
    #[serde(default)]
    pub min_cache_tokens: Option<u64>,
    /// Where the prices come from.
    #[serde(default)]
    pub source: Option<String>,
    /// When the source was read (YYYY-MM-DD).
    #[serde(default)]
    pub read: Option<String>,
}

impl PriceRow {
    /// Whether the row's pattern matches `model`.
    pub fn matches(&self, model: &str) -> bool {
        glob(self.pattern.as_bytes(), model.as_bytes())
    }

    /// Dollars per million tokens read from the cache.
    pub fn cache_read_price(&self) -> f64 {
        self.cache_read.unwrap_or(self.input)
    }

    /// Dollars per million tokens written to the cache for five minutes.
    pub fn cache_write_5m_price(&self) -> f64 {
        self.cache_write_5m.unwrap_or(1.25 * self.input)
    }

    /// Dollars per million tokens written to the cache for an hour.
    pub fn cache_write_1h_price(&self) -> f64 {
        self.cache_write_1h.unwrap_or(2.0 * self.input)
    }

    /// The shortest prefix the provider caches.
    pub fn min_cache(&self) -> u64 {
        self.min_cache_tokens.unwrap_or(1_024)
    }
}

/// A price table: the first row whose pattern matches a model prices it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct PriceTable {
    /// The rows, tried in order.
    pub models: Vec<PriceRow>,
}

impl PriceTable {
    /// The table bundled with the crate.
    pub fn bundled() -> PriceTable {
        PriceTable::from_json("bundled", BUNDLED).expect("the bundled price table is valid")
    }

    /// Reads a table from JSON text (`{"models": [{"match", "input", "output", …}]}`); `name`
    /// (a file name) is what errors call it.
    pub fn from_json(name: &str, text: &str) -> Result<PriceTable, Error> {
        let invalid = |problem: String, source| Error::Prices { name: name.to_owned(), problem, source };
        let table: PriceTable = serde_json::from_str(text)
            .map_err(|e| invalid(format!("line {}, column {}", e.line(), e.column()), Some(e)))?;
        for (i, row) in table.models.iter().enumerate() {
            let prices =
                [Some(row.input), Some(row.output), row.cache_read, row.cache_write_5m, row.cache_write_1h];
            if prices.into_iter().flatten().any(|p| !p.is_finite() || p < 0.0) {
                return Err(invalid(
                    format!("row {i} ({}): a price is negative or not a number", row.pattern),
                    None,
                ));
            }
            if row.pattern.is_empty() {
                return Err(invalid(format!("row {i}: `match` is empty"), None));
            }
        }
        Ok(table)
    }

    /// The row that prices `model`: the first that matches.
    pub fn find(&self, model: &str) -> Option<&PriceRow> {
        self.models.iter().find(|row| row.matches(model))
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of bytes.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        for (pattern, text, expected) in [
            ("claude-sonnet-4*", "claude-sonnet-4-5-20250929", true),
            ("claude-sonnet-4*", "claude-opus-4-6", false),
            ("*", "anything", true),
            ("gpt-4o", "gpt-4o-mini", false),
            ("gpt-*-mini*", "gpt-4o-mini-2024-07-18", true),
            ("a*b*c", "abxbc", true),
            ("a*b*c", "abxbd", false),
        ] {
            assert_eq!(glob(pattern.as_bytes(), text.as_bytes()), expected, "{pattern} {text}");
        }
    }

    #[test]
    fn the_bundled_table_reads_and_names_its_sources() {
        let table = PriceTable::bundled();
        assert!(table.models.iter().all(|row| row.source.is_some() && row.read.is_some()));
        assert_eq!(table.find("claude-opus-4-6").map(|r| r.input), Some(5.0));
        assert_eq!(table.find("claude-sonnet-4-5-20250929").map(|r| r.cache_write_1h_price()), Some(6.0));
    }
}
