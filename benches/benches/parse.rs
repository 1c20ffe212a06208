//! Parsing: transcript bytes to `Vec<Message>`, as the command line reads its input.

use std::hint::black_box;

use compaction_benches::{parse, sample_plan, transcript_bytes, SIZES};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn bench_parse(c: &mut Criterion) {
    for &size in SIZES {
        let bytes = transcript_bytes(size);
        let (samples, time) = sample_plan(bytes.len());
        let mut group = c.benchmark_group("parse");
        group.throughput(Throughput::Bytes(bytes.len() as u64)).sample_size(samples).measurement_time(time);
        group.bench_with_input(BenchmarkId::from_parameter(size), &bytes, |b, bytes| {
            b.iter(|| parse(black_box(bytes)))
        });
        group.finish();
    }
}

criterion_group!(benches, bench_parse);
criterion_main!(benches);
