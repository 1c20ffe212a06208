//! `cargo xtask test`: every test of the project, the Rust and the Python, in one command.
//!
//! `cargo test` cannot run the Python package's tests (`crates/compaction-python/tests`, a
//! pytest suite that runs our classes beside Haystack 3.4.1's): they need the package built by
//! maturin and installed, with Haystack, in a Python environment. This command runs
//! `cargo test --workspace --all-features --locked`, then makes a virtual environment under the
//! target directory (`python-venv`), installs `./crates/compaction-python[haystack,test]` into it
//! with pip (maturin comes from PyPI through pip's build isolation; the `test` extra brings pytest
//! and the engines `compaction.batch` is tested on, Ray and Spark), and runs pytest. Spark needs
//! Java, which `.ci/setup` installs (this command runs it first when `java` is missing).
//! The batch tests compare with the `compaction` binary itself when the Rust part of the same run
//! has built it (`COMPACTION_BIN`), besides the CLI's outputs committed beside them.
//!
//! The package is built with the dev profile there (`MATURIN_PEP517_ARGS=--profile dev`) in the
//! same target directory, so it reuses the dependencies `cargo test` just compiled instead of
//! building them again with the release profile's whole-program optimisation; a user's
//! `pip install` builds the release profile.
//!
//! `--python` runs only the Python part; `--rust` only `cargo test`.
//!
//! [`mod@bench`] is section (l) of `cargo xtask bench-vs-reference` (`--only python`): the package
//! against Haystack on `ChatMessage` objects, and `compaction.batch` over a Parquet dataset, in a
//! virtual environment of its own (`bench-venv`, kept between runs) with the release build.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::project_root;

/// Runs `cargo xtask test [--rust | --python]`.
pub fn test(args: &[String]) -> Result<()> {
    let rust = !args.iter().any(|a| a == "--python");
    let python = !args.iter().any(|a| a == "--rust");
    if let Some(other) = args.iter().find(|a| *a != "--python" && *a != "--rust") {
        bail!("unknown option {other:?} for `cargo xtask test` (--rust, --python)");
    }
    if rust {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        run(Command::new(cargo).current_dir(project_root()).args([
            "test",
            "--workspace",
            "--all-features",
            "--locked",
        ]))?;
    }
    if python {
        // The binary is compared with only when this run built it: with `--python` alone it may
        // be older than the sources.
        python_tests(rust)?;
    }
    Ok(())
}

/// The target directory: `CARGO_TARGET_DIR` when set, else `target/` at the root.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                project_root().join(dir)
            }
        }
        _ => project_root().join("target"),
    }
}

/// Builds and installs the Python package in a fresh virtual environment, then runs its pytest
/// suite there.
fn python_tests(fresh_binary: bool) -> Result<()> {
    let root = project_root();
    if Command::new("java").arg("-version").output().is_err() {
        // The Spark tests need Java: the project's setup script installs Debian's.
        eprintln!("`java` is not on PATH, and the Spark tests need it: running .ci/setup");
        run(Command::new("bash").arg(root.join(".ci").join("setup"))).context(
            "the Spark tests need Java, and .ci/setup could not install it (Debian's default-jre-headless)",
        )?;
    }
    let target = target_dir();
    let venv = target.join("python-venv");
    if venv.exists() {
        std::fs::remove_dir_all(&venv).with_context(|| format!("removing {}", venv.display()))?;
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    run(Command::new(&python).args(["-m", "venv"]).arg(&venv))?;
    let venv_python = venv.join("bin").join("python");
    run(Command::new(&venv_python)
        .current_dir(&root)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .arg("./crates/compaction-python[haystack,test]")
        .env("CARGO_TARGET_DIR", &target)
        .env("MATURIN_PEP517_ARGS", "--profile dev")
        .env("HAYSTACK_TELEMETRY_ENABLED", "False"))?;
    let mut pytest = Command::new(&venv_python);
    // The CLI the batch API is compared with, built by `cargo test` (the Rust part).
    let binary = target.join("debug").join(format!("compaction{}", std::env::consts::EXE_SUFFIX));
    if fresh_binary && binary.is_file() {
        pytest.env("COMPACTION_BIN", &binary);
    }
    run(pytest
        .current_dir(root.join("crates").join("compaction-python"))
        .args(["-m", "pytest", "-p", "no:cacheprovider", "tests"])
        // Leaves no `__pycache__` in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("HAYSTACK_TELEMETRY_ENABLED", "False"))
}

fn run(command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("starting {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

/// Section (l) of `cargo xtask bench-vs-reference` (`--only python` runs it alone): the Python
/// package against Haystack 3.4.1 on `ChatMessage` objects, and `compaction.batch` over a
/// Parquet dataset. See [`bench::bench_section`].
pub(crate) mod bench {
    use std::fmt::Write as _;
    use std::path::PathBuf;
    use std::process::Command;

    use anyhow::{bail, Context, Result};
    use serde_json::Value;

    use super::target_dir;
    use crate::{dataset, gen, project_root, reference};

    /// What the benchmark environment is made of, beside the package itself (the versions the
    /// test suite pins, and maturin to build the package with the target directory's release
    /// profile).
    const REQUIREMENTS: &[&str] =
        &["haystack-ai==3.4.1", "tiktoken==0.14.0", "pyarrow==26.0.1", "maturin>=1.9,<2"];
    /// The batch run's goal: `target_tokens`, as the CLI's `--target-tokens`.
    const BATCH_TARGET: u64 = 30_000;
    /// The speed-up asked of every row (issue 28).
    const GOAL: f64 = 5.0;

    /// Section (l), appended to `text` with its Summary rows in `summary`. When Python, its
    /// `venv` module or the packages cannot be had (no network for pip), the section says so and
    /// why, and nothing fails: the other sections do not need Python.
    pub(crate) fn bench_section(
        runs: usize,
        with_1gb: bool,
        seed: u64,
        text: &mut String,
        summary: &mut Vec<String>,
    ) -> Result<()> {
        const TITLE: &str =
            "## (l) Python: compaction.haystack against Haystack, 50 MB; compaction.batch over Parquet";
        eprintln!("(l) Python: compaction.haystack against Haystack, and compaction.batch over Parquet");
        let python = match environment()? {
            Ok(python) => python,
            Err(reason) => {
                eprintln!("  (l) skipped: {reason}");
                let _ = writeln!(text, "{TITLE}\n\nSkipped: {reason}.\n");
                summary.push(format!("| (l) Python package vs Haystack | skipped | ≥ {GOAL}× | {reason} |"));
                return Ok(());
            }
        };
        let runs = runs.clamp(1, 3);
        let transcript = gen::cached("50MB", seed)?;
        let cache = tiktoken_cache()?;
        eprintln!("  compare.py: count and prune, ours and Haystack's alternating, best of {runs}");
        let bench = project_root().join("crates").join("compaction-python").join("bench");
        let compared = json_of(
            Command::new(&python)
                .arg(bench.join("compare.py"))
                .arg(&transcript)
                .args(["--runs", &runs.to_string(), "--json"])
                .env("TIKTOKEN_CACHE_DIR", &cache)
                .env("HAYSTACK_TELEMETRY_ENABLED", "False"),
        )?;
        let size = if with_1gb { "1GB" } else { "100MB" };
        let jsonl = dataset::cached(size, seed)?;
        let parquet = jsonl.with_extension("parquet");
        eprintln!("  batch_throughput.py: compaction.batch.compact over {}", parquet.display());
        let batch =
            json_of(
                Command::new(&python).arg(bench.join("batch_throughput.py")).arg(&jsonl).arg(&parquet).args(
                    ["--runs", &runs.to_string(), "--target-tokens", &BATCH_TARGET.to_string(), "--json"],
                ),
            )?;
        write(text, summary, &compared, &batch, runs)
    }

    /// The benchmark's Python (`<target>/bench-venv`), made on first use, with the package built
    /// from this tree (the release profile) and installed into it each time; `Err` says why
    /// there is none.
    fn environment() -> Result<std::result::Result<PathBuf, String>> {
        let root = project_root();
        let target = target_dir();
        let venv = target.join("bench-venv");
        let python = venv.join("bin").join("python");
        let bin = venv.join("bin");
        let path = match std::env::var_os("PATH") {
            Some(path) => {
                std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(&path)))?
            }
            None => bin.clone().into_os_string(),
        };
        if !python.exists() {
            let system = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
            eprintln!("  creating {} with {}", venv.display(), REQUIREMENTS.join(", "));
            match Command::new(&system).args(["-m", "venv"]).arg(&venv).status() {
                Ok(status) if status.success() => {}
                Ok(_) => return Ok(Err(format!("`{system} -m venv` failed (on Debian: python3-venv)"))),
                Err(_) => {
                    return Ok(Err(format!("no `{system}` to run (set PYTHON to a Python 3.10 or later)")))
                }
            }
            let installed = Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
                .args(REQUIREMENTS)
                .status();
            if !installed.is_ok_and(|status| status.success()) {
                // Made again next time rather than left half filled.
                let _ = std::fs::remove_dir_all(&venv);
                return Ok(Err(format!("pip could not install {} (no network?)", REQUIREMENTS.join(", "))));
            }
        }
        eprintln!("  building and installing ./crates/compaction-python (release profile)");
        let status = Command::new(&python)
            .current_dir(&root)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            .args(["--no-build-isolation", "--force-reinstall", "--no-deps", "./crates/compaction-python"])
            .env("PATH", path)
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .context("starting pip")?;
        if !status.success() {
            bail!("building ./crates/compaction-python into {} failed with {status}", venv.display());
        }
        Ok(Ok(python))
    }

    /// The tiktoken tables under the names Python tiktoken looks for (see
    /// [`reference::tiktoken_cache`]), made with the reference's environment when missing.
    fn tiktoken_cache() -> Result<PathBuf> {
        let cache = project_root().join("target").join("tiktoken-cache");
        let filled = std::fs::read_dir(&cache).is_ok_and(|mut entries| entries.next().is_some());
        if filled {
            Ok(cache)
        } else {
            reference::tiktoken_cache()
        }
    }

    fn json_of(command: &mut Command) -> Result<Value> {
        let output = command.output().with_context(|| format!("running {command:?}"))?;
        if !output.status.success() {
            bail!("{command:?} failed with {}: {}", output.status, String::from_utf8_lossy(&output.stderr));
        }
        serde_json::from_slice(&output.stdout).with_context(|| format!("reading the output of {command:?}"))
    }

    fn number(value: &Value, key: &str) -> Result<f64> {
        value.get(key).and_then(Value::as_f64).with_context(|| format!("no number {key:?} in {value}"))
    }

    /// The section's text and Summary rows from what the two scripts printed.
    fn write(
        text: &mut String,
        summary: &mut Vec<String>,
        compared: &Value,
        batch: &Value,
        runs: usize,
    ) -> Result<()> {
        let messages = number(compared, "messages")?;
        let conversion = number(compared, "conversion_in")?;
        let rows =
            compared.get("rows").and_then(Value::as_array).context("no rows in compare.py's output")?;
        let _ = writeln!(
            text,
            "## (l) Python: compaction.haystack against Haystack, 50 MB; compaction.batch over Parquet\n\n\
             Generated by `cargo xtask bench-vs-reference` (`--only python` runs it alone, in \
             `target/bench-venv` with the package built from this tree, release profile, and \
             haystack-ai 3.4.1, tiktoken 0.14.0, pyarrow 26.0.1): \
             `crates/compaction-python/bench/compare.py` and `bench/batch_throughput.py`. \
             `count()` and `compact()` called from Python on Haystack's own `ChatMessage` objects (the \
             50 MB Haystack transcript, {} messages, loaded once with `ChatMessage.from_dict`), \
             conversion in and out included: our side starts from the objects and ends with Haystack \
             `ChatMessage` objects (unchanged ones are the caller's own). Pruning targets half the \
             conversation's tokens. Ours and Haystack's runs alternate; best of {runs} each (of more, \
             up to 15, for a row whose runs took under two seconds in all); both sides' results are \
             checked equal (counts, and every message's `to_dict`). Load average when the section \
             ended: {}.\n",
            thousands(messages),
            load_average()
        );
        let _ = writeln!(
            text,
            "| operation | Haystack | ours | speed-up | of ours: conversion in |\n|---|---:|---:|---:|---:|"
        );
        let mut ratios = Vec::new();
        for row in rows {
            let operation = row.get("operation").and_then(Value::as_str).unwrap_or("?");
            let counter = row.get("counter").and_then(Value::as_str).unwrap_or("?");
            let counter = if counter == "tiktoken" { "tiktoken o200k_base" } else { counter };
            let (theirs, ours) = (number(row, "haystack")?, number(row, "ours")?);
            let label = match row.get("changed").and_then(Value::as_u64) {
                Some(changed) => {
                    format!("{operation}, {counter} ({} results pruned)", thousands(changed as f64))
                }
                None => format!("{operation}, {counter}"),
            };
            let ratio = theirs / ours;
            ratios.push((format!("{operation}, {counter}"), ratio));
            let _ = writeln!(
                text,
                "| {label} | {theirs:.3} s | {ours:.3} s | **{ratio:.1}×** | {:.0} % |",
                100.0 * conversion / ours
            );
        }
        let _ = writeln!(
            text,
            "\nConversion in (reading the {} objects into Rust, alone, as `_native.read_messages` \
             does): **{conversion:.3} s**. With the approximate counter it is most of what ours costs; what \
             follows it is the count (a pass over lengths) and, for pruning, building the rewritten \
             messages with Haystack's constructors. Reading the objects is Python attribute lookups, \
             each tool call's argument dictionary written straight to the compact JSON text \
             compaction-model keeps, and the texts: one of 256 bytes or more is borrowed from the \
             Python string, with the length Python already knows (compaction-model's shared \
             `Text`), a shorter one copied into a Rust string. What is left is mostly the attribute \
             lookups, a handful a message and a part; reading Haystack's fields in fewer calls would \
             cut it further. With tiktoken the conversion is the same and the rest is byte-pair encoding \
             (compaction-tokens, bpe-openai, spread over the cores), where Haystack's tiktoken \
             encodes the whole rendered conversation on one core.\n",
            thousands(messages)
        );
        let gb = number(batch, "bytes")? / 1e9;
        let (read, seconds, native, converting) = (
            number(batch, "read")?,
            number(batch, "compact")?,
            number(batch, "native")?,
            number(batch, "conversion")?,
        );
        let _ = writeln!(
            text,
            "`compaction.batch.compact(table, \"messages\", target_tokens={BATCH_TARGET}, counter=\"approximate\")` \
             over the {}-row Parquet file written from the `gen-dataset` JSON Lines dataset ({:.2} GB of \
             conversations in one string column, {:.0} MB of Parquet; read with \
             `pyarrow.parquet.read_table`, not counted in the throughput), on {} cores; best of {runs}:\n\n\
             | read_table | compact, end to end | throughput | native call (every row read, compacted, written; GIL released) | conversion in Python and pyarrow | rows failed | tokens before → after |\n\
             |---:|---:|---:|---:|---:|---:|---|\n\
             | {read:.2} s | {seconds:.2} s | **{:.0} MB/s** | {native:.2} s | {converting:.2} s ({:.0} %) | {} | {} → {} |\n",
            thousands(number(batch, "rows")?),
            gb,
            number(batch, "parquet_bytes")? / 1e6,
            number(batch, "cores")?,
            gb * 1e3 / seconds,
            100.0 * converting / seconds,
            number(batch, "failed")?,
            thousands(number(batch, "tokens_before")?),
            thousands(number(batch, "tokens_after")?),
        );
        let _ = writeln!(
            text,
            "The conversion: the column is cast to `large_binary` (its data shared, its offsets \
             widened), each chunk's data copied into a `bytes` for the native side, which copies \
             each row again as the thread that reads it takes it; the rows' outputs are copied \
             into one `bytes`, made an Arrow array without a copy and cast back to the column's type (a failed row's input is put back with `if_else` \
             only when a row failed). What would cut it: reading the Arrow buffers in place \
             without a `bytes` copy (the buffer protocol, which the stable ABI has from Python \
             3.11, or the Arrow C data interface), and each row's output written where it goes in \
             that `bytes` instead of a buffer of its own first.\n"
        );
        let list = ratios.iter().map(|(_, r)| format!("{r:.1}×")).collect::<Vec<_>>().join(" / ");
        let missed: Vec<&str> =
            ratios.iter().filter(|(_, r)| *r < GOAL).map(|(label, _)| label.as_str()).collect();
        let verdict =
            if missed.is_empty() { "met".to_owned() } else { format!("**not met** ({})", missed.join("; ")) };
        summary.push(format!(
            "| (l) Python `compaction.haystack` on `ChatMessage` objects vs Haystack, 50 MB: count / prune, approximate; count / prune, tiktoken | {list} | ≥ {GOAL}× | {verdict} |"
        ));
        summary.push(format!(
            "| (l) `compaction.batch.compact` over {gb:.1} GB of Parquet, end to end (conversion {:.0} %) | {:.0} MB/s | | |",
            100.0 * converting / seconds,
            gb * 1e3 / seconds
        ));
        Ok(())
    }

    /// A whole number with thousands separators: `12,205`.
    fn thousands(value: f64) -> String {
        let digits = format!("{:.0}", value.abs());
        let mut out = String::new();
        for (index, digit) in digits.chars().enumerate() {
            if index > 0 && (digits.len() - index) % 3 == 0 {
                out.push(',');
            }
            out.push(digit);
        }
        if value < 0.0 {
            out.insert(0, '-');
        }
        out
    }

    /// The load average, as /proc/loadavg gives it (`unknown` elsewhere).
    fn load_average() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .ok()
            .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
            .unwrap_or_else(|| "unknown".into())
    }

    #[cfg(test)]
    mod tests {
        use serde_json::json;

        use super::{thousands, write};

        #[test]
        fn thousands_are_separated_by_commas() {
            for (value, text) in
                [(0.0, "0"), (999.0, "999"), (12_205.0, "12,205"), (181_404_488.0, "181,404,488")]
            {
                assert_eq!(thousands(value), text);
            }
        }

        /// What the two scripts print, with the speed-ups `ratios` (Haystack's time over ours).
        fn section(ratios: [f64; 4]) -> Vec<String> {
            let rows: Vec<_> = [
                ("count", "approximate"),
                ("prune", "approximate"),
                ("count", "tiktoken"),
                ("prune", "tiktoken"),
            ]
            .iter()
            .zip(ratios)
            .map(|((operation, counter), ratio)| match *operation {
                "prune" => json!({"operation": operation, "counter": counter, "haystack": ratio, "ours": 1.0,
                        "target": 100, "changed": 2825}),
                _ => json!({"operation": operation, "counter": counter, "haystack": ratio, "ours": 1.0}),
            })
            .collect();
            let compared = json!({"messages": 12205, "conversion_in": 0.05, "rows": rows});
            let batch = json!({"bytes": 1e9, "read": 1.0, "compact": 2.0, "native": 1.5, "conversion": 0.5,
                "rows": 2142, "parquet_bytes": 3.6e8, "cores": 2, "failed": 0, "tokens_before": 10, "tokens_after": 5});
            let (mut text, mut summary) = (String::new(), Vec::new());
            write(&mut text, &mut summary, &compared, &batch, 3).expect("the scripts' figures are complete");
            assert!(text.contains("12,205 messages"), "{text}");
            assert!(text.contains("| prune, approximate (2,825 results pruned) |"), "{text}");
            assert!(text.contains("**500 MB/s**"), "{text}");
            summary
        }

        #[test]
        fn the_goal_is_met_only_when_every_row_is_five_times_haystacks() {
            let met = section([5.0, 6.0, 5.5, 7.0]);
            assert!(met[0].ends_with("| ≥ 5× | met |"), "{}", met[0]);
            let missed = section([5.0, 4.9, 5.5, 2.0]);
            assert!(
                missed[0].contains("**not met** (prune, approximate; prune, tiktoken o200k_base)"),
                "{}",
                missed[0]
            );
            assert!(missed[1].contains("500 MB/s") && missed[1].contains("conversion 25 %"), "{}", missed[1]);
        }
    }
}
