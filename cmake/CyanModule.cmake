# cyan_add_module(<name> [SOURCES src...] [DEPENDS target...])
#
# Declares the library target cyan_<name> (alias cyan::<name>, exported as cyan::<name>) whose
# public headers live in <module>/include/cyan/... and are installed as <cyan/...>.
# Warnings are errors for cyan's own targets only: they are PRIVATE, so consumers never see them.
function(cyan_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  set(target cyan_${name})
  if(ARG_SOURCES)
    add_library(${target} ${ARG_SOURCES})
    set(scope PUBLIC)
    target_compile_options(${target} PRIVATE ${CYAN_WARNING_FLAGS})
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  add_library(cyan::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME cyan_${name})
  target_include_directories(${target} ${scope}
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${target} ${scope} cxx_std_20)
  if(ARG_DEPENDS)
    target_link_libraries(${target} ${scope} ${ARG_DEPENDS})
  endif()
  install(TARGETS ${target} EXPORT cyanTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set_property(GLOBAL APPEND PROPERTY CYAN_MODULES ${name})
endfunction()

# cyan_warnings(<target>): cyan's warning set for a test, example or benchmark target.
function(cyan_warnings target)
  target_compile_options(${target} PRIVATE ${CYAN_WARNING_FLAGS})
endfunction()
