// The example's GPU side: one thread per point of the box, the update of stencil.hpp.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "gpu.hpp"

namespace hj {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

__global__ void step_kernel(Step s) {
  const i64 n = s.n[0] * s.n[1] * s.n[2];
  for (i64 t = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 x = t % s.n[0], y = t / s.n[0] % s.n[1], z = t / s.n[0] / s.n[1];
    update_point(s, s.lo[0] + x, s.lo[1] + y, s.lo[2] + z);
  }
}

}  // namespace

bool gpu_built() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
void* gpu_alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  check(cudaMemset(p, 0, bytes), "cudaMemset");
  return p;
}
void gpu_free(void* p) { cudaFree(p); }
void gpu_put(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}
void gpu_get(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}
void* gpu_stream_create() {
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  return s;
}
void gpu_stream_destroy(void* s) { cudaStreamDestroy(static_cast<cudaStream_t>(s)); }
void gpu_sync(void* s) { check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize"); }
void gpu_step(const Step& s, void* stream) {
  const i64 n = s.n[0] * s.n[1] * s.n[2];
  if (n == 0) return;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<i64>((n + threads - 1) / threads, 65535));
  step_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(s);
  check(cudaGetLastError(), "step kernel launch");
}

}  // namespace hj
