//! `cargo xtask msrv`: the MSRV job. Each published crate is checked (libraries, tests and
//! examples, every feature, the locked dependencies) with the Rust its `rust-version` declares,
//! wherever that toolchain is installed: the running one, or one rustup has.
//!
//! What no toolchain here can build is said, not passed over in silence; `--require-all` makes
//! it an error (for a machine that installs them: `rustup toolchain install 1.88`). The tidy
//! tests and clippy's `incompatible_msrv` check the rest without any other toolchain: that each
//! declared version covers what the dependencies declare, and that no std API is newer.

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::project_root;

pub fn msrv(args: &[String]) -> Result<()> {
    let require_all = args.iter().any(|a| a == "--require-all");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(project_root())
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: Value = serde_json::from_slice(&output.stdout).context("reading cargo metadata")?;

    // Published crates (no `publish = false`), grouped by the Rust they declare.
    let mut by_version: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        if !package["publish"].is_null() {
            continue;
        }
        let name = package["name"].as_str().unwrap_or_default().to_owned();
        let Some(version) = package["rust_version"].as_str() else {
            bail!("{name} is published but declares no rust-version");
        };
        by_version.entry(version.to_owned()).or_default().push(name);
    }

    let current = rustc_version("rustc", &[]).context("reading the running rustc's version")?;
    let mut missing = Vec::new();
    for (version, crates) in &by_version {
        let list = crates.join(", ");
        // The running toolchain when it is the declared one, else the one rustup has installed.
        let command: Vec<String> = if same_version(&current, version) {
            vec![cargo.clone()]
        } else if let Some(toolchain) = installed_toolchain(version) {
            vec!["rustup".into(), "run".into(), toolchain, "cargo".into()]
        } else {
            println!("msrv: Rust {version} is not installed here (this is {current}); not built: {list}");
            missing.push(version.clone());
            continue;
        };
        println!("msrv: checking {list} with Rust {version}");
        let mut check = Command::new(&command[0]);
        check.args(&command[1..]).args(["check", "--locked", "--all-features", "--all-targets"]);
        for krate in crates {
            check.args(["-p", krate]);
        }
        // Another toolchain's artifacts go beside the usual ones, not over them.
        if command[0] != cargo {
            check.env("CARGO_TARGET_DIR", project_root().join("target").join(format!("msrv-{version}")));
        }
        let status = check.current_dir(project_root()).status().context("running cargo check")?;
        if !status.success() {
            bail!("{list} do not build with Rust {version}, which they declare");
        }
    }
    if !missing.is_empty() {
        let versions = missing.join(" ");
        if require_all {
            bail!("no toolchain for Rust {versions}: `rustup toolchain install {versions}`");
        }
        println!(
            "msrv: the declared versions are checked against the dependencies (tidy tests) and std \
             (clippy's incompatible_msrv); to build with them too: `rustup toolchain install {versions}`"
        );
    }
    Ok(())
}

/// `1.95.0` from `rustc 1.95.0 (59807616e 2026-04-14)`; `None` if the command cannot run.
fn rustc_version(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).arg("--version").output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.split_whitespace().nth(1).map(str::to_owned)
}

/// The rustup toolchain of the declared version (`1.88.0-x86_64-unknown-linux-gnu` for `1.88`),
/// if one is installed. Read from the list, so that rustup is never asked to download one.
fn installed_toolchain(declared: &str) -> Option<String> {
    let output = Command::new("rustup").args(["toolchain", "list"]).output().ok()?;
    let list = String::from_utf8_lossy(&output.stdout).into_owned();
    list.lines()
        .filter_map(|line| line.split_whitespace().next())
        .find(|toolchain| {
            toolchain.split_once('-').is_some_and(|(version, _)| same_version(version, declared))
        })
        .map(str::to_owned)
}

/// Whether a toolchain's version (`1.95.0`; not a nightly) is the declared one: `1.95` means any
/// 1.95.x, `1.95.0` that one.
fn same_version(full: &str, declared: &str) -> bool {
    let numbers = |v: &str| -> Option<Vec<u64>> { v.split('.').map(|p| p.parse().ok()).collect() };
    match (numbers(full), numbers(declared)) {
        (Some(full), Some(declared)) => {
            full.len() >= declared.len() && full[..declared.len()] == declared[..]
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::same_version;

    #[test]
    fn versions_compare_as_numbers() {
        assert!(same_version("1.95.0", "1.95"));
        assert!(same_version("1.95.1", "1.95"));
        assert!(same_version("1.95.0", "1.95.0"));
        assert!(!same_version("1.95.1", "1.95.0"));
        assert!(!same_version("1.88.0", "1.95"));
        assert!(!same_version("1.195.0", "1.95"));
        assert!(!same_version("1.95.0-nightly", "1.95"));
        assert!(!same_version("nightly", "1.95"));
    }
}
