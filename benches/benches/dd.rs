//! Criterion driver for the shared benchmark cases.

use criterion::{criterion_group, criterion_main, Criterion};

fn all(c: &mut Criterion) {
    for mut case in benches::all_cases() {
        c.bench_function(case.name, |b| b.iter(&mut case.op));
    }
}

criterion_group!(suite, all);
criterion_main!(suite);
