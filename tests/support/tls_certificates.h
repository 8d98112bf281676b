#pragma once

// The TLS tests' certificates: made once per test program by scripts/tls_certificates.sh (the
// openssl command) in a temporary directory removed at exit. The program is compiled with
// CYAN_TLS_CERTIFICATE_SCRIPT, the script's path.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "net/net_support.h"

namespace cyan::test {

/// The directory of the certificates (see the script for what is in it). Aborts when the
/// script fails.
inline const std::string& tls_certificates() {
  static const struct made {
    temp_dir dir;
    made() {
      const std::string command =
          std::string("sh '") + CYAN_TLS_CERTIFICATE_SCRIPT + "' '" + dir.path() + "'";
      if (std::system(command.c_str()) != 0) {
        std::fprintf(stderr, "%s failed\n", command.c_str());
        std::abort();
      }
    }
  } certificates_made;
  return certificates_made.dir.path();
}

}  // namespace cyan::test
