//! `cargo xtask bench-vs-reference`: this project and Haystack 3.4.1 side by side on the same
//! synthetic transcripts, alternating runs, with the results written to BENCHMARKS.md.
//!
//! Our side is release builds run as processes: `measure` (benches package) for `compact()`
//! timings, `compaction prune` for end-to-end runs. The reference side is
//! `xtask/reference/bench_reference.py` in `.venv-ref`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::{flag_value, gen, project_root, reference};

const SEED: u64 = 1;
/// Compaction targets are this share of the transcript's tokens.
const TARGET_FRACTION: f64 = 0.4;

/// `cargo xtask bench-vs-reference [--runs N]`.
pub fn bench_vs_reference(args: &[String]) -> Result<()> {
    let runs: usize = flag_value(args, "--runs").unwrap_or("5").parse().context("--runs takes a number")?;
    let runs = runs.max(1);
    let bench = Bench::prepare()?;
    let mut report = Report::new(&bench, runs)?;

    eprintln!("(a) compact(), approximate counter, 50MB");
    let a = bench.compare_compact(&bench.transcripts.big, "approximate", runs)?;
    report.compact("(a) compact(), approximate counter, 50 MB", &a, 30.0);

    eprintln!("(b) compact(), tiktoken o200k_base, 19MB");
    let b = bench.compare_compact(&bench.transcripts.mid, "tiktoken:o200k_base", runs)?;
    report.compact("(b) compact(), tiktoken o200k_base, 19 MB", &b, 4.0);

    if bench.has_prune() {
        eprintln!("(c) prune end to end, approximate counter, 50MB");
        let c = bench.compare_prune(&bench.transcripts.big, a.target, runs)?;
        report.prune(&c);
        eprintln!("(d) peak memory of compaction prune against input size");
        let d = bench.memory_by_size()?;
        report.memory(&d);
    } else {
        report.missing(
            "(c) prune end to end and (d) peak memory",
            "the `compaction` binary has no `prune` command yet",
        );
        eprintln!("(d*) stand-in: peak memory of `measure` (parse, count, compact, write)");
        let d = bench.memory_by_size_measure()?;
        report.memory_stand_in(&d);
    }
    eprintln!("(e) hook over a simulated 2,000-step run");
    let mut command = Command::new(&bench.measure);
    command.arg(&bench.transcripts.big).args(["--counter", "approximate", "--hook-steps", "2000"]);
    let e = json_output(&mut command)?;
    report.hook_run(&e);

    let path = project_root().join("BENCHMARKS.md");
    std::fs::write(&path, report.finish()).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

struct Transcripts {
    big: PathBuf,
    mid: PathBuf,
    by_size: Vec<PathBuf>,
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
    ours: CompactRun,
    reference: CompactRun,
    messages: u64,
    total_tokens: u64,
    target: u64,
    identical: bool,
}

struct ProcessRun {
    seconds: f64,
    max_rss_kib: u64,
}

struct PruneComparison {
    ours: Vec<ProcessRun>,
    reference: Vec<ProcessRun>,
    reference_in_script: Vec<f64>,
}

impl Bench {
    fn prepare() -> Result<Bench> {
        let root = project_root();
        let python = reference::reference_python()?;
        let tiktoken_cache = reference::tiktoken_cache()?;
        eprintln!("generating transcripts in target/transcripts/");
        let sizes = ["1MB", "10MB", "19MB", "50MB"];
        let by_size = sizes.iter().map(|s| gen::cached(s, SEED)).collect::<Result<Vec<_>>>()?;
        let transcripts = Transcripts { big: by_size[3].clone(), mid: by_size[2].clone(), by_size };
        eprintln!("building release binaries");
        reference::run(
            Command::new(env!("CARGO"))
                .args(["build", "--release", "--quiet", "-p", "compaction-benches", "--bin", "measure"])
                .args(["-p", "compaction-cli", "--bin", "compaction"])
                .current_dir(&root),
        )?;
        let target =
            std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
        let release = target.join("release");
        let scratch = root.join("target").join("bench-vs-reference");
        std::fs::create_dir_all(&scratch)?;
        let time = Some(PathBuf::from("/usr/bin/time")).filter(|t| t.exists());
        Ok(Bench {
            python,
            tiktoken_cache,
            script: root.join("xtask").join("reference").join("bench_reference.py"),
            measure: release.join("measure"),
            cli: release.join("compaction"),
            time,
            scratch,
            transcripts,
        })
    }

    fn has_prune(&self) -> bool {
        Command::new(&self.cli)
            .args(["prune", "--help"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
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
    fn compare_compact(&self, input: &Path, counter: &str, runs: usize) -> Result<CompactComparison> {
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
            eprintln!("  run {}: reference {:.3}s", run + 1, reference.seconds[run]);
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
            eprintln!("  run {}: ours {:.4}s", run + 1, ours.seconds[run]);
        }
        let identical = std::fs::read(&ours_out)? == std::fs::read(&reference_out)?;
        Ok(CompactComparison {
            ours,
            reference,
            messages: first["messages"].as_u64().unwrap_or(0),
            total_tokens: first["total_tokens"].as_u64().unwrap_or(0),
            target,
            identical,
        })
    }

    /// `prune` on both sides, alternating. Each run starts with no file data waiting to be
    /// written (see [`settle`]).
    fn compare_prune(&self, input: &Path, target: u64, runs: usize) -> Result<PruneComparison> {
        let target = target.to_string();
        let mut comparison =
            PruneComparison { ours: Vec::new(), reference: Vec::new(), reference_in_script: Vec::new() };
        for run in 0..runs {
            let mut ours = Command::new(&self.cli);
            ours.arg("prune").arg(input).arg("-o").arg(self.scratch.join("ours-prune.json")).args([
                "--target-tokens",
                &target,
                "--counter",
                "approximate",
            ]);
            settle();
            comparison.ours.push(self.timed(ours)?);
            settle();
            let mut reference = self.reference();
            reference
                .arg("prune")
                .arg(input)
                .args(["--counter", "approximate", "--target", &target, "--output"])
                .arg(self.scratch.join("reference-prune.json"));
            let (process, answer) = self.timed_json(reference)?;
            comparison.reference.push(process);
            comparison.reference_in_script.push(answer["seconds"].as_f64().unwrap_or(f64::NAN));
            eprintln!(
                "  run {}: ours {:.3}s, reference {:.3}s",
                run + 1,
                comparison.ours[run].seconds,
                comparison.reference_in_script[run]
            );
        }
        Ok(comparison)
    }

    fn memory_by_size(&self) -> Result<Vec<(u64, ProcessRun)>> {
        let counter_total = |path: &Path| -> Result<u64> {
            let answer = json_output(Command::new(&self.measure).arg(path).args([
                "--counter",
                "approximate",
                "--target",
                "0",
            ]))?;
            answer["total_tokens"].as_u64().context("measure printed no total")
        };
        let mut rows = Vec::new();
        for input in &self.transcripts.by_size {
            let target = (counter_total(input)? as f64 * TARGET_FRACTION) as u64;
            let mut command = Command::new(&self.cli);
            command.arg("prune").arg(input).arg("-o").arg(self.scratch.join("ours-prune.json")).args([
                "--target-tokens",
                &target.to_string(),
                "--counter",
                "approximate",
            ]);
            settle();
            rows.push((std::fs::metadata(input)?.len(), self.timed(command)?));
        }
        Ok(rows)
    }

    fn memory_by_size_measure(&self) -> Result<Vec<(u64, ProcessRun)>> {
        let mut rows = Vec::new();
        for input in &self.transcripts.by_size {
            let mut command = Command::new(&self.measure);
            command
                .arg(input)
                .args(["--counter", "approximate", "--fraction", "0.4", "--output"])
                .arg(self.scratch.join("ours-measure.json"));
            settle();
            rows.push((std::fs::metadata(input)?.len(), self.timed(command)?));
        }
        Ok(rows)
    }

    /// Runs `command` for its wall time and peak RSS: under `/usr/bin/time -v` when there is
    /// one, else under the reference script's `spawn` mode (`ru_maxrss` of its child).
    fn timed(&self, command: Command) -> Result<ProcessRun> {
        self.timed_json(command).map(|(run, _)| run)
    }

    /// As [`Bench::timed`], also returning the JSON the command printed (or `null`).
    fn timed_json(&self, command: Command) -> Result<(ProcessRun, Value)> {
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
            };
            return Ok((run, answer["child"].clone()));
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
        let max_rss_kib = stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let answer = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        Ok((ProcessRun { seconds, max_rss_kib }, answer))
    }
}

/// Runs `command` and reads the one JSON object it prints.
fn json_output(command: &mut Command) -> Result<Value> {
    let output = command.output().with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!("{command:?} failed with {}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    serde_json::from_slice(&output.stdout).with_context(|| format!("reading the output of {command:?}"))
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

fn verdict(met: bool) -> &'static str {
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
            &["-c", "import sys; from importlib.metadata import version; print(sys.version.split()[0], version('haystack-ai'))"],
        );
        writeln!(
            text,
            "# Benchmarks\n\n\
             Generated by `cargo xtask bench-vs-reference --runs {runs}`; do not edit by hand.\n\n\
             This project against the reference, Haystack's `ToolResultPruningCompactor` (Python, \
             haystack-ai {}), on the same synthetic transcripts (`cargo xtask gen-transcript --seed {SEED}`, \
             kept in `target/transcripts/`). The two sides run alternately, {runs} run(s) each; the numbers \
             are medians. Compaction targets are {}% of the transcript's tokens. Before each end-to-end \
             run, `sync` writes out what earlier runs left to write, so no run pays for another's \
             output.\n\n\
             ## Machine\n\n\
             - {cores} cores (`nproc`)\n- {}\n- {}\n- git {}\n- Python {}\n",
            python_version.split_whitespace().nth(1).unwrap_or("?"),
            TARGET_FRACTION * 100.0,
            machine_line("CPU: ", "/proc/cpuinfo", "model name"),
            machine_line("Memory: ", "/proc/meminfo", "MemTotal"),
            command_text("git", &["describe", "--always", "--dirty"]),
            python_version.split_whitespace().next().unwrap_or("?"),
        )?;
        writeln!(
            text,
            "## Commands\n\n```sh\n\
             cargo xtask gen-transcript --size 50MB --seed {SEED}   # also 19MB, 10MB, 1MB\n\
             target/release/measure FILE --counter SPEC --target N   # ours: parse, then time compact()\n\
             .venv-ref/bin/python xtask/reference/bench_reference.py compact FILE --counter SPEC --target N\n\
             target/release/compaction prune FILE -o OUT --target-tokens N --counter approximate\n\
             .venv-ref/bin/python xtask/reference/bench_reference.py prune FILE --counter approximate --target N --output OUT\n\
             ```\n\n\
             Peak memory is `/usr/bin/time -v`'s maximum resident set size ({}).\n",
            if bench.time.is_some() { "present here" } else { "absent here, so `ru_maxrss` of the child" }
        )?;
        Ok(Report { text, summary: Vec::new() })
    }

    fn compact(&mut self, title: &str, c: &CompactComparison, goal: f64) {
        let ours = median(&c.ours.seconds);
        let reference = median(&c.reference.seconds);
        let ratio = reference / ours;
        let whole: Vec<f64> = c.ours.seconds.iter().zip(&c.ours.apply_seconds).map(|(a, b)| a + b).collect();
        let with_apply = median(&whole);
        let same =
            if c.identical && c.ours.pruned == c.reference.pruned { "identical" } else { "**DIFFERENT**" };
        let _ = writeln!(
            self.text,
            "## {title}\n\n\
             {} messages, {} tokens, target {}. Parsing is outside the timer on both sides.\n\n\
             | | median | runs (s) | pruned |\n|---|---:|---|---:|\n\
             | ours | {:.4} s | {} | {} |\n| reference | {:.3} s | {} | {} |\n\n\
             Speed-up **{ratio:.1}×** (goal ≥ {goal}×: {}). Outputs (`to_dict` JSON): {same}.\n\n\
             The reference's `compact()` returns the new list of messages; ours returns what changes \
             (each pruned result described, not built), and `apply()` builds the compacted \
             conversation in place. Ours with `apply()` as well: median {:.4} s ({:.1}×; runs: {}).\n",
            c.messages,
            c.total_tokens,
            c.target,
            ours,
            list(&c.ours.seconds),
            c.ours.pruned,
            reference,
            list(&c.reference.seconds),
            c.reference.pruned,
            verdict(ratio >= goal),
            with_apply,
            reference / with_apply,
            list(&whole),
        );
        self.summary.push(format!("| {title} | {ratio:.1}× | ≥ {goal}× | {} |", verdict(ratio >= goal)));
    }

    fn prune(&mut self, c: &PruneComparison) {
        let ours_seconds: Vec<f64> = c.ours.iter().map(|r| r.seconds).collect();
        let reference_seconds: Vec<f64> = c.reference.iter().map(|r| r.seconds).collect();
        let ours = median(&ours_seconds);
        let reference = median(&c.reference_in_script);
        let ours_rss = c.ours.iter().map(|r| r.max_rss_kib).max().unwrap_or(0);
        let reference_rss = c.reference.iter().map(|r| r.max_rss_kib).max().unwrap_or(0);
        let ratio = reference / ours;
        let _ = writeln!(
            self.text,
            "## (c) prune end to end, approximate counter, 50 MB\n\n\
             Ours is the whole `compaction prune` process. The reference is timed inside the script, \
             from json load to json dump (its whole process, with interpreter start-up and imports, \
             is also shown).\n\n\
             | | median wall | runs (s) | peak RSS |\n|---|---:|---|---:|\n\
             | ours | {ours:.3} s | {} | {:.0} MB |\n\
             | reference (load → dump) | {reference:.3} s | {} | {:.0} MB |\n\
             | reference (whole process) | {:.3} s | {} | |\n\n\
             Speed-up **{ratio:.1}×** (goal ≥ 10×: {}).\n",
            list(&ours_seconds),
            ours_rss as f64 / 1024.0,
            list(&c.reference_in_script),
            reference_rss as f64 / 1024.0,
            median(&reference_seconds),
            list(&reference_seconds),
            verdict(ratio >= 10.0),
        );
        self.summary.push(format!(
            "| (c) prune end to end, 50 MB | {ratio:.1}× | ≥ 10× | {} |",
            verdict(ratio >= 10.0)
        ));
    }

    fn memory_table(&mut self, rows: &[(u64, ProcessRun)]) -> f64 {
        let mut worst: f64 = 0.0;
        let _ = writeln!(self.text, "| input | peak RSS | RSS / input | wall |\n|---:|---:|---:|---:|");
        for (bytes, run) in rows {
            let rss = run.max_rss_kib as f64 * 1024.0;
            let ratio = rss / *bytes as f64;
            worst = worst.max(ratio);
            let _ = writeln!(
                self.text,
                "| {:.1} MB | {:.1} MB | {ratio:.2}× | {:.3} s |",
                mb(*bytes),
                rss / 1e6,
                run.seconds
            );
        }
        worst
    }

    fn memory(&mut self, rows: &[(u64, ProcessRun)]) {
        let _ = writeln!(self.text, "## (d) peak memory of `compaction prune` against input size\n");
        let worst = self.memory_table(rows);
        // The smallest inputs measure the binary's fixed footprint more than the input; the
        // goal is about the largest one.
        let largest =
            rows.last().map_or(f64::NAN, |(bytes, run)| run.max_rss_kib as f64 * 1024.0 / *bytes as f64);
        let met = largest <= 3.0;
        let _ = writeln!(
            self.text,
            "\nAt the largest input **{largest:.2}× the input** (goal ≤ 3×: {}); worst of all sizes {worst:.2}×.\n",
            verdict(met)
        );
        self.summary
            .push(format!("| (d) prune peak RSS / input, 50 MB | {largest:.2}× | ≤ 3× | {} |", verdict(met)));
    }

    fn memory_stand_in(&mut self, rows: &[(u64, ProcessRun)]) {
        let _ = writeln!(
            self.text,
            "## (d*) stand-in: peak memory of `measure` against input size\n\n\
             Until `compaction prune` exists: the `measure` binary reads the file, parses, counts, \
             compacts once and writes the result, which is most of what `prune` will do. Not the goal's \
             measurement.\n"
        );
        let worst = self.memory_table(rows);
        let _ = writeln!(self.text, "\nWorst {worst:.2}× the input (the goal, for `prune`, is ≤ 3×).\n");
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

    fn missing(&mut self, what: &str, why: &str) {
        let _ = writeln!(self.text, "## {what}\n\nNot measured: {why}.\n");
        self.summary.push(format!("| {what} | — | | not measured |"));
    }

    fn finish(mut self) -> String {
        let _ = writeln!(self.text, "## Summary\n\n| measurement | result | goal | |\n|---|---:|---|---|");
        for line in &self.summary {
            let _ = writeln!(self.text, "{line}");
        }
        self.text
    }
}

/// Writes out what earlier runs left in the page cache (`sync`), so that a run does not pay for
/// another's output: our `prune` syncs its file before renaming it, and on ext4 that waits for
/// every file's pending data, the other side's 50 MB output included.
fn settle() {
    let _ = Command::new("sync").status();
}

fn list(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.4}")).collect::<Vec<_>>().join(", ")
}
