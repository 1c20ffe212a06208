//! `cargo xtask bench-vs-reference`: this project and Haystack 3.4.1 side by side on the same
//! synthetic transcripts, alternating runs, with the results written to BENCHMARKS.md.
//!
//! Every Haystack transcript is measured in the three spellings users have: serde_json's compact
//! JSON (our own output, and the generator's), Python's `json.dump(..., ensure_ascii=False)` and
//! Python's `json.dump(...)` (every non-ASCII character a `\uXXXX` escape). The Python ones are
//! written by Python itself, in the reference's virtual environment. Each ratio is reported for
//! each spelling, and a goal holds only when it holds for all of them.
//!
//! Our side is release builds run as processes: `measure` (benches package) for `compact()`
//! timings and counting texts, `compaction prune` and `compaction count` for end-to-end runs.
//! The reference side is `xtask/reference/bench_reference.py` in `.venv-ref`.
//!
//! Two sections measure this project alone, and can be run alone (`--only dataset,memory-by-format`,
//! printed instead of written to BENCHMARKS.md, with neither the reference nor the other
//! transcripts prepared): (j) `compaction bench` over a JSON Lines dataset of whole trajectories
//! (`gen-dataset`), and (k) the peak memory of `count` and `simulate` on each format the
//! generator writes; and (m) `compaction proxy` under load (`--only proxy-load`, see
//! `proxyload.rs`). Section (l), the Python package against Haystack and its batch API over
//! Parquet, runs alone too (`--only python`; see `python.rs`), in a virtual environment of its own.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::logs::LogFormat;
use crate::{dataset, flag_value, gen, project_root, proxyload, python, reference};

const SEED: u64 = 1;
/// Compaction targets are this share of the transcript's tokens.
const TARGET_FRACTION: f64 = 0.4;
/// How many runs (j) takes of `bench` over an input of one line, at least: the largest peak of
/// them, as of the dataset's runs.
const ONE_LINE_RUNS: usize = 10;
/// Section (j)'s arguments of `compaction bench` after the dataset: six configurations with
/// `none`.
const DATASET_BENCH: &[&str] = &[
    "--context-window",
    "32000",
    "--counter",
    "approximate",
    "--strategy",
    "tool-result-pruning,observation-masking,sliding-window",
    "--set",
    "min_tokens=0,200",
    "--set",
    "keep_observations=3,5",
];
/// Section (j)'s tiny line, for the process's own footprint: an OpenAI request of two short
/// messages.
const TINY_LINE: &str =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}, {\"role\": \"assistant\", \"content\": \"Hi\"}]}\n";
/// Section (k)'s arguments of `compaction simulate` after the file.
const SIMULATE: &[&str] = &["--context-window", "200000", "--counter", "approximate", "--quiet"];
/// The tool outputs' lines of (k)'s densest OpenAI shape.
const DENSE_TOOL_LINES: (usize, usize) = (2, 12);
/// The HuggingFace tokenizers of the conformance tests, compared with Python's `tokenizers`.
const TOKENIZERS: &[&str] = &["bytelevel_bpe", "unigram_metaspace", "wordpiece_bert"];

/// The sections `--only` runs, by name.
const ALONE: [&str; 4] = ["dataset", "memory-by-format", "python", "proxy-load"];

/// `cargo xtask bench-vs-reference [--runs N] [--skip-1gb] [--only SECTIONS]`.
pub fn bench_vs_reference(args: &[String]) -> Result<()> {
    let runs: usize = flag_value(args, "--runs").unwrap_or("5").parse().context("--runs takes a number")?;
    let runs = runs.max(1);
    let with_1gb = !args.iter().any(|a| a == "--skip-1gb");
    if let Some(only) = flag_value(args, "--only") {
        return run_alone(only, with_1gb, runs);
    }
    let bench = Bench::prepare(with_1gb)?;
    let mut report = Report::new(&bench, runs)?;

    eprintln!("(a) compact(), approximate counter, 50MB");
    let a = bench.transcripts.big.iter().map(|form| bench.compare_compact(form, "approximate", runs));
    let a = a.collect::<Result<Vec<_>>>()?;
    report.compact("(a) compact(), approximate counter, 50 MB", &a, 30.0);

    eprintln!("(b) compact(), tiktoken o200k_base, 19MB");
    let b = bench.transcripts.mid.iter().map(|form| bench.compare_compact(form, "tiktoken:o200k_base", runs));
    let b = b.collect::<Result<Vec<_>>>()?;
    report.compact("(b) compact(), tiktoken o200k_base, 19 MB", &b, 4.0);

    eprintln!("(c) prune end to end, approximate counter, 50MB");
    let c = bench
        .transcripts
        .big
        .iter()
        .zip(&a)
        .map(|(form, a)| bench.compare_prune(form, a.target, runs))
        .collect::<Result<Vec<_>>>()?;
    report.prune(&c);

    eprintln!("(d) peak memory of compaction prune against input size");
    let d = bench.memory_by_size()?;
    report.memory(&d, &c);

    eprintln!("(e) hook over a simulated 2,000-step run");
    let mut command = Command::new(&bench.measure);
    command.arg(&bench.transcripts.big[0].path).args(["--counter", "approximate", "--hook-steps", "2000"]);
    let e = json_output(&mut command)?;
    report.hook_run(&e);

    eprintln!("(f) log formats: count and prune");
    // A run takes a fifth of a second and this machine's noise is as large as what is measured:
    // three times the runs for a steadier median.
    let f = bench.log_formats(runs * 3)?;
    report.log_formats(&f);

    eprintln!("(g) HuggingFace counting against Python tokenizers");
    let g = bench.huggingface(runs.min(3))?;
    report.huggingface(&g);

    eprintln!("(h) release binary size");
    let h = bench.binary_size()?;
    let start = ["approximate", "tiktoken:o200k_base", "tiktoken:cl100k_base"]
        .iter()
        .map(|counter| Ok((*counter, bench.start_up(counter, runs)?)))
        .collect::<Result<Vec<_>>>()?;
    report.binary(h, &start);

    if let Some(huge) = bench.transcripts.by_size.get(4) {
        eprintln!("(i) every command on 1 GB");
        let i = bench.every_command(huge, runs.min(3))?;
        report.every_command(&i);
    }

    let j = bench.dataset(with_1gb, runs.min(3))?;
    report.dataset(&j);
    let k = bench.memory_by_format(with_1gb)?;
    report.memory_by_format(&k);
    python_section(&mut report, runs, with_1gb)?;
    let m = proxyload::run(&bench.cli)?;
    m.write(&mut report.text, &mut report.summary);

    let path = project_root().join("BENCHMARKS.md");
    std::fs::write(&path, report.finish()).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// `--only`: the sections named in `only` (a comma list of [`ALONE`]), printed to standard
/// output with their Summary rows; BENCHMARKS.md is left as it is.
fn run_alone(only: &str, with_1gb: bool, runs: usize) -> Result<()> {
    let sections: Vec<&str> = only.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if let Some(unknown) = sections.iter().find(|s| !ALONE.contains(s)) {
        bail!(
            "--only {unknown:?}: the sections that run alone are {} (the others need the reference \
             and each other's results: run the whole benchmark)",
            ALONE.join(", ")
        );
    }
    if sections.is_empty() {
        bail!("--only takes a comma list of sections: {}", ALONE.join(", "));
    }
    let mut report = Report { text: String::new(), summary: Vec::new() };
    if sections.contains(&"python") {
        python_section(&mut report, runs, with_1gb)?;
    }
    if sections.iter().all(|s| *s == "python") {
        // The Python section builds what it runs itself.
        print!("{}", report.finish());
        return Ok(());
    }
    let bench = Bench::binaries(false)?;
    if sections.contains(&"dataset") {
        let j = bench.dataset(with_1gb, runs.min(3))?;
        report.dataset(&j);
    }
    if sections.contains(&"memory-by-format") {
        let k = bench.memory_by_format(with_1gb)?;
        report.memory_by_format(&k);
    }
    if sections.contains(&"proxy-load") {
        let m = proxyload::run(&bench.cli)?;
        m.write(&mut report.text, &mut report.summary);
    }
    print!("{}", report.finish());
    Ok(())
}

/// Section (l): the Python package against Haystack, and its batch API over Parquet (see
/// `python::bench`); skipped, saying why, when Python or its packages cannot be had.
fn python_section(report: &mut Report, runs: usize, with_1gb: bool) -> Result<()> {
    python::bench::bench_section(runs, with_1gb, SEED, &mut report.text, &mut report.summary)
}

/// One spelling of a transcript.
struct Form {
    /// Its name in tables.
    label: &'static str,
    path: PathBuf,
}

#[derive(Default)]
struct Transcripts {
    /// 50 MB, in every spelling; the first is serde_json's.
    big: Vec<Form>,
    /// 19 MB, in every spelling.
    mid: Vec<Form>,
    /// 1, 10, 19 and 50 MB (and 1 GB when asked), serde_json's spelling.
    by_size: Vec<PathBuf>,
    /// 50 MB as a Claude Code session and as an OpenAI request.
    logs: Vec<(LogFormat, PathBuf)>,
    /// 10 MB, for the tokenizer comparison.
    small: PathBuf,
}

struct Bench {
    python: PathBuf,
    tiktoken_cache: PathBuf,
    script: PathBuf,
    measure: PathBuf,
    cli: PathBuf,
    time: Option<PathBuf>,
    scratch: PathBuf,
    transcripts: Transcripts,
}

/// One side's timings of `compact()`, and the answer it gave.
struct CompactRun {
    seconds: Vec<f64>,
    /// Ours only: `apply()` of each run's compaction, building the compacted conversation.
    apply_seconds: Vec<f64>,
    pruned: u64,
}

struct CompactComparison {
    label: &'static str,
    ours: CompactRun,
    reference: CompactRun,
    messages: u64,
    total_tokens: u64,
    target: u64,
    identical: bool,
}

#[derive(Default)]
struct ProcessRun {
    seconds: f64,
    max_rss_kib: u64,
    /// CPU time in user space and in the kernel, and minor page faults (from `/usr/bin/time`).
    user: f64,
    system: f64,
    page_faults: u64,
}

/// Our prune's phases, from its `--report`, in milliseconds.
#[derive(Default, Clone, Copy)]
struct Phases {
    read: f64,
    parse: f64,
    compact: f64,
    write: f64,
}

struct PruneComparison {
    label: &'static str,
    bytes: u64,
    ours: Vec<ProcessRun>,
    phases: Vec<Phases>,
    reference: Vec<ProcessRun>,
    reference_in_script: Vec<f64>,
    identical: bool,
}

/// `count` and `prune` on one log format.
struct LogRun {
    format: LogFormat,
    bytes: u64,
    count: Vec<ProcessRun>,
    prune: Vec<ProcessRun>,
    tokens: u64,
}

/// One command of section (i), on one input.
struct CommandRun {
    /// What was run, as the table shows it.
    label: &'static str,
    bytes: u64,
    run: ProcessRun,
}

/// Section (j): `compaction bench` over a dataset.
struct DatasetRun {
    /// The dataset's size as generated (`1GB`).
    size: &'static str,
    stats: dataset::Stats,
    /// The same command over one line of two short messages: the process's own footprint.
    tiny: ProcessRun,
    /// The same command over the longest line alone, and over that line ten times.
    longest: ProcessRun,
    longest_ten: ProcessRun,
    /// The median run by wall time; its peak RSS is the largest of all runs.
    run: ProcessRun,
    runs: Vec<f64>,
    /// With the 1 GB dataset, the same over the 100 MB one (its stats, the run, its longest line
    /// alone): whether the peak grows with the dataset.
    smaller: Option<(dataset::Stats, ProcessRun, ProcessRun)>,
    /// The same over the dataset twice over (every line twice, so the same longest line): whether
    /// the peak grows with the data when the largest transcript stays the same.
    doubled: ProcessRun,
    /// The same over the dataset with mimalloc's default purge delay (`MIMALLOC_PURGE_DELAY=10`;
    /// `bench` sets it to 0 when the environment does not): what that setting buys.
    default_purge_delay: ProcessRun,
    /// What the command printed: its table of configurations, and its last line.
    table: String,
    configurations: usize,
    benchmarked: usize,
    failed: usize,
}

/// Section (k): `count` and `simulate` on one format.
struct FormatMemory {
    label: &'static str,
    bytes: u64,
    count: ProcessRun,
    simulate: ProcessRun,
    /// Whether the goal is expected to be missed, and said so beside the row.
    dense: bool,
}

/// One tokenizer counted by both sides.
struct TokenizerRun {
    name: &'static str,
    bytes: u64,
    ours_tokens: u64,
    reference_tokens: u64,
    ours: Vec<f64>,
    reference: Vec<f64>,
}

impl Bench {
    fn prepare(with_1gb: bool) -> Result<Bench> {
        let root = project_root();
        let python = reference::reference_python()?;
        let tiktoken_cache = reference::tiktoken_cache()?;
        let script = root.join("xtask").join("reference").join("bench_reference.py");
        eprintln!("generating transcripts in target/transcripts/");
        let mut sizes = vec!["1MB", "10MB", "19MB", "50MB"];
        if with_1gb {
            sizes.push("1GB");
        }
        let by_size = sizes.iter().map(|s| gen::cached(s, SEED)).collect::<Result<Vec<_>>>()?;
        let forms = |path: &Path| -> Result<Vec<Form>> {
            let python_path = path.with_extension("python.json");
            let ascii_path = path.with_extension("python-ascii.json");
            if !(python_path.exists() && ascii_path.exists()) {
                eprintln!("  Python writes {} in its two spellings", path.display());
                json_output(
                    Command::new(&python)
                        .arg(&script)
                        .arg("write-forms")
                        .arg(path)
                        .arg("--python")
                        .arg(&python_path)
                        .arg("--python-ascii")
                        .arg(&ascii_path)
                        .env("HAYSTACK_TELEMETRY_ENABLED", "False"),
                )?;
            }
            Ok(vec![
                Form { label: "serde_json compact", path: path.to_owned() },
                Form { label: "Python `ensure_ascii=False`", path: python_path },
                Form { label: "Python default (`\\uXXXX`)", path: ascii_path },
            ])
        };
        let big = forms(&by_size[3])?;
        let mid = forms(&by_size[2])?;
        let logs = [LogFormat::ClaudeCode, LogFormat::OpenAi]
            .into_iter()
            .map(|format| Ok((format, gen::cached_in("50MB", SEED, format)?)))
            .collect::<Result<Vec<_>>>()?;
        let transcripts = Transcripts { big, mid, small: by_size[1].clone(), by_size, logs };
        let mut bench = Bench::binaries(true)?;
        bench.python = python;
        bench.tiktoken_cache = tiktoken_cache;
        bench.script = script;
        bench.transcripts = transcripts;
        Ok(bench)
    }

    /// Builds the release binaries (`measure` only with `with_measure`), for a bench with no
    /// transcripts and no reference yet: what the sections that run alone need.
    fn binaries(with_measure: bool) -> Result<Bench> {
        let root = project_root();
        eprintln!("building release binaries");
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--release", "--quiet"]);
        if with_measure {
            build.args(["-p", "compaction-benches", "--bin", "measure"]);
        }
        reference::run(build.args(["-p", "compaction-cli", "--bin", "compaction"]).current_dir(&root))?;
        let target =
            std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
        let release = target.join("release");
        let scratch = root.join("target").join("bench-vs-reference");
        std::fs::create_dir_all(&scratch)?;
        let time = Some(PathBuf::from("/usr/bin/time")).filter(|t| t.exists());
        if time.is_none() && !with_measure {
            // Without it, peak memory is read through the reference's script, not prepared here.
            bail!("the sections that run alone measure peak memory with /usr/bin/time, which is absent");
        }
        Ok(Bench {
            python: PathBuf::new(),
            tiktoken_cache: PathBuf::new(),
            script: PathBuf::new(),
            measure: release.join("measure"),
            cli: release.join("compaction"),
            time,
            scratch,
            transcripts: Transcripts::default(),
        })
    }

    /// Section (j): `compaction bench --jsonl` over the dataset of 1 GB (100 MB without the 1 GB
    /// runs), six configurations, `runs` times; over one tiny line, for the process's own
    /// footprint; over the dataset's longest line alone, for what one transcript in flight
    /// costs; and, with 1 GB, over the 100 MB dataset, for whether the peak grows with the data.
    fn dataset(&self, with_1gb: bool, runs: usize) -> Result<DatasetRun> {
        let size = if with_1gb { "1GB" } else { "100MB" };
        eprintln!("(j) compaction bench over a {size} dataset of trajectories");
        let path = dataset::cached(size, SEED)?;
        let stats = dataset::stats_of(&path)?;
        let tiny = self.scratch.join("dataset-tiny-line.jsonl");
        std::fs::write(&tiny, TINY_LINE)?;
        let command = |input: &Path| {
            let mut command = Command::new(&self.cli);
            command.arg("bench").arg("--jsonl").arg(input).args(DATASET_BENCH);
            command
        };
        // The largest peak of `runs` runs, as of the dataset; of at least ten for the inputs of one
        // line (hundredths of a second each), whose peak depends more on how the threads overlap.
        let largest_of = |input: &Path, runs: usize| -> Result<ProcessRun> {
            let mut all = (0..runs).map(|_| self.timed(command(input))).collect::<Result<Vec<_>>>()?;
            all.sort_by_key(|r| r.max_rss_kib);
            Ok(all.pop().unwrap_or_default())
        };
        let largest = |input: &Path| largest_of(input, runs);
        let largest_line = |input: &Path| largest_of(input, runs.max(ONE_LINE_RUNS));
        let longest_alone = |dataset: &Path, name: &str| -> Result<ProcessRun> {
            let mut longest = dataset::longest_line(dataset)?;
            longest.push(b'\n');
            let one = self.scratch.join(name);
            std::fs::write(&one, &longest)?;
            largest_line(&one)
        };
        let tiny_run = largest_line(&tiny)?;
        let longest = longest_alone(&path, "dataset-longest.jsonl")?;
        let ten = self.scratch.join("dataset-longest-x10.jsonl");
        std::fs::write(&ten, std::fs::read(self.scratch.join("dataset-longest.jsonl"))?.repeat(10))?;
        let longest_ten = largest(&ten)?;
        let _ = std::fs::remove_file(&ten);
        let mut all = Vec::new();
        let mut printed = String::new();
        for run in 0..runs {
            let (process, stdout) = self.timed_stdout(command(&path))?;
            eprintln!(
                "  run {}: {:.2} s, {:.0} MB",
                run + 1,
                process.seconds,
                process.max_rss_kib as f64 / 1024.0
            );
            all.push(process);
            printed = stdout;
        }
        let seconds: Vec<f64> = all.iter().map(|r| r.seconds).collect();
        let peak = all.iter().map(|r| r.max_rss_kib).max().unwrap_or(0);
        all.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        let mut run = all.swap_remove(all.len() / 2);
        run.max_rss_kib = peak;
        let smaller = if with_1gb {
            eprintln!("  the same over the 100 MB dataset");
            let small = dataset::cached("100MB", SEED)?;
            Some((
                dataset::stats_of(&small)?,
                largest(&small)?,
                longest_alone(&small, "dataset-100MB-longest.jsonl")?,
            ))
        } else {
            None
        };
        eprintln!("  the same over the dataset twice over");
        let twice = self.scratch.join("dataset-twice.jsonl");
        {
            let mut out = std::io::BufWriter::new(std::fs::File::create(&twice)?);
            for _ in 0..2 {
                std::io::copy(&mut std::fs::File::open(&path)?, &mut out)?;
            }
            std::io::Write::flush(&mut out)?;
        }
        let doubled = largest(&twice);
        let _ = std::fs::remove_file(&twice);
        let doubled = doubled?;
        eprintln!("  the same with MIMALLOC_PURGE_DELAY=10");
        let default_purge_delay = self.timed({
            let mut c = command(&path);
            c.env("MIMALLOC_PURGE_DELAY", "10");
            c
        })?;
        // "N transcripts benchmarked, F failed, K configurations"
        let last = printed.lines().find(|l| l.contains("transcripts benchmarked")).unwrap_or_default();
        let numbers: Vec<usize> =
            last.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).collect();
        let table = printed.split("\n\n").next().unwrap_or_default().trim_end().to_owned();
        Ok(DatasetRun {
            size,
            stats,
            tiny: tiny_run,
            longest,
            longest_ten,
            run,
            runs: seconds,
            smaller,
            doubled,
            default_purge_delay,
            table,
            configurations: numbers.get(2).copied().unwrap_or(0),
            benchmarked: numbers.first().copied().unwrap_or(0),
            failed: numbers.get(1).copied().unwrap_or(0),
        })
    }

    /// Section (k): `count` and `simulate` on 500 MB (100 MB without the 1 GB runs) of each
    /// format the generator writes, and of the densest OpenAI shape.
    fn memory_by_format(&self, with_1gb: bool) -> Result<Vec<FormatMemory>> {
        let size = if with_1gb { "500MB" } else { "100MB" };
        eprintln!("(k) peak memory of count and simulate by format, {size}");
        let mut inputs = Vec::new();
        for (label, format) in [
            ("Haystack", LogFormat::Haystack),
            ("Claude Code", LogFormat::ClaudeCode),
            ("OpenAI", LogFormat::OpenAi),
        ] {
            eprintln!("  generating {label}");
            inputs.push((label, gen::cached_in(size, SEED, format)?, false));
        }
        eprintln!("  generating dense OpenAI");
        inputs.push(("dense OpenAI", gen::cached_dense(size, SEED, DENSE_TOOL_LINES)?, true));
        let mut rows = Vec::new();
        for (label, path, dense) in inputs {
            eprintln!("  {label}");
            let mut count = Command::new(&self.cli);
            count.arg("count").arg(&path).args(["--counter", "approximate"]);
            let count = self.timed(count)?;
            let mut simulate = Command::new(&self.cli);
            simulate.arg("simulate").arg(&path).args(SIMULATE);
            let simulate = self.timed(simulate)?;
            rows.push(FormatMemory { label, bytes: std::fs::metadata(&path)?.len(), count, simulate, dense });
        }
        Ok(rows)
    }

    fn reference(&self) -> Command {
        let mut command = Command::new(&self.python);
        command
            .arg(&self.script)
            .env("TIKTOKEN_CACHE_DIR", &self.tiktoken_cache)
            .env("HAYSTACK_TELEMETRY_ENABLED", "False");
        command
    }

    /// `compact()` on both sides, alternating; the first run of each also writes its output,
    /// outside the timer, and the two outputs are compared byte for byte.
    fn compare_compact(&self, form: &Form, counter: &str, runs: usize) -> Result<CompactComparison> {
        eprintln!("  {}", form.label);
        let input = &form.path;
        let ours_out = self.scratch.join("ours-compact.json");
        let reference_out = self.scratch.join("reference-compact.json");
        let first = json_output(
            Command::new(&self.measure)
                .arg(input)
                .args(["--counter", counter, "--fraction", &TARGET_FRACTION.to_string(), "--output"])
                .arg(&ours_out),
        )?;
        let target = first["target_tokens"].as_u64().context("measure printed no target")?;
        let mut ours = CompactRun {
            seconds: Vec::new(),
            apply_seconds: Vec::new(),
            pruned: first["pruned"].as_u64().unwrap_or(0),
        };
        ours.seconds.push(first["compact_seconds"][0].as_f64().unwrap_or(f64::NAN));
        ours.apply_seconds.extend(first["apply_seconds"][0].as_f64());
        let mut reference = CompactRun { seconds: Vec::new(), apply_seconds: Vec::new(), pruned: 0 };
        for run in 0..runs {
            let mut command = self.reference();
            command.arg("compact").arg(input).args(["--counter", counter, "--target", &target.to_string()]);
            if run == 0 {
                command.arg("--output").arg(&reference_out);
            }
            let answer = json_output(&mut command)?;
            reference.seconds.push(answer["compact_seconds"].as_f64().unwrap_or(f64::NAN));
            reference.pruned = answer["pruned"].as_u64().unwrap_or(0);
            if run + 1 < runs {
                let answer = json_output(Command::new(&self.measure).arg(input).args([
                    "--counter",
                    counter,
                    "--target",
                    &target.to_string(),
                ]))?;
                ours.seconds.push(answer["compact_seconds"][0].as_f64().unwrap_or(f64::NAN));
                ours.apply_seconds.extend(answer["apply_seconds"][0].as_f64());
            }
            eprintln!(
                "    run {}: ours {:.4}s, reference {:.3}s",
                run + 1,
                ours.seconds[run],
                reference.seconds[run]
            );
        }
        let identical = std::fs::read(&ours_out)? == std::fs::read(&reference_out)?;
        Ok(CompactComparison {
            label: form.label,
            ours,
            reference,
            messages: first["messages"].as_u64().unwrap_or(0),
            total_tokens: first["total_tokens"].as_u64().unwrap_or(0),
            target,
            identical,
        })
    }

    /// Our `prune` of `input` to `output` with `target`, as a command.
    fn prune_command(&self, input: &Path, output: &Path, target: u64) -> Command {
        let mut command = Command::new(&self.cli);
        command.arg("prune").arg(input).arg("-o").arg(output).args([
            "--target-tokens",
            &target.to_string(),
            "--counter",
            "approximate",
        ]);
        command
    }

    /// `prune` on both sides, alternating. Each run starts with no file data waiting to be
    /// written (see [`settle`]). The outputs of the last runs are compared as JSON.
    fn compare_prune(&self, form: &Form, target: u64, runs: usize) -> Result<PruneComparison> {
        eprintln!("  {}", form.label);
        let ours_out = self.scratch.join("ours-prune.json");
        let reference_out = self.scratch.join("reference-prune.json");
        let report_path = self.scratch.join("ours-prune-report.json");
        let mut comparison = PruneComparison {
            label: form.label,
            bytes: std::fs::metadata(&form.path)?.len(),
            ours: Vec::new(),
            phases: Vec::new(),
            reference: Vec::new(),
            reference_in_script: Vec::new(),
            identical: false,
        };
        for run in 0..runs {
            let mut ours = self.prune_command(&form.path, &ours_out, target);
            ours.arg("--report").arg(&report_path);
            settle(&[&ours_out, &report_path]);
            comparison.ours.push(self.timed(ours)?);
            let report: Value = serde_json::from_slice(&std::fs::read(&report_path)?)?;
            let ms = |key: &str| report["timings_ms"][key].as_f64().unwrap_or(f64::NAN);
            comparison.phases.push(Phases {
                read: ms("read"),
                parse: ms("parse"),
                compact: ms("compact"),
                write: ms("write"),
            });
            settle(&[&reference_out]);
            let mut reference = self.reference();
            reference
                .arg("prune")
                .arg(&form.path)
                .args(["--counter", "approximate", "--target", &target.to_string(), "--output"])
                .arg(&reference_out);
            let (process, answer) = self.timed_json(reference)?;
            comparison.reference.push(process);
            comparison.reference_in_script.push(answer["seconds"].as_f64().unwrap_or(f64::NAN));
            eprintln!(
                "    run {}: ours {:.3}s, reference {:.3}s",
                run + 1,
                comparison.ours[run].seconds,
                comparison.reference_in_script[run]
            );
        }
        comparison.identical = same_json(&ours_out, &reference_out)?;
        Ok(comparison)
    }

    fn memory_by_size(&self) -> Result<Vec<(u64, ProcessRun)>> {
        let mut rows = Vec::new();
        for input in &self.transcripts.by_size {
            let mut count = Command::new(&self.cli);
            count.arg("count").arg(input);
            let (_, printed) = self.timed_stdout(count)?;
            let total: u64 = printed.trim().parse().context("count printed no number")?;
            let target = (total as f64 * TARGET_FRACTION) as u64;
            let out = self.scratch.join("ours-prune.json");
            settle(&[&out]);
            let run = self.timed(self.prune_command(input, &out, target))?;
            rows.push((std::fs::metadata(input)?.len(), run));
        }
        Ok(rows)
    }

    /// Every command of the CLI on the 1 GB transcript, and `simulate` on 25 MB beside it for its
    /// cost per megabyte: the median of `runs` runs of each. Each reads the whole file and writes
    /// its whole output.
    fn every_command(&self, huge: &Path, runs: usize) -> Result<Vec<CommandRun>> {
        let cli = |args: &[&str]| {
            let mut command = Command::new(&self.cli);
            command.args(args);
            command
        };
        let huge_text = huge.to_string_lossy().into_owned();
        let out = self.scratch.join("every-command.out").to_string_lossy().into_owned();
        let store = self.scratch.join("every-command-store");
        let (_, printed) = self.timed_stdout(cli(&["count", &huge_text]))?;
        let total: u64 = printed.trim().parse().context("count printed no number")?;
        let target = ((total as f64 * TARGET_FRACTION) as u64).to_string();
        let bytes = std::fs::metadata(huge)?.len();
        let small = gen::cached("25MB", SEED)?;
        let small_text = small.to_string_lossy().into_owned();
        let small_bytes = std::fs::metadata(&small)?.len();
        let mut rows = Vec::new();
        let mut measure = |label: &'static str, bytes: u64, command: Command| -> Result<()> {
            eprintln!("  {label}");
            let mut times = Vec::new();
            for _ in 0..runs {
                settle(&[Path::new(&out)]);
                let mut again = Command::new(command.get_program());
                again.args(command.get_args());
                times.push(self.timed(again)?);
            }
            // The median by wall time (the first run may find the input out of the page cache).
            times.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
            let run = times.swap_remove(times.len() / 2);
            rows.push(CommandRun { label, bytes, run });
            Ok(())
        };
        measure("count", bytes, cli(&["count", &huge_text]))?;
        measure("convert --to openai", bytes, cli(&["convert", &huge_text, "--to", "openai", "-o", &out]))?;
        let prune = ["--target-tokens", &target, "--counter", "approximate"];
        measure("prune (tool-result pruning)", bytes, {
            let mut command = cli(&["prune", &huge_text, "-o", &out]);
            command.args(prune);
            command
        })?;
        measure("prune --strategy sliding-window", bytes, {
            let mut command = cli(&["prune", &huge_text, "-o", &out, "--strategy", "sliding-window"]);
            command.args(prune);
            command
        })?;
        let _ = std::fs::remove_dir_all(&store);
        let store_text = store.to_string_lossy().into_owned();
        measure(
            "offload (the last step's results)",
            bytes,
            cli(&["offload", &huge_text, "--store", &store_text, "--policy", "*=always", "-o", &out]),
        )?;
        let simulate = ["--context-window", "200000", "--counter", "approximate", "--quiet"];
        measure("simulate, 25 MB", small_bytes, {
            let mut command = cli(&["simulate", &small_text]);
            command.args(simulate);
            command
        })?;
        measure("simulate", bytes, {
            let mut command = cli(&["simulate", &huge_text]);
            command.args(simulate);
            command
        })?;
        let _ = std::fs::remove_dir_all(&store);
        let _ = std::fs::remove_file(&out);
        Ok(rows)
    }

    /// `count`, then `prune` to 40% of the count, on each log format.
    fn log_formats(&self, runs: usize) -> Result<Vec<LogRun>> {
        let mut rows = Vec::new();
        for (format, path) in &self.transcripts.logs {
            eprintln!("  {}", format.name());
            let mut row = LogRun {
                format: *format,
                bytes: std::fs::metadata(path)?.len(),
                count: Vec::new(),
                prune: Vec::new(),
                tokens: 0,
            };
            let out = self.scratch.join(format!("ours-prune.{}", format.name()));
            for _ in 0..runs {
                let mut count = Command::new(&self.cli);
                count.arg("count").arg(path);
                let (run, tokens) = self.timed_stdout(count)?;
                row.tokens = tokens.trim().parse().context("count printed no number")?;
                row.count.push(run);
                settle(&[&out]);
                let target = (row.tokens as f64 * TARGET_FRACTION) as u64;
                row.prune.push(self.timed(self.prune_command(path, &out, target))?);
            }
            rows.push(row);
        }
        Ok(rows)
    }

    /// The rendered text of the 10 MB transcript, counted by both sides with each tokenizer.
    fn huggingface(&self, runs: usize) -> Result<Vec<TokenizerRun>> {
        let text = self.scratch.join("rendered-10MB.txt");
        json_output_or_nothing(
            Command::new(&self.measure).arg(&self.transcripts.small).arg("--render-to").arg(&text),
        )?;
        let bytes = std::fs::metadata(&text)?.len();
        let mut rows = Vec::new();
        for name in TOKENIZERS {
            eprintln!("  {name}");
            let tokenizer = project_root()
                .join("crates/compaction-tokens/tests/data/tokenizers")
                .join(format!("{name}.json"));
            let mut row = TokenizerRun {
                name,
                bytes,
                ours_tokens: 0,
                reference_tokens: 0,
                ours: Vec::new(),
                reference: Vec::new(),
            };
            for _ in 0..runs {
                let ours =
                    json_output(Command::new(&self.measure).arg(&text).arg("--huggingface").arg(&tokenizer))?;
                row.ours_tokens = ours["tokens"].as_u64().unwrap_or(0);
                row.ours.extend(ours["seconds"].as_array().into_iter().flatten().filter_map(Value::as_f64));
                let mut reference = self.reference();
                reference.arg("hf-count").arg(&text).arg("--tokenizer").arg(&tokenizer);
                let answer = json_output(&mut reference)?;
                row.reference_tokens = answer["tokens"].as_u64().unwrap_or(0);
                row.reference
                    .extend(answer["seconds"].as_array().into_iter().flatten().filter_map(Value::as_f64));
            }
            rows.push(row);
        }
        Ok(rows)
    }

    /// Wall time of `compaction count` on a one-message file with `counter`: start-up, reading
    /// the counter's tables, and no work to speak of.
    fn start_up(&self, counter: &str, runs: usize) -> Result<f64> {
        let tiny = self.scratch.join("one-message.json");
        std::fs::write(&tiny, r#"[{"role": "user", "content": "hello"}]"#)?;
        let mut seconds = Vec::new();
        for _ in 0..runs {
            let mut count = Command::new(&self.cli);
            count.arg("count").arg(&tiny).args(["--counter", counter]);
            seconds.push(self.timed(count)?.seconds);
        }
        Ok(median(&seconds))
    }

    /// The size of the release `compaction` binary, and of a stripped copy.
    fn binary_size(&self) -> Result<(u64, Option<u64>)> {
        let size = std::fs::metadata(&self.cli)?.len();
        let stripped = self.scratch.join("compaction-stripped");
        let ok = Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&self.cli)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        Ok((size, ok.then(|| std::fs::metadata(&stripped).map(|m| m.len()).ok()).flatten()))
    }

    /// Runs `command` for its wall time and peak RSS: under `/usr/bin/time` when there is one,
    /// else under the reference script's `spawn` mode (`ru_maxrss` of its child).
    fn timed(&self, command: Command) -> Result<ProcessRun> {
        self.timed_json(command).map(|(run, _)| run)
    }

    /// As [`Bench::timed`], also returning the JSON the command printed (or `null`).
    fn timed_json(&self, command: Command) -> Result<(ProcessRun, Value)> {
        let (run, stdout) = self.timed_stdout(command)?;
        Ok((run, serde_json::from_str(&stdout).unwrap_or(Value::Null)))
    }

    /// As [`Bench::timed`], also returning what the command printed.
    fn timed_stdout(&self, command: Command) -> Result<(ProcessRun, String)> {
        let program = command.get_program().to_owned();
        let arguments: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
        let environment: Vec<_> =
            command.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))).collect();
        let Some(time) = &self.time else {
            let mut wrapper = self.reference();
            wrapper.arg("spawn").arg("--").arg(&program).args(&arguments).envs(environment);
            let answer = json_output(&mut wrapper)?;
            let run = ProcessRun {
                seconds: answer["seconds"].as_f64().unwrap_or(f64::NAN),
                max_rss_kib: answer["max_rss_kib"].as_u64().unwrap_or(0),
                ..ProcessRun::default()
            };
            let child = match &answer["child"] {
                Value::Null => String::new(),
                other => other.to_string(),
            };
            return Ok((run, child));
        };
        let mut wrapped = Command::new(time);
        wrapped.arg("-v").arg(&program).args(&arguments).envs(environment);
        let started = Instant::now();
        let output = wrapped.output().with_context(|| format!("running {wrapped:?}"))?;
        let seconds = started.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            bail!("{wrapped:?} failed with {}: {stderr}", output.status);
        }
        let field = |name: &str| {
            stderr
                .lines()
                .find_map(|l| l.trim().strip_prefix(name))
                .map(str::trim)
                .unwrap_or_default()
                .to_owned()
        };
        let run = ProcessRun {
            seconds,
            max_rss_kib: field("Maximum resident set size (kbytes):").parse().unwrap_or(0),
            user: field("User time (seconds):").parse().unwrap_or(f64::NAN),
            system: field("System time (seconds):").parse().unwrap_or(f64::NAN),
            page_faults: field("Minor (reclaiming a frame) page faults:").parse().unwrap_or(0),
        };
        Ok((run, String::from_utf8_lossy(&output.stdout).into_owned()))
    }
}

/// Whether two JSON files hold the same value, keys in the same order (spacing and escapes
/// aside).
fn same_json(a: &Path, b: &Path) -> Result<bool> {
    let canonical = |path: &Path| -> Result<Vec<u8>> {
        let value: Value = serde_json::from_slice(&std::fs::read(path)?)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        Ok(serde_json::to_vec(&value)?)
    };
    Ok(canonical(a)? == canonical(b)?)
}

/// Runs `command` and reads the one JSON object it prints.
fn json_output(command: &mut Command) -> Result<Value> {
    let output = command.output().with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!("{command:?} failed with {}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    serde_json::from_slice(&output.stdout).with_context(|| format!("reading the output of {command:?}"))
}

/// Runs `command`, which prints nothing to read.
fn json_output_or_nothing(command: &mut Command) -> Result<()> {
    let output = command.output().with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!("{command:?} failed with {}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    Ok(())
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

pub(crate) fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "**not met**"
    }
}

fn machine_line(prefix: &str, path: &str, key: &str) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .map(|v| format!("{prefix}{v}"))
        .unwrap_or_else(|| format!("{prefix}unknown"))
}

fn command_text(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .current_dir(project_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}

/// The load averages (1, 5 and 15 minutes) from `/proc/loadavg`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|| "unknown".into())
}

/// Share of a file's characters that are not ASCII.
fn non_ascii_share(path: &Path) -> Result<f64> {
    let text = std::fs::read_to_string(path)?;
    let (mut all, mut non_ascii) = (0usize, 0usize);
    for c in text.chars() {
        all += 1;
        non_ascii += usize::from(!c.is_ascii());
    }
    Ok(non_ascii as f64 / all.max(1) as f64)
}

struct Report {
    text: String,
    summary: Vec<String>,
}

impl Report {
    fn new(bench: &Bench, runs: usize) -> Result<Report> {
        let mut text = String::new();
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
        let python_version = command_text(
            &bench.python.to_string_lossy(),
            &["-c", "import sys; from importlib.metadata import version; print(sys.version.split()[0], version('haystack-ai'), version('tokenizers'))"],
        );
        let mut version = python_version.split_whitespace();
        let (python, haystack, tokenizers) =
            (version.next().unwrap_or("?"), version.next().unwrap_or("?"), version.next().unwrap_or("?"));
        writeln!(
            text,
            "# Benchmarks\n\n\
             Generated by `cargo xtask bench-vs-reference --runs {runs}`; do not edit by hand.\n\n\
             This project against the reference, Haystack's `ToolResultPruningCompactor` (Python, \
             haystack-ai {haystack}), on the same synthetic transcripts (`cargo xtask gen-transcript --seed {SEED}`, \
             kept in `target/transcripts/`). The two sides run alternately, {runs} run(s) each; the numbers \
             are medians. Compaction targets are {}% of the transcript's tokens. Before each end-to-end \
             run, the last run's output is deleted and `sync` writes out what earlier runs left to \
             write, so no run pays for another's output.\n\n\
             ## Machine\n\n\
             - {cores} cores (`nproc`), shared with other work: load average {} when the run began\n- {}\n- {}\n- git {}\n- Python {python}, tokenizers {tokenizers}\n",
            TARGET_FRACTION * 100.0,
            load_average(),
            machine_line("CPU: ", "/proc/cpuinfo", "model name"),
            machine_line("Memory: ", "/proc/meminfo", "MemTotal"),
            command_text("git", &["describe", "--always", "--dirty"]),
        )?;
        writeln!(
            text,
            "## Transcripts\n\n\
             The generator writes agent runs whose text is as non-ASCII as real transcripts are: \
             code, logs and JSON, English prose with accented, Greek, Cyrillic, CJK and emoji words, \
             and now and then a paragraph in French, German, Spanish, Chinese, Japanese, Korean or \
             Russian, or chat full of emoji (joiners, variation selectors, characters beyond \
             U+FFFF). Python writes each Haystack transcript again as a Haystack user saves one \
             (`ChatMessage.from_dict`, `to_dict`, `json.dump`), in its two spellings:\n\n\
             | transcript | spelling | bytes | non-ASCII characters |\n|---|---|---:|---:|"
        )?;
        for (size, forms) in [("50 MB", &bench.transcripts.big), ("19 MB", &bench.transcripts.mid)] {
            for form in forms.iter() {
                writeln!(
                    text,
                    "| {size} | {} | {} | {:.2}% |",
                    form.label,
                    std::fs::metadata(&form.path)?.len(),
                    non_ascii_share(&form.path)? * 100.0
                )?;
            }
        }
        for (format, path) in &bench.transcripts.logs {
            writeln!(text, "| 50 MB | {} | {} | |", format.name(), std::fs::metadata(path)?.len())?;
        }
        writeln!(
            text,
            "\n## Commands\n\n```sh\n\
             cargo xtask gen-transcript --size 50MB --seed {SEED}   # also 19MB, 10MB, 1MB, 1GB; --format claude-code|openai\n\
             .venv-ref/bin/python xtask/reference/bench_reference.py write-forms FILE --python OUT --python-ascii OUT\n\
             target/release/measure FILE --counter SPEC --target N   # ours: parse, then time compact()\n\
             .venv-ref/bin/python xtask/reference/bench_reference.py compact FILE --counter SPEC --target N\n\
             target/release/compaction prune FILE -o OUT --target-tokens N --counter approximate --report R\n\
             .venv-ref/bin/python xtask/reference/bench_reference.py prune FILE --counter approximate --target N --output OUT\n\
             target/release/compaction count FILE   # and prune, on the log formats\n\
             target/release/measure TEXT --huggingface TOKENIZER\n\
             .venv-ref/bin/python xtask/reference/bench_reference.py hf-count TEXT --tokenizer TOKENIZER\n\
             ```\n\n\
             Peak memory is `/usr/bin/time -v`'s maximum resident set size ({}).\n",
            if bench.time.is_some() { "present here" } else { "absent here, so `ru_maxrss` of the child" }
        )?;
        Ok(Report { text, summary: Vec::new() })
    }

    fn compact(&mut self, title: &str, rows: &[CompactComparison], goal: f64) {
        let first = &rows[0];
        let _ = writeln!(
            self.text,
            "## {title}\n\n\
             {} messages, {} tokens, target {}. Parsing is outside the timer on both sides, so the \
             spelling changes nothing here but what each side parsed.\n\n\
             | spelling | ours | reference | speed-up | pruned (ours / ref.) | outputs (`to_dict` JSON) |\n\
             |---|---:|---:|---:|---:|---|",
            first.messages, first.total_tokens, first.target
        );
        let mut worst = f64::INFINITY;
        let mut all_same = true;
        for c in rows {
            let ours = median(&c.ours.seconds);
            let reference = median(&c.reference.seconds);
            let ratio = reference / ours;
            worst = worst.min(ratio);
            let same = c.identical && c.ours.pruned == c.reference.pruned;
            all_same &= same;
            let _ = writeln!(
                self.text,
                "| {} | {ours:.4} s | {reference:.3} s | **{ratio:.1}×** | {} / {} | {} |",
                c.label,
                c.ours.pruned,
                c.reference.pruned,
                if same { "identical" } else { "**DIFFERENT**" }
            );
        }
        let _ = writeln!(self.text, "\nRuns (s):\n");
        for c in rows {
            let whole: Vec<f64> =
                c.ours.seconds.iter().zip(&c.ours.apply_seconds).map(|(a, b)| a + b).collect();
            let _ = writeln!(
                self.text,
                "- {}: ours {}; with `apply()` {} (median {:.4} s); reference {}",
                c.label,
                list(&c.ours.seconds),
                list(&whole),
                median(&whole),
                list(&c.reference.seconds)
            );
        }
        let _ = writeln!(
            self.text,
            "\nWorst spelling: **{worst:.1}×** (goal ≥ {goal}×: {}). The reference's `compact()` returns the \
             new list of messages; ours returns what changes (each pruned result described, not built), \
             and `apply()` builds the compacted conversation in place.\n",
            verdict(worst >= goal)
        );
        self.summary.push(format!(
            "| {title} (worst spelling) | {worst:.1}× | ≥ {goal}× | {} |",
            verdict(worst >= goal && all_same)
        ));
    }

    fn prune(&mut self, rows: &[PruneComparison]) {
        let _ = writeln!(
            self.text,
            "## (c) prune end to end, approximate counter, 50 MB\n\n\
             Ours is the whole `compaction prune` process (with `--report`, whose phase timings are \
             shown). The reference is timed inside its script, from json load to json dump; its whole \
             process, with interpreter start-up and imports, is shown too. The outputs are compared as \
             JSON (the same value, keys in the same order): ours keeps each unchanged message in the \
             spelling it was read in.\n\n\
             | spelling | ours | reference (load → dump) | speed-up | reference (process) | ours peak RSS | ref. peak RSS | outputs |\n\
             |---|---:|---:|---:|---:|---:|---:|---|"
        );
        let mut worst = f64::INFINITY;
        let mut compact_ratio = f64::NAN;
        let mut all_same = true;
        for (i, c) in rows.iter().enumerate() {
            let ours = median(&c.ours.iter().map(|r| r.seconds).collect::<Vec<_>>());
            let reference = median(&c.reference_in_script);
            let process = median(&c.reference.iter().map(|r| r.seconds).collect::<Vec<_>>());
            let ratio = reference / ours;
            worst = worst.min(ratio);
            if i == 0 {
                compact_ratio = ratio;
            }
            all_same &= c.identical;
            let rss =
                |runs: &[ProcessRun]| runs.iter().map(|r| r.max_rss_kib).max().unwrap_or(0) as f64 / 1024.0;
            let _ = writeln!(
                self.text,
                "| {} | {ours:.3} s | {reference:.3} s | **{ratio:.1}×** | {process:.3} s | {:.0} MB | {:.0} MB | {} |",
                c.label,
                rss(&c.ours),
                rss(&c.reference),
                if c.identical { "same JSON" } else { "**DIFFERENT**" }
            );
        }
        let _ = writeln!(
            self.text,
            "\nOur phases (medians, from `--report`), and parsing speed over the file's bytes:\n\n\
             | spelling | file | read | parse | parse speed | compact | write |\n|---|---:|---:|---:|---:|---:|---:|"
        );
        let mut slowest_parse = f64::INFINITY;
        for c in rows {
            let phase = |f: fn(&Phases) -> f64| median(&c.phases.iter().map(f).collect::<Vec<_>>());
            let parse = phase(|p| p.parse);
            let speed = mb(c.bytes) / (parse / 1e3);
            slowest_parse = slowest_parse.min(speed);
            let _ = writeln!(
                self.text,
                "| {} | {:.1} MB | {:.1} ms | {parse:.1} ms | **{speed:.0} MB/s** | {:.1} ms | {:.1} ms |",
                c.label,
                mb(c.bytes),
                phase(|p| p.read),
                phase(|p| p.compact),
                phase(|p| p.write)
            );
        }
        let _ = writeln!(
            self.text,
            "\nWhere our time goes (medians): CPU time in user space and in the kernel, and page \
             faults (each a fresh 4 KB page: the input, the messages, the output's page cache).\n\n\
             | spelling | wall | user | kernel | page faults |\n|---|---:|---:|---:|---:|"
        );
        for c in rows {
            let of = |f: fn(&ProcessRun) -> f64| median(&c.ours.iter().map(f).collect::<Vec<_>>());
            let _ = writeln!(
                self.text,
                "| {} | {:.3} s | {:.3} s | {:.3} s | {:.0} |",
                c.label,
                of(|r| r.seconds),
                of(|r| r.user),
                of(|r| r.system),
                of(|r| r.page_faults as f64)
            );
        }
        let _ = writeln!(self.text, "\nRuns (s):\n");
        for c in rows {
            let _ = writeln!(
                self.text,
                "- {}: ours {}; reference {}",
                c.label,
                list(&c.ours.iter().map(|r| r.seconds).collect::<Vec<_>>()),
                list(&c.reference_in_script)
            );
        }
        let _ = writeln!(
            self.text,
            "\nSpeed-up on every spelling **{worst:.1}×** (goal ≥ 10×: {}); on serde_json's compact \
             spelling **{compact_ratio:.1}×** (goal ≥ 20×: {}). Parsing at least **{slowest_parse:.0} MB/s** \
             on every spelling (goal ≥ 500 MB/s: {}).\n",
            verdict(worst >= 10.0),
            verdict(compact_ratio >= 20.0),
            verdict(slowest_parse >= 500.0)
        );
        if !(worst >= 10.0 && compact_ratio >= 20.0) {
            let _ = writeln!(self.text, "{PRUNE_NOTES}\n");
        }
        self.summary.push(format!(
            "| (c) prune end to end, 50 MB, every spelling | {worst:.1}× | ≥ 10× | {} |",
            verdict(worst >= 10.0 && all_same)
        ));
        self.summary.push(format!(
            "| (c) prune end to end, 50 MB, serde_json compact | {compact_ratio:.1}× | ≥ 20× | {} |",
            verdict(compact_ratio >= 20.0)
        ));
        self.summary.push(format!(
            "| (c) parsing, every spelling | {slowest_parse:.0} MB/s | ≥ 500 MB/s | {} |",
            verdict(slowest_parse >= 500.0)
        ));
    }

    fn memory(&mut self, rows: &[(u64, ProcessRun)], prune: &[PruneComparison]) {
        let _ = writeln!(
            self.text,
            "## (d) peak memory of `compaction prune` against input size\n\n\
             serde_json's spelling, by size:\n\n\
             | input | peak RSS | RSS / input | wall |\n|---:|---:|---:|---:|"
        );
        let mut worst: f64 = 0.0;
        for (i, (bytes, run)) in rows.iter().enumerate() {
            let rss = run.max_rss_kib as f64 * 1024.0;
            let ratio = rss / *bytes as f64;
            // The smallest input measures the binary's fixed footprint more than the input.
            if i > 0 {
                worst = worst.max(ratio);
            }
            let _ = writeln!(
                self.text,
                "| {:.1} MB | {:.1} MB | {ratio:.2}× | {:.3} s |",
                mb(*bytes),
                rss / 1e6,
                run.seconds
            );
        }
        let _ = writeln!(self.text, "\nEvery spelling, 50 MB (from (c)):\n\n| spelling | input | peak RSS | RSS / input |\n|---|---:|---:|---:|");
        for c in prune {
            let rss = c.ours.iter().map(|r| r.max_rss_kib).max().unwrap_or(0) as f64 * 1024.0;
            let ratio = rss / c.bytes as f64;
            worst = worst.max(ratio);
            let _ = writeln!(
                self.text,
                "| {} | {:.1} MB | {:.1} MB | {ratio:.2}× |",
                c.label,
                mb(c.bytes),
                rss / 1e6
            );
        }
        let met = worst <= 3.0;
        let _ = writeln!(
            self.text,
            "\nWorst from 10 MB up, every spelling: **{worst:.2}× the input** (goal ≤ 3×: {}). At 1 MB \
             the process's own footprint (about 6 MB) dominates.\n",
            verdict(met)
        );
        self.summary.push(format!(
            "| (d) prune peak RSS / input, 10 MB – 1 GB, every spelling | {worst:.2}× | ≤ 3× | {} |",
            verdict(met)
        ));
    }

    fn hook_run(&mut self, e: &Value) {
        let first = e["first_steps_mean_seconds"].as_f64().unwrap_or(0.0);
        let last = e["last_steps_mean_seconds"].as_f64().unwrap_or(0.0);
        let growth = if first > 0.0 { last / first } else { f64::INFINITY };
        // Linear total time means a flat cost per untriggered step; allow noise, not growth.
        let met = growth <= 2.0;
        let _ = writeln!(
            self.text,
            "## (e) hook over a simulated 2,000-step run\n\n\
             The 50 MB transcript replayed as an agent run: before each of {} model calls the hook runs \
             (window: half the transcript's tokens; it compacted {} times), then the message is appended. \
             Total {:.3} s, ending with {} messages.\n\n\
             | untriggered steps | mean time per step |\n|---|---:|\n\
             | first 200 | {:.2} µs |\n| last 200 | {:.2} µs |\n\n\
             Last / first: **{growth:.2}×** (goal: flat, ≤ 2×: {}).\n",
            e["steps"],
            e["triggered"],
            e["total_seconds"].as_f64().unwrap_or(0.0),
            e["messages_at_end"],
            first * 1e6,
            last * 1e6,
            verdict(met),
        );
        self.summary.push(format!(
            "| (e) hook, 2,000 steps: last/first step cost | {growth:.2}× | flat (≤ 2×) | {} |",
            verdict(met)
        ));
    }

    fn log_formats(&mut self, rows: &[LogRun]) {
        let _ = writeln!(
            self.text,
            "## (f) log formats: `count` and `prune`, 50 MB\n\n\
             The same kind of conversation as a Claude Code session (JSON Lines of events, with the \
             envelope, progress and file-history events, and `toolUseResult` repeating each output, as \
             Claude Code 2.x writes them) and as an OpenAI Chat Completions request (`model`, `tools`, \
             `messages`). `prune` prunes to 40% of the count. The reference reads neither format.\n\n\
             | format | file | tokens | `count` | speed | peak RSS | `prune` | speed | peak RSS |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        let mut slowest = f64::INFINITY;
        let mut worst_rss: f64 = 0.0;
        let mut spreads = Vec::new();
        for row in rows {
            let wall = |runs: &[ProcessRun]| median(&runs.iter().map(|r| r.seconds).collect::<Vec<_>>());
            let rss =
                |runs: &[ProcessRun]| runs.iter().map(|r| r.max_rss_kib).max().unwrap_or(0) as f64 * 1024.0;
            let (count, prune) = (wall(&row.count), wall(&row.prune));
            let seconds = row.prune.iter().map(|r| r.seconds);
            let (fastest, slowest_run) =
                (seconds.clone().fold(f64::INFINITY, f64::min), seconds.fold(0.0, f64::max));
            spreads.push(format!("{} {fastest:.3}–{slowest_run:.3} s", row.format.name()));
            let (count_speed, prune_speed) = (mb(row.bytes) / count, mb(row.bytes) / prune);
            slowest = slowest.min(count_speed).min(prune_speed);
            worst_rss =
                worst_rss.max(rss(&row.count) / row.bytes as f64).max(rss(&row.prune) / row.bytes as f64);
            let _ = writeln!(
                self.text,
                "| {} | {:.1} MB | {} | {count:.3} s | **{count_speed:.0} MB/s** | {:.0} MB | {prune:.3} s | **{prune_speed:.0} MB/s** | {:.0} MB |",
                row.format.name(),
                mb(row.bytes),
                row.tokens,
                rss(&row.count) / 1e6,
                rss(&row.prune) / 1e6,
            );
        }
        let runs = rows.first().map_or(0, |row| row.prune.len());
        let _ = writeln!(
            self.text,
            "\nMedians of {runs} runs of each, three times the runs of the other sections (a run takes a fifth \
             of a second, and the noise of this machine is as large as the differences measured); the runs \
             of `prune` spread over {}.\n\n\
             Slowest: **{slowest:.0} MB/s** (goal ≥ 300 MB/s: {}); peak RSS at most **{worst_rss:.2}× the \
             input** (goal ≤ 3×: {}).\n\n{}\n",
            spreads.join(", "),
            verdict(slowest >= 300.0),
            verdict(worst_rss <= 3.0),
            LOG_FORMAT_NOTES
        );
        self.summary.push(format!(
            "| (f) Claude Code and OpenAI logs, `count` and `prune`, 50 MB | {slowest:.0} MB/s | ≥ 300 MB/s | {} |",
            verdict(slowest >= 300.0)
        ));
        self.summary.push(format!(
            "| (f) log formats, peak RSS / input | {worst_rss:.2}× | ≤ 3× | {} |",
            verdict(worst_rss <= 3.0)
        ));
    }

    fn huggingface(&mut self, rows: &[TokenizerRun]) {
        let _ = writeln!(
            self.text,
            "## (g) HuggingFace counting against Python `tokenizers`\n\n\
             The text every counter measures (the rendered conversation) of the 10 MB transcript, \
             {:.1} MB, counted whole with each of the conformance tests' tokenizers: ours \
             (`HuggingFaceTokenCounter::count_text`, the tokenizers crate with its pure-Rust regex) \
             against Python's `tokenizers` (`Tokenizer.encode(text, add_special_tokens=False)`; its \
             wheels are built with Oniguruma). Load time is left out on both sides.\n\n\
             | tokenizer | tokens (ours / Python) | ours | Python | speed-up |\n|---|---:|---:|---:|---:|",
            rows.first().map_or(0.0, |r| mb(r.bytes))
        );
        let mut worst = f64::INFINITY;
        let mut same = true;
        for row in rows {
            let (ours, reference) = (median(&row.ours), median(&row.reference));
            let ratio = reference / ours;
            worst = worst.min(ratio);
            same &= row.ours_tokens == row.reference_tokens;
            let _ = writeln!(
                self.text,
                "| {} | {} / {} | {ours:.3} s | {reference:.3} s | **{ratio:.2}×** |",
                row.name, row.ours_tokens, row.reference_tokens
            );
        }
        let _ = writeln!(
            self.text,
            "\nSlowest: **{worst:.2}×** Python's speed (goal ≥ 1×, same counts: {}). The tokenizers crate's \
             `onig` feature (Oniguruma, as the Python wheels use) was considered: the pure-Rust regex is \
             already faster here, and `onig` would add a C library to the build.\n",
            verdict(worst >= 1.0 && same)
        );
        self.summary.push(format!(
            "| (g) HuggingFace counting vs Python `tokenizers` (same counts) | {worst:.2}× | ≥ 1× | {} |",
            verdict(worst >= 1.0 && same)
        ));
    }

    fn binary(&mut self, (size, stripped): (u64, Option<u64>), start: &[(&str, f64)]) {
        let stripped_mb = stripped.map_or(f64::NAN, mb);
        let met = stripped.is_some_and(|s| mb(s) <= 30.0);
        let _ = writeln!(
            self.text,
            "## (h) release binary\n\n\
             `target/release/compaction` (default features: tiktoken, HuggingFace and Parquet) is {:.1} MB as \
             built (with line tables) and **{stripped_mb:.1} MB stripped** (goal ≤ 30 MB: {}).\n\n\
             o200k_base and cl100k_base are counted with bpe-openai's tokenizer; bpe-openai's own \
             prebuilt encodings (32 MB and 15 MB, three Aho-Corasick automata each) are not linked. \
             compaction-tokens' build script builds the encodings from tiktoken-rs's token lists, drops \
             the two automata counting never uses and compresses the rest with zstd at level 9 (8.0 MB \
             and 3.8 MB; LZ4, used before, made them 12 MB and 6 MB and was undone about 14 ms sooner \
             for o200k_base). The cost: building compaction-tokens with `tiktoken` builds the two \
             encodings once; a process's first count with an encoding decompresses and reads it (table \
             below: `compaction count` of a one-message file), where bpe-openai's prebuilt o200k_base \
             took about 0.1 s to read. tiktoken-rs alone would save another 12 MB but counts about 1.7× \
             slower and takes 0.4 s to load o200k_base; it still counts p50k_base and r50k_base, from \
             their 0.8 MB tables.\n",
            mb(size),
            verdict(met)
        );
        let _ = writeln!(self.text, "| counter | `compaction count`, one message |\n|---|---:|");
        for (counter, seconds) in start {
            let _ = writeln!(self.text, "| {counter} | {seconds:.3} s |");
        }
        let _ = writeln!(self.text);
        self.summary.push(format!(
            "| (h) release binary, stripped | {stripped_mb:.1} MB | ≤ 30 MB | {} |",
            verdict(met)
        ));
    }

    fn every_command(&mut self, rows: &[CommandRun]) {
        let _ = writeln!(
            self.text,
            "## (i) every command on 1 GB\n\n\
             The 1 GB transcript (serde_json's spelling) through each command, approximate counter, \
             the median of up to three runs; `prune` to {}% of the count, `offload` storing the last \
             step's results (what the command offloads), `simulate` with a 200,000-token window. \
             `simulate` on 25 MB beside it gives its cost per megabyte.\n\n\
             | command | input | wall | per MB | peak RSS | RSS / input |\n|---|---:|---:|---:|---:|---:|",
            TARGET_FRACTION * 100.0
        );
        for row in rows {
            let rss = row.run.max_rss_kib as f64 * 1024.0;
            let _ = writeln!(
                self.text,
                "| `{}` | {:.0} MB | {:.2} s | {:.2} ms | {:.0} MB | {:.2}× |",
                row.label,
                mb(row.bytes),
                row.run.seconds,
                row.run.seconds * 1e3 / mb(row.bytes),
                rss / 1e6,
                rss / row.bytes as f64
            );
        }
        let per_mb = |label: &str| {
            rows.iter().find(|r| r.label == label).map(|r| r.run.seconds / mb(r.bytes)).unwrap_or(f64::NAN)
        };
        let ratio = per_mb("simulate") / per_mb("simulate, 25 MB");
        let met = ratio <= 1.5;
        let _ = writeln!(
            self.text,
            "\n`simulate`'s cost per MB at 1 GB is **{ratio:.2}×** its cost at 25 MB (goal ≤ 1.5×: {}).\n",
            verdict(met)
        );
        self.summary.push(format!(
            "| (i) simulate, cost per MB at 1 GB / at 25 MB | {ratio:.2}× | ≤ 1.5× | {} |",
            verdict(met)
        ));
    }

    fn dataset(&mut self, row: &DatasetRun) {
        let gb = row.stats.bytes as f64 / 1e9;
        let per_gb = row.run.seconds / gb;
        let wall_met = per_gb <= 60.0;
        let rss = |r: &ProcessRun| r.max_rss_kib as f64 * 1024.0 / 1e6;
        let (peak, footprint, longest) = (rss(&row.run), rss(&row.tiny), rss(&row.longest));
        // Two cores, so two transcripts in flight: twice what the longest alone adds to the
        // footprint, plus the footprint.
        let allowed = 2.0 * (longest - footprint) + footprint;
        let rss_met = peak <= allowed;
        let size = if row.size == "1GB" { "1 GB" } else { "100 MB" };
        let scaled = if row.size == "1GB" {
            String::new()
        } else {
            " (run with `--skip-1gb`: the dataset is 100 MB instead of 1 GB, and the wall time is \
             scaled to 1 GB for the goal)"
                .to_owned()
        };
        let smaller = match &row.smaller {
            Some((stats, run, longest)) => format!(
                "| the 100 MB dataset (same seed: {} lines, the longest {:.2} MB) | {:.2} s | {:.1} s | {:.1} MB |\n\
                 | its longest line alone | {:.2} s | | {:.1} MB |\n",
                stats.lines,
                mb(stats.largest_line),
                run.seconds,
                run.seconds / (stats.bytes as f64 / 1e9),
                rss(run),
                longest.seconds,
                rss(longest),
            ),
            None => String::new(),
        };
        let growth = match &row.smaller {
            Some((_, run, small_longest)) => format!(
                " Over a tenth of the data (100 MB), the peak is {:.1} MB, its own goal {:.1} MB: \
                 from 100 MB to 1 GB the peak grows by {:.1} MB, and that of the longest line \
                 alone by {:.1} MB (1 GB holds longer lines).",
                rss(run),
                2.0 * (rss(small_longest) - footprint) + footprint,
                peak - rss(run),
                longest - rss(small_longest),
            ),
            None => String::new(),
        };
        let _ = writeln!(
            self.text,
            "## (j) `compaction bench` over a dataset of trajectories, {size}\n\n\
             `cargo xtask gen-dataset --size {} --seed {SEED}` writes JSON Lines of whole trajectories, \
             one a line{scaled}: {} lines, {:.1} MB, the longest line {:.2} MB. Each has 8–30 tool steps \
             (an assistant message with one call, then its result of 20–400 lines of the generator's \
             text: code, logs, JSON and prose, as non-ASCII as the transcripts above), in one of three \
             shapes drawn per line: an OpenAI request `{{\"messages\": [...]}}` (three in five), a \
             Haystack message list (one in five), a SWE-agent trajectory (`history`, `trajectory`, \
             `info`; one in five). `compaction bench` reads the file line by line and replays each \
             line on all cores with {} configurations, `none` (the baseline, always first), \
             `tool-result-pruning` with `min_tokens=0` and `200`, `observation-masking` with \
             `keep_observations=3` and `5`, and `sliding-window`; `--context-window 32000`, the \
             approximate counter:\n\n\
             ```sh\ntarget/release/compaction bench --jsonl DATASET {}\n```\n\n\
             | | wall | per GB | peak RSS |\n|---|---:|---:|---:|\n\
             | the dataset, {size} | {:.2} s | {per_gb:.1} s | {peak:.1} MB |\n\
             | one line of two short messages (the footprint: the process's own) | {:.2} s | | {footprint:.1} MB |\n\
             | the dataset's longest line alone | {:.2} s | | {longest:.1} MB |\n\
             | that line ten times over | {:.2} s | | {:.1} MB |\n\
             {smaller}| the dataset twice over (every line twice: the same longest line) | {:.2} s | {:.1} s | {:.1} MB |\n\
             | the dataset, {size}, with mimalloc's default purge delay (`MIMALLOC_PURGE_DELAY=10`) | {:.2} s | | {:.1} MB |\n\n\
             {} transcripts benchmarked, {} failed; wall is the median of {} run(s) ({}), each peak \
             RSS the largest of as many runs (of {ONE_LINE_RUNS} for the inputs of one line). What \
             the command printed (the last run):\n\n\
             ```text\n{}\n```\n\n\
             Wall: **{per_gb:.1} s per GB** (goal ≤ 60 s for 1 GB on this two-core machine: {}). \
             Memory: the goal is the peak at most twice the largest transcript plus a constant. A \
             transcript costs what the same command over it alone adds to the footprint, so the \
             goal reads: peak(dataset) ≤ 2 × \
             (peak(longest line alone) − footprint) + footprint = 2 × ({longest:.1} − \
             {footprint:.1}) + {footprint:.1} = **{allowed:.1} MB**, against **{peak:.1} MB** ({}).{growth} Twice the data with the same longest line peaks at {:.1} MB: {}. \
             One line is in flight at a time: the thread that reads and parses it replays a share \
             of its configurations and a replayer a core the others (the queue between the walker \
             and that thread holds where the lines are, not their bytes); each transcript's \
             figures are folded into the totals as soon as it is done, and kept whole only for \
             `--json`, `--csv` and `--svg`, which list them. The allocator's part: mimalloc hands a \
             thread's freed pages back to the system only after a delay, 10 ms by default, which \
             each later free while it waits lengthens, so while a thread is busy what it freed \
             and has not handed back counts in the peak; `bench` runs with that delay at 0 (it \
             starts itself again with `MIMALLOC_PURGE_DELAY=0` unless the variable is set), and \
             with the default (the last row) the peak is {:.1} MB{}.\n",
            row.size,
            row.stats.lines,
            mb(row.stats.bytes),
            mb(row.stats.largest_line),
            row.configurations,
            DATASET_BENCH.join(" "),
            row.run.seconds,
            row.tiny.seconds,
            row.longest.seconds,
            row.longest_ten.seconds,
            rss(&row.longest_ten),
            row.doubled.seconds,
            row.doubled.seconds / (2.0 * gb),
            rss(&row.doubled),
            row.default_purge_delay.seconds,
            rss(&row.default_purge_delay),
            row.benchmarked,
            row.failed,
            row.runs.len(),
            row.runs.iter().map(|s| format!("{s:.2} s")).collect::<Vec<_>>().join(", "),
            row.table,
            verdict(wall_met),
            verdict(rss_met),
            rss(&row.doubled),
            // Within a tenth: the runs of one input differ by that much.
            if rss(&row.doubled) <= 1.1 * peak {
                "the peak follows the largest transcript, not the size of the dataset"
            } else {
                "the peak grows with the dataset"
            },
            rss(&row.default_purge_delay),
            if rss(&row.default_purge_delay) > allowed { ", over the goal" } else { "" },
        );
        let all_read = row.failed == 0 && row.benchmarked as u64 == row.stats.lines;
        self.summary.push(format!(
            "| (j) `compaction bench`, {size} dataset, {} configurations, wall per GB | {per_gb:.1} s | ≤ 60 s | {} |",
            row.configurations,
            verdict(wall_met && all_read)
        ));
        self.summary.push(format!(
            "| (j) `compaction bench`, peak RSS over the dataset against 2 × (the longest line alone − footprint) + footprint | {peak:.1} MB / {allowed:.1} MB | ≤ 2 × largest + constant | {} |",
            verdict(rss_met)
        ));
    }

    fn memory_by_format(&mut self, rows: &[FormatMemory]) {
        let size = rows.first().map_or(0.0, |r| mb(r.bytes));
        let label = if size > 300.0 { "500 MB" } else { "100 MB" };
        let _ = writeln!(
            self.text,
            "## (k) peak memory of `count` and `simulate` by format, {label}\n\n\
             Each format the generator writes, about {label} of it (`cargo xtask gen-transcript --size \
             {} --format haystack|claude-code|openai`), and the densest OpenAI shape \
             (`--format openai --tool-lines {}-{}`: every step one call, with no text, and its result of \
             {} to {} short lines, a message every 250 bytes or so, where the plain OpenAI request has \
             one every few kilobytes). Peak RSS of\n\n\
             ```sh\ntarget/release/compaction count FILE --counter approximate\n\
             target/release/compaction simulate FILE {}\n```\n\n\
             | format | input | `count` | peak RSS | RSS / input | `simulate` | peak RSS | RSS / input |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|",
            label.replace(' ', ""),
            DENSE_TOOL_LINES.0,
            DENSE_TOOL_LINES.1,
            DENSE_TOOL_LINES.0,
            DENSE_TOOL_LINES.1,
            SIMULATE.join(" ")
        );
        let ratio = |run: &ProcessRun, bytes: u64| run.max_rss_kib as f64 * 1024.0 / bytes as f64;
        let (mut worst, mut worst_dense) = (0.0f64, 0.0f64);
        for row in rows {
            let (count, simulate) = (ratio(&row.count, row.bytes), ratio(&row.simulate, row.bytes));
            if row.dense {
                worst_dense = worst_dense.max(count).max(simulate);
            } else {
                worst = worst.max(count).max(simulate);
            }
            let _ = writeln!(
                self.text,
                "| {} | {:.0} MB | {:.2} s | {:.0} MB | **{count:.2}×** | {:.2} s | {:.0} MB | **{simulate:.2}×** |",
                row.label,
                mb(row.bytes),
                row.count.seconds,
                row.count.max_rss_kib as f64 * 1024.0 / 1e6,
                row.simulate.seconds,
                row.simulate.max_rss_kib as f64 * 1024.0 / 1e6,
            );
        }
        let _ = writeln!(
            self.text,
            "\nHaystack, Claude Code and OpenAI: at most **{worst:.2}× the input** (goal ≤ 3×: {}). \
             Dense OpenAI: **{worst_dense:.2}×** (the same goal: {}){}.\n",
            verdict(worst <= 3.0),
            verdict(worst_dense <= 3.0),
            if worst_dense > 3.0 {
                ": there a message's structure (its parts, the result's own copy of its call, the \
                 pairing of calls and results) outweighs its bytes, and `simulate`'s replay holds a \
                 copy of every message beside the conversation (about the input's size again) and two \
                 running counts (a call's arguments are kept as their JSON text, not as a parsed \
                 object)"
            } else {
                ""
            }
        );
        self.summary.push(format!(
            "| (k) `count` and `simulate` peak RSS / input, {label}, Haystack, Claude Code, OpenAI | {worst:.2}× | ≤ 3× | {} |",
            verdict(worst <= 3.0)
        ));
        self.summary.push(format!(
            "| (k) the same, dense OpenAI (a message every ~250 bytes) | {worst_dense:.2}× | ≤ 3× | {} |",
            verdict(worst_dense <= 3.0)
        ));
    }

    fn finish(mut self) -> String {
        let _ = writeln!(
            self.text,
            "## Summary\n\nLoad average when the run ended: {}.\n\n| measurement | result | goal | |\n|---|---:|---|---|",
            load_average()
        );
        for line in &self.summary {
            let _ = writeln!(self.text, "{line}");
        }
        self.text
    }
}

/// What was done for (c), and where its time still goes, for when a goal is missed.
const PRUNE_NOTES: &str = "What was done: messages are read straight from the bytes in any spelling \
(`Message::read_prefix_in`, 8 bytes at a time, each string's contents checked as UTF-8 in one \
simdutf8 call and only when not all ASCII, on both cores); \
texts stay in the input undecoded (pruning and the approximate counter need only their lengths, \
known from the read); unchanged messages are written back as runs of input bytes, handed to a \
second thread that writes each buffer while the next is made, and changed messages are encoded \
on another thread ahead of their turn while the main thread copies the unchanged ones \
(`threads::made_ahead`; new since the last benchmark: the main thread of the compact spelling's \
prune ran 303 M instructions, now 258 M). The running count now tells each message's own count \
from the measure it took of it (`Additive::count_alone`) instead of rendering the message \
again, so the compact phase went from 18–24 ms to 11–15; and the approximate counter walks a \
conversation of 2,048 messages or more on two threads, which (a) shows too. Parsing went \
from 165–314 ms (issue 15's measurements) to about 50 ms on a quiet machine; the whole prune of the \
compact spelling runs 0.51 G instructions (callgrind; 0.54 G at the last benchmark), most of them \
reading, and most of the reading finding each string's end: an escape comes every twenty bytes \
or so in a tool's output, and each ends an eight-byte step. Tried and left this time: finding \
the next quote or backslash with `memchr`'s vector search (and checking the string for control \
characters and non-ASCII bytes after, in one vectorized pass) ran as many instructions and \
parsed a 50 MB file no faster in-process (the search is restarted at every escape), and taking \
every stop of an eight-byte word in turn instead of starting a new word after each ran 761 M \
instructions for the OpenAI prune of (f) where the word-at-a-time scan runs 681 M. What is left \
is mostly the kernel's: the table above \
shows about as much CPU time in the kernel as in user space, most of it page faults (this machine's \
virtual memory makes each fresh page cost microseconds): reading 50 MB into fresh memory, the \
messages, writing the output into the page cache, and `fsync` before the output's atomic rename \
(a large output is flushed while it is written, so that waits for the tail only). Neither the \
read nor the write divides well over two cores: the two threads reading the input's halves take \
turns more than they run side by side (`perf` shows each waiting while the other faults pages \
in), and ext4 holds a file's lock for the whole of a buffered write, so the output goes into \
the page cache one write at a time, on the main thread for the long runs of unchanged input. \
What would cut it, and why it is not done: mapping the input instead of reading it (no copy, no \
zeroed pages) needs `unsafe` (`memmap2::Mmap::map`), which the workspace forbids; huge pages \
(300 page faults instead of 20,700 when mimalloc gets them) make the kernel zero 2 MB pages and \
compact memory now and then: a 50 MB prune took 0.10 to 0.38 s with them, 0.14 to 0.17 s \
without, and a 10 MB one held 34 MB instead of 26, so the command asks for none \
(`prctl(PR_SET_THP_DISABLE)`), and mimalloc is now built not to ask for them on the region it \
reserves at its first allocation, before the command's `main` runs (a 9 ms wait for the kernel \
to compact memory was seen there); skipping `fsync` would make the output's rename unsafe. On two cores shared with other work both our threads compete with it, \
where the reference runs on one: the spread of our runs shows it.";

/// Where the log formats' time goes, and what would make them faster: see compaction-formats.
const LOG_FORMAT_NOTES: &str = "Where the time goes (callgrind, all threads). Claude Code, 50 MB: \
`count` 656 M instructions (657 M at the last benchmark), `prune` 638 M (643 M; 316 M on the \
main thread and 316 M on the second). How it is read: \
each line checked as UTF-8 with simdutf8, its members walked by hand (`claude_code::walk_fields`), \
the envelope and `toolUseResult` crossed by a check as strict as serde_json's (`skip.rs`), the \
`message` of a `user` or `assistant` event built by hand (`values.rs`), its tool results' texts \
checked, counted and left in the input (`values::ResultsFound`), repeated keys looked for while \
it is built, the lines parsed on two threads (the second takes five runs of lines in eight), a \
write-back's edits found on two threads. The tool results' texts are left in the input, as \
the OpenAI and Haystack readers leave theirs, and the walk keeps where each line's `message` \
starts and where each result lies (`Slot::span`), so neither the envelope nor a replaced result \
is crossed again to find it. What changed since the last benchmark, for every format: the \
running count tells each message's own count from its measure instead of rendering it again \
(`Additive::count_alone`). What is left: checking and counting the results' texts, a fifth (an escape \
every twenty bytes or so ends each eight-byte step); crossing `toolUseResult` and the envelope, \
a sixth; building the rest of the message (serde_json's `Map` hashes every key with SipHash) and \
turning it into messages. \
OpenAI: the request is read without a tree (`request::read`): its envelope's members parsed as \
they come, its messages read one by one from their bytes on two threads (the second starting at a \
message near the middle), each string `content` checked and left in the input, only the other \
members parsed, each message read up to its pairing on the thread that read it, and repeated \
keys looked for only in the values parsed. Written back, the envelope and every unchanged \
message are copied from the input; each changed message is encoded over its original. At 50 MB, \
`count` 605 M instructions (as at the last benchmark), `prune` 675 M (684 M; 331 M on the main \
thread where it ran 366 M). What changed: the changed messages are encoded on another thread \
ahead of their turn while the main thread copies the unchanged ones (`threads::made_ahead`), \
where they were encoded 2,048 at a time on two threads while the main thread waited; the output \
is flushed to the device every 4 MB, each write handing over at most that much, so a long run \
of unchanged input is flushed while the rest of it is written. What is left: finding each string's end and \
counting its characters, 43% of all (see (c) for what was tried); after the reading, the \
pruning (20 M) and the write-back (about 25 M) on the main thread. \
The limit, with a profile (`perf record`, 50 MB `prune`): the kernel takes half of the CPU time \
(52% of the samples for Claude Code, 51% for OpenAI). Reading the input takes a third of the \
Claude Code samples and a fifth of the OpenAI ones, most of it page faults on the fresh memory \
the file is read into (12,200 of them; zeroing those pages alone is a tenth of all samples); \
the other faults are the messages' memory, and copying the output into the page cache is 4% \
and 14%. This virtual machine hands free pages back to its host (`virtio_balloon` free page \
reporting), so a fresh page costs more here than on bare metal, and the same run takes from \
0.12 to over 0.2 s. What would cut it: mapping the input instead of reading it (`unsafe`, \
which the workspace forbids), or reading it in pieces and reading the unchanged bytes again \
when writing (a write-back that streams its input: a change of the formats crate's model of \
its input, not done yet). Tried and left: reading the input into an anonymous map whose halves \
two threads have the kernel fill first (`MADV_POPULATE_WRITE`) read a 50 MB request in 31 ms \
(median of 15) where the `Vec` read takes 22.";

/// Deletes what the last run of the next command wrote (`outputs`), then writes out what earlier
/// runs left in the page cache (`sync`), so that a run does not pay for another's output: our
/// `prune` syncs its file before renaming it, and on ext4 that waits for every file's pending
/// data, the other side's 50 MB output included; and a file written over the last run's output
/// frees that output's blocks while it is written or renamed (10 to 15 ms for 50 MB on this
/// machine's disk, mounted with `discard`), which a user writing a new file does not pay.
fn settle(outputs: &[&Path]) {
    for output in outputs {
        let _ = std::fs::remove_file(output);
    }
    let _ = Command::new("sync").status();
}

fn list(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.4}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_the_sections_it_cannot_run_alone() {
        // (the list given, what the error must name), refused before anything is built.
        let cases: &[(&str, &[&str])] = &[
            ("dataset,prune", &["\"prune\"", "dataset, memory-by-format, python, proxy-load"]),
            ("python,haystack", &["\"haystack\"", "python"]),
            ("proxy", &["\"proxy\"", "proxy-load"]),
            ("(a)", &["\"(a)\""]),
            (",", &["comma list", "memory-by-format"]),
        ];
        for (only, expected) in cases {
            let error = run_alone(only, false, 1).expect_err(only).to_string();
            for part in *expected {
                assert!(error.contains(part), "--only {only}: {error}");
            }
        }
    }
}
