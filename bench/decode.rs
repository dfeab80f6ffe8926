//! Criterion benchmark (filled in by its issue).
fn main() {}
