//! Tokio arms, each runtime built (and warmed) before the first workload line:
//!   fib       — `tokio::spawn` of fib(n-1) and an inline `.await` of fib(n-2) per call above
//!               the cut-off (a coroutine fork), on a multi_thread runtime of 2 workers;
//!   dispatch  — n tiny tasks f(i % 20 + 1) spawned from the root on the main thread (outside
//!               the workers, as the C++ arms post from outside their pools), each JoinHandle
//!               awaited, on the same multi_thread runtime;
//!   pingpong  — two current_thread runtimes, each on its own thread, passing a value back and
//!               forth through two mpsc channels of capacity 1; the echo side adds 1.

use cyan_peers::{answer, factorial, fib_serial, number, serve_lines};
use std::future::Future;
use std::pin::Pin;
use tokio::sync::mpsc;

fn fib(n: u64, cutoff: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if n < cutoff {
            return fib_serial(n);
        }
        let left = tokio::spawn(fib(n - 1, cutoff));
        let right = fib(n - 2, cutoff).await;
        left.await.unwrap() + right
    })
}

/// The root is block_on's future, which runs on the calling thread (not a worker): every task
/// is spawned from outside the workers, as the C++ arms post from outside their pools.
fn dispatch(rt: &tokio::runtime::Runtime, tasks: u64) -> u64 {
    rt.block_on(async move {
        let handles: Vec<_> = (0..tasks)
            .map(|i| tokio::spawn(async move { factorial(i % 20 + 1) }))
            .collect();
        let mut total = 0u64;
        for handle in handles {
            total = total.wrapping_add(handle.await.unwrap());
        }
        total
    })
}

/// The echo side's thread: a current_thread runtime of its own, started once.
struct EchoThread {
    jobs: std::sync::mpsc::Sender<(u64, mpsc::Receiver<u64>, mpsc::Sender<u64>)>,
}

impl EchoThread {
    fn new() -> Self {
        let (jobs, receive) = std::sync::mpsc::channel::<(u64, mpsc::Receiver<u64>, mpsc::Sender<u64>)>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            for (trips, mut there, back) in receive {
                rt.block_on(async move {
                    for _ in 0..trips {
                        let v = there.recv().await.unwrap();
                        back.send(v + 1).await.unwrap();
                    }
                });
            }
        });
        EchoThread { jobs }
    }
}

/// Hands the echo side its channel ends (untimed: it waits on the first receive), then times
/// the round trips on this thread's runtime.
fn ping_pong(rt: &tokio::runtime::Runtime, echo: &EchoThread, trips: u64) {
    let (there_tx, there_rx) = mpsc::channel::<u64>(1);
    let (back_tx, mut back_rx) = mpsc::channel::<u64>(1);
    echo.jobs.send((trips, there_rx, back_tx)).unwrap();
    answer(|| {
        rt.block_on(async move {
            let mut v = 0u64;
            for _ in 0..trips {
                there_tx.send(v).await.unwrap();
                v = back_rx.recv().await.unwrap();
            }
            v
        })
    });
}

fn main() {
    let pool = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    pool.block_on(async { tokio::spawn(async { 1 }).await.unwrap() });
    let ping = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let echo = EchoThread::new();
    serve_lines(|words| match words[0] {
        "fib" => {
            let (cutoff, n) = (number(words, 1), number(words, 2));
            // The root is spawned too, so that the whole tree runs on the pool's workers.
            answer(|| pool.block_on(async move { tokio::spawn(fib(n, cutoff)).await.unwrap() }));
            true
        }
        "dispatch" => {
            let tasks = number(words, 1);
            answer(|| dispatch(&pool, tasks));
            true
        }
        "pingpong" => {
            let trips = number(words, 1);
            ping_pong(&ping, &echo, trips);
            true
        }
        _ => false,
    });
}
