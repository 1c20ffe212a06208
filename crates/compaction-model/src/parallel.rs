//! The one place the workspace's library code starts threads, and the setting that bounds them.
//!
//! Reading a large file, counting a long conversation and writing it back spread their work over
//! the machine's cores. A library user may not want that: inside an async runtime, beside a pool
//! of their own, or on a machine they share. Every crate of the workspace starts its threads
//! through the helpers here ([`join`], [`map`]), which ask [`max_threads`] how
//! many they may use:
//!
//! * by default, the machine's cores ([`std::thread::available_parallelism`]);
//! * [`set_max_threads`] bounds it for the whole process (`1`: no thread is ever started, every
//!   piece of work runs on the thread that asked for it, in the same order);
//! * [`with_max_threads`] bounds it for one call on this thread, and for the threads that call
//!   starts.
//!
//! Results never depend on the number of threads, only the wall time does.
//! [`threads_started`] says how many threads the work of this thread has started, so a caller
//! (or a test) can check that a bound holds.
//!
//! ```
//! use std::num::NonZeroUsize;
//! use compaction_model::parallel;
//!
//! let squares = parallel::with_max_threads(NonZeroUsize::MIN, || {
//!     let before = parallel::threads_started();
//!     let squares = parallel::map(&[1, 2, 3], |n| n * n);
//!     assert_eq!(parallel::threads_started(), before, "one thread: none started");
//!     squares
//! });
//! assert_eq!(squares, [1, 4, 9]);
//! ```

use std::cell::Cell;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The process-wide bound; 0 when none is set.
static MAX_THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's bound, from [`with_max_threads`] or the thread that started it; 0: none.
    static LOCAL_MAX: Cell<usize> = const { Cell::new(0) };
    /// The count of threads started by this thread's work, shared with the threads it starts.
    static STARTED: Arc<AtomicU64> = Arc::new(AtomicU64::new(0));
}

/// Bounds the threads library code may use, for the whole process: `Some(1)` starts none,
/// `None` lifts the bound (the machine's cores).
pub fn set_max_threads(limit: Option<NonZeroUsize>) {
    MAX_THREADS.store(limit.map_or(0, NonZeroUsize::get), Ordering::Relaxed);
}

/// How many threads work asked for on this thread may use, this one included: the machine's
/// cores, bounded by [`with_max_threads`] or else [`set_max_threads`]; at least 1.
pub fn max_threads() -> usize {
    let cores = cores();
    let local = LOCAL_MAX.with(Cell::get);
    let bound = if local > 0 { local } else { MAX_THREADS.load(Ordering::Relaxed) };
    if bound > 0 {
        cores.min(bound)
    } else {
        cores
    }
}

/// The machine's cores, asked once: on Linux each ask reads the process's CPU affinity and its
/// cgroup's quota, tens of microseconds that a count of many short conversations would pay again
/// and again.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get))
}

/// Runs `work` with at most `limit` threads for it (this one included), and for what the
/// threads it starts ask in turn; the bound before is restored after, also when `work` panics.
pub fn with_max_threads<R>(limit: NonZeroUsize, work: impl FnOnce() -> R) -> R {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            LOCAL_MAX.with(|local| local.set(self.0));
        }
    }
    let _restore = Restore(LOCAL_MAX.with(|local| local.replace(limit.get())));
    work()
}

/// How many threads the work of this thread has started through these helpers (its threads'
/// own included): a bound of 1 leaves it unchanged.
pub fn threads_started() -> u64 {
    STARTED.with(|started| started.load(Ordering::Relaxed))
}

/// `work` on a new scoped thread that keeps this thread's bound and its count of threads started.
fn spawn_in<'scope, R: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    work: impl FnOnce() -> R + Send + 'scope,
) -> std::thread::ScopedJoinHandle<'scope, R> {
    let limit = max_threads();
    let started = STARTED.with(Arc::clone);
    started.fetch_add(1, Ordering::Relaxed);
    scope.spawn(move || {
        STARTED.with(|mine| mine.store(0, Ordering::Relaxed));
        let counted = CountInto(started);
        let result = with_max_threads(NonZeroUsize::new(limit).unwrap_or(NonZeroUsize::MIN), work);
        drop(counted);
        result
    })
}

/// On a started thread's end, adds what it started in turn to the count of the thread that
/// started it.
struct CountInto(Arc<AtomicU64>);

impl Drop for CountInto {
    fn drop(&mut self) {
        let mine = STARTED.with(|mine| mine.load(Ordering::Relaxed));
        self.0.fetch_add(mine, Ordering::Relaxed);
    }
}

/// Runs `first` here and `second` beside it on another thread when two threads are allowed,
/// else one after the other (`first`, then `second`); gives both results. A panic of the other
/// thread goes on here.
pub fn join<A, B: Send>(first: impl FnOnce() -> A, second: impl FnOnce() -> B + Send) -> (A, B) {
    if max_threads() < 2 {
        let first = first();
        return (first, second());
    }
    std::thread::scope(|scope| {
        let later = spawn_in(scope, second);
        let first = first();
        (first, later.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

/// Items handed out per grab by [`map`]: small enough to balance uneven items.
const CHUNK: usize = 8;

/// `f` applied to every item, the results in order, on every thread allowed.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if items.len() < 2 || max_threads() < 2 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let pieces = std::sync::Mutex::new(Vec::new());
    let work = || {
        let mut done = Vec::new();
        loop {
            let start = next.fetch_add(CHUNK, Ordering::Relaxed);
            if start >= items.len() {
                break;
            }
            let end = (start + CHUNK).min(items.len());
            done.push((start, items[start..end].iter().map(&f).collect::<Vec<R>>()));
        }
        pieces.lock().unwrap_or_else(std::sync::PoisonError::into_inner).append(&mut done);
    };
    // Every worker is a thread of its own and this one waits: a tokenizer that keeps state per
    // thread (tiktoken-rs picks a regex by thread) counted 19 MB in 0.25 s with this thread as a
    // worker, 0.23 s as it is.
    std::thread::scope(|scope| {
        let started: Vec<_> = (0..max_threads()).map(|_| spawn_in(scope, work)).collect();
        for thread in started {
            thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
    });
    let mut pieces = pieces.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    pieces.sort_unstable_by_key(|(start, _)| *start);
    pieces.into_iter().flat_map(|(_, results)| results).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> NonZeroUsize {
        NonZeroUsize::new(2).unwrap_or(NonZeroUsize::MIN)
    }

    #[test]
    fn one_thread_runs_everything_here_in_order() {
        let here = std::thread::current().id();
        with_max_threads(NonZeroUsize::MIN, || {
            let before = threads_started();
            let order = std::sync::Mutex::new(Vec::new());
            let (a, b) = join(
                || {
                    order.lock().unwrap().push("first");
                    std::thread::current().id()
                },
                || {
                    order.lock().unwrap().push("second");
                    std::thread::current().id()
                },
            );
            assert_eq!((a, b), (here, here));
            assert_eq!(*order.lock().unwrap(), ["first", "second"]);
            let ids = map(&(0..100).collect::<Vec<_>>(), |_| std::thread::current().id());
            assert!(ids.iter().all(|id| *id == here));
            assert_eq!(threads_started(), before);
            assert_eq!(max_threads(), 1);
        });
    }

    #[test]
    fn results_do_not_depend_on_the_threads_and_started_ones_are_counted() {
        let items: Vec<u64> = (0..1000).collect();
        let alone = with_max_threads(NonZeroUsize::MIN, || map(&items, |n| n * 3));
        let before = threads_started();
        let spread = with_max_threads(two(), || map(&items, |n| n * 3));
        assert_eq!(alone, spread);
        if std::thread::available_parallelism().map_or(1, NonZeroUsize::get) >= 2 {
            assert!(threads_started() > before);
            // A started thread keeps the bound of the thread that started it.
            let inner = with_max_threads(two(), || join(max_threads, max_threads));
            assert_eq!(inner, (2, 2));
        }
    }

    #[test]
    fn the_bound_is_restored_after_a_panic() {
        let outer = max_threads();
        let caught =
            std::panic::catch_unwind(|| with_max_threads(NonZeroUsize::MIN, || panic!("in the work")));
        assert!(caught.is_err());
        assert_eq!(max_threads(), outer);
    }
}
