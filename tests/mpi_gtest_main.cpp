// GoogleTest main for tests that call MPI: MPI is initialized once around all tests, and only rank 0
// prints results so mpiexec -n N output stays readable. Built with FERRY_GPU_TEST for GPU tests,
// which exit 77 (skipped) where no GPU is usable.
//
// Exit code, agreed by all ranks: 1 when any test failed on any rank; else 77 (CTest: skipped,
// SKIP_RETURN_CODE) when any test skipped on any rank, because GTEST_SKIP alone exits 0 and a
// suite that skipped its work would read as passed; else 0.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#ifdef FERRY_GPU_TEST
#include <ferry/gpu.hpp>
#endif

int main(int argc, char** argv) {
#ifdef FERRY_GPU_TEST
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
  const int rc = RUN_ALL_TESTS();
  const auto* unit = ::testing::UnitTest::GetInstance();
  int mine[2] = {rc != 0 ? 1 : 0, unit->skipped_test_count()};
  int any[2] = {0, 0};
  MPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any[0] == 0 && mine[1] > 0) {  // every rank that skipped names what it skipped
    for (int s = 0; s < unit->total_test_suite_count(); ++s) {
      const auto* suite = unit->GetTestSuite(s);
      for (int t = 0; t < suite->total_test_count(); ++t) {
        const auto* info = suite->GetTestInfo(t);
        if (info->result()->Skipped())
          std::printf("rank %d skipped %s.%s\n", rank, suite->name(), info->name());
      }
    }
  }
  MPI_Finalize();
  if (any[0] != 0) return 1;
  return any[1] > 0 ? 77 : 0;
}
