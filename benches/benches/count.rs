//! Counting a whole transcript with the approximate counter and tiktoken o200k_base.

use std::hint::black_box;

use compaction_benches::{parse, sample_plan, transcript_bytes, SIZES};
use compaction_tokens::{ApproximateTokenCounter, TiktokenCounter, TokenCounter};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn bench_count(c: &mut Criterion) {
    let counters: Vec<(&str, Box<dyn TokenCounter>)> = vec![
        ("approximate", Box::new(ApproximateTokenCounter::default())),
        ("tiktoken_o200k", Box::new(TiktokenCounter::new("o200k_base").expect("o200k_base is built in"))),
    ];
    for &size in SIZES {
        let bytes = transcript_bytes(size);
        let messages = parse(&bytes);
        let (samples, time) = sample_plan(bytes.len());
        for (name, counter) in &counters {
            let mut group = c.benchmark_group(format!("count/{name}"));
            group
                .throughput(Throughput::Bytes(bytes.len() as u64))
                .sample_size(samples)
                .measurement_time(time);
            group.bench_with_input(BenchmarkId::from_parameter(size), &messages, |b, messages| {
                b.iter(|| counter.count(black_box(messages), &[]))
            });
            group.finish();
        }
    }
}

criterion_group!(benches, bench_count);
criterion_main!(benches);
