# Included from the top level before find_package(MPI) when FERRY_PYTHON is on. The interposer of
# the Python package runs under mpi4py, so it must be built against the MPI that mpi4py loads in
# the Python the package installs into; the MPI compiler is chosen, in order:
#   1. MPI_C_COMPILER, when given (-C cmake.define.MPI_C_COMPILER=... with pip);
#   2. the mpicc mpi4py was built with (mpi4py.get_config(); mpi4py 3 records it, mpi4py 4 only
#      when its build was configured with one);
#   3. $MPICC, the variable mpi4py's own build reads;
#   4. FindMPI's search (mpicc on PATH).
# python/CMakeLists.txt then checks that the MPI found is the one mpi4py loads.
find_package(Python 3.8 REQUIRED COMPONENTS Interpreter)

set(FERRY_MPI4PY_CHECK ON CACHE BOOL
    "Stop the Python package's build when it would use another MPI than mpi4py's")
set(FERRY_MPI4PY_LIBRARY "")
set(FERRY_MPI4PY_VERSION "")
set(FERRY_MPI4PY_MPICC "")

# pip builds in an isolated environment that hides the target environment's packages (mpi4py among
# them) behind PYTHONPATH and PYTHONNOUSERSITE; its interpreter is the target's, so the probe runs
# that interpreter without them. The probe imports mpi4py without initializing MPI.
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE
          ${Python_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/ferry/_probe.py mpi4py
  OUTPUT_VARIABLE _ferry_probe ERROR_VARIABLE _ferry_probe_err RESULT_VARIABLE _ferry_probe_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_ferry_probe_rc EQUAL 0)
  string(JSON FERRY_MPI4PY_LIBRARY GET "${_ferry_probe}" library)
  string(JSON FERRY_MPI4PY_VERSION GET "${_ferry_probe}" version)
  string(JSON FERRY_MPI4PY_MPICC GET "${_ferry_probe}" mpicc)
  string(JSON _ferry_mpi4py_at GET "${_ferry_probe}" mpi4py_module)
  message(STATUS "Ferry: mpi4py (${_ferry_mpi4py_at}) loads ${FERRY_MPI4PY_LIBRARY}: "
                 "${FERRY_MPI4PY_VERSION}")
else()
  string(JSON _ferry_probe_why ERROR_VARIABLE _ferry_json_err GET "${_ferry_probe}" error)
  if(_ferry_json_err)
    set(_ferry_probe_why "${_ferry_probe}${_ferry_probe_err}")
  endif()
  message(WARNING "Ferry: cannot ask mpi4py which MPI it uses (${_ferry_probe_why}) in "
    "${Python_EXECUTABLE}; building against the MPI found on PATH. Install mpi4py before Ferry to "
    "build against its MPI; ferry-run checks the match when it starts a program.")
endif()

if(NOT MPI_C_COMPILER)
  if(FERRY_MPI4PY_MPICC AND EXISTS "${FERRY_MPI4PY_MPICC}")
    set(MPI_C_COMPILER "${FERRY_MPI4PY_MPICC}" CACHE FILEPATH "MPI C compiler (mpi4py's)")
  elseif(DEFINED ENV{MPICC})
    find_program(_ferry_mpicc NAMES $ENV{MPICC} NO_CACHE)
    if(NOT _ferry_mpicc)
      message(FATAL_ERROR "Ferry: MPICC=$ENV{MPICC} is not a program")
    endif()
    set(MPI_C_COMPILER "${_ferry_mpicc}" CACHE FILEPATH "MPI C compiler ($MPICC)")
  endif()
endif()
