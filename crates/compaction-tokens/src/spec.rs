//! Counters named by a short string, as the command line takes them.

use crate::approximate::ApproximateTokenCounter;
use crate::counter::TokenCounter;
use crate::error::Error;

/// Builds a counter from a spec: `approximate`, `approximate:CHARS_PER_TOKEN`, `tiktoken`,
/// `tiktoken:ENCODING_OR_MODEL` or `huggingface:PATH`.
///
/// ```
/// let counter = compaction_tokens::counter_from_spec("approximate:2.5")?;
/// assert_eq!(counter.describe(), "approximate:2.5");
/// # Ok::<(), compaction_tokens::Error>(())
/// ```
///
/// # Errors
///
/// When the spec names no known counter, a counter whose feature is off, a ratio that is not a
/// number above 0, or a tokenizer that cannot be loaded.
pub fn counter_from_spec(spec: &str) -> Result<Box<dyn TokenCounter>, Error> {
    let invalid = |reason: &str| Error::InvalidSpec { spec: spec.to_owned(), reason: reason.to_owned() };
    let (kind, argument) = match spec.split_once(':') {
        Some((kind, argument)) => (kind, Some(argument)),
        None => (spec, None),
    };
    match kind {
        "approximate" => {
            let counter = match argument {
                None => ApproximateTokenCounter::default(),
                Some(ratio) => {
                    let ratio: f64 = ratio
                        .parse()
                        .map_err(|_| invalid("CHARS_PER_TOKEN must be a number, such as 4 or 3.5"))?;
                    ApproximateTokenCounter::new(ratio)?
                }
            };
            Ok(Box::new(counter))
        }
        "tiktoken" => tiktoken(argument.unwrap_or("o200k_base")),
        "huggingface" => match argument {
            Some(path) if !path.is_empty() => huggingface(path),
            _ => Err(invalid("huggingface needs the path of a tokenizer.json: huggingface:PATH")),
        },
        _ => Err(invalid(
            "expected approximate[:CHARS_PER_TOKEN], tiktoken[:ENCODING_OR_MODEL] or huggingface:PATH",
        )),
    }
}

#[cfg(feature = "tiktoken")]
fn tiktoken(name: &str) -> Result<Box<dyn TokenCounter>, Error> {
    Ok(Box::new(crate::tiktoken::TiktokenCounter::new(name)?))
}

#[cfg(not(feature = "tiktoken"))]
fn tiktoken(_name: &str) -> Result<Box<dyn TokenCounter>, Error> {
    Err(Error::BackendNotEnabled { backend: "tiktoken" })
}

#[cfg(feature = "huggingface")]
fn huggingface(path: &str) -> Result<Box<dyn TokenCounter>, Error> {
    Ok(Box::new(crate::huggingface::HuggingFaceTokenCounter::from_file(path)?))
}

#[cfg(not(feature = "huggingface"))]
fn huggingface(_path: &str) -> Result<Box<dyn TokenCounter>, Error> {
    Err(Error::BackendNotEnabled { backend: "huggingface" })
}
