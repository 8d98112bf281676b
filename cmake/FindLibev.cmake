# FindLibev: finds libev (Debian: libev-dev) and defines the imported target Libev::Libev.
#
# Result variables: Libev_FOUND, Libev_VERSION, Libev_INCLUDE_DIR, Libev_LIBRARY.
# Installed next to cyanConfig.cmake, so find_package(cyan) finds libev the same way.
find_path(Libev_INCLUDE_DIR NAMES ev.h PATH_SUFFIXES libev)
find_library(Libev_LIBRARY NAMES ev)

if(Libev_INCLUDE_DIR AND EXISTS "${Libev_INCLUDE_DIR}/ev.h")
  file(STRINGS "${Libev_INCLUDE_DIR}/ev.h" libev_version_lines
    REGEX "^#define EV_VERSION_(MAJOR|MINOR)[ \t]+[0-9]+")
  string(REGEX REPLACE ".*EV_VERSION_MAJOR[ \t]+([0-9]+).*" "\\1" libev_major "${libev_version_lines}")
  string(REGEX REPLACE ".*EV_VERSION_MINOR[ \t]+([0-9]+).*" "\\1" libev_minor "${libev_version_lines}")
  set(Libev_VERSION "${libev_major}.${libev_minor}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Libev
  REQUIRED_VARS Libev_LIBRARY Libev_INCLUDE_DIR
  VERSION_VAR Libev_VERSION)

if(Libev_FOUND AND NOT TARGET Libev::Libev)
  add_library(Libev::Libev UNKNOWN IMPORTED)
  set_target_properties(Libev::Libev PROPERTIES
    IMPORTED_LOCATION "${Libev_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Libev_INCLUDE_DIR}")
endif()
mark_as_advanced(Libev_INCLUDE_DIR Libev_LIBRARY)
