#include "bench/peers.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cyan::bench {

std::unique_ptr<peer_program> peer_program::start(const std::string& program,
                                                  const std::string& label) {
  const std::string path = executable_directory() + "/" + program;
  if (::access(path.c_str(), X_OK) != 0) {
    std::printf("%s: skipped (%s was not built: see the CMake configure output)\n", label.c_str(),
                path.c_str());
    return nullptr;
  }
  return std::make_unique<peer_program>(path);
}

peer_program::peer_program(const std::string& path)
    : process_({ path }, -1, /*piped_input=*/true, /*piped_errors=*/false) {}

peer_program::~peer_program() {
  process_.close_input();  // the child reads the end of its stdin and returns from main
  (void)process_.wait(std::chrono::seconds(10));
}

sample peer_program::run(const std::string& workload_line) {
  process_.write_input(workload_line + "\n");
  const std::string line = process_.read_line(std::chrono::minutes(5));
  const auto values = parse_result_line(line);
  // The checksum is read as an integer: parse_result_line's doubles keep 53 bits of 64.
  const auto checksum = line.find(" checksum=");
  if (values.count("seconds") == 0 || checksum == std::string::npos) {
    std::fprintf(stderr, "peer program (pid %d) gave no RESULT for \"%s\"\n",
                 static_cast<int>(process_.pid()), workload_line.c_str());
    std::abort();
  }
  return { values.at("seconds"), std::strtoull(line.c_str() + checksum + 10, nullptr, 10) };
}

}  // namespace cyan::bench
