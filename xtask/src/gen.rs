//! `cargo xtask gen-transcript`: write a deterministic synthetic agent transcript, in Haystack's
//! shape or, converted (see `logs.rs`), as a Claude Code session or an OpenAI request.
//!
//! The generator itself lives in `benches/src/gen.rs`, shared with the benchmarks, so xtask
//! gets it without depending on the benches crate (and the tokenizers behind it).
//!
//! `--tool-lines MIN-MAX` (OpenAI only) writes another shape instead: a request whose every step
//! is one call, with no text, and its result of MIN to MAX lines (`dataset.rs`); `2-12` is the
//! densest shape of the memory benchmark, a message every 250 bytes or so.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use crate::logs::{convert, LogFormat};
use crate::{flag_value, project_root};

#[path = "../../benches/src/gen.rs"]
pub(crate) mod transcript;

/// A transcript of about `size` bytes in `format`: the Haystack transcript converted, made large
/// enough first that the converted file has about that size.
pub fn generate_in(size: &str, seed: u64, format: LogFormat) -> Result<String> {
    let bytes = transcript::parse_size(size).map_err(|e| anyhow!(e))?;
    if format == LogFormat::Haystack {
        return Ok(transcript::generate(bytes, seed));
    }
    // How much the conversion grows or shrinks the transcript, measured on the transcript itself
    // up to 64 MB and on its first 20 MB above that (converting goes through a tree of values,
    // a few times the text's size, so the full size is converted once only).
    let sample = if bytes <= 64_000_000 { bytes } else { 20_000_000 };
    let first = convert(&transcript::generate(sample, seed), format)?;
    if first.is_empty() {
        return Ok(first);
    }
    let scaled = (bytes as f64 * sample as f64 / first.len() as f64) as usize;
    if scaled == sample {
        return Ok(first);
    }
    drop(first);
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

/// The cached file name of a request of `gen-transcript --format openai --tool-lines MIN-MAX`.
pub fn file_name_dense(size: &str, seed: u64, (low, high): (usize, usize)) -> String {
    format!(
        "transcript-{size}-seed{seed}-v{}.{}-tool-lines-{low}-{high}.openai.json",
        transcript::VERSION,
        crate::dataset::VERSION
    )
}

/// As [`cached_in`], an OpenAI request whose tool outputs have `lines` lines.
pub fn cached_dense(size: &str, seed: u64, lines: (usize, usize)) -> Result<PathBuf> {
    let path = project_root().join("target").join("transcripts").join(file_name_dense(size, seed, lines));
    if !path.exists() {
        let bytes = transcript::parse_size(size).map_err(|e| anyhow!(e))?;
        crate::dataset::write_openai_request(&path, bytes, seed, lines)?;
    }
    Ok(path)
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

/// `cargo xtask gen-transcript [--size 50MB] [--seed N] [--format F] [--tool-lines MIN-MAX] [-o FILE]`.
pub fn gen_transcript(args: &[String]) -> Result<()> {
    let size = flag_value(args, "--size").unwrap_or("10MB");
    let seed: u64 = flag_value(args, "--seed").unwrap_or("1").parse().context("--seed takes a number")?;
    let format = LogFormat::parse(flag_value(args, "--format").unwrap_or("haystack"))?;
    let tool_lines = flag_value(args, "--tool-lines").map(crate::dataset::parse_range).transpose()?;
    let name = match tool_lines {
        Some(_) if format != LogFormat::OpenAi => {
            bail!("--tool-lines is for --format openai only (got --format {})", format.name())
        }
        Some(lines) => file_name_dense(size, seed, lines),
        None => file_name_in(size, seed, format),
    };
    let out = flag_value(args, "-o")
        .or_else(|| flag_value(args, "--output"))
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("target").join("transcripts").join(name));
    let started = Instant::now();
    if let Some(lines) = tool_lines {
        let bytes = transcript::parse_size(size).map_err(|e| anyhow!(e))?;
        let stats = crate::dataset::write_openai_request(&out, bytes, seed, lines)?;
        eprintln!(
            "wrote {} ({} bytes, {} messages, openai, tool outputs of {}-{} lines, seed {seed}) in {:.2?}",
            out.display(),
            stats.bytes,
            stats.lines,
            lines.0,
            lines.1,
            started.elapsed()
        );
        return Ok(());
    }
    let text = generate_in(size, seed, format)?;
    crate::dataset::write_atomically(&out, |file| Ok(file.write_all(text.as_bytes())?))?;
    eprintln!(
        "wrote {} ({} bytes, {}, seed {seed}) in {:.2?}",
        out.display(),
        text.len(),
        format.name(),
        started.elapsed()
    );
    Ok(())
}
