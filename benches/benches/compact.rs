//! `compact()` of the pruning compactor down to 40% of the transcript's tokens, with each
//! counter: approximate, tiktoken o200k_base and a HuggingFace byte-level BPE tokenizer (1 MB
//! and 10 MB only; see `HUGGINGFACE_MAX_BYTES`).

use std::hint::black_box;

use compaction_benches::{
    huggingface_bpe, parse, sample_plan, transcript_bytes, HUGGINGFACE_MAX_BYTES, SIZES,
};
use compaction_core::{Compactor, PruningSettings, ToolResultPruningCompactor};
use compaction_tokens::{ApproximateTokenCounter, TiktokenCounter, TokenCounter};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn bench_compact(c: &mut Criterion) {
    let compactor =
        ToolResultPruningCompactor::new(PruningSettings::default()).expect("default settings are valid");
    let counters: Vec<(&str, Box<dyn TokenCounter>)> = vec![
        ("approximate", Box::new(ApproximateTokenCounter::default())),
        ("tiktoken_o200k", Box::new(TiktokenCounter::new("o200k_base").expect("o200k_base is built in"))),
        ("huggingface_bpe", Box::new(huggingface_bpe())),
    ];
    for &size in SIZES {
        let bytes = transcript_bytes(size);
        let messages = parse(&bytes);
        let (samples, time) = sample_plan(bytes.len());
        for (name, counter) in &counters {
            if name.starts_with("huggingface") && bytes.len() > HUGGINGFACE_MAX_BYTES {
                continue;
            }
            let target = counter.count(&messages, &[]) * 2 / 5;
            let mut group = c.benchmark_group(format!("compact/{name}"));
            group
                .throughput(Throughput::Bytes(bytes.len() as u64))
                .sample_size(samples)
                .measurement_time(time);
            group.bench_with_input(BenchmarkId::from_parameter(size), &messages, |b, messages| {
                b.iter(|| compactor.compact(black_box(messages), target, counter.as_ref()))
            });
            group.finish();
        }
    }
}

criterion_group!(benches, bench_compact);
criterion_main!(benches);
