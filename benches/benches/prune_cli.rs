//! `compaction prune` end to end, the release binary run as a subprocess: read, parse, compact
//! to 40% of the approximate count, write.
//!
//! Skipped, with a note on standard error, until `cargo build --release -p compaction-cli` has
//! built a binary that has the `prune` command.

use std::process::Command;

use compaction_benches::{
    compaction_binary, has_subcommand, parse, sample_plan, transcript_with_seed, SEED, SIZES,
};
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn bench_prune_cli(c: &mut Criterion) {
    let Some(binary) = compaction_binary().filter(|b| has_subcommand(b, "prune")) else {
        eprintln!(
            "prune_cli: skipped; build the command first: cargo build --release -p compaction-cli \
             (it needs the `prune` subcommand)"
        );
        return;
    };
    let scratch = std::env::temp_dir().join(format!("compaction-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("temporary folder");
    for &size in SIZES {
        let input = transcript_with_seed(size, SEED).expect("transcript");
        let bytes = std::fs::read(&input).expect("transcript");
        let target = ApproximateTokenCounter::default().count(&parse(&bytes), &[]) * 2 / 5;
        let output = scratch.join(format!("pruned-{size}.json"));
        let (samples, time) = sample_plan(bytes.len());
        let mut group = c.benchmark_group("prune_cli/approximate");
        group.throughput(Throughput::Bytes(bytes.len() as u64)).sample_size(samples).measurement_time(time);
        group.bench_function(BenchmarkId::from_parameter(size), |b| {
            b.iter(|| {
                let status = Command::new(&binary)
                    .arg("prune")
                    .arg(&input)
                    .arg("-o")
                    .arg(&output)
                    .args(["--target-tokens", &target.to_string(), "--counter", "approximate"])
                    .status()
                    .expect("running compaction prune");
                assert!(status.success(), "compaction prune failed with {status}");
            })
        });
        group.finish();
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

criterion_group!(benches, bench_prune_cli);
criterion_main!(benches);
