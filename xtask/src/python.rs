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
