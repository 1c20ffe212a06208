//! Project automation for the compaction workspace, run as `cargo xtask <command>`.
//!
//! - `fixtures [--seed N] [--random-cases K]`: regenerate the committed reference fixtures by
//!   running Haystack 3.4.1 in a virtual environment this command makes (`.venv-ref`).
//! - `differential [--seed N] [--cases K]`: draw fresh random cases, run them through the
//!   reference, then through this project's conformance tests, and report disagreements.
//! - `gen-transcript [--size 50MB] [--seed N] [--format haystack|claude-code|openai] [-o FILE]`:
//!   write a deterministic synthetic agent transcript (default under `target/transcripts/`).
//!   `--tool-lines MIN-MAX` (OpenAI): every step one call and its result of MIN to MAX lines.
//! - `gen-dataset [--size 1GB] [--seed N] [--out FILE]`: write a deterministic JSON Lines dataset
//!   of whole trajectories, one a line, for `compaction bench --jsonl` (see `dataset.rs`).
//! - `bench-vs-reference [--runs N] [--skip-1gb] [--only SECTIONS]`: time this project against
//!   the reference side by side, on every spelling of its transcripts and on the log formats, and
//!   write BENCHMARKS.md; `--only dataset,memory-by-format,proxy-load` runs those sections alone
//!   and prints them.
//! - `msrv [--require-all]`: check each published crate with the Rust its `rust-version`
//!   declares, where that toolchain is installed (the MSRV job of `.ci/run`).
//! - `test [--rust | --python]`: every test, `cargo test` and then the Python package's pytest
//!   suite in a virtual environment under the target directory (see `python.rs`).
//!
//! `cargo test -p xtask` also checks the workspace's architecture invariants (see `tidy/`).

mod bench;
mod dataset;
mod gen;
mod logs;
mod msrv;
mod proxyload;
mod python;
mod reference;
#[cfg(test)]
mod tidy;

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        print_help();
        return Ok(());
    };
    match command.as_str() {
        "fixtures" => reference::fixtures(rest),
        "differential" => reference::differential(rest),
        "gen-transcript" => gen::gen_transcript(rest),
        "gen-dataset" => dataset::gen_dataset(rest),
        "bench-vs-reference" => bench::bench_vs_reference(rest),
        "msrv" => msrv::msrv(rest),
        "test" => python::test(rest),
        "help" | "--help" | "-h" => {
            print_help();
            Ok(())
        }
        other => bail!("unknown xtask command {other:?}; run `cargo xtask help`"),
    }
}

fn print_help() {
    println!(
        "cargo xtask <command>\n\n\
         fixtures [--seed N] [--random-cases K]   regenerate the committed reference fixtures\n\
         differential [--seed N] [--cases K]      compare fresh random cases against the reference\n\
         gen-transcript [--size 50MB] [--seed N] [--format haystack|claude-code|openai] [--tool-lines MIN-MAX] [-o FILE]\n\
         \x20                                        write a synthetic agent transcript (target/transcripts/)\n\
         gen-dataset [--size 1GB] [--seed N] [--out FILE]\n\
         \x20                                        write a JSON Lines dataset of whole trajectories, one a line\n\
         bench-vs-reference [--runs N] [--skip-1gb] [--only dataset,memory-by-format,proxy-load]\n\
         \x20                                        time this project against the reference, write BENCHMARKS.md\n\
         \x20                                        (--only: run those sections alone, print them)\n\
         msrv [--require-all]                     check each published crate with the Rust it declares\n\
         test [--rust | --python]                 every test: cargo test, then the Python package's pytest suite"
    );
}

/// The workspace root.
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// The value after `--name` in `args`, if present.
pub fn flag_value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}
