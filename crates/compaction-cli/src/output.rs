//! Writing results: to standard output, or atomically to files.
//!
//! A command's output files are made in three steps. [`plan`] checks each target before the
//! command does its work, so one that cannot be written (a missing folder, a folder in its place)
//! fails the run at once. When the content is ready, [`Planned::stage`] creates a temporary file
//! beside the target under a name that says what it is (`.NAME.compaction-partial-XXXXXX`); the
//! content is written into it by a second thread while it is still being made (see
//! [`handed_off`]) and flushed to the device (a large one while it is still being written, see
//! [`EarlySync`]). Once every output of the run is written, and so everything that can fail has
//! succeeded, [`commit_run`] renames them over their targets: that is the commit point. A
//! failure before it removes the temporary files and leaves every target as it was; so does a
//! rename that fails at the commit, which puts back the targets it already replaced. A target
//! that is a symbolic link is written where the link leads, and the link stays.
//!
//! When the run is interrupted (SIGINT, SIGTERM, SIGHUP) before the commit point, the temporary
//! files are removed before the signal ends the process, and so are the offload store's scratch
//! files; after it, the run has done what it was asked, and the process ends with the status the
//! run ends with (0, or 3 when some results could not be offloaded). After a SIGKILL, which no
//! program can catch, a leftover keeps its name, so it can be recognised and deleted.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use anyhow::{anyhow, Context, Result};
use tempfile::NamedTempFile;

/// Where a command writes an output: standard output, or a file, staged beside its target when
/// it is written and put in place at the commit.
pub enum Output {
    /// Standard output (no path, or `-`), written as the content is made.
    Stdout,
    /// A file, put in place by [`commit_run`].
    File(Planned),
}

impl Output {
    /// The output `path` names (standard output for `None` or `-`), checked (see [`plan`]).
    pub fn open(path: Option<&Path>) -> Result<Output> {
        match path {
            Some(path) if path.as_os_str() != "-" => Ok(Output::File(plan(path)?)),
            _ => Ok(Output::Stdout),
        }
    }

    /// Writes what `write` makes into a buffered writer, so a large output is never held in
    /// memory whole: to standard output, or into the staged file (by a second thread a buffer
    /// at a time while `write` makes the next, see [`handed_off`]), then ready to be committed.
    pub fn write_with(self, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<Option<Ready>> {
        match self {
            Output::Stdout => {
                let mut stdout = BufWriter::with_capacity(BUFFER, std::io::stdout().lock());
                write(&mut stdout).and_then(|()| Ok(stdout.flush()?)).context("<stdout>: cannot write")?;
                Ok(None)
            }
            Output::File(planned) => planned.stage()?.write_with(write).map(Some),
        }
    }

    /// Writes `bytes`, as [`Output::write_with`].
    pub fn write(self, bytes: &[u8]) -> Result<Option<Ready>> {
        match self {
            Output::Stdout => {
                let mut stdout = std::io::stdout().lock();
                stdout.write_all(bytes).and_then(|()| stdout.flush()).context("<stdout>: cannot write")?;
                Ok(None)
            }
            Output::File(planned) => planned.stage()?.write(bytes).map(Some),
        }
    }
}

/// Writes `bytes` to `path` atomically (staged, then committed alone), or to standard output
/// when `path` is `None` or `-`. On error an existing file stays as it was. Not the run's
/// commit point: a command with one output ends with [`commit_run`] instead.
pub fn write_output(path: Option<&Path>, bytes: &[u8]) -> Result<()> {
    commit(Output::open(path)?.write(bytes)?)
}

/// The write buffer: large enough that a big output goes out in few system calls.
const BUFFER: usize = 1 << 20;

/// An output file being made: a temporary file beside its target, or, for a device or a pipe
/// (which renaming would replace), the target itself, opened when the content is written.
/// Dropped before it is committed, the temporary file is removed.
pub struct Staged {
    /// The path given (and where its links lead), for messages.
    name: String,
    /// Where the file lands: the path given, or the file its links lead to.
    target: PathBuf,
    /// The temporary file; `None` for a device or a pipe.
    temp: Option<NamedTempFile>,
}

/// A staged file whose content is written and flushed to the device, waiting for [`commit`].
pub struct Ready(Staged);

/// An output file checked, before the command does its work, and not yet begun.
pub struct Planned {
    /// The path given (and where its links lead), for messages.
    name: String,
    /// Where the file lands: the path given, or the file its links lead to.
    target: PathBuf,
    /// Whether it is a device or a pipe, written directly.
    device: bool,
}

/// Checks that an output file can be written at `path`, or where a link at `path` leads: it is
/// not a folder, and its folder takes a new file (one is made beside it and removed at once).
/// Nothing is left, so an interrupt, even a SIGKILL, before the file is staged leaves nothing.
pub fn plan(path: &Path) -> Result<Planned> {
    let given = path.display();
    let target = resolve_links(path).with_context(|| format!("{given}: cannot write"))?;
    let name = match target == path {
        true => given.to_string(),
        false => format!("{given} (a link to {})", target.display()),
    };
    match std::fs::metadata(&target) {
        Ok(found) if found.is_dir() => return Err(anyhow!("{name}: cannot write: it is a folder")),
        // A device or a pipe (`/dev/stdout`, a FIFO) cannot be replaced by renaming a file onto
        // it: that would swap it for a regular file. It is written directly.
        Ok(found) if !found.is_file() => return Ok(Planned { name, target, device: true }),
        _ => {}
    }
    // Made and removed under the lock: an interrupt never finds it.
    let outputs = outputs();
    drop(create_beside(&target).with_context(|| format!("{name}: cannot create"))?);
    drop(outputs);
    Ok(Planned { name, target, device: false })
}

impl Planned {
    /// Creates the temporary file the output is written to.
    pub fn stage(self) -> Result<Staged> {
        let Planned { name, target, device } = self;
        if device {
            return Ok(Staged { name, target, temp: None });
        }
        // Registered while the lock is held, so an interrupt sees the file as soon as it exists.
        let mut outputs = outputs();
        let temp = create_beside(&target).with_context(|| format!("{name}: cannot create"))?;
        outputs.partial.push(temp.path().to_path_buf());
        Ok(Staged { name, target, temp: Some(temp) })
    }
}

/// Stages an output file: creates its temporary file beside `path`, or beside the file a link
/// at `path` leads to (see [`plan`]).
pub fn stage(path: &Path) -> Result<Staged> {
    plan(path)?.stage()
}

/// A new temporary file beside `target`, named after it.
fn create_beside(target: &Path) -> std::io::Result<NamedTempFile> {
    let (dir, base) = beside(target);
    tempfile::Builder::new().prefix(&format!(".{base}.{PARTIAL_MARK}-")).make_in(dir, create_new)
}

/// Creates a file that did not exist, readable and writable by its owner only.
fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// The folder a file is in (`.` for a bare name) and its name.
fn beside(path: &Path) -> (&Path, String) {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    (dir, path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
}

/// Where the symbolic links at `path` lead, followed one after another: the first path that is
/// not a link, which may not exist yet (a dangling link's target). A relative link leads from
/// the folder it is in.
fn resolve_links(path: &Path) -> std::io::Result<PathBuf> {
    // As many as the system follows before it gives up (Linux's MAXSYMLINKS).
    const MAX_LINKS: usize = 40;
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&path) {
            Ok(found) if found.file_type().is_symlink() => {
                let to = std::fs::read_link(&path)?;
                path = match path.parent() {
                    Some(parent) if to.is_relative() => parent.join(to),
                    _ => to,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(std::io::Error::other(format!("more than {MAX_LINKS} symbolic links, one leading to the next")))
}

impl Staged {
    /// Writes what `write` makes, by a second thread a buffer at a time (see [`handed_off`]).
    pub fn write_with(self, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<Ready> {
        self.fill(|file| handed_off(file, write))
    }

    /// Writes `bytes`.
    pub fn write(self, bytes: &[u8]) -> Result<Ready> {
        self.fill(|file| Ok(file.write_all(bytes)?))
    }

    /// Writes the file's content with `write` (unbuffered), then flushes it to the device and
    /// gives it its final permissions. On error the temporary file is removed (as `self` drops).
    fn fill(mut self, write: impl FnOnce(&mut (dyn Write + Send)) -> Result<()>) -> Result<Ready> {
        let written = match &mut self.temp {
            None => std::fs::OpenOptions::new()
                .write(true)
                .open(&self.target)
                .with_context(|| format!("{}: cannot open", self.name))
                .and_then(|mut device| write(&mut device)),
            Some(temp) => (|| {
                {
                    let mut early = EarlySync::new(temp.as_file_mut());
                    write(&mut early)?;
                    early.finish()?;
                }
                set_final_permissions(temp.as_file(), &self.target)?;
                Ok(temp.as_file().sync_all()?)
            })(),
        };
        written.with_context(|| format!("{}: cannot write", self.name))?;
        Ok(Ready(self))
    }
}

impl Drop for Staged {
    /// Removes a temporary file not committed, under the lock, so an interrupt never looks for
    /// a file already gone nor misses one still there.
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            let mut outputs = outputs();
            let path = temp.path().to_path_buf();
            drop(temp);
            outputs.partial.retain(|p| p != &path);
        }
    }
}

/// Puts every file in place, all or none: each is renamed over its target, in order. Until
/// the last is in place, each target a rename replaces is kept (as a hard link, or a copy where
/// the file system has none); a rename that fails puts the replaced targets back and removes
/// the rest, so every target is as it was. Not the run's commit point (see [`commit_run`]).
pub fn commit(files: impl IntoIterator<Item = Ready>) -> Result<()> {
    commit_then(files, None)
}

/// [`commit`] as the run's commit point: once it has succeeded the run has done what it was
/// asked, and an interrupt (SIGINT, SIGTERM, SIGHUP) that comes after it ends the process with
/// `status`, the exit status the run ends with, instead of failing it. Every output of the run is
/// to be written (a file, or standard output) before.
pub fn commit_run(files: impl IntoIterator<Item = Ready>, status: u8) -> Result<()> {
    commit_then(files, Some(status))
}

fn commit_then(files: impl IntoIterator<Item = Ready>, then: Option<u8>) -> Result<()> {
    // Taken out of their staged files first: one dropped while the lock is held would wait for it.
    let files: Vec<Placing> = files
        .into_iter()
        .filter_map(|Ready(mut staged)| {
            let temp = staged.temp.take()?;
            Some(Placing { name: std::mem::take(&mut staged.name), target: staged.target.clone(), temp })
        })
        .collect();
    let temps: Vec<PathBuf> = files.iter().map(|file| file.temp.path().to_path_buf()).collect();
    // Under the lock: an interrupt comes before (every temporary file is removed, every target
    // as it was) or after (every target whole).
    let mut outputs = outputs();
    let placed = place(files);
    outputs.partial.retain(|p| !temps.contains(p));
    if placed.is_ok() {
        outputs.done = then.or(outputs.done);
    }
    placed
}

/// A file at the commit: its temporary file, and where it goes.
struct Placing {
    name: String,
    target: PathBuf,
    temp: NamedTempFile,
}

/// What a target held before a rename replaced it.
enum Kept {
    /// Nothing: it did not exist.
    Absent,
    /// This file, a hard link to it or a copy, beside it.
    Was(NamedTempFile<()>),
}

/// Renames each file over its target; see [`commit`].
fn place(files: Vec<Placing>) -> Result<()> {
    // The last needs nothing kept: once it is in place, nothing is left to fail.
    let mut kept = Vec::with_capacity(files.len());
    for file in files.iter().take(files.len().saturating_sub(1)) {
        kept.push(Some(keep(&file.target).with_context(|| {
            format!("{}: cannot write: cannot keep the file there until every output is in place", file.name)
        })?));
    }
    kept.push(None);
    let mut placed: Vec<(String, PathBuf, Option<Kept>)> = Vec::with_capacity(files.len());
    for (file, kept) in files.into_iter().zip(kept) {
        let Placing { name, target, temp } = file;
        if let Err(error) = temp.persist(&target) {
            // The temporary file is removed as `error` drops; those not reached as `files` does.
            let why = error.error;
            let mut not_back = Vec::new();
            for (name, target, kept) in placed.into_iter().rev() {
                if let Err(error) = put_back(&target, kept) {
                    not_back.push(format!("{name} could not be put back as it was: {error}"));
                }
            }
            return Err(match not_back.is_empty() {
                true => anyhow!("{name}: cannot write: {why}; every output is as it was"),
                false => anyhow!("{name}: cannot write: {why}; {}", not_back.join("; ")),
            });
        }
        placed.push((name, target, kept));
    }
    // Every file in place: what was kept goes, as `placed` drops.
    Ok(())
}

/// Keeps what `target` holds, beside it, until [`put_back`] or the end of the commit.
fn keep(target: &Path) -> std::io::Result<Kept> {
    match std::fs::symlink_metadata(target) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Kept::Absent),
        Err(error) => return Err(error),
        Ok(_) => {}
    }
    let (dir, base) = beside(target);
    let prefix = format!(".{base}.{PARTIAL_MARK}-");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    builder
        .make_in(dir, |path| std::fs::hard_link(target, path))
        .or_else(|_| builder.make_in(dir, |path| copy_new(target, path)))
        .map(Kept::Was)
}

/// Copies `from` to `to`, a file that did not exist, with its permissions; on error nothing is
/// left at `to`.
fn copy_new(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut source = std::fs::File::open(from)?;
    let mut copy = create_new(to)?;
    let copied = std::io::copy(&mut source, &mut copy)
        .and_then(|_| copy.set_permissions(source.metadata()?.permissions()))
        .and_then(|()| copy.sync_all());
    if copied.is_err() {
        let _ = std::fs::remove_file(to);
    }
    copied
}

/// Puts `target` back as it was before a rename replaced it.
fn put_back(target: &Path, kept: Option<Kept>) -> std::io::Result<()> {
    match kept {
        None => Ok(()),
        Some(Kept::Absent) => std::fs::remove_file(target),
        Some(Kept::Was(file)) => file.persist(target).map_err(|error| {
            // Left where it is, and named, rather than removed.
            let at = error.file.into_temp_path().keep().map(|p| p.display().to_string());
            std::io::Error::other(format!("{}; it is kept as {}", error.error, at.unwrap_or_default()))
        }),
    }
}

/// Runs `write` with what it writes going to `sink` on a second thread, a buffer of [`BUFFER`]
/// bytes at a time: the kernel copies one buffer into the page cache while `write` fills the
/// next, where one thread would do one and then the other. At most a few buffers are in use,
/// and they are used again. A write of a buffer's size or more is not copied: once what came
/// before it is written, it goes to `sink` as it is. An error of the writing thread is the one
/// given: `write` then fails only because it could not hand over what it made.
fn handed_off(sink: &mut (dyn Write + Send), write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let sink = Mutex::new(sink);
    let sink = &sink;
    std::thread::scope(|scope| {
        // One buffer waiting while one is written.
        let (full, to_write) = std::sync::mpsc::sync_channel::<Vec<u8>>(1);
        let (written, emptied) = std::sync::mpsc::channel::<Vec<u8>>();
        let writer = std::thread::Builder::new().name("output-write".into()).spawn_scoped(
            scope,
            move || -> std::io::Result<()> {
                for mut buffer in to_write {
                    lock(sink).write_all(&buffer)?;
                    buffer.clear();
                    // The maker may have stopped; the buffer is then simply dropped.
                    let _ = written.send(buffer);
                }
                Ok(())
            },
        )?;
        let mut out = Handoff { buffer: Vec::with_capacity(BUFFER), full, emptied, in_flight: 0, sink };
        let made = write(&mut out).and_then(|()| Ok(out.hand_over()?));
        // Closes the channel: the writer stops once it has written what it was given.
        drop(out);
        writer.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        made?;
        Ok(lock(sink).flush()?)
    })
}

/// The sink of [`handed_off`], shared by the two threads, each writing in turn.
type Shared<'a> = Mutex<&'a mut (dyn Write + Send)>;

fn lock<'s, 'a>(sink: &'s Shared<'a>) -> MutexGuard<'s, &'a mut (dyn Write + Send)> {
    // A panic while writing ends the command; the sink is not used after it.
    sink.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The maker's end of [`handed_off`].
struct Handoff<'s, 'a> {
    buffer: Vec<u8>,
    full: std::sync::mpsc::SyncSender<Vec<u8>>,
    emptied: std::sync::mpsc::Receiver<Vec<u8>>,
    /// Buffers handed over and not yet back.
    in_flight: usize,
    sink: &'s Shared<'a>,
}

impl Handoff<'_, '_> {
    /// Hands the buffer, if it holds anything, to the writing thread, and takes an empty one.
    fn hand_over(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let next = match self.emptied.try_recv() {
            Ok(emptied) => {
                self.in_flight -= 1;
                emptied
            }
            Err(_) => Vec::with_capacity(BUFFER),
        };
        let buffer = std::mem::replace(&mut self.buffer, next);
        self.full.send(buffer).map_err(|_| writer_stopped())?;
        self.in_flight += 1;
        Ok(())
    }

    /// Waits until everything handed over is written.
    fn drain(&mut self) -> std::io::Result<()> {
        while self.in_flight > 0 {
            self.emptied.recv().map_err(|_| writer_stopped())?;
            self.in_flight -= 1;
        }
        Ok(())
    }
}

fn writer_stopped() -> std::io::Error {
    std::io::Error::other("the output's writing thread stopped")
}

impl Write for Handoff<'_, '_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes).map(|()| bytes.len())
    }

    /// Takes all of `bytes` at once (the default would call `write` until it had).
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        // Most writes are a few bytes of an encoded message.
        if self.buffer.len() + bytes.len() <= BUFFER {
            self.buffer.extend_from_slice(bytes);
            return Ok(());
        }
        if bytes.len() >= BUFFER {
            self.hand_over()?;
            self.drain()?;
            return lock(self.sink).write_all(bytes);
        }
        self.hand_over()?;
        self.buffer.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// After this many bytes of a file, and after each as many more, what was written so far is
/// flushed to the device on a second thread while the rest is still being produced.
const SYNC_EVERY: u64 = 4 << 20;

/// Writes to a file and, every [`SYNC_EVERY`] bytes, has a second thread flush what the file
/// holds so far (`fdatasync`), so the device writes while the command is still writing: the
/// `fsync` before the rename then waits only for the tail. A 40 MB output's `fsync` took about
/// 25 ms after the last byte; written this way, under 1 (strace, 50 MB `prune`). Each call writes
/// at most [`SYNC_EVERY`] bytes, so a long run of unchanged input handed over in one piece is
/// flushed while the rest of it is written: the write of a 50 MB OpenAI `prune` went from 39 to
/// 27 ms (medians of 10; 8 MB steps without the cap). A small file never starts the thread. The
/// final `fsync` is still what makes the file durable; an error of an early flush fails the
/// write (an error the kernel reports once might not come back to the final one).
struct EarlySync<'a> {
    file: &'a mut std::fs::File,
    written: u64,
    syncer: Option<Syncer>,
}

/// The flushing thread and the channel that asks it to flush again.
struct Syncer {
    ask: std::sync::mpsc::SyncSender<()>,
    thread: std::thread::JoinHandle<std::io::Result<()>>,
}

impl<'a> EarlySync<'a> {
    fn new(file: &'a mut std::fs::File) -> Self {
        EarlySync { file, written: 0, syncer: None }
    }

    /// Asks for a flush of everything written so far; starts the thread the first time. A flush
    /// already asked for and not yet begun covers this one too.
    fn ask_for_sync(&mut self) -> std::io::Result<()> {
        if self.syncer.is_none() {
            let file = self.file.try_clone()?;
            // One request waiting at most: asking while one waits adds nothing.
            let (ask, asked) = std::sync::mpsc::sync_channel::<()>(1);
            let thread = std::thread::Builder::new().name("output-sync".into()).spawn(move || {
                while asked.recv().is_ok() {
                    file.sync_data()?;
                }
                Ok(())
            })?;
            self.syncer = Some(Syncer { ask, thread });
        }
        if let Some(syncer) = &self.syncer {
            // Full: a request waits already. Disconnected: the thread stopped on an error,
            // which `finish` reports.
            let _ = syncer.ask.try_send(());
        }
        Ok(())
    }

    /// Stops the flushing thread, if it started, once it has done what it was asked; what it
    /// ended with.
    fn stop(&mut self) -> Option<std::thread::Result<std::io::Result<()>>> {
        let Syncer { ask, thread } = self.syncer.take()?;
        drop(ask);
        Some(thread.join())
    }

    /// Waits for the flushing thread, and gives its error if a flush failed.
    fn finish(mut self) -> std::io::Result<()> {
        match self.stop() {
            None => Ok(()),
            Some(ended) => ended.unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        }
    }
}

impl Write for EarlySync<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // No more than SYNC_EVERY bytes a call: what one long write hands over can be flushed
        // while the rest of it is still being written.
        let n = self.file.write(&bytes[..bytes.len().min(SYNC_EVERY as usize)])?;
        let before = self.written;
        self.written += n as u64;
        // Another SYNC_EVERY bytes crossed.
        if self.written / SYNC_EVERY > before / SYNC_EVERY {
            self.ask_for_sync()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for EarlySync<'_> {
    /// On an error the thread is still stopped before the file is removed.
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// What names a temporary output file, so a leftover of a killed run says what it is.
pub const PARTIAL_MARK: &str = "compaction-partial";

/// The run's output files: the temporary files that exist right now, and, once the run has
/// passed its commit point, the exit status it ends with.
struct Outputs {
    partial: Vec<PathBuf>,
    done: Option<u8>,
}

static OUTPUTS: Mutex<Outputs> = Mutex::new(Outputs { partial: Vec::new(), done: None });

fn outputs() -> MutexGuard<'static, Outputs> {
    // Removing paths cannot leave the list half-changed, so a poisoned lock is still usable.
    OUTPUTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What an interrupt does, given the run's outputs.
#[derive(Debug, PartialEq, Eq)]
enum Interrupt {
    /// Before the commit point: remove these temporary files, and end as the signal would.
    Stop(Vec<PathBuf>),
    /// After it: the run did what it was asked; end with this status.
    Finish(u8),
}

impl Outputs {
    fn on_interrupt(&self) -> Interrupt {
        match self.done {
            Some(status) => Interrupt::Finish(status),
            None => Interrupt::Stop(self.partial.clone()),
        }
    }
}

/// Handles SIGINT, SIGTERM and SIGHUP: before the run's commit point, removes the temporary
/// output files, and the offload store's scratch files, then lets the signal end the process as
/// it would have; after it, ends the process with the run's status. Call once, at start-up.
#[cfg(unix)]
pub fn clean_up_on_interrupt() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            // Holding the lock until the process ends keeps any rename from starting.
            let outputs = outputs();
            match outputs.on_interrupt() {
                Interrupt::Finish(status) => std::process::exit(status.into()),
                Interrupt::Stop(partial) => {
                    for path in partial {
                        let _ = std::fs::remove_file(path);
                    }
                    // And the offload store's scratch files, where it needs named ones (see
                    // compaction-offload); no store write completes after this.
                    compaction_offload::remove_scratch_files_before_exit();
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                    std::process::exit(128 + signal);
                }
            }
        }
    });
}

#[cfg(not(unix))]
pub fn clean_up_on_interrupt() {}

/// Gives the temporary file the permissions of the file it replaces, or 0644 for a new one (a
/// temporary file starts private, 0600).
#[cfg(unix)]
fn set_final_permissions(file: &std::fs::File, path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let permissions = match std::fs::metadata(path) {
        Ok(existing) => existing.permissions(),
        Err(_) => std::fs::Permissions::from_mode(0o644),
    };
    file.set_permissions(permissions)
}

#[cfg(not(unix))]
fn set_final_permissions(_file: &std::fs::File, _path: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_output_is_flushed_while_written_and_lands_whole() {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let path = dir.path().join("out.bin");
        std::fs::write(&path, b"what was there").expect("an existing target");
        let len = 2 * SYNC_EVERY as usize + 12_345;
        let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let staged = Output::open(Some(&path)).expect("the output is staged");
        let ready = staged
            .write_with(|out| {
                // Small writes, copied into buffers, and writes larger than a buffer, which are not.
                let (small, large) = bytes.split_at(len / 2);
                for chunk in small.chunks(100_000) {
                    out.write_all(chunk)?;
                }
                for chunk in large.chunks(3 * BUFFER + 7) {
                    out.write_all(&chunk[..10])?;
                    out.write_all(&chunk[10..])?;
                }
                Ok(())
            })
            .expect("the output is written");
        // Not in place until committed.
        assert_eq!(std::fs::read(&path).expect("the target"), b"what was there");
        commit(ready).expect("the output is committed");
        assert_eq!(std::fs::read(&path).expect("the output"), bytes);
        // The temporary file was renamed: nothing else is left beside the target.
        assert_eq!(std::fs::read_dir(dir.path()).expect("the folder").count(), 1);
    }

    /// Takes `room` bytes, then fails as a full disk does.
    struct Full {
        room: usize,
        taken: Vec<u8>,
    }

    impl Write for Full {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.taken.len() + bytes.len() > self.room {
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
            self.taken.extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_writing_threads_error_is_the_one_given() {
        for write_size in [1000, 2 * BUFFER] {
            let mut sink = Full { room: 3 * BUFFER, taken: Vec::new() };
            let error = handed_off(&mut sink, |out| {
                for _ in 0..8 * BUFFER / write_size {
                    out.write_all(&vec![b'z'; write_size])?;
                }
                Ok(())
            })
            .expect_err("the sink fills up");
            let kind = error.downcast_ref::<std::io::Error>().map(std::io::Error::kind);
            assert_eq!(kind, Some(std::io::ErrorKind::StorageFull), "{error:#}");
            assert!(sink.taken.iter().all(|&b| b == b'z'));
        }
        // The maker's own error, when the writer is fine.
        let mut sink = Full { room: usize::MAX, taken: Vec::new() };
        let error = handed_off(&mut sink, |out| {
            out.write_all(b"half")?;
            anyhow::bail!("the maker failed")
        })
        .expect_err("the maker fails");
        assert_eq!(error.to_string(), "the maker failed");
    }

    #[test]
    fn the_flushing_thread_starts_only_for_a_large_file() {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let mut file = std::fs::File::create(dir.path().join("small")).expect("a file");
        let mut early = EarlySync::new(&mut file);
        early.write_all(&[b'x'; 4096]).expect("written");
        assert!(early.syncer.is_none());
        early.finish().expect("nothing to wait for");

        let mut file = std::fs::File::create(dir.path().join("large")).expect("a file");
        let mut early = EarlySync::new(&mut file);
        let block = vec![b'y'; 1 << 20];
        for _ in 0..(SYNC_EVERY >> 20) + 1 {
            early.write_all(&block).expect("written");
        }
        assert!(early.syncer.is_some());
        early.finish().expect("every early flush succeeded");
        let written = std::fs::metadata(dir.path().join("large")).expect("the file").len();
        assert_eq!(written, SYNC_EVERY + (1 << 20));

        // One long write is taken a step at a time, each step flushed while the next is written.
        let mut file = std::fs::File::create(dir.path().join("long")).expect("a file");
        let mut early = EarlySync::new(&mut file);
        let long = vec![b'z'; 5 * SYNC_EVERY as usize / 2];
        assert_eq!(early.write(&long).expect("written"), SYNC_EVERY as usize);
        assert!(early.syncer.is_some());
        early.write_all(&long[SYNC_EVERY as usize..]).expect("written");
        early.finish().expect("every early flush succeeded");
        assert_eq!(std::fs::read(dir.path().join("long")).expect("the file"), long);
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("the folder")
            .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn files_are_in_place_only_once_committed_together() {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let (report, output) = (dir.path().join("report.json"), dir.path().join("out.json"));
        std::fs::write(&output, b"old output").expect("an existing output");
        let report_ready = stage(&report).and_then(|s| s.write(b"report")).expect("the report is written");
        let output_ready = stage(&output).and_then(|s| s.write(b"output")).expect("the output is written");
        assert!(!report.exists());
        assert_eq!(std::fs::read(&output).expect("the output"), b"old output");
        commit([report_ready, output_ready]).expect("both are committed");
        assert_eq!(std::fs::read(&report).expect("the report"), b"report");
        assert_eq!(std::fs::read(&output).expect("the output"), b"output");
        assert_eq!(names(dir.path()), ["out.json", "report.json"]);
    }

    /// A rename that fails at the commit (here the last target turned into a folder after it
    /// was staged) puts back the targets already replaced, existing or new, and leaves nothing.
    #[test]
    fn a_rename_failing_at_the_commit_puts_back_what_it_replaced() {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let existing = dir.path().join("existing.json");
        let new = dir.path().join("new.json");
        let last = dir.path().join("last.json");
        std::fs::write(&existing, b"was there").expect("an existing target");
        let ready: Vec<Ready> = [&existing, &new, &last]
            .into_iter()
            .map(|path| stage(path).and_then(|s| s.write(b"written")).expect("written"))
            .collect();
        std::fs::create_dir(&last).expect("a folder in the last target's place");
        std::fs::write(last.join("inside"), b"x").expect("a folder that is not empty");
        let error = commit(ready).expect_err("the last rename fails");
        let message = format!("{error:#}");
        assert!(message.starts_with(&format!("{}: cannot write: ", last.display())), "{message}");
        assert!(message.ends_with("every output is as it was"), "{message}");
        assert_eq!(std::fs::read(&existing).expect("the existing target"), b"was there");
        assert!(!new.exists(), "a target that did not exist was left");
        assert_eq!(names(dir.path()), ["existing.json", "last.json"]);
    }

    #[test]
    fn a_target_that_cannot_be_written_is_an_error_when_checked_and_leaves_nothing() {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let missing = dir.path().join("missing").join("r.json");
        let error = plan(&missing).err().expect("a missing folder");
        let message = format!("{error:#}");
        assert!(message.starts_with(&format!("{}: cannot create: ", missing.display())), "{message}");
        // The system's error, not the temporary file's name.
        assert!(!message.contains(PARTIAL_MARK), "{message}");
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).expect("a folder");
        let error = plan(&folder).err().expect("a folder in the target's place");
        assert_eq!(format!("{error:#}"), format!("{}: cannot write: it is a folder", folder.display()));
        assert_eq!(names(dir.path()), ["folder"]);
        // Checked, nothing is left; staged, the temporary file is there; dropped before it is
        // committed, it goes.
        let planned = plan(&dir.path().join("out.json")).expect("planned");
        assert_eq!(names(dir.path()), ["folder"]);
        let staged = planned.stage().expect("staged");
        assert_eq!(names(dir.path()).len(), 2);
        drop(staged);
        assert_eq!(names(dir.path()), ["folder"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_is_written_through_and_kept() {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).expect("a folder");
        let file = sub.join("file.json");
        std::fs::write(&file, b"old").expect("the link's target");
        // Relative links: one to the file, one to that link, and one dangling.
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("sub/file.json", &link).expect("a link");
        let chain = sub.join("chain.json");
        std::os::unix::fs::symlink("../link.json", &chain).expect("a link to the link");
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink("sub/new.json", &dangling).expect("a dangling link");
        for (path, bytes) in [(&link, &b"through the link"[..]), (&chain, b"through two links")] {
            commit(Some(stage(path).and_then(|s| s.write(bytes)).expect("written"))).expect("committed");
            assert!(std::fs::symlink_metadata(path).expect("the link").file_type().is_symlink());
            assert_eq!(std::fs::read(&file).expect("the file"), bytes);
        }
        commit(Some(stage(&dangling).and_then(|s| s.write(b"new")).expect("written"))).expect("committed");
        assert!(std::fs::symlink_metadata(&dangling).expect("the link").file_type().is_symlink());
        assert_eq!(std::fs::read(sub.join("new.json")).expect("the file the link named"), b"new");
        assert_eq!(names(dir.path()), ["dangling.json", "link.json", "sub"]);
        assert_eq!(names(&sub), ["chain.json", "file.json", "new.json"]);
        // A loop of links is an error naming the path given.
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::os::unix::fs::symlink("b", &a).expect("a link");
        std::os::unix::fs::symlink("a", &b).expect("a link");
        let error = stage(&a).err().expect("a loop");
        assert!(format!("{error:#}").starts_with(&format!("{}: cannot write: ", a.display())));
    }

    /// Before the commit point an interrupt removes the temporary files and ends the run as the
    /// signal would; once [`commit_run`] has put everything in place it ends it with the run's
    /// status.
    #[test]
    fn an_interrupt_after_the_commit_point_finishes_the_run() {
        let mut outputs = Outputs { partial: vec![PathBuf::from(".o.compaction-partial-x")], done: None };
        assert_eq!(outputs.on_interrupt(), Interrupt::Stop(outputs.partial.clone()));
        outputs.done = Some(3);
        assert_eq!(outputs.on_interrupt(), Interrupt::Finish(3));
        // A commit that is not the run's leaves it before its commit point; the run's passes it.
        commit(None).expect("nothing to commit");
        assert_eq!(super::outputs().done, None);
        commit_run(None, 0).expect("nothing to commit");
        assert_eq!(std::mem::take(&mut super::outputs().done), Some(0));
    }
}
