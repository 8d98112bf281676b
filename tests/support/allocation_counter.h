#pragma once

// Counts the calling thread's calls to the global operator new, plain and over-aligned (replaced
// in allocation_counter.cpp), so a test can prove how many allocations an operation makes.

namespace cyan::test {

/// Starts counting the calling thread's allocations from zero.
void start_counting_allocations() noexcept;
/// Stops counting and returns the number of allocations since start_counting_allocations().
int stop_counting_allocations() noexcept;

}  // namespace cyan::test
