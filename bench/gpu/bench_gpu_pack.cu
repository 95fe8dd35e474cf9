// bench_gpu_pack: the GPU pack engine against everything a user could pick instead, every case in
// one run on one GPU, timed with CUDA events (warm-up, then the median of many repetitions).
//
//   ferry_pack / ferry_unpack   ferry::gpu::pack_async / unpack_async
//   hand_kernel                 what an application writes: one thread per element, 2-D/3-D grid
//   memcpy2d / memcpy3d         cudaMemcpy2DAsync / cudaMemcpy3DAsync (strided cases)
//   memcpy_per_block            one cudaMemcpyAsync per contiguous block, what CUDA-aware MPIs do
//                               for datatypes (only where there are at most 8192 blocks)
//   roofline                    (32 B x sectors read + bytes written) / measured D2D copy rate
//
// Cases: 2-D objects (packed size 64 B .. 64 MiB x blocks 1 B .. 4 KiB; pitch 512 B, or twice the
// block for blocks of 512 B and more), the -X/-Y/-Z faces of a 256^3 grid (radius 3, 8-byte values,
// 512-byte row pitch as in the dissertation), the 26 faces x 8 quantities of a halo exchange as one
// batch (and its x faces, y/z faces, edges and corners apart), the Astaroth case's periodic
// self-exchange as one batch of copies against its hand-written baselines (bench_gpu_halo.cu), and
// an irregular indexed layout. Methods ending in _device_only are timed with the host's cost of
// issuing them hidden (Timer::device_median): the GPU's own time.
// Flags: --quick (no 2-D sweep), --halo (only faces, batches and the self-exchange: ~1 minute),
// --json FILE. Writes JSON, prints a table and, last, a summary table for docs/performance.md.
#include <cuda_runtime.h>
#include <ferry/gpu.hpp>
#include <ferry/type.hpp>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_gpu_common.cuh"
#include "cuda_check.hpp"

namespace bench {

__global__ void spin_kernel(long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < static_cast<unsigned long long>(ns));
}

void spin(long long ns) { spin_kernel<<<1, 1>>>(ns); }

}  // namespace bench

namespace {

using namespace bench;


template <class W>
__global__ void hand2d(const char* __restrict__ src, char* __restrict__ dst, i64 words, i64 total,
                       i64 pitch) {
  // What an application writes: one thread per word, row and column from the flat index.
  for (i64 i = threadIdx.x + i64{blockIdx.x} * blockDim.x; i < total; i += i64{gridDim.x} * blockDim.x) {
    i64 row = i / words, col = i - row * words;
    reinterpret_cast<W*>(dst)[i] = reinterpret_cast<const W*>(src + row * pitch)[col];
  }
}

__global__ void empty_kernel() {}

// The floor under any launch: host cost of launching an empty kernel.
void hand_launch_cost(char*) {
  for (int i = 0; i < 100; ++i) empty_kernel<<<1, 32>>>();
  CK(cudaDeviceSynchronize());
  const int n = 2000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) empty_kernel<<<1, 32>>>();
  auto t1 = std::chrono::steady_clock::now();
  CK(cudaDeviceSynchronize());
  double s = std::chrono::duration<double>(t1 - t0).count() / n;
  record("overhead", "empty kernel", "host_launch_call", 0, 0, s);
  std::printf("host cost: empty kernel launch %.2f us per call\n", s * 1e6);
}

__global__ void hand3d(const double* __restrict__ src, double* __restrict__ dst, int ex, int ey,
                       int ez, i64 sx, i64 sy) {
  // What an application writes: one thread per 8-byte value of an ex*ey*ez box (row and plane
  // strides sx, sy values), x, y and z from the flat index.
  const i64 n = i64{ex} * ey * ez;
  for (i64 i = threadIdx.x + i64{blockIdx.x} * blockDim.x; i < n; i += i64{gridDim.x} * blockDim.x) {
    const int x = static_cast<int>(i % ex);
    const i64 yz = i / ex;
    const int y = static_cast<int>(yz % ey), z = static_cast<int>(yz / ey);
    dst[i] = src[z * sy + y * sx + x];
  }
}

bool large_only = false;
bool tuning = false;  // launch-shape sweeps: 64 MiB 2-D cases and the faces only
int l2_fetch = 0;

void run_2d(Timer& tm, char* mem, char* packed, char* host_pinned) {
  const i64 all_sizes[] = {64, 1 << 10, 16 << 10, 256 << 10, 4 << 20, 16 << 20, 64 << 20};
  std::vector<i64> sizes(std::begin(all_sizes), std::end(all_sizes));
  if (large_only) sizes = {16 << 20, 64 << 20};
  if (tuning) sizes = {64 << 20};
  const i64 blocks[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
  for (i64 size : sizes)
    for (i64 block : blocks) {
      if (block > size) continue;
      if (tuning && block != 8 && block != 64 && block != 256 && block != 4096) continue;
      const i64 pitch = block < 512 ? 512 : 2 * block;
      const i64 n = size / block;
      MPI_Datatype t;
      MPI_Type_vector(static_cast<int>(n), static_cast<int>(block), static_cast<int>(pitch), MPI_BYTE, &t);
      ferry::Type ty = commit(t);
      const std::string name = std::to_string(size) + "B/" + std::to_string(block) + "B";
      auto pk = [&] { ferry::gpu::pack_async(mem, 1, ty, packed); };
      auto up = [&] { ferry::gpu::unpack_async(packed, mem, 1, ty); };
      record("2d", name, "ferry_pack", size, block, tm.median(pk));
      record("2d", name, "ferry_unpack", size, block, tm.median(up));
      if (large_only || tuning) continue;
      record("2d", name, "ferry_pack_mapped", size, block,
             tm.median([&] { ferry::gpu::pack_async(mem, 1, ty, host_pinned); }));
      const i64 w = block % 16 == 0 ? 16 : block % 8 == 0 ? 8 : block % 4 == 0 ? 4 : block % 2 == 0 ? 2 : 1;
      const i64 words = block / w, total = size / w;
      const auto grid = static_cast<unsigned>(std::min<i64>((total + 255) / 256, 1 << 20));
      auto hand = [&] {
        switch (w) {
          case 16: hand2d<uint4><<<grid, 256>>>(mem, packed, words, total, pitch); break;
          case 8: hand2d<std::uint64_t><<<grid, 256>>>(mem, packed, words, total, pitch); break;
          case 4: hand2d<std::uint32_t><<<grid, 256>>>(mem, packed, words, total, pitch); break;
          case 2: hand2d<std::uint16_t><<<grid, 256>>>(mem, packed, words, total, pitch); break;
          default: hand2d<std::uint8_t><<<grid, 256>>>(mem, packed, words, total, pitch);
        }
      };
      record("2d", name, "hand_kernel", size, block, tm.median(hand));
      record("2d", name, "memcpy2d", size, block, tm.median([&] {
               CK(cudaMemcpy2DAsync(packed, block, mem, pitch, block, n, cudaMemcpyDeviceToDevice));
             }));
      if (n <= 8192)
        record("2d", name, "memcpy_per_block", size, block, tm.median([&] {
                 for (i64 i = 0; i < n; ++i)
                   CK(cudaMemcpyAsync(packed + i * block, mem + i * pitch, block, cudaMemcpyDeviceToDevice));
               }, 5, 1));
      SectorCount sc;
      for (i64 i = 0; i < std::min<i64>(n, 1); ++i) sc.add(0, block);
      sc.sectors *= n;  // every block starts 512-aligned: the same count each
      record("2d", name, "roofline", size, block, roofline(sc.sectors, size));
    }
}

struct Grid {
  // 256^3 interior, radius 3, 8-byte values; rows padded to a 512-byte pitch (2560 B).
  static constexpr int n = 256, r = 3, e = n + 2 * r;
  static constexpr i64 row = 2560, plane = row * e, bytes = plane * e;
};

// A box of the grid: extents and starts in points (x fastest), as a subarray of bytes.
ferry::Type box(int x0, int y0, int z0, int ex, int ey, int ez) {
  int sizes[3] = {Grid::e, Grid::e, static_cast<int>(Grid::row)};
  int sub[3] = {ez, ey, ex * 8};
  int st[3] = {z0, y0, x0 * 8};
  MPI_Datatype t;
  MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_C, MPI_BYTE, &t);
  return commit(t);
}

void sectors_of_box(SectorCount& sc, int x0, int y0, int z0, int ex, int ey, int ez) {
  for (int z = 0; z < ez; ++z)
    for (int y = 0; y < ey; ++y)
      sc.add((z0 + z) * Grid::plane + (y0 + y) * Grid::row + x0 * 8, ex * 8);
}

// Host-side cost of one asynchronous pack call (checks, plan lookup, kernel launch), and of the
// pointer classification inside it.
void run_overhead(char* packed) {
  char* grid;
  CK(cudaMalloc(&grid, Grid::bytes));
  ferry::Type ty = box(Grid::r, Grid::r, Grid::r, Grid::r, Grid::n, Grid::n);
  for (int i = 0; i < 100; ++i) ferry::gpu::pack_async(grid, 1, ty, packed);
  CK(cudaDeviceSynchronize());
  const int n = 2000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) ferry::gpu::pack_async(grid, 1, ty, packed);
  auto t1 = std::chrono::steady_clock::now();
  CK(cudaDeviceSynchronize());
  double call = std::chrono::duration<double>(t1 - t0).count() / n;
  t0 = std::chrono::steady_clock::now();
  volatile int sink = 0;
  for (int i = 0; i < 20 * n; ++i) sink = sink + static_cast<int>(ferry::gpu::memory_of(grid + i));
  t1 = std::chrono::steady_clock::now();
  double classify = std::chrono::duration<double>(t1 - t0).count() / (20 * n);
  hand_launch_cost(packed);
  record("overhead", "-X face", "host_pack_async_call", 0, 0, call);
  record("overhead", "pointer", "host_memory_of", 0, 0, classify);
  std::printf("host cost: pack_async %.2f us per call, memory_of %.3f us per call\n", call * 1e6,
              classify * 1e6);
  CK(cudaFree(grid));
}

void run_faces(Timer& tm, char* packed) {
  char* grid;
  CK(cudaMalloc(&grid, Grid::bytes));
  CK(cudaMemset(grid, 7, Grid::bytes));
  const int n = Grid::n, r = Grid::r;
  struct Face {
    const char* name;
    int ex, ey, ez;
  } faces[] = {{"-X", r, n, n}, {"-Y", n, r, n}, {"-Z", n, n, r}};
  for (const Face& f : faces) {
    ferry::Type ty = box(r, r, r, f.ex, f.ey, f.ez);
    const i64 bytes = ty.size();
    record("face", f.name, "ferry_pack", bytes, f.ex * 8,
           tm.median([&] { ferry::gpu::pack_async(grid, 1, ty, packed); }, 100));
    record("face", f.name, "ferry_unpack", bytes, f.ex * 8,
           tm.median([&] { ferry::gpu::unpack_async(packed, grid, 1, ty); }, 100));
    const double* src = reinterpret_cast<const double*>(grid + r * Grid::plane + r * Grid::row + r * 8);
    const auto g = static_cast<unsigned>((i64{f.ex} * f.ey * f.ez + 255) / 256);
    record("face", f.name, "hand_kernel", bytes, f.ex * 8, tm.median([&] {
             hand3d<<<g, 256>>>(src, reinterpret_cast<double*>(packed), f.ex, f.ey, f.ez,
                                Grid::row / 8, Grid::plane / 8);
           }, 100));
    cudaMemcpy3DParms p{};
    p.srcPtr = make_cudaPitchedPtr(grid, Grid::row, Grid::row, Grid::e);
    p.srcPos = make_cudaPos(r * 8, r, r);
    p.dstPtr = make_cudaPitchedPtr(packed, f.ex * 8, f.ex * 8, f.ey);
    p.extent = make_cudaExtent(f.ex * 8, f.ey, f.ez);
    p.kind = cudaMemcpyDeviceToDevice;
    record("face", f.name, "memcpy3d", bytes, f.ex * 8,
           tm.median([&] { CK(cudaMemcpy3DAsync(&p)); }, 100));
    SectorCount sc;
    sectors_of_box(sc, r, r, r, f.ex, f.ey, f.ez);
    record("face", f.name, "roofline", bytes, f.ex * 8, roofline(sc.sectors, bytes));
    if (f.name[1] != 'X') continue;
    // Where the -X face's time goes: the GPU alone (host cost hidden), one launch of a 1-job
    // Batch (no per-call checks), and the one-kernel copy of the interior slab into the +X halo
    // of the same grid (the self-send of a periodic code), against an empty kernel's launch.
    record("face", f.name, "ferry_pack_device_only", bytes, f.ex * 8,
           tm.device_median([&] { ferry::gpu::pack_async(grid, 1, ty, packed); }, 100));
    ferry::gpu::Batch one(ferry::gpu::Direction::pack, {{grid, packed, 1, &ty}});
    record("face", f.name, "ferry_batch_1job", bytes, f.ex * 8, tm.median([&] { one.launch(); }, 100));
    record("face", f.name, "ferry_batch_1job_device_only", bytes, f.ex * 8,
           tm.device_median([&] { one.launch(); }, 100));
    ferry::Type halo = box(n + r, r, r, f.ex, f.ey, f.ez);
    record("face", f.name, "ferry_copy_to_halo", bytes, f.ex * 8,
           tm.median([&] { ferry::gpu::copy_async(grid, 1, ty, grid, 1, halo); }, 100));
    record("face", f.name, "ferry_copy_to_halo_device_only", bytes, f.ex * 8,
           tm.device_median([&] { ferry::gpu::copy_async(grid, 1, ty, grid, 1, halo); }, 100));
    SectorCount hc;
    sectors_of_box(hc, n + r, r, r, f.ex, f.ey, f.ez);  // written sectors of the halo
    record("face", f.name, "copy_roofline", bytes, f.ex * 8,
           32.0 * (sc.sectors + hc.sectors) / copy_rate);
    record("face", f.name, "empty_kernel", 0, 0, tm.median([&] { empty_kernel<<<1, 32>>>(); }, 100));
    record("face", f.name, "empty_kernel_device_only", 0, 0,
           tm.device_median([&] { empty_kernel<<<1, 32>>>(); }, 100));
  }
  CK(cudaFree(grid));
}

// The 26 neighbours' send boxes of one quantity: for each direction, 3 points thick where the
// offset is non-zero, the whole interior (256) where it is zero.
struct Box {
  int x0, y0, z0, ex, ey, ez;
};
std::vector<Box> halo_boxes() {
  std::vector<Box> out;
  const int n = Grid::n, r = Grid::r;
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        if (!dx && !dy && !dz) continue;
        auto span = [&](int d, int& s, int& e) {
          s = d > 0 ? n : r;  // the interior's first 3 or last 3 points, or all of it
          e = d ? r : n;
        };
        Box b;
        span(dx, b.x0, b.ex);
        span(dy, b.y0, b.ey);
        span(dz, b.z0, b.ez);
        out.push_back(b);
      }
  return out;
}

void run_batch(Timer& tm) {
  const int quantities = 8;
  std::vector<char*> grids(quantities);
  for (auto& g : grids) {
    CK(cudaMalloc(&g, Grid::bytes));
    CK(cudaMemset(g, 3, Grid::bytes));
  }
  std::vector<Box> boxes = halo_boxes();
  std::vector<ferry::Type> types;
  for (const Box& b : boxes) types.push_back(box(b.x0, b.y0, b.z0, b.ex, b.ey, b.ez));
  i64 total = 0;
  for (const ferry::Type& t : types) total += t.size() * quantities;
  char* packed;
  CK(cudaMalloc(&packed, total + 16 * types.size() * quantities));
  // Jobs by class too, to see where the time goes: x faces (24 B rows), y/z faces (2 KiB rows),
  // edges and corners (small).
  std::vector<ferry::gpu::Job> jobs, by_class[3];
  SectorCount sc, class_sc[3];
  i64 class_bytes[3] = {0, 0, 0};
  i64 at = 0;
  for (int q = 0; q < quantities; ++q)
    for (std::size_t i = 0; i < types.size(); ++i) {
      const Box& b = boxes[i];
      const ferry::gpu::Job job{grids[static_cast<std::size_t>(q)], packed + at, 1, &types[i]};
      jobs.push_back(job);
      at += (types[i].size() + 15) / 16 * 16;
      sectors_of_box(sc, b.x0, b.y0, b.z0, b.ex, b.ey, b.ez);
      const int thin = (b.ex == Grid::r) + (b.ey == Grid::r) + (b.ez == Grid::r);
      const int k = thin > 1 ? 2 : b.ex == Grid::r ? 0 : 1;
      by_class[k].push_back(job);
      sectors_of_box(class_sc[k], b.x0, b.y0, b.z0, b.ex, b.ey, b.ez);
      class_bytes[k] += types[i].size();
    }
  ferry::gpu::Batch batch(ferry::gpu::Direction::pack, jobs);
  const std::string name = std::to_string(jobs.size()) + " jobs";
  record("batch", name, "ferry_batch", total, 0, tm.median([&] { batch.launch(); }, 50));
  record("batch", name, "ferry_batch_device_only", total, 0,
         tm.device_median([&] { batch.launch(); }, 50));
  record("batch", name, "ferry_separate_launches", total, 0, tm.median([&] {
           for (const auto& j : jobs) ferry::gpu::pack_async(j.origin, 1, *j.type, j.packed);
         }, 20));
  ferry::gpu::Batch unbatch(ferry::gpu::Direction::unpack, jobs);
  record("batch", name, "ferry_batch_unpack", total, 0, tm.median([&] { unbatch.launch(); }, 50));
  record("batch", name, "roofline", total, 0, roofline(sc.sectors, total));
  const char* class_name[3] = {"x faces", "y/z faces", "edges+corners"};
  for (int k = 0; k < 3; ++k) {
    ferry::gpu::Batch part(ferry::gpu::Direction::pack, by_class[k]);
    record("batch", class_name[k], "ferry_batch_device_only", class_bytes[k], 0,
           tm.device_median([&] { part.launch(); }, 50));
    record("batch", class_name[k], "roofline", class_bytes[k], 0,
           roofline(class_sc[k].sectors, class_bytes[k]));
  }
  for (auto& g : grids) CK(cudaFree(g));
  CK(cudaFree(packed));
}

void run_indexed(Timer& tm, char* mem, char* packed) {
  // 200k blocks of 1..64 doubles with gaps of 0..64 doubles: an irregular particle list.
  std::mt19937 rng(1);
  const int n = 200000;
  std::vector<int> lens(n), disps(n);
  int at = 0;
  SectorCount sc;
  i64 bytes = 0;
  for (int i = 0; i < n; ++i) {
    lens[static_cast<std::size_t>(i)] = 1 + static_cast<int>(rng() % 64);
    at += 1 + static_cast<int>(rng() % 64);
    disps[static_cast<std::size_t>(i)] = at;
    sc.add(i64{at} * 8, i64{lens[static_cast<std::size_t>(i)]} * 8);
    bytes += i64{lens[static_cast<std::size_t>(i)]} * 8;
    at += lens[static_cast<std::size_t>(i)];
  }
  MPI_Datatype t;
  MPI_Type_indexed(n, lens.data(), disps.data(), MPI_DOUBLE, &t);
  ferry::Type ty = commit(t);
  record("indexed", "200k blocks", "ferry_pack", bytes, 0,
         tm.median([&] { ferry::gpu::pack_async(mem, 1, ty, packed); }));
  record("indexed", "200k blocks", "ferry_unpack", bytes, 0,
         tm.median([&] { ferry::gpu::unpack_async(packed, mem, 1, ty); }));
  record("indexed", "200k blocks", "roofline", bytes, 0, roofline(sc.sectors, bytes));
}

void write_json(const char* path) {
  FILE* f = std::fopen(path, "w");
  if (!f) return;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"copy_rate_Bps\": %.6e,\n  \"results\": [\n", prop.name, copy_rate);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(f, "    {\"group\": \"%s\", \"name\": \"%s\", \"method\": \"%s\", \"bytes\": %lld, "
                    "\"block\": %lld, \"seconds\": %.6e}%s\n",
                 r.group.c_str(), r.name.c_str(), r.method.c_str(), static_cast<long long>(r.bytes),
                 static_cast<long long>(r.block), r.seconds, i + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* json = "bench_gpu_pack.json";
  bool quick = false, halo = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--halo")) halo = quick = true;
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--large-only")) large_only = true;
    if (!std::strcmp(argv[i], "--tuning")) tuning = true;
    if (!std::strcmp(argv[i], "--l2-fetch") && i + 1 < argc) l2_fetch = std::atoi(argv[++i]);
  }
  if (!ferry::gpu::available()) {
    std::printf("no GPU: nothing to measure\n");
    MPI_Finalize();
    return 0;
  }
  if (l2_fetch > 0) {  // an experiment: the L2's fetch granularity for sparse sector reads
    CK(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, static_cast<std::size_t>(l2_fetch)));
    std::size_t v = 0;
    CK(cudaDeviceGetLimit(&v, cudaLimitMaxL2FetchGranularity));
    std::printf("L2 fetch granularity set to %zu B\n", v);
  }
  Timer tm;
  measure_copy_rate(tm);
  const std::size_t mem_bytes = std::size_t{64} << 30;  // 64 MiB of 1-byte blocks at 512 B pitch: 32 GiB
  char *mem = nullptr, *packed = nullptr, *pinned = nullptr;
  CK(cudaMalloc(&mem, quick ? std::size_t{1} << 30 : mem_bytes / 2 + (64 << 20)));
  CK(cudaMalloc(&packed, 256 << 20));
  CK(cudaHostAlloc(&pinned, 256 << 20, cudaHostAllocMapped));
  CK(cudaMemset(packed, 0, 256 << 20));
  if (!quick) run_2d(tm, mem, packed, pinned);
  if (tuning) run_faces(tm, packed);
  if (!large_only && !tuning) {
    run_overhead(packed);
    run_faces(tm, packed);
    run_batch(tm);
    run_halo_copy(tm);
    if (!halo) run_indexed(tm, mem, packed);
  }
  write_json(json);
  std::printf("%-8s %-16s %-32s %12s %12s\n", "group", "case", "method", "time_us", "GB/s");
  for (const Result& r : results)
    std::printf("%-8s %-16s %-32s %12.2f %12.1f\n", r.group.c_str(), r.name.c_str(), r.method.c_str(),
                r.seconds * 1e6, r.bytes ? r.bytes / r.seconds / 1e9 : 0.0);
  if (!large_only && !tuning) {
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    print_summary(prop.name);
  }
  CK(cudaFree(mem));
  CK(cudaFree(packed));
  CK(cudaFreeHost(pinned));
  MPI_Finalize();
  return 0;
}
