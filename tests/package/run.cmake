# Installs Ferry from this build tree into a scratch prefix, then configures, builds and runs a
# consumer project that finds it with find_package(Ferry), both with the MPI whose compiler wrapper
# is MPI_C_COMPILER (the one the tested build uses).
set(mpi "")
if(MPI_C_COMPILER)
  set(mpi -DMPI_C_COMPILER=${MPI_C_COMPILER})
endif()
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/ferry -G ${GENERATOR}
                        -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_TESTS=OFF
                        -DFERRY_BUILD_BENCHMARKS=OFF -DFERRY_BUILD_APPS=OFF -DFERRY_CUDA=OFF
                        -DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix ${mpi}
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/ferry --target install
                COMMAND_ERROR_IS_FATAL ANY)
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
