//! Spreading per-message work over the machine's cores.
//!
//! Counting is pure and every message is independent, so results are identical whatever the
//! number of threads; only the wall time changes.

use compaction_model::Message;

/// Below this much work (in bytes of text, roughly) threads cost more than they save.
pub(crate) const PARALLEL_THRESHOLD: usize = 256 * 1024;

/// A rough size of the counting work for `messages`, to decide whether threads pay off.
pub(crate) fn work_estimate(messages: &[Message]) -> usize {
    messages.iter().map(crate::render::rendered_message_chars).sum()
}

/// `f` applied to every item, in order, spread over the threads allowed
/// (`compaction_model::parallel`) when the work is large enough.
pub fn map<T, R, F>(items: &[T], approximate_work: usize, f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    if approximate_work < PARALLEL_THRESHOLD {
        return items.iter().map(f).collect();
    }
    compaction_model::parallel::map(items, f)
}
