// Experiment (not built): per-call costs on the interposer's small device path (8 B), all cases
// interleaved, medians of 2900 after 100 warm-up rounds. Built against the CUDA preset's libferry:
//   mpicxx -O2 -std=c++20 -I include -I /usr/local/cuda/include bench/experiments/small_path_cost.cpp \
//     build/cuda/src/libferry.a -L/usr/local/cuda/lib64 -lcudart -ldl -o /tmp/cost && mpirun -n 1 /tmp/cost
#include <cuda_runtime.h>
#include <mpi.h>
#include <ferry/gpu.hpp>
#include <ferry/type.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  char *d, *h;
  cudaMalloc(&d, 4096);
  cudaHostAlloc(&h, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  ferry::Type t = ferry::translate(MPI_BYTE);
  volatile int sink = 0;
  std::vector<std::pair<std::string, std::function<void()>>> cases = {
    {"memory_of(device)", [&] { sink = (int)ferry::gpu::memory_of(d); }},
    {"memory_of(pinned)", [&] { sink = (int)ferry::gpu::memory_of(h); }},
    {"allocation_of(device)", [&] { sink = (int)ferry::gpu::allocation_of(d).size; }},
    {"cudaPointerGetAttributes(device)", [&] { cudaPointerAttributes a; cudaPointerGetAttributes(&a, d); sink = a.type; }},
    {"ferry::gpu::pack 8 B D2H (dense)", [&] { ferry::gpu::pack(d, 8, t, h); }},
    {"ferry::gpu::copy 8 B H2D", [&] { ferry::gpu::copy(d, h, 8); }},
    {"ferry::gpu::copy 8 B D2H", [&] { ferry::gpu::copy(h, d, 8); }},
    {"cudaMemcpyAsync legacy + sync D2H", [&] { cudaMemcpyAsync(h, d, 8, cudaMemcpyDefault, 0); cudaStreamSynchronize(0); }},
    {"cudaMemcpyAsync legacy + sync H2D", [&] { cudaMemcpyAsync(d, h, 8, cudaMemcpyDefault, 0); cudaStreamSynchronize(0); }},
    {"cudaMemcpyAsync nonblocking + sync D2H", [&] { cudaMemcpyAsync(h, d, 8, cudaMemcpyDefault, s); cudaStreamSynchronize(s); }},
    {"cudaMemcpyAsync nonblocking + sync H2D", [&] { cudaMemcpyAsync(d, h, 8, cudaMemcpyDefault, s); cudaStreamSynchronize(s); }},
    {"cudaMemcpy H2D", [&] { cudaMemcpy(d, h, 8, cudaMemcpyHostToDevice); }},
    {"cudaMemcpy D2H", [&] { cudaMemcpy(h, d, 8, cudaMemcpyDeviceToHost); }},
    {"cudaStreamQuery(legacy)", [&] { sink = cudaStreamQuery(cudaStreamLegacy); }},
    {"cudaGetDevice", [&] { int x; cudaGetDevice(&x); sink = x; }},
  };
  std::vector<std::vector<double>> t_us(cases.size());
  for (int r = 0; r < 3000; ++r)
    for (std::size_t i = 0; i < cases.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      cases[i].second();
      t_us[i].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto& v = t_us[i];
    std::sort(v.begin() + 100, v.end());
    std::printf("%-40s median %7.3f us  p10 %7.3f  p90 %7.3f\n", cases[i].first.c_str(), v[100 + (v.size() - 100) / 2],
                v[100 + (v.size() - 100) / 10], v[100 + 9 * (v.size() - 100) / 10]);
  }
  MPI_Finalize();
}
