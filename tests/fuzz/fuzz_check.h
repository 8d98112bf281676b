#pragma once

// What a fuzz target asserts: a violated property aborts, which libFuzzer reports as a finding
// and keeps the input that caused it.

#include <cstdio>
#include <cstdlib>

#define CYAN_FUZZ_CHECK(condition)                                                   \
  do {                                                                               \
    if (!(condition)) {                                                              \
      std::fprintf(stderr, "%s:%d: violated: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                  \
    }                                                                                \
  } while (false)
