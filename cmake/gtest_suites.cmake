# gtest_suites.cmake - registers a GoogleTest binary with ctest as one test per test suite ("Resume.*" runs
# every Resume test in one process), where gtest_discover_tests registers one per test. For the sanitizer
# build (tools/test.sh): there every start of the test binary costs ~0.3 s (ASan's shadow memory and
# allocator set-up, and the leak check at exit: 0.27-0.38 s of wall time, 0.22 s of CPU, for a run of no
# test; 0.09 s for an ASan "hello world"), so 601 starts took 2-3 minutes of the cores' time; 128 starts
# (one per suite) take 30-40 s.
# The tests and their assertions are the same; the ones in a suite share a process, as they do when the
# binary is run whole.
#   attnmap_add_gtest_suites(TARGET SKIP)  SKIP: gtest filter patterns ("A.B:C.*") left out of every suite
# The suites are listed from the built binary (--gtest_list_tests) when ctest starts and the binary is newer
# than the list: this file is also the script that writes the list (cmake -P, the variables below).
if(CMAKE_SCRIPT_MODE_FILE)
  # -DEXE=test binary -DOUT=file to write -DWORKDIR=folder the tests run in -DSKIP=negative patterns
  execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE status
                  TIMEOUT 60)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${status}):\n${listing}")
  endif()
  string(REPLACE ";" "\\;" listing "${listing}")
  string(REPLACE "\n" ";" lines "${listing}")
  set(suites "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")  # "Suite." or "Prefix/Suite/0.  # TypeParam = ..."
      set(suite "${CMAKE_MATCH_1}")
      list(APPEND suites "${suite}")
      set(count_${suite} 0)
    elseif(line MATCHES "^  [^ ]" AND DEFINED suite)
      math(EXPR count_${suite} "${count_${suite}} + 1")
    endif()
  endforeach()
  set(filter_tail "")
  if(SKIP)
    set(filter_tail "-${SKIP}")
  endif()
  set(text "")
  foreach(suite IN LISTS suites)
    # COST: the suite's number of tests, so that ctest starts the large suites first (a clean build has no
    # timings of earlier runs).
    string(APPEND text
      "add_test([==[${suite}.*]==] [==[${EXE}]==] [==[--gtest_filter=${suite}.*${filter_tail}]==])\n"
      "set_tests_properties([==[${suite}.*]==] PROPERTIES WORKING_DIRECTORY [==[${WORKDIR}]==]"
      " COST ${count_${suite}})\n")
  endforeach()
  file(WRITE "${OUT}" "${text}")
  return()
endif()

function(attnmap_add_gtest_suites target skip)
  # ctest reads the include file when it starts: it lists the suites again whenever the binary is newer than
  # the list (GoogleTest's PRE_TEST way: also right after a build folder switches to this option).
  set(list_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake")
  file(GENERATE OUTPUT "${include_file}" CONTENT
"if(EXISTS [==[$<TARGET_FILE:${target}>]==])
  if(NOT EXISTS [==[${list_file}]==] OR [==[$<TARGET_FILE:${target}>]==] IS_NEWER_THAN [==[${list_file}]==])
    execute_process(COMMAND [==[${CMAKE_COMMAND}]==] [==[-DEXE=$<TARGET_FILE:${target}>]==] [==[-DOUT=${list_file}]==]
                            [==[-DWORKDIR=${CMAKE_CURRENT_BINARY_DIR}]==] [==[-DSKIP=${skip}]==]
                            -P [==[${PROJECT_SOURCE_DIR}/cmake/gtest_suites.cmake]==] RESULT_VARIABLE status)
    if(NOT status EQUAL 0)
      add_test(${target}_LIST_FAILED ${target}_LIST_FAILED)
      return()
    endif()
  endif()
  include([==[${list_file}]==])
else()
  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
