// go_peer: the Go arms of the pool benchmarks (forkjoin, factorial, sync), a child program
// speaking the child-arm protocol of examples/bench/process.h: one workload per stdin line,
// answered by one "RESULT seconds=... checksum=..." line. Standard library only, GOMAXPROCS at
// its default (the CPUs) but for the ping-pong.
//
//	fib CUTOFF N  fib(N), a goroutine for fib(n-1) per call above the cut-off, joined by a
//	              sync.WaitGroup, fib(n-2) inline
//	sum N         the sum of 0..N-1 from a slice, split in halves down to kSumGrain elements, a
//	              goroutine per left half
//	dispatch N    N goroutines f(i % 20 + 1) started from main, results kept in a slice,
//	              joined by a sync.WaitGroup
//	pingpong N    two goroutines pass a value back and forth through two unbuffered channels
//	              (Go's idiomatic form: each send finds its partner waiting and hands the value
//	              over, as the C++ arms' capacity-1 channels do), GOMAXPROCS 2 during the
//	              workload; the echo side adds 1
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// kSumGrain: the smallest half the sum splits off, the same grain as the C++ arms' chunks.
const kSumGrain = 16384

//go:noinline
func fibSerial(n uint64) uint64 {
	if n < 2 {
		return n
	}
	return fibSerial(n-1) + fibSerial(n-2)
}

func fib(n, cutoff uint64) uint64 {
	if n < cutoff {
		return fibSerial(n)
	}
	var left uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		left = fib(n-1, cutoff)
		wg.Done()
	}()
	right := fib(n-2, cutoff)
	wg.Wait()
	return left + right
}

func sum(values []uint64) uint64 {
	if len(values) <= kSumGrain {
		var total uint64
		for _, v := range values {
			total += v
		}
		return total
	}
	half := len(values) / 2
	var left uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		left = sum(values[:half])
		wg.Done()
	}()
	right := sum(values[half:])
	wg.Wait()
	return left + right
}

//go:noinline
func factorial(i uint64) uint64 {
	if i < 1 {
		i = 1
	}
	result := i
	for i > 2 {
		i--
		result *= i
	}
	return result
}

func dispatch(tasks uint64) uint64 {
	results := make([]uint64, tasks)
	var wg sync.WaitGroup
	wg.Add(int(tasks))
	for i := uint64(0); i < tasks; i++ {
		go func(i uint64) {
			results[i] = factorial(i%20 + 1)
			wg.Done()
		}(i)
	}
	wg.Wait()
	var total uint64
	for _, v := range results {
		total += v
	}
	return total
}

// kPingPongProcs: the ping-pong's GOMAXPROCS, one P per side as the C++ arms have one thread
// per side.
const kPingPongProcs = 2

func pingPong(trips uint64) uint64 {
	there := make(chan uint64)
	back := make(chan uint64)
	go func() {
		for i := uint64(0); i < trips; i++ {
			back <- (<-there) + 1
		}
	}()
	var v uint64
	for i := uint64(0); i < trips; i++ {
		there <- v
		v = <-back
	}
	return v
}

func main() {
	out := bufio.NewWriter(os.Stdout)
	answer := func(work func() uint64) {
		start := time.Now()
		checksum := work()
		fmt.Fprintf(out, "RESULT seconds=%.9f checksum=%d\n", time.Since(start).Seconds(), checksum)
		out.Flush()
	}
	number := func(words []string, i int) uint64 {
		if i >= len(words) {
			return 0
		}
		n, _ := strconv.ParseUint(words[i], 10, 64)
		return n
	}
	var input []uint64
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		words := strings.Fields(lines.Text())
		if len(words) == 0 {
			continue
		}
		switch words[0] {
		case "fib":
			cutoff, n := number(words, 1), number(words, 2)
			answer(func() uint64 { return fib(n, cutoff) })
		case "sum":
			n := number(words, 1)
			if uint64(len(input)) != n {
				input = make([]uint64, n)
				for i := range input {
					input[i] = uint64(i)
				}
			}
			answer(func() uint64 { return sum(input) })
		case "dispatch":
			tasks := number(words, 1)
			answer(func() uint64 { return dispatch(tasks) })
		case "pingpong":
			trips := number(words, 1)
			procs := runtime.GOMAXPROCS(kPingPongProcs) // untimed: stops the world
			answer(func() uint64 { return pingPong(trips) })
			runtime.GOMAXPROCS(procs)
		default:
			fmt.Fprintln(out, "RESULT unsupported=1")
			out.Flush()
		}
	}
}
