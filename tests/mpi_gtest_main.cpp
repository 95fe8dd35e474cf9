// GoogleTest main for tests that call MPI: MPI is initialized once around all tests, and only rank 0
// prints results so mpiexec -n N output stays readable. Built with FERRY_GPU_TEST for GPU tests,
// which exit 77 (skipped) where no GPU is usable.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>

#ifdef FERRY_GPU_TEST
#include <ferry/gpu.hpp>

#include <cstdio>
#endif

int main(int argc, char** argv) {
#ifdef FERRY_GPU_TEST
  // CTest reports exit code 77 as skipped (SKIP_RETURN_CODE).
  if (!ferry::gpu::available()) {
    std::printf("no usable GPU: skipped\n");
    return 77;
  }
#endif
  ::testing::InitGoogleTest(&argc, argv);
  // Threads: the interposer's tests under MPI_THREAD_MULTIPLE check themselves for the level.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  // Errors come back as return codes so tests can assert on the error class.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* all = std::getenv("FERRY_TEST_ALL_RANKS");  // 1: every rank prints (debugging)
  if (rank != 0 && !(all && all[0] == '1')) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
