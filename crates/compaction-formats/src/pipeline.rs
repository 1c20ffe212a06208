//! Event logs read a line at a time: the two-thread line pipeline behind [`read()`](crate::read())
//! and [`LineReader`], which streams a log from any source.

use std::ops::Range;

use compaction_json::dupkeys;
use compaction_model::JsonSource;
use serde_json::Value;

use crate::codec::LineRead;
use crate::conversation::{non_empty, Back, Conversation, Layout, ReadOptions};
use crate::error::{self, Error};
use crate::eventlog::{from_log, json_lines, Event, EventLog, JsonLines, LogDecoded};
use crate::format::Format;
use crate::notes::{self, Note, NoteKind};
use crate::threads;
use crate::{claude_code, formats};

/// Below this many bytes an event log is read on one thread, and a tree's repeated keys are
/// looked for after its parse; starting another thread costs more.
pub(crate) const PARALLEL_LOG: usize = 1 << 20;

/// Lines pass between the threads reading a log in runs of about this many bytes.
const RUN_BYTES: usize = 256 << 10;

/// A line parsed ahead of its turn: what the format's reader takes from it (`None` when it must
/// be parsed whole, which reads it or words its error), and the keys repeated in what is read of
/// it (the whole line, but for a Claude Code event read lean: see [`claude_code::lean_event`]).
type Ahead = (Option<Event>, dupkeys::Keys);

/// Parses the line at `line` of `input`; from a shared input, a Claude Code event leaves its tool
/// results' texts there.
fn parse_ahead(format: Format, input: Lines<'_>, line: Range<usize>) -> Ahead {
    let bytes = input.bytes();
    if format == Format::ClaudeCode {
        let lean = match input {
            Lines::Shared(source) => claude_code::lean_event_in(source, line.clone()),
            Lines::Lent(_) => claude_code::lean_event(&bytes[line.clone()]),
        };
        if let Some((event, keys)) = lean {
            return (Some(event), keys);
        }
    }
    let line = &bytes[line];
    let event = match format {
        Format::ClaudeCode => None,
        _ => compaction_model::value_from_slice(line).ok().map(Event::whole),
    };
    (event, dupkeys::scan_keys(line))
}

/// Reads an event log line by line, never holding more than a few runs of lines' JSON, on two
/// threads when there are two cores and the file is large ([`read_lines`]).
pub(crate) fn read_log(
    source: &JsonSource,
    options: &ReadOptions,
    format: Format,
) -> Result<Conversation, Error> {
    read_log_on(source, options, format, threads::two_cores() && source.as_bytes().len() >= PARALLEL_LOG)
}

/// [`read_log`], on two threads when `parallel`.
pub(crate) fn read_log_on(
    source: &JsonSource,
    options: &ReadOptions,
    format: Format,
    parallel: bool,
) -> Result<Conversation, Error> {
    let bytes = source.as_bytes();
    let name = options.name.as_str();
    let mut log = EventLog::default();
    // Only the formats of logs come here; another would be read as Responses items, as ever.
    let mut reader = LogReader::new(format, name, options.full_history)
        .or_else(|| LogReader::new(Format::Responses, name, options.full_history))
        .ok_or_else(|| Error::Unrecognized {
            name: name.to_owned(),
            reason: format!("a {} file is not read line by line", format.label()),
        })?;
    let mut repeated = Repeated::default();
    let lines: Vec<(usize, Range<usize>)> = json_lines(bytes).collect();
    read_lines(Lines::Shared(source), &lines, 0, &mut reader, &mut repeated, name, parallel.then_some(0))?;
    log.bases = lines.into_iter().map(|(_, range)| range).collect();
    if log.bases.is_empty() {
        return Err(Error::Empty { name: name.to_owned() });
    }
    let mut decoded = reader.finish()?;
    // Fingerprints are what a write-back checks changed messages against.
    decoded.seal();
    // Keys compared as written can differ and still be the same key only through an escape.
    log.unique_keys = repeated.objects == 0 && !repeated.escaped;
    decoded.notes.extend(repeated.note());
    Ok(from_log(format, decoded, log, Layout::Lines))
}

/// The bytes lines are read from: shared with the texts read from them, or only lent.
#[derive(Clone, Copy)]
enum Lines<'a> {
    Shared(&'a JsonSource),
    Lent(&'a [u8]),
}

impl<'a> Lines<'a> {
    fn bytes(self) -> &'a [u8] {
        match self {
            Lines::Shared(source) => source.as_bytes(),
            Lines::Lent(bytes) => bytes,
        }
    }
}

/// Feeds `lines` of `input` (each a line number and the line's bytes) in order to `reader`, the
/// first as the `base`-th line read, and their repeated keys to `repeated`.
///
/// The state machines read lines in order, but parsing a line (most of the work) needs nothing
/// from the lines before it. The lines are taken in runs of about [`RUN_BYTES`]. With
/// `parallel`, the number of the first run among those of the whole log, a second thread parses
/// five runs in every eight ahead of their turn and hands them over in order, through a short
/// queue, while this one parses the other three itself and feeds every line to the reader
/// (measured with callgrind, both threads then have about as much to do; the runs are numbered
/// across calls so the shares hold however the log is cut). A line the second thread
/// could not parse is parsed again here, so errors are the same, and the first one in `lines`
/// is the one given. Returns how many runs there were.
fn read_lines(
    input: Lines<'_>,
    lines: &[(usize, Range<usize>)],
    base: usize,
    reader: &mut LogReader,
    repeated: &mut Repeated,
    name: &str,
    parallel: Option<usize>,
) -> Result<usize, Error> {
    let format = reader.format();
    let bytes = input.bytes();
    let mut runs = Vec::new();
    let mut run_start = 0;
    for (k, (_, range)) in lines.iter().enumerate() {
        if range.end - lines[run_start].1.start >= RUN_BYTES || k + 1 == lines.len() {
            runs.push(run_start..k + 1);
            run_start = k + 1;
        }
    }
    // The reader waits on what the other thread sends: only with two threads allowed.
    let parallel = parallel.filter(|_| threads::two_cores());
    let theirs = |run: usize| parallel.is_some_and(|first| !matches!((first + run) % 8, 0 | 3 | 5));
    let (send, receive) = std::sync::mpsc::sync_channel::<Vec<Ahead>>(4);
    let runs = &runs;
    let parse_theirs = move || {
        for (_, run) in runs.iter().enumerate().filter(|(k, _)| theirs(*k)) {
            let parsed = lines[run.clone()]
                .iter()
                .map(|(_, range)| parse_ahead(format, input, range.clone()))
                .collect();
            // The reader stopped (an error): nothing more is wanted.
            if send.send(parsed).is_err() {
                return;
            }
        }
    };
    let read_in_order = move || -> Result<(), Error> {
        for (k, run) in runs.iter().enumerate() {
            // Should the other thread have stopped, its runs are parsed here.
            let mut ahead = if theirs(k) { receive.recv().ok().map(Vec::into_iter) } else { None };
            for (k, (number, range)) in lines[run.clone()].iter().enumerate().map(|(j, l)| (run.start + j, l))
            {
                let number = *number;
                let base = u32::try_from(base + k).unwrap_or(u32::MAX);
                let (event, keys) = ahead
                    .as_mut()
                    .and_then(Iterator::next)
                    .unwrap_or_else(|| parse_ahead(format, input, range.clone()));
                repeated.add(keys, Some(number));
                match event {
                    Some(event) => reader.line(number, base, event)?,
                    None => reader.read_line(name, number, base, &bytes[range.clone()])?,
                }
            }
        }
        // Stops the other thread if it is still parsing.
        drop(receive);
        Ok(())
    };
    if parallel.is_some() {
        threads::join(read_in_order, parse_theirs).0?;
    } else {
        drop(parse_theirs);
        read_in_order()?;
    }
    Ok(runs.len())
}

/// Objects that repeat a key, for the note that says so.
#[derive(Debug, Default)]
pub(crate) struct Repeated {
    objects: usize,
    first: Option<(String, Option<usize>)>,
    /// Whether a key was written with an escape (see [`dupkeys::Keys`]).
    escaped: bool,
}

impl Repeated {
    pub(crate) fn scan(&mut self, json: &[u8], line: Option<usize>) {
        self.add(dupkeys::scan_keys(json), line);
    }

    /// Adds what [`dupkeys::scan_keys`] found in `line`.
    pub(crate) fn add(&mut self, found: dupkeys::Keys, line: Option<usize>) {
        self.escaped |= found.escaped;
        if let Some((count, key)) = found.repeated {
            self.objects += count;
            self.first.get_or_insert((key, line));
        }
    }

    pub(crate) fn note(&self) -> Option<Note> {
        let (key, line) = self.first.as_ref()?;
        let at = line.map(|l| format!(" on line {l}")).unwrap_or_default();
        let text = format!(
            "{} repeated a key (first {}{at}); the last value of each was read",
            notes::plural(self.objects, "object"),
            error::snippet(key)
        );
        Some(Note::new(NoteKind::DuplicateKey, self.objects, text))
    }
}

/// Reads an event log (Claude Code, Codex, Responses items a line) one line at a time, for inputs
/// too large to hold: memory stays bounded by the longest line and the conversation read (the
/// model's last view), never the file. The conversation it gives can be converted to a
/// [`Target`](crate::Target), not written back in its own format (that needs the file's bytes).
///
/// ```
/// use compaction_formats::{Format, LineReader, ReadOptions};
///
/// let log = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"Hi\"}}\n\
///            {\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"role\":\"assistant\",\"content\":\"Hello\"}}\n";
/// let format = compaction_formats::detect_lines(log.as_bytes(), "log")?.expect("an event log");
/// assert_eq!(format, Format::ClaudeCode);
/// let mut reader = LineReader::new(format, &ReadOptions::named("log")).expect("read line by line");
/// for line in log.lines() {
///     reader.push(line.as_bytes())?;
/// }
/// assert_eq!(reader.finish()?.messages.len(), 2);
/// # Ok::<(), compaction_formats::Error>(())
/// ```
#[derive(Debug)]
pub struct LineReader {
    reader: LogReader,
    format: Format,
    name: String,
    number: usize,
    lines: usize,
    /// How many runs of lines were read (see [`read_lines`]).
    runs: usize,
    repeated: Repeated,
}

impl LineReader {
    /// A reader of `format`, or `None` when the format is not read line by line.
    pub fn new(format: Format, options: &ReadOptions) -> Option<LineReader> {
        Some(LineReader {
            reader: LogReader::new(format, &options.name, options.full_history)?,
            format,
            name: options.name.clone(),
            number: 0,
            lines: 0,
            runs: 0,
            repeated: Repeated::default(),
        })
    }

    /// Reads the next line of the file (without its line break); blank lines count for the line
    /// numbers errors give, and are otherwise skipped.
    pub fn push(&mut self, line: &[u8]) -> Result<(), Error> {
        self.number += 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = if self.number == 1 { line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line) } else { line };
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let base = u32::try_from(self.lines).unwrap_or(u32::MAX);
        let (event, keys) = parse_ahead(self.reader.format(), Lines::Lent(line), 0..line.len());
        match event {
            Some(event) => self.reader.line(self.number, base, event)?,
            None => self.reader.read_line(&self.name, self.number, base, line)?,
        }
        self.repeated.add(keys, Some(self.number));
        self.lines += 1;
        Ok(())
    }

    /// Reads the next lines of the file: `lines` holds whole lines, each with its line break but
    /// perhaps the last one of the file. The same as [`LineReader::push`] on each of them, but a
    /// block of a megabyte or more is parsed on two threads, as [`read()`](crate::read()) parses a whole log, so a
    /// caller that reads the file a few megabytes at a time holds little more than that and reads
    /// as fast.
    pub fn push_lines(&mut self, lines: &[u8]) -> Result<(), Error> {
        let mut numbered = JsonLines::after(lines, self.number);
        let found: Vec<(usize, Range<usize>)> = numbered.by_ref().collect();
        self.number = numbered.number();
        let parallel = threads::two_cores() && lines.len() >= PARALLEL_LOG;
        let (reader, repeated) = (&mut self.reader, &mut self.repeated);
        let first = parallel.then_some(self.runs);
        self.runs += read_lines(Lines::Lent(lines), &found, self.lines, reader, repeated, &self.name, first)?;
        self.lines += found.len();
        Ok(())
    }

    /// The conversation read; an error when it holds no message.
    pub fn finish(self) -> Result<Conversation, Error> {
        if self.lines == 0 {
            return Err(Error::Empty { name: self.name });
        }
        // Not fingerprinted (`seal`): a conversation read line by line is never written back.
        let mut decoded = self.reader.finish()?;
        decoded.notes.extend(self.repeated.note());
        let mut conversation = from_log(self.format, decoded, EventLog::default(), Layout::Lines);
        conversation.back = Back::Streamed;
        let options = ReadOptions::named(self.name);
        non_empty(conversation, &options, String::new())
    }
}

/// A log's reader, from the format's module, with the format it reads.
#[derive(Debug)]
struct LogReader {
    format: Format,
    reader: Box<dyn LineRead>,
}

impl LogReader {
    /// The reader of `format`, when it is read line by line.
    fn new(format: Format, name: &str, full_history: bool) -> Option<Self> {
        let reader = formats::of(format).line_reader(name, full_history)?;
        Some(LogReader { format, reader })
    }

    /// The format read.
    fn format(&self) -> Format {
        self.format
    }

    /// Reads line `number` of file `name` from its bytes, parsed whole: a line [`parse_ahead`]
    /// could not read, which this reads, or whose error it words.
    fn read_line(&mut self, name: &str, number: usize, base: u32, line: &[u8]) -> Result<(), Error> {
        let value: Value = compaction_model::value_from_slice(line).map_err(|source| Error::Json {
            name: name.to_owned(),
            line: Some(number),
            source,
        })?;
        self.line(number, base, Event::whole(value))
    }

    /// Reads a line's JSON.
    fn line(&mut self, number: usize, base: u32, event: Event) -> Result<(), Error> {
        self.reader.line(number, base, event)
    }

    fn finish(self) -> Result<LogDecoded, Error> {
        self.reader.finish()
    }
}

// Unit tests that read files (real sessions) live outside `src/`, which does no I/O.
#[cfg(test)]
#[path = "../tests/unit/lean_logs.rs"]
mod lean_logs;
