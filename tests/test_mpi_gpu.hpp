// tests/test_mpi_gpu.hpp — the fixture and helpers shared by test_mpi_gpu's two files.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include "mpi_pairs.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace ferry_mpi_gpu_test {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

struct Device {
  double* p = nullptr;
  explicit Device(std::size_t n) { cudaMalloc(&p, n * sizeof(double)); }
  ~Device() { cudaFree(p); }
};

class MpiGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    cudaGetDeviceCount(&n);
    cudaSetDevice(world_rank() % n);
    int size = 0;
    MPI_Comm_size(pair_comm(), &size);
    ASSERT_EQ(size, 2) << "run with an even number of ranks";
  }
};

inline std::vector<double> values(int rank, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = rank * 1e6 + static_cast<double>(i);
  return v;
}

// rank * 1e6 + i for i in [first, first + step * n) by step: what a strided or offset message
// carries, to compare whole buffers against.
inline std::vector<double> values_from(int rank, std::size_t n, std::size_t first,
                                       std::size_t step = 1) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = rank * 1e6 + static_cast<double>(first + step * i);
  return v;
}

}  // namespace ferry_mpi_gpu_test
