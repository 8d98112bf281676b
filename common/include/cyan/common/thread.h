#pragma once

#include <string>
#include <string_view>

namespace cyan::this_thread {

/// Names the calling thread (shown by top, gdb and perf). Linux keeps at most 15 bytes; a longer
/// name is truncated. Returns false when the system refused. [any thread, about itself]
bool set_name(std::string_view name) noexcept;

/// The calling thread's name, or an empty string when it cannot be read. [any thread]
[[nodiscard]] std::string get_name();

/// Pins the calling thread to one CPU. Throws std::system_error when the CPU does not exist or
/// the thread may not run there. [any thread, about itself]
void set_affinity(unsigned cpu);

}  // namespace cyan::this_thread
