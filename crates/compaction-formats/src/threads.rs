//! Work split in two, the second part on another thread: what a large read or write-back does
//! when two threads are allowed (`compaction_model::parallel`, which starts every thread).

use compaction_model::parallel;

pub(crate) use compaction_model::parallel::join;

/// Whether two threads or more are allowed here (the machine's cores, bounded by the caller).
pub(crate) fn two_cores() -> bool {
    parallel::max_threads() > 1
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

/// How many items [`made_ahead`] makes at a time, and how many such blocks may wait to be
/// taken: a bound on the memory what is made ahead holds.
const BLOCK: usize = 64;
const BLOCKS_AHEAD: usize = 32;

/// Gives `take` the results of `make` on each of `items`, in order. When `parallel`, another
/// thread makes them ahead of their turn (a few thousand at most) while `take` uses those made
/// before, so the two run side by side: a write-back encodes the messages it changed while it
/// copies the ones it did not. Making stops at the first error, which comes last.
///
/// A panic of the making thread goes on here once `take` is done (it then saw fewer results).
pub(crate) fn made_ahead<T: Sync, R: Send, E: Send, O>(
    items: &[T],
    parallel: bool,
    make: impl Fn(&T) -> Result<R, E> + Sync,
    take: impl FnOnce(&mut dyn Iterator<Item = Result<R, E>>) -> O,
) -> O {
    // The maker and the taker must run at once (the taker waits on what the maker sends).
    if !parallel || items.len() < 2 || !two_cores() {
        let mut failed = false;
        return take(&mut items.iter().map_while(|item| {
            let result = (!failed).then(|| make(item))?;
            failed = result.is_err();
            Some(result)
        }));
    }
    let (made, to_take) = std::sync::mpsc::sync_channel::<Vec<Result<R, E>>>(BLOCKS_AHEAD);
    let make = &make;
    let maker = move || {
        for block in items.chunks(BLOCK) {
            let mut results = Vec::with_capacity(block.len());
            let mut failed = false;
            for item in block {
                let result = make(item);
                failed = result.is_err();
                results.push(result);
                if failed {
                    break;
                }
            }
            // Nobody takes any more: stop.
            if made.send(results).is_err() || failed {
                return;
            }
        }
    };
    let taker = move || {
        let taken = take(&mut to_take.iter().flatten());
        // Stops the maker if it is still making.
        drop(to_take);
        taken
    };
    join(taker, maker).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_made_ahead_comes_in_order_and_stops_at_the_first_error() {
        let items: Vec<u32> = (0..1000).collect();
        for parallel in [false, true] {
            let all: Vec<u32> = made_ahead(
                &items,
                parallel,
                |&n| Ok::<_, ()>(n * 2),
                |made| made.map(Result::unwrap).collect(),
            );
            assert_eq!(all, items.iter().map(|n| n * 2).collect::<Vec<_>>());
            let until = made_ahead(
                &items,
                parallel,
                |&n| if n == 700 { Err(n) } else { Ok(n) },
                |made| made.collect::<Vec<_>>(),
            );
            assert_eq!(until.len(), 701, "nothing is made after an error");
            assert_eq!(until.last(), Some(&Err(700)));
        }
        // A taker that stops early stops the maker, which would otherwise wait forever to hand
        // over what it made beyond what may wait.
        let many: Vec<usize> = (0..BLOCK * BLOCKS_AHEAD * 4).collect();
        for parallel in [false, true] {
            let count = std::sync::atomic::AtomicUsize::new(0);
            let first: Vec<usize> = made_ahead(
                &many,
                parallel,
                |&n| {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Ok::<_, ()>(n)
                },
                |made| made.take(3).map(Result::unwrap).collect(),
            );
            assert_eq!(first, [0, 1, 2]);
            assert!(count.into_inner() <= BLOCK * (BLOCKS_AHEAD + 2), "made no more than may wait");
        }
    }
}
