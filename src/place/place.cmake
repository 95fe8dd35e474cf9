# The placement layer (src/place): grid partition (§4.3), QAP placement (§4.4), graph partition and
# rank reordering (§5.7). Included from src/CMakeLists.txt; adds its sources to the ferry target.
#
# Graph partitioning uses METIS where it is found (Debian: libmetis-dev), else a built-in multilevel
# recursive bisection. FERRY_METIS: ON (required), OFF (never), AUTO (when found).
set(FERRY_METIS "AUTO" CACHE STRING "Partition graphs with METIS: ON, OFF or AUTO (when found)")
set_property(CACHE FERRY_METIS PROPERTY STRINGS ON OFF AUTO)

target_sources(ferry PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/grid.cpp
  ${CMAKE_CURRENT_LIST_DIR}/qap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/placement.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bisect.cpp
  ${CMAKE_CURRENT_LIST_DIR}/refine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reorder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cart.cpp)

set(FERRY_HAVE_METIS OFF)
if(NOT FERRY_METIS STREQUAL "OFF")
  find_path(FERRY_METIS_INCLUDE_DIR metis.h PATH_SUFFIXES metis)
  find_library(FERRY_METIS_LIBRARY metis)
  if(FERRY_METIS_INCLUDE_DIR AND FERRY_METIS_LIBRARY)
    set(FERRY_HAVE_METIS ON)
  elseif(FERRY_METIS STREQUAL "ON")
    message(FATAL_ERROR "FERRY_METIS=ON but METIS was not found (apt-get install libmetis-dev, "
                        "or set FERRY_METIS_INCLUDE_DIR and FERRY_METIS_LIBRARY)")
  endif()
endif()
if(FERRY_HAVE_METIS)
  target_sources(ferry PRIVATE ${CMAKE_CURRENT_LIST_DIR}/metis.cpp)
  target_include_directories(ferry SYSTEM PRIVATE ${FERRY_METIS_INCLUDE_DIR})
  # The library by path, not an imported target, so a static libferry's export names it directly.
  target_link_libraries(ferry PRIVATE ${FERRY_METIS_LIBRARY})
  target_compile_definitions(ferry PRIVATE FERRY_HAVE_METIS=1)
  message(STATUS "Ferry: graph partitioner METIS (${FERRY_METIS_LIBRARY})")
else()
  target_sources(ferry PRIVATE ${CMAKE_CURRENT_LIST_DIR}/metis_none.cpp)
  message(STATUS "Ferry: graph partitioner built-in recursive bisection (no METIS)")
endif()
