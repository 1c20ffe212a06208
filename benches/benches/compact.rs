//! `compact()` of the pruning compactor down to 40% of the transcript's tokens, with each
//! counter: approximate, tiktoken o200k_base and a HuggingFace byte-level BPE tokenizer (1 MB
//! and 10 MB only; see `HUGGINGFACE_MAX_BYTES`).

use std::hint::black_box;

use compaction_benches::{bench_counters, parse, sample_plan, transcript_bytes, SIZES};
use compaction_core::{Compactor, PruningSettings, ToolResultPruningCompactor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn bench_compact(c: &mut Criterion) {
    let compactor =
        ToolResultPruningCompactor::new(PruningSettings::default()).expect("default settings are valid");
    let counters = bench_counters();
    for &size in SIZES {
        let bytes = transcript_bytes(size);
        let messages = parse(&bytes);
        let (samples, time) = sample_plan(bytes.len());
        for bench in counters.iter().filter(|bench| bytes.len() <= bench.max_bytes) {
            let (name, counter) = (bench.name, &bench.counter);
            let target = counter.count(&messages, &[]) * 2 / 5;
            let mut group = c.benchmark_group(format!("compact/{name}"));
            group
                .throughput(Throughput::Bytes(bytes.len() as u64))
                .sample_size(samples)
                .measurement_time(time);
            group.bench_with_input(BenchmarkId::from_parameter(size), &messages, |b, messages| {
                b.iter(|| {
                    compactor
                        .try_compact(black_box(messages), target, counter.as_ref())
                        .expect("a local counter cannot fail")
                })
            });
            group.finish();
        }
    }
}

criterion_group!(benches, bench_compact);
criterion_main!(benches);
