// ferry-demo: commits a few datatypes real programs use, prints what Ferry made of them, packs
// them and checks the bytes against the system MPI's own MPI_Pack.
//
//   ferry-demo                   the demo (under mpiexec or alone)
//   ferry-demo --knobs           every FERRY_* environment knob and its effective value
//   ferry-demo --knobs-markdown  the README's knob table, generated from the knob registry
#include <ferry/ferry.h>
#include <ferry/gpu.hpp>
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "sys/env.hpp"  // the knob registry (an internal header: this is Ferry's own tool)

#ifdef FERRY_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

// Packs the same object from GPU memory with the GPU engine; true when the bytes match `want`.
bool run_on_gpu(const std::vector<unsigned char>& buf, const ferry::Type& type,
                const std::vector<unsigned char>& want) {
#ifdef FERRY_HAVE_CUDA
  void *dbuf = nullptr, *dout = nullptr;
  if (cudaMalloc(&dbuf, buf.size()) != cudaSuccess ||
      cudaMalloc(&dout, want.size() + 1) != cudaSuccess)
    return false;
  cudaMemcpy(dbuf, buf.data(), buf.size(), cudaMemcpyHostToDevice);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  float best = 1e30f;
  for (int i = 0; i < 20; ++i) {  // the first launches load the kernels
    cudaEventRecord(a);
    ferry::gpu::pack_async(dbuf, 1, type, dout);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    best = ms < best ? ms : best;
  }
  std::vector<unsigned char> got(want.size());
  cudaMemcpy(got.data(), dout, got.size(), cudaMemcpyDeviceToHost);
  cudaFree(dbuf);
  cudaFree(dout);
  bool same = got == want;
  std::printf("  packed on the GPU in %.1f us (best of 20); equal: %s\n", best * 1e3,
              same ? "yes" : "NO");
  return same;
#else
  (void)buf;
  (void)type;
  (void)want;
  return true;
#endif
}

struct Example {
  const char* name;
  MPI_Datatype type;
  std::size_t buffer_bytes;  // the allocation the type describes
};

bool run(const Example& ex) {
  MPI_Datatype t = ex.type;
  MPI_Type_commit(&t);
  auto t0 = std::chrono::steady_clock::now();
  if (ferry_type_commit(t) != MPI_SUCCESS) {
    std::printf("%s: commit failed: %s\n", ex.name, ferry_error_string());
    return false;
  }
  auto t1 = std::chrono::steady_clock::now();
  auto type = ferry::lookup(t);
  std::printf("== %s\n", ex.name);
  std::printf("  commit %.1f us, %s", std::chrono::duration<double, std::micro>(t1 - t0).count(),
              type->describe().c_str());

  std::vector<unsigned char> buf(ex.buffer_bytes);
  std::iota(buf.begin(), buf.end(), 0);
  int size = 0;
  ferry_pack_size(1, t, &size);
  std::vector<unsigned char> mine(static_cast<std::size_t>(size)), theirs(mine.size());
  int pos_mine = 0, pos_theirs = 0;
  t0 = std::chrono::steady_clock::now();
  int rc = ferry_pack(buf.data(), 1, t, mine.data(), size, &pos_mine);
  t1 = std::chrono::steady_clock::now();
  MPI_Pack(buf.data(), 1, t, theirs.data(), size, &pos_theirs, MPI_COMM_WORLD);
  bool same = rc == MPI_SUCCESS && pos_mine == pos_theirs && mine == theirs;
  std::printf("  packed %d B in %.1f us on the CPU; equal to MPI_Pack: %s\n", pos_mine,
              std::chrono::duration<double, std::micro>(t1 - t0).count(), same ? "yes" : "NO");
  if (ferry::gpu::available()) same = run_on_gpu(buf, *type, theirs) && same;
  std::printf("\n");
  ferry_type_free(t);
  MPI_Type_free(&t);
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  // The knob listings need no MPI (the README check runs them outside mpiexec).
  if (argc == 2 && std::string(argv[1]) == "--knobs-markdown") {
    std::fputs(ferry::detail::env::markdown_table().c_str(), stdout);
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--knobs") {
    std::fputs(ferry::detail::env::settings_text("").c_str(), stdout);
    return 0;
  }
  if (argc > 1) {
    std::fprintf(stderr, "usage: ferry-demo [--knobs | --knobs-markdown]\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  if (ferry::gpu::available())
    std::printf("Ferry demo: CPU engine and GPU engine\n\n");
  else
    std::printf("Ferry demo: CPU engine (no GPU %s)\n\n",
#ifdef FERRY_HAVE_CUDA
                "found");
#else
                "backend in this build");
#endif
  std::vector<Example> examples;

  {  // The -X halo face of a 256^3 grid, radius 3, 8-byte values, rows padded to 2560 B
     // (dissertation fig. 5.8-5.10).
    int sizes[3] = {262, 262, 2560}, subsizes[3] = {256, 256, 24}, starts[3] = {3, 3, 24};
    MPI_Datatype t;
    MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_BYTE, &t);
    examples.push_back({"halo face -X of a 256^3 grid (subarray of bytes)", t,
                        std::size_t{262} * 262 * 2560});
  }
  {  // Column 7 of a 1000 x 500 row-major matrix of doubles.
    MPI_Datatype t;
    MPI_Type_vector(1000, 1, 500, MPI_DOUBLE, &t);
    examples.push_back({"matrix column (vector of doubles)", t, std::size_t{1000} * 500 * 8});
  }
  {  // A particle list: irregular indices of 3-double records.
    MPI_Datatype rec, t;
    MPI_Type_contiguous(3, MPI_DOUBLE, &rec);
    int lens[5] = {2, 1, 4, 1, 3}, disps[5] = {0, 5, 9, 20, 31};
    MPI_Type_indexed(5, lens, disps, rec, &t);
    MPI_Type_free(&rec);
    examples.push_back({"indexed particle list (indexed of 3 doubles)", t, std::size_t{34} * 24});
  }
  {  // A struct of mixed fields, repeated as a vector: the general form stays factored.
    int lens[3] = {1, 2, 1};
    MPI_Aint disps[3] = {0, 8, 24};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, rec, t;
    MPI_Type_create_struct(3, lens, disps, types, &rec);
    MPI_Type_vector(100, 2, 3, rec, &t);
    MPI_Type_free(&rec);
    examples.push_back({"vector of structs {int; double[2]; char}", t, std::size_t{300} * 32});
  }
  bool ok = true;
  for (const Example& ex : examples) ok = run(ex) && ok;
  std::printf(ok ? "All packed bytes equal MPI_Pack's.\n" : "MISMATCH against MPI_Pack.\n");
  MPI_Finalize();
  return ok ? 0 : 1;
}
