//! Work split in two, the second part on another thread: what a large read or write-back does
//! when the machine has the cores for it.

/// Whether this machine has two cores or more.
pub(crate) fn two_cores() -> bool {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) > 1
}

/// Runs `first` here and `second` on another thread at the same time, and gives both results; a
/// panic on the other thread goes on here.
pub(crate) fn join<A, B: Send>(first: impl FnOnce() -> A, second: impl FnOnce() -> B + Send) -> (A, B) {
    std::thread::scope(|scope| {
        let later = scope.spawn(second);
        let first = first();
        (first, later.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

/// `work` on each half of `items`, the second half on another thread when `parallel`, the
/// results of the two halves in order; the first error in that order is the one given, as one
/// pass over `items` would give it.
pub(crate) fn on_halves<T: Sync, R: Send, E: Send>(
    items: &[T],
    parallel: bool,
    work: impl Fn(&[T]) -> Result<Vec<R>, E> + Sync,
) -> Result<Vec<R>, E> {
    if !parallel || items.len() < 2 {
        return work(items);
    }
    let (first, second) = items.split_at(items.len() / 2);
    let (first, second) = join(|| work(first), || work(second));
    let mut all = first?;
    all.extend(second?);
    Ok(all)
}
