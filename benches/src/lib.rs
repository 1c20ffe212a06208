//! Shared loaders for the benchmarks.
