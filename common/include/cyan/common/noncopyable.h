#pragma once

namespace cyan {

/// Base class for types that must not be copied (a thread, a loop, a watcher). Moving is left to
/// the derived class: it declares its own move operations if it wants them.
class noncopyable {
 protected:
  noncopyable() = default;
  ~noncopyable() = default;

 public:
  noncopyable(const noncopyable&) = delete;
  noncopyable& operator=(const noncopyable&) = delete;
};

}  // namespace cyan
