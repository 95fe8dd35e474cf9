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
#include <ferry/pack.hpp>
#include <ferry/type.hpp>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
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

// Seconds per call of a loop of n back-to-back calls: the figure earlier runs reported. Once the
// launch queue is full the loop runs at the GPU's rate of retiring launches, not the host's cost.
double loop_cost(const std::function<void()>& f, int n = 2000) {
  for (int i = 0; i < 100; ++i) f();
  CK(cudaDeviceSynchronize());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  CK(cudaDeviceSynchronize());
  return std::chrono::duration<double>(t1 - t0).count() / n;
}

// Host-side cost of one asynchronous pack call against what it is made of, all in bursts that
// never fill the launch queue (host_cost): an empty kernel's launch; a 1-job Batch's launch (the
// same kernel work, no per-call checks or plan lookup); the two pointer queries pack_async makes
// (memory_of of both buffers); those queries followed by the Batch launch (what pack_async cannot
// go below while it checks its pointers); copy_async from the interior to the +X halo. The loop
// of 2000 calls that earlier runs reported is kept beside them.
void run_overhead(char* packed) {
  char* grid;
  CK(cudaMalloc(&grid, Grid::bytes));
  ferry::Type ty = box(Grid::r, Grid::r, Grid::r, Grid::r, Grid::n, Grid::n);
  ferry::Type halo = box(Grid::n + Grid::r, Grid::r, Grid::r, Grid::r, Grid::n, Grid::n);
  ferry::gpu::Batch one(ferry::gpu::Direction::pack, {{grid, packed, 1, &ty}});
  const char* first = grid + ty.data_lb(1);
  volatile int sink = 0;
  auto pack = [&] { ferry::gpu::pack_async(grid, 1, ty, packed); };
  auto empty = [] { empty_kernel<<<1, 32>>>(); };
  auto queries = [&] {
    sink = sink + static_cast<int>(ferry::gpu::memory_of(first)) + static_cast<int>(ferry::gpu::memory_of(packed));
  };
  const char* face = "-X face";
  record("overhead", face, "host_pack_async_call", 0, 0, host_cost(pack));
  record("overhead", "empty kernel", "host_launch_call", 0, 0, host_cost(empty));
  record("overhead", face, "host_batch_1job_launch_call", 0, 0, host_cost([&] { one.launch(); }));
  record("overhead", face, "host_pointer_queries", 0, 0, host_cost(queries));
  record("overhead", face, "host_queries_then_batch_launch", 0, 0, host_cost([&] {
           queries();
           one.launch();
         }));
  record("overhead", face, "host_copy_async_call", 0, 0,
         host_cost([&] { ferry::gpu::copy_async(grid, 1, ty, grid, 1, halo); }));
  record("overhead", face, "host_pack_async_loop_2000", 0, 0, loop_cost(pack));
  record("overhead", "empty kernel", "host_launch_loop_2000", 0, 0, loop_cost(empty));
  const int n = 40000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) sink = sink + static_cast<int>(ferry::gpu::memory_of(grid + i));
  const auto t1 = std::chrono::steady_clock::now();
  record("overhead", "pointer", "host_memory_of", 0, 0, std::chrono::duration<double>(t1 - t0).count() / n);
  std::printf("host cost per call: pack_async %.2f us (loop of 2000: %.2f), empty launch %.2f us (loop: %.2f), "
              "Batch of 1 job %.2f us, its 2 pointer queries %.2f us\n",
              1e6 * get_result("overhead", face, "host_pack_async_call"),
              1e6 * get_result("overhead", face, "host_pack_async_loop_2000"),
              1e6 * get_result("overhead", "empty kernel", "host_launch_call"),
              1e6 * get_result("overhead", "empty kernel", "host_launch_loop_2000"),
              1e6 * get_result("overhead", face, "host_batch_1job_launch_call"),
              1e6 * get_result("overhead", face, "host_pointer_queries"));
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

__global__ void fill_bytes(std::uint64_t* p, i64 words, std::uint64_t salt) {
  for (i64 i = blockIdx.x * i64{blockDim.x} + threadIdx.x; i < words; i += i64{gridDim.x} * blockDim.x)
    p[i] = (static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ULL) ^ salt;
}

__global__ void count_diff_words(const std::uint64_t* a, const std::uint64_t* b, i64 words,
                                 unsigned long long* out) {
  unsigned long long k = 0;
  for (i64 i = blockIdx.x * i64{blockDim.x} + threadIdx.x; i < words; i += i64{gridDim.x} * blockDim.x)
    k += a[i] != b[i];
  if (k) atomicAdd(out, k);
}

// Words of `bytes` (a multiple of 8) at a and b that differ.
unsigned long long differing(const char* a, const char* b, i64 bytes) {
  unsigned long long* d;
  CK(cudaMalloc(&d, sizeof *d));
  CK(cudaMemset(d, 0, sizeof *d));
  count_diff_words<<<1024, 256>>>(reinterpret_cast<const std::uint64_t*>(a),
                                  reinterpret_cast<const std::uint64_t*>(b), bytes / 8, d);
  unsigned long long n = 0;
  CK(cudaMemcpy(&n, d, sizeof n, cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  return n;
}

void run_batch(Timer& tm) {
  const int quantities = 8;
  std::vector<char*> grids(quantities), saved(quantities);
  for (int q = 0; q < quantities; ++q) {
    CK(cudaMalloc(&grids[static_cast<std::size_t>(q)], Grid::bytes));
    CK(cudaMalloc(&saved[static_cast<std::size_t>(q)], Grid::bytes));
  }
  auto fill_grids = [&] {
    for (int q = 0; q < quantities; ++q)
      fill_bytes<<<1024, 256>>>(reinterpret_cast<std::uint64_t*>(grids[static_cast<std::size_t>(q)]), Grid::bytes / 8, q);
  };
  fill_grids();
  std::vector<Box> boxes = halo_boxes();
  std::vector<ferry::Type> types;
  for (const Box& b : boxes) types.push_back(box(b.x0, b.y0, b.z0, b.ex, b.ey, b.ez));
  i64 total = 0;
  for (const ferry::Type& t : types) total += t.size() * quantities;
  const i64 packed_bytes = total + 16 * static_cast<i64>(types.size()) * quantities;
  char *packed, *packed_ref;
  CK(cudaMalloc(&packed, packed_bytes));
  CK(cudaMalloc(&packed_ref, packed_bytes));
  // Jobs by class too, to see where the time goes: x faces (24 B rows), y/z faces (2 KiB rows),
  // edges and corners (small). Beside them, the same packs and unpacks with each quantity's -X and
  // +X faces as one interleaved pair (ferry::interleave), the two packed regions an interleaved
  // layout of the packed allocation (slot 0).
  std::vector<ferry::gpu::Job> jobs, by_class[3];
  std::vector<ferry::gpu::Move> pack_pairs, unpack_pairs, x_pairs, x_pairs_unpack;
  std::deque<ferry::Type> pair_types;
  SectorCount sc, class_sc[3];
  i64 class_bytes[3] = {0, 0, 0};
  i64 at = 0;
  for (int q = 0; q < quantities; ++q) {
    char* g = grids[static_cast<std::size_t>(q)];
    const ferry::Type* face[2] = {nullptr, nullptr};  // -X, +X
    i64 face_at[2] = {0, 0};
    for (std::size_t i = 0; i < types.size(); ++i) {
      const Box& b = boxes[i];
      const ferry::gpu::Job job{g, packed + at, 1, &types[i]};
      jobs.push_back(job);
      sectors_of_box(sc, b.x0, b.y0, b.z0, b.ex, b.ey, b.ez);
      const int thin = (b.ex == Grid::r) + (b.ey == Grid::r) + (b.ez == Grid::r);
      const int k = thin > 1 ? 2 : b.ex == Grid::r ? 0 : 1;
      by_class[k].push_back(job);
      sectors_of_box(class_sc[k], b.x0, b.y0, b.z0, b.ex, b.ey, b.ez);
      class_bytes[k] += types[i].size();
      if (k == 0) {
        face[b.x0 == Grid::r ? 0 : 1] = &types[i];
        face_at[b.x0 == Grid::r ? 0 : 1] = at;
      } else {
        pack_pairs.push_back({{g, 1, &types[i]}, {nullptr, 0, nullptr, 0, at}});
        unpack_pairs.push_back({{nullptr, 0, nullptr, 0, at}, {g, 1, &types[i]}});
      }
      at += (types[i].size() + 15) / 16 * 16;
    }
    const i64 n = face[0]->size();
    const ferry::Type& faces = pair_types.emplace_back(ferry::interleave(*face[0], *face[1]));
    const ferry::Type& regions = pair_types.emplace_back(ferry::interleave(
        ferry::Type(ferry::make_dense(face_at[0], n), 0, n), ferry::Type(ferry::make_dense(face_at[1], n), 0, n), 24));
    const ferry::gpu::Move pk{{g, 1, &faces}, {nullptr, 1, &regions, 0, 0}};
    const ferry::gpu::Move up{{nullptr, 1, &regions, 0, 0}, {g, 1, &faces}};
    pack_pairs.push_back(pk);
    unpack_pairs.push_back(up);
    x_pairs.push_back(pk);
    x_pairs_unpack.push_back(up);
  }
  const std::vector<void*> slots{packed};
  ferry::gpu::Batch batch(ferry::gpu::Direction::pack, jobs);
  ferry::gpu::Batch unbatch(ferry::gpu::Direction::unpack, jobs);
  ferry::gpu::Batch batch_pairs(pack_pairs, slots), unbatch_pairs(unpack_pairs, slots);

  // The pairs must pack the same bytes, and unpack the same grids, as the jobs one by one.
  batch.launch();
  CK(cudaMemcpy(packed_ref, packed, packed_bytes, cudaMemcpyDeviceToDevice));
  CK(cudaMemset(packed, 0, packed_bytes));
  batch_pairs.launch();
  const unsigned long long pack_diff = differing(packed, packed_ref, packed_bytes);
  for (auto& g : grids) CK(cudaMemset(g, 0, Grid::bytes));
  unbatch.launch();
  for (int q = 0; q < quantities; ++q)
    CK(cudaMemcpy(saved[static_cast<std::size_t>(q)], grids[static_cast<std::size_t>(q)], Grid::bytes, cudaMemcpyDeviceToDevice));
  for (auto& g : grids) CK(cudaMemset(g, 0, Grid::bytes));
  unbatch_pairs.launch();
  unsigned long long unpack_diff = 0;
  for (int q = 0; q < quantities; ++q)
    unpack_diff += differing(grids[static_cast<std::size_t>(q)], saved[static_cast<std::size_t>(q)], Grid::bytes);
  std::printf("pack batch with x pairs: %s (%llu words differ); unpack: %s (%llu words differ)\n",
              pack_diff ? "DIFFERS" : "the same packed bytes", pack_diff,
              unpack_diff ? "DIFFERS" : "the same grids", unpack_diff);
  fill_grids();

  const std::string name = std::to_string(jobs.size()) + " jobs";
  record("batch", name, "ferry_batch", total, 0, tm.median([&] { batch.launch(); }, 50));
  record("batch", name, "ferry_batch_device_only", total, 0,
         tm.device_median([&] { batch.launch(); }, 50));
  record("batch", name, "ferry_separate_launches", total, 0, tm.median([&] {
           for (const auto& j : jobs) ferry::gpu::pack_async(j.origin, 1, *j.type, j.packed);
         }, 20));
  record("batch", name, "ferry_batch_unpack", total, 0, tm.median([&] { unbatch.launch(); }, 50));
  record("batch", name, "ferry_batch_unpack_device_only", total, 0,
         tm.device_median([&] { unbatch.launch(); }, 50));
  record("batch", name, "ferry_batch_x_pairs", total, 0, tm.median([&] { batch_pairs.launch(); }, 50));
  record("batch", name, "ferry_batch_x_pairs_device_only", total, 0,
         tm.device_median([&] { batch_pairs.launch(); }, 50));
  record("batch", name, "ferry_batch_unpack_x_pairs", total, 0,
         tm.median([&] { unbatch_pairs.launch(); }, 50));
  record("batch", name, "ferry_batch_unpack_x_pairs_device_only", total, 0,
         tm.device_median([&] { unbatch_pairs.launch(); }, 50));
  record("batch", name, "roofline", total, 0, roofline(sc.sectors, total));
  const char* class_name[3] = {"x faces", "y/z faces", "edges+corners"};
  for (int k = 0; k < 3; ++k) {
    ferry::gpu::Batch part(ferry::gpu::Direction::pack, by_class[k]);
    ferry::gpu::Batch unpart(ferry::gpu::Direction::unpack, by_class[k]);
    record("batch", class_name[k], "ferry_batch_device_only", class_bytes[k], 0,
           tm.device_median([&] { part.launch(); }, 50));
    record("batch", class_name[k], "ferry_batch_unpack_device_only", class_bytes[k], 0,
           tm.device_median([&] { unpart.launch(); }, 50));
    record("batch", class_name[k], "roofline", class_bytes[k], 0,
           roofline(class_sc[k].sectors, class_bytes[k]));
  }
  ferry::gpu::Batch part(x_pairs, slots), unpart(x_pairs_unpack, slots);
  record("batch", "x faces", "ferry_batch_x_pairs_device_only", class_bytes[0], 0,
         tm.device_median([&] { part.launch(); }, 50));
  record("batch", "x faces", "ferry_batch_unpack_x_pairs_device_only", class_bytes[0], 0,
         tm.device_median([&] { unpart.launch(); }, 50));
  for (int q = 0; q < quantities; ++q) {
    CK(cudaFree(grids[static_cast<std::size_t>(q)]));
    CK(cudaFree(saved[static_cast<std::size_t>(q)]));
  }
  CK(cudaFree(packed));
  CK(cudaFree(packed_ref));
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
