//! rayon arms: fib with `rayon::join` per call above the cut-off, and `par_iter().sum()`, on a
//! pool of as many threads as CPUs (started, and warmed, before the first workload line).

use cyan_peers::{answer, fib_serial, number, serve_lines, sum_input};
use rayon::prelude::*;

fn fib(n: u64, cutoff: u64) -> u64 {
    if n < cutoff {
        return fib_serial(n);
    }
    let (a, b) = rayon::join(|| fib(n - 1, cutoff), || fib(n - 2, cutoff));
    a + b
}

fn main() {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| rayon::join(|| 1, || 2));
    let mut input: Vec<u64> = Vec::new();
    serve_lines(|words| match words[0] {
        "fib" => {
            let (cutoff, n) = (number(words, 1), number(words, 2));
            answer(|| pool.install(|| fib(n, cutoff)));
            true
        }
        "sum" => {
            let n = number(words, 1) as usize;
            if input.len() != n {
                input = sum_input(n);
            }
            answer(|| pool.install(|| input.par_iter().sum::<u64>()));
            true
        }
        _ => false,
    });
}
