//! `cargo xtask gen-dataset`: a deterministic JSON Lines dataset of whole agent trajectories, one
//! a line, as `compaction bench --jsonl` reads them; and the dense OpenAI request of
//! `gen-transcript --tool-lines`.
//!
//! The text is the transcript generator's (`benches/src/gen.rs`, through `gen.rs`): transcripts of
//! a megabyte are generated from seeds drawn from the dataset's seed, parsed, and their texts
//! taken apart into a stream of tool-output lines (long lines wrapped near 160 bytes, at a
//! space where there is one), of prose (the system, user and assistant texts) and of tool calls.
//! The trajectories are then put together from those streams, so their text is as non-ASCII as
//! the transcripts' (see the generator's header) while their shape is the dataset's own.
//!
//! Each line is one trajectory of 8–30 tool steps (an assistant message with one call, then its
//! result of 20–400 lines), in one of three shapes, drawn per line: an OpenAI Chat Completions
//! request (`{"model", "messages"}`, three lines in five), a Haystack `ChatMessage.to_dict` list
//! (one in five) and a SWE-agent trajectory (`trajectory`, `history`, `info`; one in five).
//! Files are written to a temporary name beside their place and renamed there when whole.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Map, Value};

use crate::gen::transcript;
use crate::{flag_value, project_root};

/// Bumped whenever the dataset's output changes, so cached datasets of an older version are
/// never read again (the transcript generator's own version is in the name as well).
pub const VERSION: u32 = 1;

/// How many bytes of transcript each refill of the text streams generates.
const CHUNK: usize = 1_000_000;
/// A stream holding this many items takes no more from a refill (the streams are drawn from at
/// different rates; this bounds the ones drawn from less).
const CAP: usize = 20_000;
/// Lines of tool output longer than this are wrapped.
const WRAP: usize = 160;
/// The same, in the dense request: short lines, as `ls`, a test runner or `grep -l` print them,
/// which with 2–12 lines a result make a message every 250 bytes or so.
const WRAP_DENSE: usize = 32;
/// Tool steps per trajectory.
const STEPS: (usize, usize) = (8, 30);
/// Lines per tool output in the dataset.
const DATASET_LINES: (usize, usize) = (20, 400);

/// `cargo xtask gen-dataset [--size 1GB] [--seed N] [--out PATH]`.
pub fn gen_dataset(args: &[String]) -> Result<()> {
    let size = flag_value(args, "--size").unwrap_or("1GB");
    let seed: u64 = flag_value(args, "--seed").unwrap_or("1").parse().context("--seed takes a number")?;
    let bytes = transcript::parse_size(size).map_err(|e| anyhow!(e))?;
    let out = flag_value(args, "--out")
        .or_else(|| flag_value(args, "-o"))
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("target").join("transcripts").join(file_name(size, seed)));
    let started = Instant::now();
    let stats = write_dataset(&out, bytes, seed)?;
    eprintln!(
        "wrote {} ({} bytes, {} trajectories, the longest {} bytes, seed {seed}) in {:.2?}",
        out.display(),
        stats.bytes,
        stats.lines,
        stats.largest_line,
        started.elapsed()
    );
    Ok(())
}

/// The cached file name of a dataset of `size` and `seed`.
pub fn file_name(size: &str, seed: u64) -> String {
    format!("dataset-{size}-seed{seed}-v{}.{VERSION}.jsonl", transcript::VERSION)
}

/// `target/transcripts/dataset-SIZE-seedN-….jsonl`, written if missing.
pub fn cached(size: &str, seed: u64) -> Result<PathBuf> {
    let path = project_root().join("target").join("transcripts").join(file_name(size, seed));
    if !path.exists() {
        let bytes = transcript::parse_size(size).map_err(|e| anyhow!(e))?;
        write_dataset(&path, bytes, seed)?;
    }
    Ok(path)
}

/// What a dataset holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Lines (trajectories).
    pub lines: u64,
    /// Bytes, newlines included.
    pub bytes: u64,
    /// Bytes of the longest line, without its newline.
    pub largest_line: u64,
}

/// Reads the lines of the dataset at `path` for their number and the longest.
pub fn stats_of(path: &Path) -> Result<Stats> {
    use std::io::BufRead as _;
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut stats = Stats::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read =
            reader.read_until(b'\n', &mut line).with_context(|| format!("reading {}", path.display()))?;
        if read == 0 {
            return Ok(stats);
        }
        stats.bytes += read as u64;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if !text.is_empty() {
            stats.lines += 1;
            stats.largest_line = stats.largest_line.max(text.len() as u64);
        }
    }
}

/// The longest line of the dataset at `path` (the first of them), without its newline.
pub fn longest_line(path: &Path) -> Result<Vec<u8>> {
    use std::io::BufRead as _;
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let (mut longest, mut line) = (Vec::new(), Vec::new());
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).with_context(|| format!("reading {}", path.display()))? == 0 {
            return Ok(longest);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.len() > longest.len() {
            std::mem::swap(&mut longest, &mut line);
        }
    }
}

/// Writes a dataset of about `bytes` bytes to `path` (whole or not at all).
pub fn write_dataset(path: &Path, bytes: usize, seed: u64) -> Result<Stats> {
    write_atomically(path, |out| {
        let mut source = TextSource::new(seed, WRAP, false);
        let mut stats = Stats::default();
        let mut line = String::new();
        while (stats.bytes as usize) < bytes {
            line.clear();
            source.trajectory(stats.lines, &mut line)?;
            line.push('\n');
            out.write_all(line.as_bytes())?;
            stats.lines += 1;
            stats.bytes += line.len() as u64;
            stats.largest_line = stats.largest_line.max(line.len() as u64 - 1);
        }
        Ok(stats)
    })
}

/// An OpenAI Chat Completions request of about `bytes` bytes: a system and a user message, then
/// steps of one call (no text) and its result of `lines` lines (a range), the densest shape of
/// `gen-transcript --tool-lines`.
pub fn write_openai_request(path: &Path, bytes: usize, seed: u64, lines: (usize, usize)) -> Result<Stats> {
    write_atomically(path, |out| {
        let mut source = TextSource::new(seed, WRAP_DENSE, true);
        let tools: Vec<Value> = TOOLS
            .iter()
            .map(|name| {
                json!({"type": "function", "function": {"name": name, "description": format!("Runs {name}."),
                    "parameters": {"type": "object", "properties": {}, "additionalProperties": true}}})
            })
            .collect();
        let mut text = String::from("{\"model\":\"gpt-4o\",\"temperature\":0,\"tools\":");
        text.push_str(&Value::Array(tools).to_string());
        text.push_str(",\"messages\":[\n");
        let system = json!({"role": "system", "content": source.prose()?});
        let user = json!({"role": "user", "content": source.prose()?});
        text.push_str(&format!("{system},\n{user}"));
        let mut written = text.len();
        out.write_all(text.as_bytes())?;
        let mut messages = 2u64;
        let mut step = 0u64;
        while written < bytes {
            text.clear();
            let (name, arguments) = source.call()?;
            let id = format!("call_{step}");
            let output = source.tool_output(lines)?;
            let assistant = json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
                "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]});
            let tool = json!({"role": "tool", "tool_call_id": id, "content": output});
            text.push_str(&format!(",\n{assistant},\n{tool}"));
            out.write_all(text.as_bytes())?;
            written += text.len();
            messages += 2;
            step += 1;
        }
        out.write_all(b"\n]}\n")?;
        Ok(Stats { lines: messages, bytes: written as u64 + 4, largest_line: 0 })
    })
}

/// Runs `write` on a buffered temporary file beside `path`, then renames it to `path`; on an
/// error the temporary file is deleted and `path` left as it was.
pub(crate) fn write_atomically<T>(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
) -> Result<T> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let partial = dir.join(format!(".{name}.{}.partial", std::process::id()));
    let result = (|| {
        let file = File::create(&partial).with_context(|| format!("creating {}", partial.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let value = write(&mut out).with_context(|| format!("writing {}", partial.display()))?;
        let file = out.into_inner().map_err(|e| e.into_error()).context("flushing")?;
        file.sync_all().with_context(|| format!("syncing {}", partial.display()))?;
        std::fs::rename(&partial, path)
            .with_context(|| format!("renaming {} to {}", partial.display(), path.display()))?;
        Ok(value)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

/// `MIN-MAX` (or `N`), as `--tool-lines` takes it.
pub fn parse_range(text: &str) -> Result<(usize, usize)> {
    let number =
        |t: &str| t.trim().parse::<usize>().with_context(|| format!("{text:?} is not MIN-MAX, such as 2-12"));
    let (low, high) = match text.split_once('-') {
        Some((low, high)) => (number(low)?, number(high)?),
        None => (number(text)?, number(text)?),
    };
    if low == 0 || low > high {
        bail!("{text:?}: expected 1 <= MIN <= MAX, such as 2-12");
    }
    Ok((low, high))
}

/// The tools the generator calls (as `benches/src/gen.rs` names them).
const TOOLS: &[&str] =
    &["read_file", "search_code", "run_tests", "web_search", "list_dir", "shell", "fetch_url", "query_db"];

/// splitmix64, as the generator draws with, for the dataset's own choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`.
    fn range(&mut self, (low, high): (usize, usize)) -> usize {
        low + (self.next() % (high - low + 1) as u64) as usize
    }
}

/// The generator's texts, as streams of tool-output lines, prose and calls (see the header).
struct TextSource {
    rng: Rng,
    /// Tool-output lines are wrapped at this many bytes.
    wrap: usize,
    /// Whether a call drawn goes back to the end of its stream: the dense request draws a call
    /// for every few hundred bytes, where a transcript has one every five kilobytes or so, and
    /// would otherwise generate and parse ten times the text it writes.
    recycle_calls: bool,
    lines: VecDeque<String>,
    prose: VecDeque<String>,
    calls: VecDeque<(String, Value)>,
}

impl TextSource {
    fn new(seed: u64, wrap: usize, recycle_calls: bool) -> TextSource {
        TextSource {
            rng: Rng(seed ^ 0xD1B5_4A32_D192_ED03),
            wrap,
            recycle_calls,
            lines: VecDeque::new(),
            prose: VecDeque::new(),
            calls: VecDeque::new(),
        }
    }

    /// Generates and parses another transcript, and takes its texts apart.
    fn refill(&mut self) -> Result<()> {
        let text = transcript::generate(CHUNK, self.rng.next());
        let messages: Vec<Value> = serde_json::from_str(&text).context("the generated transcript is JSON")?;
        let (take_lines, take_prose, take_calls) =
            (self.lines.len() < CAP, self.prose.len() < CAP, self.calls.len() < CAP);
        for message in &messages {
            let parts = message["content"].as_array().map(Vec::as_slice).unwrap_or_default();
            for part in parts {
                if let Some(text) = part["text"].as_str() {
                    if take_prose && !text.is_empty() {
                        self.prose.push_back(text.to_owned());
                    }
                } else if let Some(call) = part.get("tool_call") {
                    if take_calls {
                        let name = call["tool_name"].as_str().unwrap_or("shell").to_owned();
                        self.calls.push_back((name, call["arguments"].clone()));
                    }
                } else if let Some(result) = part.get("tool_call_result") {
                    if !take_lines {
                        continue;
                    }
                    match &result["result"] {
                        Value::String(text) => push_lines(&mut self.lines, text, self.wrap),
                        Value::Array(parts) => {
                            for text in parts.iter().filter_map(|p| p["text"].as_str()) {
                                push_lines(&mut self.lines, text, self.wrap);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        if self.lines.is_empty() || self.prose.is_empty() || self.calls.is_empty() {
            bail!("a generated transcript of {CHUNK} bytes had no tool output, prose or call");
        }
        Ok(())
    }

    fn prose(&mut self) -> Result<String> {
        loop {
            if let Some(text) = self.prose.pop_front() {
                return Ok(text);
            }
            self.refill()?;
        }
    }

    fn call(&mut self) -> Result<(String, Value)> {
        loop {
            if let Some(call) = self.calls.pop_front() {
                if self.recycle_calls {
                    self.calls.push_back(call.clone());
                }
                return Ok(call);
            }
            self.refill()?;
        }
    }

    /// A tool's output of `range` lines.
    fn tool_output(&mut self, range: (usize, usize)) -> Result<String> {
        let count = self.rng.range(range);
        let mut text = String::new();
        for i in 0..count {
            let line = loop {
                if let Some(line) = self.lines.pop_front() {
                    break line;
                }
                self.refill()?;
            };
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&line);
        }
        Ok(text)
    }

    /// Appends one trajectory (the `index`th), in the shape drawn for it, as one line of JSON.
    fn trajectory(&mut self, index: u64, out: &mut String) -> Result<()> {
        let steps = self.rng.range(STEPS);
        let shape = self.rng.range((0, 4));
        let system = self.prose()?;
        let task = self.prose()?;
        let mut drawn = Vec::with_capacity(steps);
        for step in 0..steps {
            let (name, arguments) = self.call()?;
            let thought = if self.rng.range((0, 9)) < 7 { Some(self.prose()?) } else { None };
            let output = self.tool_output(DATASET_LINES)?;
            drawn.push(Step { id: format!("call_{index}_{step}"), name, arguments, thought, output });
        }
        let answer = self.prose()?;
        let value = match shape {
            0..=2 => openai(&system, &task, &drawn, &answer),
            3 => haystack(&system, &task, &drawn, &answer),
            _ => swe_agent(&system, &task, &drawn, &answer, index),
        };
        out.push_str(&value.to_string());
        Ok(())
    }
}

/// One tool step of a trajectory, before it is given a shape.
struct Step {
    id: String,
    name: String,
    arguments: Value,
    thought: Option<String>,
    output: String,
}

/// Appends `text`'s lines to `lines`, a line longer than `wrap` bytes cut at its last space
/// before that (or at a character boundary when it has none).
fn push_lines(lines: &mut VecDeque<String>, text: &str, wrap: usize) {
    for mut line in text.lines() {
        while line.len() > wrap {
            let mut cut = wrap;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            let cut = line[..cut].rfind(' ').filter(|&at| at > wrap / 2).unwrap_or(cut);
            lines.push_back(line[..cut].to_owned());
            line = line[cut..].trim_start_matches(' ');
        }
        lines.push_back(line.to_owned());
    }
}

fn openai(system: &str, task: &str, steps: &[Step], answer: &str) -> Value {
    let mut messages =
        vec![json!({"role": "system", "content": system}), json!({"role": "user", "content": task})];
    for step in steps {
        messages.push(json!({"role": "assistant", "content": step.thought, "tool_calls": [{"id": step.id,
            "type": "function", "function": {"name": step.name, "arguments": step.arguments.to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": step.id, "content": step.output}));
    }
    messages.push(json!({"role": "assistant", "content": answer}));
    json!({"model": "gpt-4o", "messages": messages})
}

fn haystack(system: &str, task: &str, steps: &[Step], answer: &str) -> Value {
    let message =
        |role: &str, content: Value| json!({"role": role, "meta": {}, "name": null, "content": content});
    let mut messages =
        vec![message("system", json!([{"text": system}])), message("user", json!([{"text": task}]))];
    for step in steps {
        let call = json!({"tool_name": step.name, "arguments": step.arguments, "id": step.id, "extra": null});
        let mut parts = Vec::new();
        if let Some(thought) = &step.thought {
            parts.push(json!({"text": thought}));
        }
        parts.push(json!({"tool_call": call}));
        messages.push(message("assistant", Value::Array(parts)));
        messages.push(message(
            "tool",
            json!([{"tool_call_result": {"result": step.output, "origin": call, "error": false}}]),
        ));
    }
    messages.push(message("assistant", json!([{"text": answer}])));
    Value::Array(messages)
}

/// A SWE-agent 1.x trajectory: `history` (what the model saw, as bench reads it), `trajectory`
/// (each step's action and observation again, as SWE-agent writes them) and `info`.
fn swe_agent(system: &str, task: &str, steps: &[Step], answer: &str, index: u64) -> Value {
    let entry = |fields: Value| {
        let mut object = fields.as_object().cloned().unwrap_or_default();
        object.insert("agent".into(), json!("main"));
        Value::Object(object)
    };
    let mut history = vec![
        entry(json!({"role": "system", "content": system, "message_type": "system_prompt"})),
        entry(
            json!({"role": "user", "content": [{"type": "text", "text": task}], "message_type": "observation"}),
        ),
    ];
    let mut trajectory = Vec::new();
    for step in steps {
        let action = command_of(&step.name, &step.arguments);
        let thought = step.thought.clone().unwrap_or_default();
        let observation = format!("OBSERVATION:\n{}", step.output);
        history.push(entry(
            json!({"role": "assistant", "content": thought, "thought": thought, "action": action,
            "tool_calls": [{"index": 1, "function": {"arguments": json!({"command": action}).to_string(),
                "name": "bash"}, "id": step.id, "type": "function"}], "message_type": "action"}),
        ));
        history.push(entry(json!({"role": "tool", "content": [{"type": "text", "text": observation}],
            "message_type": "observation", "tool_call_ids": [step.id]})));
        trajectory.push(json!({"action": action, "observation": step.output, "response": thought,
            "thought": thought, "execution_time": 0.25, "state": {"working_dir": "/testbed"}}));
    }
    history
        .push(entry(json!({"role": "assistant", "content": answer, "thought": answer, "action": "submit",
        "message_type": "action"})));
    let mut info = Map::new();
    info.insert("swe_agent_version".into(), json!("1.0.1"));
    info.insert("exit_status".into(), json!("submitted"));
    info.insert("instance".into(), json!(format!("generated__dataset.{index}")));
    json!({"trajectory": trajectory, "history": history, "info": info})
}

/// The shell command a SWE-agent would have run for a generated call.
fn command_of(name: &str, arguments: &Value) -> String {
    if let Some(command) = arguments["command"].as_str() {
        return command.to_owned();
    }
    if let Some(path) = arguments["path"].as_str() {
        return if name == "list_dir" { format!("ls -la {path}") } else { format!("cat -n {path}") };
    }
    let query: String = arguments["query"].as_str().unwrap_or("TODO").chars().take(40).collect();
    format!("grep -rn {} src", Value::String(query))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_line_ranges_parse_and_bad_ones_are_named() {
        for (text, expected) in [("2-12", Some((2, 12))), ("5", Some((5, 5))), (" 1 - 3 ", Some((1, 3)))] {
            assert_eq!(parse_range(text).ok(), expected, "{text}");
        }
        for text in ["0-3", "5-2", "a-b", "", "3-"] {
            let error = parse_range(text).expect_err(text).to_string();
            assert!(error.contains(&format!("{text:?}")), "{text}: {error}");
        }
    }

    #[test]
    fn long_lines_are_wrapped_without_splitting_a_character() {
        let long = "é".repeat(200) + " " + &"word ".repeat(60);
        let mut lines = VecDeque::new();
        push_lines(&mut lines, &format!("short\n{long}\n"), WRAP);
        assert_eq!(lines[0], "short");
        assert!(lines.iter().all(|l| l.len() <= WRAP), "{lines:?}");
        let joined: String = lines.iter().skip(1).map(String::as_str).collect::<Vec<_>>().join(" ");
        assert_eq!(joined.replace(' ', ""), long.replace(' ', ""));
    }

    #[test]
    fn a_dataset_is_deterministic_whole_trajectories_of_three_shapes() {
        let dir = std::env::temp_dir().join(format!("xtask-dataset-{}", std::process::id()));
        let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
        let stats = write_dataset(&a, 3_000_000, 7).unwrap();
        write_dataset(&b, 3_000_000, 7).unwrap();
        let text = std::fs::read_to_string(&a).unwrap();
        assert_eq!(text, std::fs::read_to_string(&b).unwrap());
        assert_eq!(stats, stats_of(&a).unwrap());
        let longest = longest_line(&a).unwrap();
        assert_eq!(longest.len() as u64, stats.largest_line);
        assert!(text.lines().any(|line| line.as_bytes() == longest));
        assert!(stats.bytes >= 3_000_000 && stats.lines > 3, "{stats:?}");
        let mut shapes = [0usize; 3];
        for line in text.lines() {
            let value: Value = serde_json::from_str(line).unwrap();
            let (shape, tools) = if let Some(messages) = value["messages"].as_array() {
                (0, messages.iter().filter(|m| m["role"] == "tool").collect::<Vec<_>>())
            } else if let Some(messages) = value.as_array() {
                (1, messages.iter().filter(|m| m["role"] == "tool").collect())
            } else {
                let history = value["history"].as_array().unwrap();
                assert!(value["trajectory"].is_array() && value["info"].is_object());
                (2, history.iter().filter(|m| m["role"] == "tool").collect())
            };
            shapes[shape] += 1;
            assert!((STEPS.0..=STEPS.1).contains(&tools.len()), "{} steps", tools.len());
        }
        assert!(shapes.iter().all(|&n| n > 0), "{shapes:?}");
        assert!(!text.is_ascii());
        // No temporary file is left beside them.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_dense_request_has_outputs_of_the_lines_asked() {
        let dir = std::env::temp_dir().join(format!("xtask-dense-{}", std::process::id()));
        let path = dir.join("dense.json");
        let stats = write_openai_request(&path, 200_000, 3, (2, 12)).unwrap();
        let value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let messages = value["messages"].as_array().unwrap();
        assert_eq!(messages.len() as u64, stats.lines);
        for tool in messages.iter().filter(|m| m["role"] == "tool") {
            let lines = tool["content"].as_str().unwrap().lines().count();
            assert!((1..=12).contains(&lines), "{lines}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
