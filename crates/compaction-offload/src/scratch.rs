//! Named scratch files of file-system store writes in flight, so that a program ending on a
//! signal can remove them first.
//!
//! On Linux a store write needs no named scratch file: the content goes to an unnamed file
//! (`O_TMPFILE`) that is given its name once whole, so no interruption, not even a SIGKILL,
//! can leave one behind. Where the kernel, the file system or `/proc` does not allow that (and
//! on other systems) the content goes to a scratch file named `.offload-*.partial` in the
//! store's directory first; each is registered here while it exists.

use std::sync::{Mutex, MutexGuard};

/// How to remove one scratch file.
type Removal = Box<dyn Fn() + Send>;

/// The scratch files that exist right now, each with the id its write holds.
static IN_FLIGHT: Mutex<Vec<(u64, Removal)>> = Mutex::new(Vec::new());

fn in_flight() -> MutexGuard<'static, Vec<(u64, Removal)>> {
    // Adding and taking entries cannot leave the list half-changed, so a poisoned lock is usable.
    IN_FLIGHT.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A registered scratch file: unregistered when dropped (the write removed it, or gave it its
/// name under [`Scratch::place`]).
pub(crate) struct Scratch(u64);

impl Scratch {
    /// Registers a scratch file that `remove` removes. Call it before the file is created, so
    /// that no moment passes with the file there and unregistered.
    pub(crate) fn register(remove: Removal) -> Scratch {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        in_flight().push((id, remove));
        Scratch(id)
    }

    /// Runs `place` (which gives the scratch file its name) under the lock that
    /// [`remove_scratch_files_before_exit`] takes: the file is either removed first, and `place`
    /// never runs, or placed, and not removed.
    pub(crate) fn place<T>(&self, place: impl FnOnce() -> T) -> T {
        let _held = in_flight();
        place()
    }
}

#[cfg(test)]
impl Scratch {
    /// Runs this file's removal, as [`remove_scratch_files_before_exit`] would, leaving other
    /// writes (of tests running beside) alone.
    pub(crate) fn remove_now(&self) {
        let held = in_flight();
        if let Some((_, remove)) = held.iter().find(|(id, _)| *id == self.0) {
            remove();
        }
    }

    /// Whether this file is registered.
    pub(crate) fn is_registered(&self) -> bool {
        in_flight().iter().any(|(id, _)| *id == self.0)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        in_flight().retain(|(id, _)| *id != self.0);
    }
}

/// Removes the scratch files of the file-system store writes in flight in this process, and
/// stops every store write from then on (it waits forever): for a signal handler that is about
/// to end the process, so that an interrupted run leaves no `.offload-*.partial` file in a
/// store. A write already given its name is whole and stays.
///
/// On Linux, writes need no named scratch file unless the file system cannot make unnamed files
/// (`O_TMPFILE`) or `/proc` is not mounted, so there is usually nothing to remove. A process
/// killed with SIGKILL, which no handler sees, can leave one only in those cases; its name,
/// `.offload-*.partial`, says what it is.
///
/// ```no_run
/// // In the thread that handles SIGINT, SIGTERM and SIGHUP, just before the process ends:
/// compaction_offload::remove_scratch_files_before_exit();
/// std::process::exit(130);
/// ```
pub fn remove_scratch_files_before_exit() {
    let mut held = in_flight();
    for (_, remove) in held.drain(..) {
        remove();
    }
    // The lock stays held until the process ends: no write can place a scratch file now.
    std::mem::forget(held);
}
