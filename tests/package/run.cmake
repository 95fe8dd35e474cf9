# Installs Ferry from the tested build tree (BUILD_DIR) into a scratch prefix, then configures, builds and runs a
# consumer project that finds it with find_package(Ferry), both with the MPI whose compiler wrapper
# is MPI_C_COMPILER (the one the tested build uses).
set(mpi "")
if(MPI_C_COMPILER)
  set(mpi -DMPI_C_COMPILER=${MPI_C_COMPILER})
endif()
file(REMOVE_RECURSE ${WORK_DIR})
# The tested build itself is installed (what `cmake --install` of a user's build does), so the
# test checks the libraries that the other tests ran, and costs no second build of Ferry.
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package/consumer
                        -B ${WORK_DIR}/consumer -G ${GENERATOR}
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix ${mpi}
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK_DIR}/consumer/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer failed: ${rc}")
endif()
