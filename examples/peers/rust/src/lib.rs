//! What the Rust peers share: the child-arm protocol of examples/bench/process.h (one workload
//! per stdin line, answered by one `RESULT seconds=... checksum=...` line) and the work itself,
//! the same as the C++ arms' (examples/forkjoin_benchmark.cpp, factorial_benchmark.cpp).

use std::io::{BufRead, Write};
use std::time::Instant;

/// The serial fib below a fork's cut-off: one real call per node, as in the C++ arms.
#[inline(never)]
pub fn fib_serial(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_serial(n - 1) + fib_serial(n - 2)
    }
}

/// i! modulo 2^64, the factorial benchmark's task (wrapping like the C++ arm).
#[inline(never)]
pub fn factorial(i: u64) -> u64 {
    let mut i = i.max(1);
    let mut result = i;
    while i > 2 {
        i -= 1;
        result = result.wrapping_mul(i);
    }
    result
}

/// The parallel sum's input: element i is i, so the exact sum is n(n-1)/2.
pub fn sum_input(n: usize) -> Vec<u64> {
    (0..n as u64).collect()
}

/// Times `work` (which returns a checksum) and prints the RESULT line.
pub fn answer(work: impl FnOnce() -> u64) {
    let start = Instant::now();
    let checksum = work();
    let seconds = start.elapsed().as_secs_f64();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "RESULT seconds={:.9} checksum={}", seconds, checksum).unwrap();
    out.flush().unwrap();
}

/// Reads workload lines ("fib CUTOFF N", "sum N", "dispatch N", "pingpong N") until the end of
/// stdin and hands each, split into words, to `serve`; an unknown workload answers
/// `RESULT unsupported=1`.
pub fn serve_lines(mut serve: impl FnMut(&[&str]) -> bool) {
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        if !serve(&words) {
            println!("RESULT unsupported=1");
            std::io::stdout().flush().unwrap();
        }
    }
}

pub fn number(words: &[&str], i: usize) -> u64 {
    words.get(i).and_then(|w| w.parse().ok()).unwrap_or(0)
}
