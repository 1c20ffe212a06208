//! `cargo xtask gen-transcript`: write a deterministic synthetic agent transcript, in Haystack's
//! shape or, converted (see `logs.rs`), as a Claude Code session or an OpenAI request.
//!
//! The generator itself lives in `benches/src/gen.rs`, shared with the benchmarks, so xtask
//! gets it without depending on the benches crate (and the tokenizers behind it).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};

use crate::logs::{convert, LogFormat};
use crate::{flag_value, project_root};

#[path = "../../benches/src/gen.rs"]
mod transcript;

/// A transcript of about `size` bytes in `format`: the Haystack transcript converted, made large
/// enough first that the converted file has about that size.
pub fn generate_in(size: &str, seed: u64, format: LogFormat) -> Result<String> {
    let bytes = transcript::parse_size(size).map_err(|e| anyhow!(e))?;
    let first = convert(&transcript::generate(bytes, seed), format)?;
    if format == LogFormat::Haystack || first.is_empty() {
        return Ok(first);
    }
    let scaled = (bytes as f64 * bytes as f64 / first.len() as f64) as usize;
    convert(&transcript::generate(scaled, seed), format)
}

/// The cached file name of a transcript in `format`.
pub fn file_name_in(size: &str, seed: u64, format: LogFormat) -> String {
    match format {
        LogFormat::Haystack => transcript::file_name(size, seed),
        _ => format!(
            "transcript-{size}-seed{seed}-v{}.{}.{}",
            transcript::VERSION,
            format.name(),
            format.extension()
        ),
    }
}

/// `target/transcripts/transcript-SIZE-seedN.json`, the name the benches use as well; written
/// if missing.
pub fn cached(size: &str, seed: u64) -> Result<PathBuf> {
    cached_in(size, seed, LogFormat::Haystack)
}

/// As [`cached`], in `format`.
pub fn cached_in(size: &str, seed: u64, format: LogFormat) -> Result<PathBuf> {
    let dir = project_root().join("target").join("transcripts");
    let path = dir.join(file_name_in(size, seed, format));
    if !path.exists() {
        std::fs::create_dir_all(&dir)?;
        let partial = dir.join(format!(".transcript-{size}-seed{seed}.{}.partial", std::process::id()));
        std::fs::write(&partial, generate_in(size, seed, format)?)?;
        std::fs::rename(&partial, &path)?;
    }
    Ok(path)
}

/// `cargo xtask gen-transcript [--size 50MB] [--seed N] [--format F] [-o FILE]`.
pub fn gen_transcript(args: &[String]) -> Result<()> {
    let size = flag_value(args, "--size").unwrap_or("10MB");
    let seed: u64 = flag_value(args, "--seed").unwrap_or("1").parse().context("--seed takes a number")?;
    let format = LogFormat::parse(flag_value(args, "--format").unwrap_or("haystack"))?;
    let out =
        flag_value(args, "-o").or_else(|| flag_value(args, "--output")).map(PathBuf::from).unwrap_or_else(
            || project_root().join("target").join("transcripts").join(file_name_in(size, seed, format)),
        );
    let started = Instant::now();
    let text = generate_in(size, seed, format)?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&out, &text).with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "wrote {} ({} bytes, {}, seed {seed}) in {:.2?}",
        out.display(),
        text.len(),
        format.name(),
        started.elapsed()
    );
    Ok(())
}
