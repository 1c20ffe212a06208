//! Shared loaders for the benchmarks: synthetic transcripts, made on first use, and parsing.
//!
//! The transcripts come from [`gen`], the same generator `cargo xtask gen-transcript` runs, and
//! are cached in `target/transcripts/` under a name that records their size and seed.

pub mod gen;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use compaction_model::{messages_from_slice, Message};
use compaction_tokens::{ApproximateTokenCounter, HuggingFaceTokenCounter, TiktokenCounter, TokenCounter};

/// The seed of every benchmark transcript.
pub const SEED: u64 = 1;

/// The transcript sizes the criterion benches run on.
pub const SIZES: &[&str] = &["1MB", "10MB", "50MB"];

/// The largest transcript the HuggingFace benches run on. The tokenizers crate encodes a few MB
/// a second, so one 50 MB sample would take about fifteen seconds and the ten criterion needs
/// minutes; 1 MB and 10 MB show its throughput as well.
pub const HUGGINGFACE_MAX_BYTES: usize = 20_000_000;

/// A token counter the count and compact benches run.
#[derive(Debug)]
pub struct BenchCounter {
    /// Its name in the bench ids, such as `tiktoken_o200k`.
    pub name: &'static str,
    /// The counter.
    pub counter: Box<dyn TokenCounter>,
    /// The largest transcript it is benched on.
    pub max_bytes: usize,
}

/// One counter of each backend: approximate, tiktoken o200k_base, and the byte-level BPE
/// tokenizer (GPT-2's kind) trained for the conformance tests, in
/// `crates/compaction-tokens/tests/data/tokenizers/`.
pub fn bench_counters() -> Vec<BenchCounter> {
    let tokenizer = project_root().join("crates/compaction-tokens/tests/data/tokenizers/bytelevel_bpe.json");
    let huggingface = HuggingFaceTokenCounter::from_file(&tokenizer)
        .unwrap_or_else(|e| panic!("cannot load {}: {e}", tokenizer.display()));
    let tiktoken = TiktokenCounter::new("o200k_base").expect("o200k_base is built in");
    vec![
        BenchCounter {
            name: "approximate",
            counter: Box::new(ApproximateTokenCounter::default()),
            max_bytes: usize::MAX,
        },
        BenchCounter { name: "tiktoken_o200k", counter: Box::new(tiktoken), max_bytes: usize::MAX },
        BenchCounter {
            name: "huggingface_bpe",
            counter: Box::new(huggingface),
            max_bytes: HUGGINGFACE_MAX_BYTES,
        },
    ]
}

/// The workspace root.
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Where generated transcripts are kept.
pub fn transcripts_dir() -> PathBuf {
    project_root().join("target").join("transcripts")
}

/// The path of the transcript of `size` (such as `10MB`) with `seed`, generated if missing.
pub fn transcript_with_seed(size: &str, seed: u64) -> std::io::Result<PathBuf> {
    let bytes = gen::parse_size(size).map_err(std::io::Error::other)?;
    let dir = transcripts_dir();
    let path = dir.join(gen::file_name(size, seed));
    if !path.exists() {
        std::fs::create_dir_all(&dir)?;
        // Written beside and renamed, so a bench running in parallel never reads half a file.
        let partial = dir.join(format!(".transcript-{size}-seed{seed}.{}.partial", std::process::id()));
        std::fs::write(&partial, gen::generate(bytes, seed))?;
        std::fs::rename(&partial, &path)?;
    }
    Ok(path)
}

/// The bytes of the benchmark transcript of `size`, generated if missing.
pub fn transcript_bytes(size: &str) -> Vec<u8> {
    let path =
        transcript_with_seed(size, SEED).unwrap_or_else(|e| panic!("cannot make the {size} transcript: {e}"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Parses a transcript as the command line reads a Haystack array: straight from the bytes,
/// message by message, without a JSON tree.
pub fn parse(bytes: &[u8]) -> Vec<Message> {
    messages_from_slice(bytes).unwrap_or_else(|e| panic!("transcript is not a conversation: {e}"))
}

/// Samples and measurement time for a bench over `bytes` of input: big inputs get few samples
/// so `cargo bench --workspace` stays within minutes.
pub fn sample_plan(bytes: usize) -> (usize, Duration) {
    if bytes >= 20_000_000 {
        (10, Duration::from_secs(8))
    } else if bytes >= 5_000_000 {
        (10, Duration::from_secs(5))
    } else {
        (30, Duration::from_secs(3))
    }
}

/// The release build of the `compaction` command, if it exists (`CARGO_TARGET_DIR` honoured).
pub fn compaction_binary() -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("target"));
    let binary = target.join("release").join(format!("compaction{}", std::env::consts::EXE_SUFFIX));
    binary.exists().then_some(binary)
}

/// Whether `binary` has the subcommand `name` (its `--help` succeeds).
pub fn has_subcommand(binary: &Path, name: &str) -> bool {
    Command::new(binary).args([name, "--help"]).output().map(|o| o.status.success()).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use compaction_model::{is_offloaded, ResultPart, Role, ToolResultContent};

    use super::*;

    #[test]
    fn transcripts_are_deterministic_and_parse() {
        let text = gen::generate(300_000, 7);
        assert_eq!(text, gen::generate(300_000, 7));
        assert_ne!(text, gen::generate(300_000, 8));
        assert!((300_000..400_000).contains(&text.len()), "{} bytes", text.len());
        let messages = parse(text.as_bytes());
        assert_eq!(messages[0].role, Role::System);
        assert!(messages.iter().any(|m| m.role == Role::Tool && is_offloaded(&m.meta)));
        assert!(messages.iter().any(|m| m.tool_call_result().is_some_and(|r| r.error)));
        let image_result = |m: &Message| {
            m.tool_call_result().is_some_and(|r| match &r.result {
                ToolResultContent::Parts(parts) => parts.iter().any(|p| matches!(p, ResultPart::Image(_))),
                ToolResultContent::Text(_) => false,
            })
        };
        assert!(messages.iter().any(image_result));
        assert!(text.chars().any(|c| c as u32 > 0xFFFF), "no astral characters");
        // Written exactly as the model writes it back, so the file is in `to_dict` shape.
        let written = serde_json::to_string(&compaction_model::messages_to_value(&messages)).unwrap();
        let compact: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(written, serde_json::to_string(&compact).unwrap());
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(gen::parse_size("50MB"), Ok(50_000_000));
        assert_eq!(gen::parse_size("1.5mb"), Ok(1_500_000));
        assert_eq!(gen::parse_size("500KB"), Ok(500_000));
        assert_eq!(gen::parse_size("123"), Ok(123));
        assert!(gen::parse_size("ten").is_err());
        assert!(gen::parse_size("5TB").is_err());
    }
}
