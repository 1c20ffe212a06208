//! The command's allocator, and the one setting of it that `bench` changes.
//!
//! mimalloc (see the dependency's comment in Cargo.toml for why and what it buys) hands the
//! pages a thread frees back to the system only after a delay, 10 ms by default, which each
//! later free while it waits pushes back. `bench` replays transcript after transcript, each
//! freeing what the one before allocated, so with that delay its peak counts, beside the
//! transcript in flight, what the ones before it freed and was not yet handed back: over the
//! 1 GB dataset of BENCHMARKS.md (j) a third of the peak. With the delay at 0 the peak follows
//! the transcript in flight, for a few percent more time.
//!
//! mimalloc reads its settings from the environment once, as the process starts, and changing
//! one from inside would take a foreign call, which this workspace does not make (`unsafe` is
//! forbidden). So `bench` runs itself again in place (`exec`: the same process, its standard
//! streams and arguments) with `MIMALLOC_PURGE_DELAY=0` set, unless the variable is set already:
//! a user's own value is kept, and the second start does not start a third.

// The global allocator of the binary; the library crates leave theirs to their users.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's name for the delay, in milliseconds, before freed pages go back to the system.
const PURGE_DELAY: &str = "MIMALLOC_PURGE_DELAY";

/// Runs the command again, in place, with freed memory handed back to the system at once,
/// unless the environment already says how (see the module's comment). Returns only when it
/// did not (the variable was set, or the system could not start the binary again: then the
/// command runs as it is, only with a higher peak).
pub fn hand_back_freed_memory_at_once() {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        if std::env::var_os(PURGE_DELAY).is_some() {
            return;
        }
        let Ok(binary) = std::env::current_exe() else { return };
        let mut arguments = std::env::args_os();
        let mut command = std::process::Command::new(binary);
        if let Some(name) = arguments.next() {
            command.arg0(name);
        }
        // `exec` returns only with the error that kept it from replacing this process.
        let _ = command.args(arguments).env(PURGE_DELAY, "0").exec();
    }
}
