//! Running the reference: Haystack 3.4.1 in a virtual environment, for fixtures and
//! differential checks.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{flag_value, project_root};

const REFERENCE: &str = "haystack-ai==3.4.1";

/// The Python interpreter of `.venv-ref`, made (and filled) on first use.
pub(crate) fn reference_python() -> Result<PathBuf> {
    let root = project_root();
    let venv = root.join(".venv-ref");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        eprintln!("creating {} with {REFERENCE}", venv.display());
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    let installed = Command::new(&python)
        .args(["-c", "import haystack, tiktoken, tokenizers; from importlib.metadata import version; assert version('haystack-ai') == '3.4.1'"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !installed {
        run(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            REFERENCE,
            "tiktoken",
            "tokenizers",
        ]))?;
    }
    Ok(python)
}

/// A folder with the `.tiktoken` tables tiktoken-rs ships, saved under the names Python
/// tiktoken looks for (the SHA-1 of the URL it would download), so it never needs the network.
pub(crate) fn tiktoken_cache() -> Result<PathBuf> {
    let cache = project_root().join("target").join("tiktoken-cache");
    std::fs::create_dir_all(&cache)?;
    let assets = tiktoken_rs_assets()?;
    let python = reference_python()?;
    let script = r#"
import hashlib, shutil, sys, os
assets, cache = sys.argv[1], sys.argv[2]
base = "https://openaipublic.blob.core.windows.net/"
files = {f"encodings/{e}.tiktoken": f"{e}.tiktoken" for e in ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]}
files.update({"gpt-2/encodings/main/vocab.bpe": "vocab.bpe", "gpt-2/encodings/main/encoder.json": "encoder.json"})
for url, name in files.items():
    source = os.path.join(assets, name)
    if os.path.exists(source):
        shutil.copyfile(source, os.path.join(cache, hashlib.sha1((base + url).encode()).hexdigest()))
"#;
    run(Command::new(python).args(["-c", script]).arg(&assets).arg(&cache))?;
    Ok(cache)
}

/// The `assets/` folder of the tiktoken-rs crate in the cargo registry.
fn tiktoken_rs_assets() -> Result<PathBuf> {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1"])
        .current_dir(project_root())
        .output()
        .context("running cargo metadata")?;
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("reading cargo metadata")?;
    for package in metadata["packages"].as_array().into_iter().flatten() {
        if package["name"] == "tiktoken-rs" {
            if let Some(manifest) = package["manifest_path"].as_str() {
                return Ok(Path::new(manifest).with_file_name("assets"));
            }
        }
    }
    bail!("tiktoken-rs is not in the dependency graph")
}

pub(crate) fn run(command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

fn generator(out_root: &Path, seed: &str, extra: &[&str]) -> Result<()> {
    let python = reference_python()?;
    let cache = tiktoken_cache()?;
    let script = project_root().join("xtask").join("reference").join("generate.py");
    run(Command::new(python)
        .arg(script)
        .arg("--out-root")
        .arg(out_root)
        .args(["--seed", seed])
        .args(extra)
        .env("TIKTOKEN_CACHE_DIR", cache)
        .env("HAYSTACK_TELEMETRY_ENABLED", "False"))
}

/// compaction-llm's conversion fixtures (`generate_llm.py`), into `out_root`.
fn llm_generator(out_root: &Path, seed: &str, extra: &[&str]) -> Result<()> {
    let python = reference_python()?;
    let script = project_root().join("xtask").join("reference").join("generate_llm.py");
    run(Command::new(python)
        .arg(script)
        .arg("--out-root")
        .arg(out_root)
        .args(["--seed", seed])
        .args(extra)
        .env("HAYSTACK_TELEMETRY_ENABLED", "False"))
}

/// `cargo xtask fixtures`: regenerate the committed fixtures.
pub fn fixtures(args: &[String]) -> Result<()> {
    let seed = flag_value(args, "--seed").unwrap_or("1");
    let mut extra = Vec::new();
    if let Some(k) = flag_value(args, "--random-cases") {
        extra.extend(["--random-cases", k]);
    }
    family_generator(&project_root(), seed, &extra)?;
    generator(&project_root(), seed, &extra)?;
    llm_generator(&project_root(), seed, &extra)?;
    let python = reference_python()?;
    let script = project_root().join("xtask").join("reference").join("generate_offload.py");
    run(Command::new(python).arg(script).arg(project_root()).env("HAYSTACK_TELEMETRY_ENABLED", "False"))
}

/// `cargo xtask differential`: fresh random cases through the reference, then through the
/// conformance tests of every crate, pointed at them with `COMPACTION_EXTRA_FIXTURES`.
pub fn differential(args: &[String]) -> Result<()> {
    let seed = flag_value(args, "--seed").map(str::to_owned).unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        (now.as_secs() % 1_000_000).to_string()
    });
    let cases = flag_value(args, "--cases").unwrap_or("200");
    let out = project_root().join("target").join("differential").join(&seed);
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    std::fs::create_dir_all(&out)?;
    eprintln!("differential run: seed {seed}, {cases} random cases per kind, in {}", out.display());
    family_generator(&out, &seed, &["--random-cases", cases])?;
    generator(&out, &seed, &["--random-cases", cases])?;
    llm_generator(&out, &seed, &["--random-cases", cases])?;
    run(Command::new(env!("CARGO"))
        .args(["test", "--workspace", "--all-features", "--test", "integration", "--", "conformance"])
        .current_dir(project_root())
        .env("COMPACTION_EXTRA_FIXTURES", &out))?;
    eprintln!("no disagreement with the reference on seed {seed}");
    Ok(())
}

/// The fixtures of the rest of the compaction family (`generate_family.py`: sliding window,
/// summarization, the budget hook, the compaction hook driving the first two), into `out_root`.
fn family_generator(out_root: &Path, seed: &str, extra: &[&str]) -> Result<()> {
    let python = reference_python()?;
    let cache = tiktoken_cache()?;
    let script = project_root().join("xtask").join("reference").join("generate_family.py");
    run(Command::new(python)
        .arg(script)
        .arg("--out-root")
        .arg(out_root)
        .args(["--seed", seed])
        .args(extra)
        .env("TIKTOKEN_CACHE_DIR", cache)
        .env("HAYSTACK_TELEMETRY_ENABLED", "False"))
}
