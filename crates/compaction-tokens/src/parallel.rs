//! Spreading per-message work over the machine's cores.
//!
//! Counting is pure and every message is independent, so results are identical whatever the
//! number of threads; only the wall time changes.

use std::sync::atomic::{AtomicUsize, Ordering};

use compaction_model::Message;

/// Below this much work (in bytes of text, roughly) threads cost more than they save.
pub(crate) const PARALLEL_THRESHOLD: usize = 256 * 1024;

/// Messages handed out per grab; small enough to balance uneven message sizes.
const CHUNK: usize = 8;

/// A rough size of the counting work for `messages`, to decide whether threads pay off.
pub(crate) fn work_estimate(messages: &[Message]) -> usize {
    messages.iter().map(crate::render::rendered_message_chars).sum()
}

/// `f` applied to every item, in order, on all cores when the work is large enough.
pub fn map<T, R, F>(items: &[T], approximate_work: usize, f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if threads < 2 || items.len() < 2 || approximate_work < PARALLEL_THRESHOLD {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut pieces: Vec<(usize, Vec<R>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let start = next.fetch_add(CHUNK, Ordering::Relaxed);
                        if start >= items.len() {
                            break done;
                        }
                        let end = (start + CHUNK).min(items.len());
                        done.push((start, items[start..end].iter().map(&f).collect()));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    pieces.sort_unstable_by_key(|(start, _)| *start);
    pieces.into_iter().flat_map(|(_, results)| results).collect()
}
