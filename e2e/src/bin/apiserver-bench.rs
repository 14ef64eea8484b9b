//! apiserver-bench: placeholder being written; see the API server benchmark in BENCHMARKS.md.
fn main() {}
