# Keeps the README's knob table in step with the knob registry (src/sys/env.cpp).
#   cmake -DGEN=<ferry-demo> -DREADME=<README.md> -P check_knobs.cmake             fails on a difference
#   cmake -DGEN=<ferry-demo> -DREADME=<README.md> -DUPDATE=ON -P check_knobs.cmake  rewrites the table
# The table sits between the lines "<!-- knobs:begin ... -->" and "<!-- knobs:end -->".
execute_process(COMMAND ${GEN} --knobs-markdown OUTPUT_VARIABLE table RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${GEN} --knobs-markdown failed: ${rc}")
endif()
file(READ ${README} text)
string(FIND "${text}" "<!-- knobs:begin" begin)
string(FIND "${text}" "<!-- knobs:end -->" end)
if(begin EQUAL -1 OR end EQUAL -1 OR end LESS begin)
  message(FATAL_ERROR "${README}: no <!-- knobs:begin --> ... <!-- knobs:end --> markers")
endif()
string(SUBSTRING "${text}" ${begin} -1 after_begin)
string(FIND "${after_begin}" "\n" nl)
math(EXPR body_start "${begin} + ${nl} + 1")
math(EXPR body_len "${end} - ${body_start}")
string(SUBSTRING "${text}" ${body_start} ${body_len} current)
if(current STREQUAL table)
  message(STATUS "README knob table matches the registry")
  return()
endif()
if(UPDATE)
  string(SUBSTRING "${text}" 0 ${body_start} head)
  string(SUBSTRING "${text}" ${end} -1 tail)
  file(WRITE ${README} "${head}${table}${tail}")
  message(STATUS "README knob table rewritten from the registry")
  return()
endif()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/knobs-expected.md "${table}")
message(FATAL_ERROR "The README's knob table differs from the knob registry (src/sys/env.cpp).\n"
  "Expected (also in ${CMAKE_CURRENT_BINARY_DIR}/knobs-expected.md):\n${table}\n"
  "Regenerate it: cmake -DUPDATE=ON -DGEN=${GEN} -DREADME=${README} -P ${CMAKE_CURRENT_LIST_FILE}")
