//! Reading conversations: from a path or standard input, in any format compaction-formats knows.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use compaction_model::ToolSpec;
use serde_json::Value;

use compaction_formats::{Conversation, Format, ReadOptions};

/// Where a conversation comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Standard input (INPUT absent or `-`).
    Stdin,
    /// A file.
    File(PathBuf),
}

impl Source {
    /// The source for an INPUT argument.
    pub fn from_arg(arg: Option<&Path>) -> Source {
        match arg {
            None => Source::Stdin,
            Some(path) if path.as_os_str() == "-" => Source::Stdin,
            Some(path) => Source::File(path.to_owned()),
        }
    }

    /// The name used in error messages.
    pub fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".to_owned(),
            Source::File(path) => path.display().to_string(),
        }
    }

    /// Every byte of the input.
    pub fn read_bytes(&self) -> Result<Vec<u8>> {
        match self {
            Source::Stdin => {
                let mut bytes = Vec::new();
                std::io::stdin().read_to_end(&mut bytes).context("<stdin>: cannot read")?;
                Ok(bytes)
            }
            Source::File(path) => read_file(path).with_context(|| format!("{}: cannot read", path.display())),
        }
    }
}

/// Files at least this large are read by two threads, each into its half of the buffer: most
/// of a read is the kernel filling fresh pages, which two cores do in half the time.
const PARALLEL_READ: usize = 4 << 20;

#[cfg(unix)]
fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let metadata = file.metadata()?;
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let len = match usize::try_from(metadata.len()) {
        Ok(len) if len >= PARALLEL_READ && cores > 1 && metadata.is_file() => len,
        _ => return std::fs::read(path),
    };
    let mut bytes = vec![0; len];
    let (head, tail) = bytes.split_at_mut(len / 2);
    let middle = head.len() as u64;
    let halves = std::thread::scope(|scope| {
        let second = scope.spawn(|| file.read_exact_at(tail, middle));
        let first = file.read_exact_at(head, 0);
        first.and(second.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    });
    match halves {
        Ok(()) => {}
        // Shorter than its size said: it changed while being read; read it again as a whole.
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return std::fs::read(path),
        Err(error) => return Err(error),
    }
    // Anything appended since its size was taken.
    let mut at = len as u64;
    let mut chunk = [0; 8192];
    loop {
        match file.read_at(&mut chunk, at) {
            Ok(0) => return Ok(bytes),
            Ok(n) => {
                bytes.extend_from_slice(&chunk[..n]);
                at += n as u64;
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

#[cfg(not(unix))]
fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(path)
}

/// The arguments every command that reads a conversation takes.
#[derive(Debug, Clone, clap::Args)]
pub struct InputArgs {
    /// The conversation: a path, or `-` or nothing for standard input.
    pub input: Option<PathBuf>,
    /// The transcript format: haystack, openai, anthropic, claude-code, swe-agent or openhands;
    /// detected from the content when absent.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Which conversation of a file holding several (tau-bench trajectories, OpenHands
    /// evaluation output with one instance a line); 0, the first, when absent.
    #[arg(long, value_name = "N")]
    pub conversation: Option<usize>,
    /// Read everything the log holds. By default a log the provider (or agent) compacted is read
    /// as the model saw it at its last call: Claude Code's summary and what follows its
    /// `compact_boundary`, what a Codex `compacted` line left, what follows an Anthropic
    /// `compaction` block, what an OpenHands condensation did not forget.
    #[arg(long)]
    pub full_history: bool,
}

impl InputArgs {
    /// Reads the conversation the arguments name. Of a file holding several, when none was
    /// chosen, a note on standard error says which one was read.
    pub fn read(&self) -> Result<Conversation> {
        Ok(self.read_timed()?.conversation)
    }

    /// Like [`InputArgs::read`], for a command that never writes the conversation (`simulate`):
    /// without what writing it back needs ([`ReadOptions::without_write_back`]), so it holds
    /// less.
    pub fn read_without_write_back(&self) -> Result<Conversation> {
        let source = Source::from_arg(self.input.as_deref());
        Ok(self.read_with(&source, self.options(&source).without_write_back())?.conversation)
    }

    /// Like [`InputArgs::read`], also telling how long reading and parsing took, for commands
    /// that report timings. The conversation keeps the input's bytes.
    pub fn read_timed(&self) -> Result<ReadInput> {
        let source = Source::from_arg(self.input.as_deref());
        self.read_with(&source, self.options(&source))
    }

    /// Reads `source` with `options`, timed.
    fn read_with(&self, source: &Source, options: ReadOptions) -> Result<ReadInput> {
        let spinner = crate::progress::spinner(&format!("reading {}", source.name()));
        let started = std::time::Instant::now();
        let bytes = source.read_bytes()?;
        let read = started.elapsed();
        let conversation = compaction_formats::read(bytes, &options).map_err(usage_or_input)?;
        let parse = started.elapsed() - read;
        spinner.finish_and_clear();
        self.say_notes(source, &conversation);
        Ok(ReadInput { conversation, read, parse })
    }

    /// Reads the conversation for a command that will not write it back in its own format
    /// (`count`, `convert --to`): an event log (Claude Code, Codex, Responses items a line) is
    /// read a few megabytes of whole lines at a time, so memory holds those and the
    /// conversation, never the file; anything else is read whole, as [`InputArgs::read`] reads
    /// it.
    pub fn read_streaming(&self) -> Result<Conversation> {
        let source = Source::from_arg(self.input.as_deref());
        let options = self.options(&source);
        self.streaming(source, options)
    }

    /// Like [`InputArgs::read_streaming`], for a command that never writes the conversation
    /// (`count`): a file read whole is read without what writing it back needs
    /// ([`ReadOptions::without_write_back`]), so it holds less.
    pub fn read_streaming_without_write_back(&self) -> Result<Conversation> {
        let source = Source::from_arg(self.input.as_deref());
        let options = self.options(&source).without_write_back();
        self.streaming(source, options)
    }

    /// [`InputArgs::read_streaming`] of `source` with `options`.
    fn streaming(&self, source: Source, options: ReadOptions) -> Result<Conversation> {
        let name = source.name();
        let lines_possible = self.conversation.is_none()
            && self.format.is_none_or(|f| compaction_formats::LineReader::new(f, &options).is_some());
        if !lines_possible {
            return Ok(self.read_with(&source, options)?.conversation);
        }
        let spinner = crate::progress::spinner(&format!("reading {name}"));
        let mut input: Box<dyn BufRead> = match &source {
            Source::Stdin => Box::new(BufReader::with_capacity(1 << 20, std::io::stdin().lock())),
            Source::File(path) => {
                let file = std::fs::File::open(path).with_context(|| format!("{name}: cannot read"))?;
                Box::new(BufReader::with_capacity(1 << 20, file))
            }
        };
        // The first lines tell the format.
        let mut head = read_head(&mut *input).with_context(|| format!("{name}: cannot read"))?;
        // Only whole lines: a line cut short is not JSON, and would hide the format.
        let whole = head.iter().rposition(|&b| b == b'\n').map_or(head.len(), |k| k + 1);
        let format = match self.format {
            Some(format) => Some(format),
            None => compaction_formats::detect_lines(&head[..whole], &name)?,
        };
        let reader = format.and_then(|format| compaction_formats::LineReader::new(format, &options));
        if reader.is_some() && !head.ends_with(b"\n") {
            // The rest of the line the head stopped in.
            input.read_until(b'\n', &mut head).with_context(|| format!("{name}: cannot read"))?;
        }
        let Some(mut reader) = reader else {
            // Not an event log: a file is read whole as `read` reads it (on two threads, into a
            // buffer of its size); standard input, which cannot be read again, to its end.
            if let Source::File(_) = source {
                spinner.finish_and_clear();
                return Ok(self.read_with(&source, options)?.conversation);
            }
            input.read_to_end(&mut head).with_context(|| format!("{name}: cannot read"))?;
            let conversation = compaction_formats::read(head, &options).map_err(usage_or_input)?;
            spinner.finish_and_clear();
            self.say_notes(&source, &conversation);
            return Ok(conversation);
        };
        reader.push_lines(&head)?;
        // The rest a block of whole lines at a time: a few megabytes, which the reader parses on
        // two threads. A line the block cuts waits for the next one.
        const BLOCK: u64 = 4 << 20;
        let mut block = Vec::new();
        loop {
            let read = input
                .by_ref()
                .take(BLOCK)
                .read_to_end(&mut block)
                .with_context(|| format!("{name}: cannot read"))?;
            if read == 0 {
                // The end of the input: what is left is its last line.
                reader.push_lines(&block)?;
                break;
            }
            // Only the bytes just read can hold a new line break: a line longer than a block is
            // not looked through again each time it grows.
            let fresh = block.len() - read as usize;
            if let Some(end) = block[fresh..].iter().rposition(|&b| b == b'\n').map(|k| fresh + k) {
                reader.push_lines(&block[..=end])?;
                block.drain(..=end);
            }
        }
        let conversation = reader.finish()?;
        spinner.finish_and_clear();
        self.say_notes(&source, &conversation);
        Ok(conversation)
    }

    fn options(&self, source: &Source) -> ReadOptions {
        let mut options = ReadOptions::named(source.name()).with_full_history(self.full_history);
        options.format = self.format;
        options.conversation = self.conversation;
        options
    }

    /// Says once on standard error what reading left out or chose.
    fn say_notes(&self, source: &Source, conversation: &Conversation) {
        if conversation.conversations > 1 && self.conversation.is_none() {
            crate::progress::say(&format!(
                "note: {} holds {} conversations; read conversation {} (choose with --conversation N)",
                source.name(),
                conversation.conversations,
                conversation.selected
            ));
        }
        for note in &conversation.notes {
            crate::progress::say(&format!("note: {}: {note}", source.name()));
        }
    }
}

/// Lines enough to tell a format from: the first 64, or the first 1 MB when the lines are long
/// (an OpenAI request is one line of the whole file; a log's line is rarely that long), so
/// telling the format does not scan a large one-line file for line breaks. The head may stop
/// within a line.
fn read_head(input: &mut dyn BufRead) -> std::io::Result<Vec<u8>> {
    const LINES: usize = 64;
    const BYTES: usize = 1 << 20;
    let mut head = Vec::new();
    let mut lines = 0;
    while lines < LINES && head.len() < BYTES {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        let room = buffer.len().min(BYTES - head.len());
        let mut take = room;
        let mut from = 0;
        while let Some(k) = buffer[from..room].iter().position(|&b| b == b'\n') {
            from += k + 1;
            lines += 1;
            if lines == LINES {
                take = from;
                break;
            }
        }
        head.extend_from_slice(&buffer[..take]);
        input.consume(take);
    }
    Ok(head)
}

/// A conversation out of range is bad usage; anything else is bad input.
fn usage_or_input(error: compaction_formats::Error) -> anyhow::Error {
    match error {
        compaction_formats::Error::NoSuchConversation { name, index, count } => {
            anyhow::Error::new(crate::error::UsageError(format!(
                "{name}: --conversation {index} is out of range: the file holds {count} conversation{}",
                if count == 1 { "" } else { "s" }
            )))
        }
        other => anyhow::Error::new(other),
    }
}

/// A conversation with how long it took to read.
#[derive(Debug)]
pub struct ReadInput {
    /// The conversation.
    pub conversation: Conversation,
    /// Time spent reading the bytes.
    pub read: std::time::Duration,
    /// Time spent parsing them.
    pub parse: std::time::Duration,
}

/// A JSON syntax error with its line and column.
pub fn json_error(name: &str, error: &serde_json::Error) -> anyhow::Error {
    anyhow!("{name}: invalid JSON: {error}")
}

/// Reads a `--tools` file: a JSON array of `{"name", "description", "parameters"}` objects.
pub fn read_tools(path: &Path) -> Result<Vec<ToolSpec>> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).with_context(|| format!("{name}: cannot read"))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|error| json_error(&name, &error))?;
    let Value::Array(items) = value else {
        return Err(anyhow!("{name}: expected a JSON array of tool specs"));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            serde_json::from_value::<ToolSpec>(item).map_err(|error| anyhow!("{name}: tool {index}: {error}"))
        })
        .collect()
}
