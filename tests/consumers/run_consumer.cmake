# cmake -DKIND=... -P run_consumer.cmake: builds and runs the consumer program of one kind.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "consumer ${KIND}: `${command}` failed (${result})")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/build)

if(KIND STREQUAL "add_subdirectory")
  run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR}/add_subdirectory -B ${build} -G ${CMAKE_GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCYAN_SOURCE_DIR=${CYAN_SOURCE_DIR})
  run(${CMAKE_COMMAND} --build ${build})
  run(${build}/consumer)
  return()
endif()

# find_package and pkg-config both start from an installed cyan.
run(${CMAKE_COMMAND} --install ${CYAN_BINARY_DIR} --prefix ${prefix})

if(KIND STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR}/find_package -B ${build} -G ${CMAKE_GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
  run(${CMAKE_COMMAND} --build ${build})
  run(${build}/consumer)
elseif(KIND STREQUAL "pkg_config")
  file(GLOB_RECURSE pc_files ${prefix}/cyan.pc)
  list(GET pc_files 0 pc_file)
  get_filename_component(pc_dir ${pc_file} DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} ${pc_dir})
  execute_process(COMMAND pkg-config --cflags --libs cyan OUTPUT_VARIABLE flags
    OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  file(MAKE_DIRECTORY ${build})
  run(${CXX_COMPILER} ${CONSUMER_SOURCE_DIR}/main.cpp -o ${build}/consumer ${flags})
  run(${build}/consumer)
else()
  message(FATAL_ERROR "unknown consumer kind '${KIND}'")
endif()
