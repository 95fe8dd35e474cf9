// The kernels of bench_pingpong's face_staged mode: one thread per value, the index math a user
// writes for a box of a 3-D grid. Not Ferry's engine: this is the baseline.
#include "pingpong_kernels.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace pingpong {
namespace {

using i64 = std::int64_t;

void check_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_pingpong: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void fill_kernel(double* grid, int owner) {
  for (i64 i = threadIdx.x + i64{blockIdx.x} * blockDim.x; i < Grid::points;
       i += i64{gridDim.x} * blockDim.x)
    grid[i] = static_cast<double>(owner) * 1e9 + static_cast<double>(i);
}

// Offset in the grid of value i of the packed X face at x0.
__device__ i64 face_offset(i64 i, int x0) {
  const int x = static_cast<int>(i % Grid::r);
  const i64 yz = i / Grid::r;
  const int y = static_cast<int>(yz % Grid::n), z = static_cast<int>(yz / Grid::n);
  return (i64{z} + Grid::r) * Grid::a * Grid::a + (i64{y} + Grid::r) * Grid::a + x0 + x;
}

__global__ void pack_kernel(const double* __restrict__ grid, double* __restrict__ packed, int x0) {
  for (i64 i = threadIdx.x + i64{blockIdx.x} * blockDim.x; i < Grid::face_points;
       i += i64{gridDim.x} * blockDim.x)
    packed[i] = grid[face_offset(i, x0)];
}

__global__ void unpack_kernel(const double* __restrict__ packed, double* __restrict__ grid, int x0) {
  for (i64 i = threadIdx.x + i64{blockIdx.x} * blockDim.x; i < Grid::face_points;
       i += i64{gridDim.x} * blockDim.x)
    grid[face_offset(i, x0)] = packed[i];
}

constexpr int kThreads = 256;
constexpr unsigned face_blocks() {
  return static_cast<unsigned>((Grid::face_points + kThreads - 1) / kThreads);
}

}  // namespace

void fill_grid(double* grid, int owner) {
  fill_kernel<<<4096, kThreads>>>(grid, owner);
  check_launch("fill kernel");
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_pingpong: fill kernel: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

void pack_x_face(const double* grid, double* packed, int x0) {
  pack_kernel<<<face_blocks(), kThreads>>>(grid, packed, x0);
  check_launch("pack kernel");
}

void unpack_x_face(const double* packed, double* grid, int x0) {
  unpack_kernel<<<face_blocks(), kThreads>>>(packed, grid, x0);
  check_launch("unpack kernel");
}

}  // namespace pingpong
