//! Running futures concurrently, a bounded number at a time, without a runtime of our own: the
//! async counters' many requests share the caller's task.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Awaits every future of `futures`, at most `limit` at once; their outputs in order.
pub(crate) async fn join_bounded<F: Future>(futures: Vec<F>, limit: usize) -> Vec<F::Output> {
    let total = futures.len();
    let mut waiting: VecDeque<(usize, F)> = futures.into_iter().enumerate().collect();
    let mut running: Vec<(usize, Pin<Box<F>>)> = Vec::new();
    let mut outputs: Vec<Option<F::Output>> = (0..total).map(|_| None).collect();
    std::future::poll_fn(|cx| loop {
        while running.len() < limit.max(1) {
            match waiting.pop_front() {
                Some((index, future)) => running.push((index, Box::pin(future))),
                None => break,
            }
        }
        let mut finished = false;
        let mut k = 0;
        while k < running.len() {
            if let Poll::Ready(output) = running[k].1.as_mut().poll(cx) {
                outputs[running[k].0] = Some(output);
                running.swap_remove(k);
                finished = true;
            } else {
                k += 1;
            }
        }
        if running.is_empty() && waiting.is_empty() {
            return Poll::Ready(());
        }
        // Each pending future has registered the waker; poll again only when a slot opened.
        if !finished {
            return Poll::Pending;
        }
    })
    .await;
    outputs.into_iter().map(|output| output.expect("every future was awaited to the end")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn outputs_keep_their_order_and_the_bound_holds() {
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let futures: Vec<_> = (0..9u64)
            .map(|i| {
                let (running, most) = (&running, &most);
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20 - 2 * i)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    i * 10
                }
            })
            .collect();
        let outputs = join_bounded(futures, 3).await;
        assert_eq!(outputs, (0..9).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 3);
    }
}
