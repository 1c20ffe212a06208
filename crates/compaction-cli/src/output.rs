//! Writing results: to standard output, or atomically to a file.
//!
//! A file is written beside its target under a name that says what it is
//! (`.NAME.compaction-partial-XXXXXX`), by a second thread while the content is still being made
//! (see [`handed_off`]), flushed to the device (a large one while it is still being
//! written, see [`EarlySync`]), then renamed over the target, so a reader never sees half a file.
//! When the run is interrupted (SIGINT, SIGTERM, SIGHUP) the temporary file is removed before the
//! signal ends the process, and so are the offload store's scratch files; after a
//! SIGKILL, which no program can catch, the leftover keeps that name, so it can be recognised and
//! deleted.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use anyhow::{Context, Result};

/// Writes `bytes` to `path` atomically (a temporary file beside it, flushed, then renamed), or to
/// standard output when `path` is `None` or `-`. On error an existing file stays as it was.
pub fn write_output(path: Option<&Path>, bytes: &[u8]) -> Result<()> {
    match path {
        Some(path) if path.as_os_str() != "-" => write_atomic(path, bytes),
        _ => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(bytes).and_then(|()| stdout.flush()).context("<stdout>: cannot write")
        }
    }
}

/// As [`write_output`], with the content produced by `write` into a buffered writer, so a large
/// output is never held in memory whole. A file is written by a second thread a buffer at a
/// time while `write` makes the next (see [`handed_off`]).
pub fn write_output_with(
    path: Option<&Path>,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    match path {
        Some(path) if path.as_os_str() != "-" => write_atomic_with(path, |file| handed_off(file, write)),
        _ => {
            let mut stdout = BufWriter::with_capacity(BUFFER, std::io::stdout().lock());
            write(&mut stdout).and_then(|()| Ok(stdout.flush()?)).context("<stdout>: cannot write")
        }
    }
}

/// The write buffer: large enough that a big output goes out in few system calls.
const BUFFER: usize = 1 << 20;

/// Writes a file atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |file| Ok(file.write_all(bytes)?))
}

/// Writes a file atomically, what `write` writes to it (unbuffered) making its content.
fn write_atomic_with(path: &Path, write: impl FnOnce(&mut (dyn Write + Send)) -> Result<()>) -> Result<()> {
    let name = path.display();
    // A device or pipe (`/dev/stdout`, a FIFO) cannot be replaced by renaming a file onto it:
    // that would swap the device for a regular file. Write to it directly.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("{name}: cannot open"))?;
        return write(&mut file).with_context(|| format!("{name}: cannot write"));
    }
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let base = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut file = {
        // Registered while the lock is held, so an interrupt sees the file as soon as it exists.
        let mut partial = partial_files();
        let file = tempfile::Builder::new()
            .prefix(&format!(".{base}.{PARTIAL_MARK}-"))
            .tempfile_in(dir)
            .with_context(|| format!("{name}: cannot create"))?;
        partial.push(file.path().to_path_buf());
        file
    };
    let temp = file.path().to_path_buf();
    let written = (|| {
        {
            let mut early = EarlySync::new(file.as_file_mut());
            write(&mut early)?;
            early.finish()?;
        }
        set_final_permissions(file.as_file(), path)?;
        file.as_file().sync_all()?;
        // Renamed under the lock: an interrupt either removes the file first (the target stays as
        // it was) or comes after the rename (the target is whole).
        let mut partial = partial_files();
        let persisted = file.persist(path).map_err(|e| anyhow::Error::from(e.error));
        partial.retain(|p| p != &temp);
        persisted.map(drop)
    })();
    // On failure the temporary file is dropped (and deleted) on the way out.
    if written.is_err() {
        partial_files().retain(|p| p != &temp);
    }
    written.with_context(|| format!("{name}: cannot write"))
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

/// Temporary output files that exist right now.
fn partial_files() -> MutexGuard<'static, Vec<PathBuf>> {
    static FILES: OnceLock<Mutex<Vec<PathBuf>>> = OnceLock::new();
    // Removing paths cannot leave the list half-changed, so a poisoned lock is still usable.
    FILES.get_or_init(|| Mutex::new(Vec::new())).lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Removes the temporary output files, and the offload store's scratch files, when SIGINT,
/// SIGTERM or SIGHUP arrives, then lets the signal end the process as it would have. Call once,
/// at start-up.
#[cfg(unix)]
pub fn clean_up_on_interrupt() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            // Holding the lock until the process ends keeps any rename from starting.
            let partial = partial_files();
            for path in partial.iter() {
                let _ = std::fs::remove_file(path);
            }
            // And the offload store's scratch files, where it needs named ones (see
            // compaction-offload); no store write completes after this.
            compaction_offload::remove_scratch_files_before_exit();
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            std::process::exit(128 + signal);
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
        write_output_with(Some(&path), |out| {
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
}
