// tests/test_mpi_protocol.hpp — the fixture and helpers shared by test_mpi_protocol's two files.
#pragma once

#include <ferry/ferry_mpi.h>
#include <ferry/transport.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include "mpi_pairs.hpp"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

namespace ferry_protocol_test {

class Protocol : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    MPI_Comm_size(pair_comm(), &n);
    ASSERT_EQ(n, 2) << "run with an even number of ranks";
    // The harness sets it for every rank; without it the suite would test the plain path.
    const char* t = std::getenv("FERRY_PROTOCOL_TEST");
    ASSERT_TRUE(t && t[0] == '1') << "FERRY_PROTOCOL_TEST=1 did not reach this rank (ctest passes it)";
  }
};

// Messages of a stub's size are taken early by probes (the probe cannot tell them from stubs).
inline constexpr int kStubDoubles = ferry::transport::kStubBytes / static_cast<int>(sizeof(double));
static_assert(ferry::transport::kStubBytes % sizeof(double) == 0);

inline constexpr int kN = 1 << 18;  // 2 MiB of doubles: pipelined (FERRY_PIPELINE_MIN=1 MiB)

inline std::vector<double> pattern(int who, int salt, std::size_t n = kN) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = who * 1e7 + salt * 1e6 + static_cast<double>(i);
  return v;
}

}  // namespace ferry_protocol_test
