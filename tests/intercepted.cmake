# cmake -DLIBRARY=libferry-mpi.so -DNM=nm -DLIST=intercepted.txt -DTESTS=<tests folder>
#       -DREFUSED=<src/mpi/refused.def> -P intercepted.cmake
# Fails when the MPI_* functions the library exports differ from LIST, or when one of them is
# called by no host suite, or (unless LIST marks it host-only) by no GPU suite. A call is the name
# followed by "(" or, passed as a function pointer, by ",", ")" or "}", outside // comments and
# strings.
cmake_minimum_required(VERSION 3.24)
# The collectives' catalogue (test_mpi_collectives*.hpp) is compiled into both suites.
set(collectives test_mpi_collectives.cpp test_mpi_collectives.hpp test_mpi_collectives_cases.hpp
                test_mpi_collectives_persistent.hpp)
set(host_sources test_mpi_interposer.cpp ${collectives} test_mpi_protocol.cpp
                 test_mpi_protocol_more.cpp test_mpi_protocol.hpp test_mpi_modes.cpp
                 test_mpi_refused.cpp test_mpi_stream.cpp mpi_gtest_main.cpp mpi_plain.c
                 test_mpi_reorder.cpp test_mpi_reorder_cart.cpp test_mpi_large_count.cpp
                 test_mpi_refused_c.cpp test_mpi_refused_host.hpp)
set(gpu_sources test_mpi_gpu.cpp test_mpi_gpu_ipc.cpp test_mpi_gpu.hpp
                test_mpi_gpu_collectives.cpp ${collectives} test_mpi_modes.cpp test_mpi_refused.cpp
                test_mpi_refused_host.hpp
                test_mpi_stream.cpp mpi_gtest_main.cpp mpi_static_cuda.cpp)

execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY} OUTPUT_VARIABLE nm_out
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${rc})")
endif()
string(REGEX MATCHALL "[ \t][TWi] MPI_[A-Za-z0-9_]+" exported "${nm_out}")
list(TRANSFORM exported REPLACE "^[ \t][TWi] " "")
list(FILTER exported EXCLUDE REGEX "^MPI_[A-Z0-9_]+$")  # Fortran's upper-case mangling (below)
list(REMOVE_DUPLICATES exported)
list(SORT exported)

file(STRINGS ${LIST} lines)
set(listed "")
set(host_only "")
set(mpi4 "")
foreach(line IN LISTS lines)
  if(line MATCHES "^(MPI_[A-Za-z0-9_]+)(.*)$")
    # The name first: the MATCHES below overwrites CMAKE_MATCH_1.
    set(name ${CMAKE_MATCH_1})
    set(rest "${CMAKE_MATCH_2}")
    if(rest MATCHES "host-only")
      list(APPEND host_only ${name})
    endif()
    if(rest MATCHES "mpi4")
      list(APPEND mpi4 ${name})
    endif()
    list(APPEND listed ${name})
  endif()
endforeach()
# MPI-4's large-count entries exist only where the MPI's header is MPI-4: a library built against
# an MPI-3 header exports none of them, and none is then expected.
set(mpi4_built FALSE)
foreach(name IN LISTS mpi4)
  if(name IN_LIST exported)
    set(mpi4_built TRUE)
  endif()
endforeach()
if(NOT mpi4_built)
  list(REMOVE_ITEM listed ${mpi4})
endif()
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
  set(call "[^A-Za-z0-9_]${name}[ \t\r\n]*[(,)}]")
  # The shared host suites (test_mpi_refused_host.hpp) write a refused call FERRY_C(name): its int
  # form in test_mpi_refused, its large-count _c form in test_mpi_refused_c.
  set(wrapped FALSE)
  if(name IN_LIST mpi4 AND name MATCHES "^(.+)_c$")
    set(base ${CMAKE_MATCH_1})
    if(host_text MATCHES "FERRY_C\\(${base}\\)")
      set(wrapped TRUE)
    endif()
  endif()
  if(NOT wrapped AND NOT host_text MATCHES "${call}")
    list(APPEND problems "${name}: called by no host suite")
  endif()
  if(NOT name IN_LIST host_only AND NOT gpu_text MATCHES "${call}")
    list(APPEND problems "${name}: called by no GPU suite")
  endif()
endforeach()

# With Open MPI the library also defines the Fortran entries (src/mpi/fortran.hpp): exactly one
# per served call (listed, not refused), each in every mangling: mpi_x, mpi_x_, mpi_x__, MPI_X,
# mpi_x_f08_, mpi_x_f08. With MPICH, the f08 entries (mpi_x_f08_) its own bindings bypass.
string(REGEX MATCHALL "[ \t][TWi] mpi_[a-z0-9_]+_f08_\n" f08 "${nm_out}")
list(LENGTH f08 n_f08)
if(n_f08 GREATER 0)
  file(STRINGS ${REFUSED} refused_lines REGEX "^FERRY_REFUSED\\(")
  set(refused "")
  foreach(line IN LISTS refused_lines)
    if(line MATCHES "^FERRY_REFUSED\\([^,]+, (MPI_[A-Za-z0-9_]+),")
      list(APPEND refused ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(served "")
  foreach(name IN LISTS listed)
    if(NOT name IN_LIST refused AND NOT name IN_LIST mpi4)
      string(TOLOWER ${name} lower)
      list(APPEND served ${lower})
    endif()
  endforeach()
  list(TRANSFORM f08 REPLACE "^[ \t][TWi] (mpi_[a-z0-9_]+)_f08_\n$" "\\1")
  foreach(lower IN LISTS f08)
    if(NOT lower IN_LIST served)
      list(APPEND problems "${lower}_f08_: a Fortran entry of a call Ferry does not serve")
    endif()
  endforeach()
  # Open MPI: every served call has its entries, in every mangling. MPICH: only the f08 entries
  # of the calls its `use mpi_f08` bindings send to PMPI_* (src/mpi/fortran_requests.cpp).
  set(full FALSE)
  if(nm_out MATCHES "[ \t][TWi] mpi_send_\n")
    set(full TRUE)
  endif()
  foreach(lower IN LISTS served)
    string(TOUPPER ${lower} upper)
    set(manglings ${lower} ${lower}_ ${lower}__ ${upper} ${lower}_f08_ ${lower}_f08)
    if(NOT full)
      if(NOT lower IN_LIST f08)
        continue()
      endif()
      set(manglings ${lower}_f08_)
    endif()
    foreach(sym ${manglings})
      if(NOT nm_out MATCHES "[ \t][TWi] ${sym}\n")
        list(APPEND problems "${sym}: Fortran entry missing")
      endif()
    endforeach()
  endforeach()
  list(LENGTH f08 n_entries)
  message(STATUS "${n_entries} Fortran entries")
else()
  message(STATUS "no Fortran entries")
endif()

list(LENGTH listed n)
if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "intercepted calls without a test:\n  ${text}")
endif()
message(STATUS "${n} intercepted functions, each called by a host suite and a GPU suite")
