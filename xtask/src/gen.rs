//! `cargo xtask gen-transcript`: write a deterministic synthetic agent transcript.
//!
//! The generator itself lives in `benches/src/gen.rs`, shared with the benchmarks, so xtask
//! gets it without depending on the benches crate (and the tokenizers behind it).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};

use crate::{flag_value, project_root};

#[path = "../../benches/src/gen.rs"]
mod transcript;

/// A transcript of `size` bytes (`50MB`, `19MB`, …) for `seed`.
pub fn generate(size: &str, seed: u64) -> Result<String> {
    let bytes = transcript::parse_size(size).map_err(|e| anyhow!(e))?;
    Ok(transcript::generate(bytes, seed))
}

/// `target/transcripts/transcript-SIZE-seedN.json`, the name the benches use as well; written
/// if missing.
pub fn cached(size: &str, seed: u64) -> Result<PathBuf> {
    let dir = project_root().join("target").join("transcripts");
    let path = dir.join(transcript::file_name(size, seed));
    if !path.exists() {
        std::fs::create_dir_all(&dir)?;
        let partial = dir.join(format!(".transcript-{size}-seed{seed}.{}.partial", std::process::id()));
        std::fs::write(&partial, generate(size, seed)?)?;
        std::fs::rename(&partial, &path)?;
    }
    Ok(path)
}

/// `cargo xtask gen-transcript [--size 50MB] [--seed N] [-o FILE]`.
pub fn gen_transcript(args: &[String]) -> Result<()> {
    let size = flag_value(args, "--size").unwrap_or("10MB");
    let seed: u64 = flag_value(args, "--seed").unwrap_or("1").parse().context("--seed takes a number")?;
    let out =
        flag_value(args, "-o").or_else(|| flag_value(args, "--output")).map(PathBuf::from).unwrap_or_else(
            || project_root().join("target").join("transcripts").join(transcript::file_name(size, seed)),
        );
    let started = Instant::now();
    let text = generate(size, seed)?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&out, &text).with_context(|| format!("writing {}", out.display()))?;
    let messages = text.matches("\n{\"role\":").count();
    eprintln!(
        "wrote {} ({} bytes, {messages} messages, seed {seed}) in {:.2?}",
        out.display(),
        text.len(),
        started.elapsed()
    );
    Ok(())
}
