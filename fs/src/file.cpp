#include "cyan/fs/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace cyan::fs {
namespace {

// open_mode as open(2)'s flags; throws std::invalid_argument without an access mode.
int open_flags(open_mode mode) {
  const bool read = has(mode, open_mode::read);
  const bool write = has(mode, open_mode::write) || has(mode, open_mode::append);
  if (!read && !write) {
    throw std::invalid_argument("cyan::fs::file::open: open_mode needs read, write or append");
  }
  int flags = O_CLOEXEC | (read && write ? O_RDWR : write ? O_WRONLY : O_RDONLY);
  flags |= has(mode, open_mode::create) ? O_CREAT : 0;
  flags |= has(mode, open_mode::truncate) ? O_TRUNC : 0;
  flags |= has(mode, open_mode::append) ? O_APPEND : 0;
  flags |= has(mode, open_mode::exclusive) ? O_EXCL : 0;
  return flags;
}

}  // namespace

file::file(file&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

file& file::operator=(file&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

file::~file() {
  close();
}

detail::open_op file::open_within(std::filesystem::path path, open_mode mode,
                                  detail::timeout_type timeout) {
  return detail::open_op(std::move(path), open_flags(mode), timeout);
}

detail::transfer_op file::transfer(std::uint64_t offset, std::byte* data, std::size_t size,
                                   bool write, detail::timeout_type timeout) const noexcept {
  detail::call_request request;
  request.what = write ? detail::call_request::kind::write : detail::call_request::kind::read;
  request.fd = fd_;
  request.offset = offset;
  request.data = data;
  request.size = std::min(size, detail::kMaxTransfer);
  request.path = path_.c_str();
  return detail::transfer_op(request, timeout);
}

detail::sync_op file::sync_within(detail::timeout_type timeout) const noexcept {
  detail::call_request request;
  request.what = detail::call_request::kind::sync;
  request.fd = fd_;
  request.path = path_.c_str();
  return detail::sync_op(request, timeout);
}

std::uint64_t file::size() const {
  struct ::stat status {};
  if (::fstat(fd_, &status) != 0) {
    throw std::system_error(errno, std::generic_category(),
                            "cyan::fs::file::size '" + path_.string() + "'");
  }
  return static_cast<std::uint64_t>(status.st_size);
}

void file::close() noexcept {
  if (fd_ >= 0) {
    ::close(std::exchange(fd_, -1));  // the descriptor is gone even when close() reports EINTR
  }
}

}  // namespace cyan::fs
