//! Integration tests of the `compaction` binary: formats read, round trips, real transcripts, errors,
//! prune, offload, simulate, bench (over Parquet datasets too), the bytes the JSON-tree path writes,
//! and the commit point of a run's outputs.

mod bench;
mod cache_aware;
mod commit_point;
mod dialect;
mod error_sources;
mod errors;
mod faults;
mod formats;
mod logs;
mod offload;
#[cfg(feature = "parquet")]
mod parquet;
mod provider_faults;
mod proxy;
mod prune;
mod readers_faults;
mod real_transcripts;
mod refetch;
mod report_counts;
mod roundtrip;
mod simulate;
mod standin;
mod strategies;
mod tree_writes;
mod write_fidelity;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    /// The standard output as JSON; JSON Lines as an array of the lines' values.
    pub fn json(&self) -> Value {
        assert_eq!(self.code, 0, "the command failed: {}", self.stderr);
        let text = std::str::from_utf8(&self.stdout).expect("output is UTF-8");
        serde_json::from_str(text).unwrap_or_else(|_| {
            Value::Array(text.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect())
        })
    }

    /// The standard output of `count`.
    pub fn count(&self) -> u64 {
        assert_eq!(self.code, 0, "count failed: {}", self.stderr);
        std::str::from_utf8(&self.stdout).unwrap().trim().parse().expect("a bare integer")
    }
}

/// Runs the binary with `args`, feeding `stdin`.
pub fn run(args: &[&str], stdin: Option<&[u8]>) -> Run {
    run_with_env(args, stdin, &[])
}

/// The variables that point a provider client somewhere: unset for every run but those given.
const PROVIDER_VARIABLES: [&str; 4] =
    ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"];

/// [`run`] with these environment variables set, and no other provider variable.
pub fn run_with_env(args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_compaction"));
    for variable in PROVIDER_VARIABLES {
        command.env_remove(variable);
    }
    let mut child = command
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.unwrap_or_default().to_vec();
    let writer = std::thread::spawn(move || {
        // The binary may stop reading early on bad input; a broken pipe is fine.
        let _ = input.write_all(&bytes);
    });
    let output = child.wait_with_output().expect("the binary finishes");
    writer.join().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: output.stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The workspace root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The shared corpus of real transcripts: `$COMPACTION_CORPUS`, else
/// `<repo>/../shared/transcripts/raw`; `None` (said on stderr) when it is not there, and the
/// tests that need it pass without it.
pub fn corpus() -> Option<PathBuf> {
    let dir = match std::env::var_os("COMPACTION_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => repo().join("../shared/transcripts/raw"),
    };
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: no transcript corpus at {}", dir.display());
        None
    }
}

/// A bundled sample, as a path string.
pub fn sample(relative: &str) -> String {
    repo().join("examples/transcripts").join(relative).display().to_string()
}

/// Messages of a Haystack conversation written by `convert --to haystack`.
pub fn haystack(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["convert"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--to", "haystack"]);
    match run(&all, None).json() {
        Value::Array(messages) => messages,
        other => panic!("expected an array, got {other}"),
    }
}

/// The roles of messages, one letter each.
pub fn roles(messages: &[Value]) -> String {
    messages.iter().map(|m| m["role"].as_str().unwrap()[..1].to_owned()).collect()
}
