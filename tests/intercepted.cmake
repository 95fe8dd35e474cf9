# cmake -DLIBRARY=libferry-mpi.so -DNM=nm -DLIST=intercepted.txt -DTESTS=<tests folder>
#       -P intercepted.cmake
# Fails when the MPI_* functions the library exports differ from LIST, or when one of them is
# called by no host suite, or (unless LIST marks it host-only) by no GPU suite. A call is the name
# followed by "(" or, passed as a function pointer, by "," or ")", outside // comments and strings.
cmake_minimum_required(VERSION 3.24)
set(host_sources test_mpi_interposer.cpp test_mpi_collectives.cpp test_mpi_protocol.cpp
                 test_mpi_modes.cpp mpi_gtest_main.cpp mpi_plain.c test_mpi_reorder.cpp
                 test_mpi_reorder_cart.cpp)
set(gpu_sources test_mpi_gpu.cpp test_mpi_gpu_collectives.cpp test_mpi_collectives.cpp
                test_mpi_modes.cpp mpi_gtest_main.cpp mpi_static_cuda.cpp)

execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY} OUTPUT_VARIABLE nm_out
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${rc})")
endif()
string(REGEX MATCHALL "[ \t][TWi] MPI_[A-Za-z0-9_]+" exported "${nm_out}")
list(TRANSFORM exported REPLACE "^[ \t][TWi] " "")
list(REMOVE_DUPLICATES exported)
list(SORT exported)

file(STRINGS ${LIST} lines)
set(listed "")
set(host_only "")
foreach(line IN LISTS lines)
  if(line MATCHES "^(MPI_[A-Za-z0-9_]+)(.*)$")
    # The name first: the MATCHES below overwrites CMAKE_MATCH_1.
    set(name ${CMAKE_MATCH_1})
    list(APPEND listed ${name})
    if(CMAKE_MATCH_2 MATCHES "host-only")
      list(APPEND host_only ${name})
    endif()
  endif()
endforeach()
list(SORT listed)

set(problems "")
foreach(name IN LISTS exported)
  if(NOT name IN_LIST listed)
    list(APPEND problems "${name}: exported by the library, missing from intercepted.txt")
  endif()
endforeach()
foreach(name IN LISTS listed)
  if(NOT name IN_LIST exported)
    list(APPEND problems "${name}: in intercepted.txt, not exported by the library")
  endif()
endforeach()

function(read_sources out)
  set(text " ")
  foreach(f IN LISTS ARGN)
    file(READ ${TESTS}/${f} t)
    string(REGEX REPLACE "//[^\n]*" "" t "${t}")
    string(REGEX REPLACE "\"[^\"\n]*\"" "\"\"" t "${t}")
    string(APPEND text " ${t}")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
read_sources(host_text ${host_sources})
read_sources(gpu_text ${gpu_sources})

foreach(name IN LISTS listed)
  set(call "[^A-Za-z0-9_]${name}[ \t\r\n]*[(,)]")
  if(NOT host_text MATCHES "${call}")
    list(APPEND problems "${name}: called by no host suite")
  endif()
  if(NOT name IN_LIST host_only AND NOT gpu_text MATCHES "${call}")
    list(APPEND problems "${name}: called by no GPU suite")
  endif()
endforeach()

list(LENGTH listed n)
if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "intercepted calls without a test:\n  ${text}")
endif()
message(STATUS "${n} intercepted functions, each called by a host suite and a GPU suite")
