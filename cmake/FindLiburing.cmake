# FindLiburing: finds liburing (Debian: liburing-dev) and defines the imported target
# Liburing::Liburing.
#
# Result variables: Liburing_FOUND, Liburing_INCLUDE_DIR, Liburing_LIBRARY. liburing 2.3 (Debian 12)
# has no version header; cyan uses nothing newer than 2.3.
# Installed next to cyanConfig.cmake, so find_package(cyan) finds liburing the same way.
find_path(Liburing_INCLUDE_DIR NAMES liburing.h)
find_library(Liburing_LIBRARY NAMES uring)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Liburing
  REQUIRED_VARS Liburing_LIBRARY Liburing_INCLUDE_DIR)

if(Liburing_FOUND AND NOT TARGET Liburing::Liburing)
  add_library(Liburing::Liburing UNKNOWN IMPORTED)
  set_target_properties(Liburing::Liburing PROPERTIES
    IMPORTED_LOCATION "${Liburing_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Liburing_INCLUDE_DIR}")
endif()
mark_as_advanced(Liburing_INCLUDE_DIR Liburing_LIBRARY)
