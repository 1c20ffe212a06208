//! One compaction-hook step on a long conversation (the common case: it does not trigger), and
//! the offload compactor writing into an in-memory store.

use std::hint::black_box;
use std::sync::Arc;

use compaction_benches::{parse, sample_plan, transcript_bytes, SIZES};
use compaction_core::Compactor;
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
use compaction_model::Message;
use compaction_offload::{InMemoryToolResultStore, OffloadCompactorSettings, ToolResultOffloadCompactor};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn bench_hook_step(c: &mut Criterion) {
    for &size in SIZES {
        let bytes = transcript_bytes(size);
        let messages = parse(&bytes);
        let (samples, time) = sample_plan(bytes.len());
        let hook = CompactionHook::new(
            Box::new(compaction_core::ToolResultPruningCompactor::default()),
            CompactionHookSettings::new(usize::MAX / 2),
        )
        .expect("valid settings");
        // A long run so far; each iteration is the next step: a tool result arrives, the hook
        // runs before the model call.
        let mut state = AgentState::new(messages.clone());
        let _outcome = hook.run(&mut state);
        let arrival = Message::user("one more observation");
        let mut group = c.benchmark_group("hook_step/untriggered");
        group.throughput(Throughput::Bytes(bytes.len() as u64)).sample_size(samples).measurement_time(time);
        group.bench_function(BenchmarkId::from_parameter(size), |b| {
            b.iter(|| {
                state.push(arrival.clone());
                black_box(hook.run(&mut state))
            })
        });
        group.finish();
    }
}

fn bench_offload(c: &mut Criterion) {
    let counter = ApproximateTokenCounter::default();
    for &size in SIZES {
        let bytes = transcript_bytes(size);
        let messages = parse(&bytes);
        let target = counter.count(&messages, &[]) * 2 / 5;
        let (samples, time) = sample_plan(bytes.len());
        let mut group = c.benchmark_group("offload_compact/approximate");
        group.throughput(Throughput::Bytes(bytes.len() as u64)).sample_size(samples).measurement_time(time);
        group.bench_with_input(BenchmarkId::from_parameter(size), &messages, |b, messages| {
            b.iter(|| {
                let store = Arc::new(InMemoryToolResultStore::new());
                let compactor = ToolResultOffloadCompactor::new(store, OffloadCompactorSettings::default())
                    .expect("default settings are valid");
                compactor
                    .try_compact(black_box(messages), target, &counter)
                    .expect("a local counter cannot fail")
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench_hook_step, bench_offload);
criterion_main!(benches);
