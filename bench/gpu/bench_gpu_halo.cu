// bench_gpu_pack, part 2: the periodic self-exchange of the Astaroth case on one GPU (issue 15's
// local method, and its baseline (e) in the same run), and the summary table for
// docs/performance.md.
//
//   ferry_batch            one ferry::gpu::Batch of 208 copy moves (26 directions x 8 fields, each
//                          from the interior straight into the opposite halo), one launch
//   ferry_copy_async_208   the same moves as 208 ferry::gpu::copy_async calls
//   hand_fused             baseline (e): one thread per halo cell of every field and direction,
//                          one launch (the direction found by a search, the cell by divisions)
//   hand_208               baseline (e): one launch per field and direction, one thread per cell
//   floor                  77.3 MB read + 77.3 MB written at the measured device copy rate
#include <ferry/gpu.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_gpu_common.cuh"

namespace bench {

namespace {

struct Cube {  // 256^3 interior, radius 3, fp64 values in dense 262^3 arrays (Astaroth's layout)
  static constexpr int n = 256, r = 3, e = n + 2 * r, fields = 8;
  static constexpr i64 row = e, plane = row * e, points = plane * e;  // in values
};

// One direction: the halo box it fills (`to`, extents `ext`) and its periodic image (`from`).
struct Region {
  int to[3], from[3], ext[3];  // x, y, z
};

std::vector<Region> regions() {
  std::vector<Region> out;
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        if (!dx && !dy && !dz) continue;
        const int d[3] = {dx, dy, dz};
        Region g;
        for (int a = 0; a < 3; ++a) {
          g.ext[a] = d[a] ? Cube::r : Cube::n;
          g.to[a] = d[a] < 0 ? 0 : d[a] > 0 ? Cube::n + Cube::r : Cube::r;
          g.from[a] = d[a] < 0 ? Cube::n : Cube::r;
        }
        out.push_back(g);
      }
  return out;
}

struct RegionTable {
  long long first[27];  // first cell of each direction in a field's list of halo cells
  Region region[26];
};
__constant__ RegionTable kTable;

__device__ __forceinline__ i64 at(const int p[3], int x, int y, int z) {
  return (p[2] + z) * Cube::plane + (p[1] + y) * Cube::row + (p[0] + x);
}

__global__ void hand_fused(double* const* fields, long long cells) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= cells * Cube::fields) return;
  const int f = static_cast<int>(i / cells);
  long long c = i - f * cells;
  int lo = 0, hi = 25;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (kTable.first[mid] <= c) lo = mid;
    else hi = mid - 1;
  }
  const Region& g = kTable.region[lo];
  c -= kTable.first[lo];
  const int x = static_cast<int>(c % g.ext[0]);
  const long long t = c / g.ext[0];
  const int y = static_cast<int>(t % g.ext[1]), z = static_cast<int>(t / g.ext[1]);
  double* a = fields[f];
  a[at(g.to, x, y, z)] = a[at(g.from, x, y, z)];
}

__global__ void hand_box(double* a, Region g) {
  const long long n = static_cast<long long>(g.ext[0]) * g.ext[1] * g.ext[2];
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int x = static_cast<int>(i % g.ext[0]);
  const long long t = i / g.ext[0];
  const int y = static_cast<int>(t % g.ext[1]), z = static_cast<int>(t / g.ext[1]);
  a[at(g.to, x, y, z)] = a[at(g.from, x, y, z)];
}

__global__ void fill(double* a, i64 n, double base) {
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n; i += static_cast<i64>(gridDim.x) * blockDim.x)
    a[i] = base + static_cast<double>(i);
}

__global__ void count_differences(const double* a, const double* b, i64 n, unsigned long long* out) {
  unsigned long long k = 0;
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n; i += static_cast<i64>(gridDim.x) * blockDim.x)
    k += a[i] != b[i];
  if (k) atomicAdd(out, k);
}

ferry::Type box_type(const int start[3], const int ext[3]) {
  int sizes[3] = {Cube::e, Cube::e, Cube::e}, sub[3] = {ext[2], ext[1], ext[0]};
  int st[3] = {start[2], start[1], start[0]};
  MPI_Datatype t;
  MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_C, MPI_DOUBLE, &t);
  return commit(t);
}

}  // namespace

void run_halo_copy(Timer& tm) {
  const std::vector<Region> regs = regions();
  RegionTable table{};
  long long cells = 0;
  for (std::size_t k = 0; k < regs.size(); ++k) {
    table.first[k] = cells;
    table.region[k] = regs[k];
    cells += static_cast<long long>(regs[k].ext[0]) * regs[k].ext[1] * regs[k].ext[2];
  }
  table.first[26] = cells;
  CK(cudaMemcpyToSymbol(kTable, &table, sizeof table));
  const i64 bytes = cells * 8 * Cube::fields;  // 77.3 MB
  const std::size_t field_bytes = static_cast<std::size_t>(Cube::points) * 8;
  std::vector<double*> a(Cube::fields), b(Cube::fields);
  for (int f = 0; f < Cube::fields; ++f) {
    CK(cudaMalloc(&a[static_cast<std::size_t>(f)], field_bytes));
    CK(cudaMalloc(&b[static_cast<std::size_t>(f)], field_bytes));
    fill<<<1024, 256>>>(a[static_cast<std::size_t>(f)], Cube::points, 1e9 * f);
    fill<<<1024, 256>>>(b[static_cast<std::size_t>(f)], Cube::points, 1e9 * f);
  }
  double** dev_b;
  CK(cudaMalloc(&dev_b, sizeof(double*) * Cube::fields));
  CK(cudaMemcpy(dev_b, b.data(), sizeof(double*) * Cube::fields, cudaMemcpyHostToDevice));

  std::vector<ferry::Type> src, dst;
  for (const Region& g : regs) {
    src.push_back(box_type(g.from, g.ext));
    dst.push_back(box_type(g.to, g.ext));
  }
  std::vector<ferry::gpu::Move> moves;
  std::vector<void*> slots(a.begin(), a.end());
  for (int f = 0; f < Cube::fields; ++f)
    for (std::size_t k = 0; k < regs.size(); ++k)
      moves.push_back({{nullptr, 1, &src[k], f, 0}, {nullptr, 1, &dst[k], f, 0}});
  ferry::gpu::Batch batch(moves, slots);

  // Ferry's exchange on a, the fused hand kernel on b, from the same values: a must equal b.
  const unsigned grid = static_cast<unsigned>((cells * Cube::fields + 255) / 256);
  batch.launch();
  hand_fused<<<grid, 256>>>(dev_b, cells);
  unsigned long long* diff;
  CK(cudaMalloc(&diff, sizeof *diff));
  CK(cudaMemset(diff, 0, sizeof *diff));
  for (int f = 0; f < Cube::fields; ++f)
    count_differences<<<1024, 256>>>(a[static_cast<std::size_t>(f)], b[static_cast<std::size_t>(f)], Cube::points, diff);
  unsigned long long differ = 0;
  CK(cudaMemcpy(&differ, diff, sizeof differ, cudaMemcpyDeviceToHost));
  std::printf("Astaroth self-exchange: Ferry's batch and the hand kernel %s (%llu values differ)\n",
              differ ? "DIFFER" : "agree on every value of the 8 arrays", differ);

  const std::string name = "astaroth 1 GPU";
  record("halo", name, "ferry_batch", bytes, 0, tm.median([&] { batch.launch(); }, 50));
  record("halo", name, "ferry_batch_device_only", bytes, 0, tm.device_median([&] { batch.launch(); }, 50));
  record("halo", name, "hand_fused", bytes, 0, tm.median([&] { hand_fused<<<grid, 256>>>(dev_b, cells); }, 50));
  record("halo", name, "hand_fused_device_only", bytes, 0,
         tm.device_median([&] { hand_fused<<<grid, 256>>>(dev_b, cells); }, 50));
  record("halo", name, "hand_208", bytes, 0, tm.median([&] {
           for (double* f : b)
             for (const Region& g : regs) {
               const long long n = static_cast<long long>(g.ext[0]) * g.ext[1] * g.ext[2];
               hand_box<<<static_cast<unsigned>((n + 255) / 256), 256>>>(f, g);
             }
         }, 20));
  record("halo", name, "ferry_copy_async_208", bytes, 0, tm.median([&] {
           for (const ferry::gpu::Move& m : moves)
             ferry::gpu::copy_async(a[static_cast<std::size_t>(m.src.slot)], 1, *m.src.type,
                                    a[static_cast<std::size_t>(m.dst.slot)], 1, *m.dst.type);
         }, 20));
  record("halo", name, "floor", bytes, 0, 2.0 * static_cast<double>(bytes) / copy_rate);
  // The same moves by class, to see where the time goes: x faces (24 B pieces at both ends of
  // every row), y/z faces (2 KiB rows), edges and corners.
  const char* class_name[3] = {"copy x faces", "copy y/z faces", "copy edges+corners"};
  for (int k = 0; k < 3; ++k) {
    std::vector<ferry::gpu::Move> part;
    i64 part_bytes = 0;
    for (std::size_t i = 0; i < moves.size(); ++i) {
      const Region& g = regs[i % regs.size()];
      const int thin = (g.ext[0] == Cube::r) + (g.ext[1] == Cube::r) + (g.ext[2] == Cube::r);
      if ((thin > 1 ? 2 : g.ext[0] == Cube::r ? 0 : 1) != k) continue;
      part.push_back(moves[i]);
      part_bytes += moves[i].src.type->size();
    }
    ferry::gpu::Batch b_part(part, slots);
    record("halo", class_name[k], "ferry_batch_device_only", part_bytes, 0,
           tm.device_median([&] { b_part.launch(); }, 30));
    record("halo", class_name[k], "floor", part_bytes, 0, 2.0 * static_cast<double>(part_bytes) / copy_rate);
  }
  // Host cost of one Batch::launch (what start() of a halo exchange pays to submit it); few
  // enough launches that the queue never fills and makes the host wait for the GPU.
  CK(cudaDeviceSynchronize());
  const int reps = 100;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) batch.launch();
  auto t1 = std::chrono::steady_clock::now();
  CK(cudaDeviceSynchronize());
  record("overhead", name, "host_batch_launch_call", 0, 0,
         std::chrono::duration<double>(t1 - t0).count() / reps);
  for (int f = 0; f < Cube::fields; ++f) {
    CK(cudaFree(a[static_cast<std::size_t>(f)]));
    CK(cudaFree(b[static_cast<std::size_t>(f)]));
  }
  CK(cudaFree(dev_b));
  CK(cudaFree(diff));
}

namespace {

double get(const char* group, const std::string& name, const char* method) {
  for (const Result& r : results)
    if (r.group == group && r.name == name && r.method == method) return r.seconds;
  return std::nan("");
}

double us(double s) { return s * 1e6; }

}  // namespace

void print_summary(const char* device) {
  std::printf("\n--- for docs/performance.md (%s, device copy %.0f GB/s read + write) ---\n", device,
              copy_rate / 1e9);
  std::printf("| case | Ferry (us) | Ferry, GPU only (us) | floor or roofline (us) | Ferry at | "
              "baselines in the same run (us) |\n|---|---|---|---|---|---|\n");
  auto row = [](const std::string& what, double ev, double dev, double ref, const char* of,
                const std::string& base) {
    char e[32] = "-";
    if (!std::isnan(ev)) std::snprintf(e, sizeof e, "%.1f", us(ev));
    std::printf("| %s | %s | %.1f | %.1f | %.0f %% of %s | %s |\n", what.c_str(), e, us(dev), us(ref),
                100.0 * ref / (std::isnan(ev) ? dev : ev), of, base.c_str());
  };
  char base[200];
  const std::string a = "astaroth 1 GPU";
  std::snprintf(base, sizeof base, "hand fused %.1f (GPU only %.1f); hand, 208 launches %.1f; Ferry "
                "copy_async x 208 %.1f", us(get("halo", a, "hand_fused")),
                us(get("halo", a, "hand_fused_device_only")), us(get("halo", a, "hand_208")),
                us(get("halo", a, "ferry_copy_async_208")));
  row("Astaroth self-exchange (26 x 8 copy moves, 1 launch)", get("halo", a, "ferry_batch"),
      get("halo", a, "ferry_batch_device_only"), get("halo", a, "floor"), "the copy rate", base);
  for (const char* k : {"copy x faces", "copy y/z faces", "copy edges+corners"})
    row(std::string("self-exchange, ") + k + " alone", std::nan(""), get("halo", k, "ferry_batch_device_only"),
        get("halo", k, "floor"), "the copy rate", "");
  const std::string b = "208 jobs";
  std::snprintf(base, sizeof base, "Ferry, 208 launches %.1f; unpack batch %.1f",
                us(get("batch", b, "ferry_separate_launches")), us(get("batch", b, "ferry_batch_unpack")));
  row("pack batch, 26 directions x 8 quantities", get("batch", b, "ferry_batch"),
      get("batch", b, "ferry_batch_device_only"), get("batch", b, "roofline"), "the sector roofline", base);
  for (const char* k : {"x faces", "y/z faces", "edges+corners"})
    row(std::string("pack batch, ") + k + " alone", std::nan(""), get("batch", k, "ferry_batch_device_only"),
        get("batch", k, "roofline"), "the sector roofline", "");
  std::snprintf(base, sizeof base, "hand kernel %.1f; empty kernel %.1f (GPU only %.1f)",
                us(get("face", "-X", "hand_kernel")), us(get("face", "-X", "empty_kernel")),
                us(get("face", "-X", "empty_kernel_device_only")));
  row("-X face, pack_async (1.5 MiB, 24 B rows)", get("face", "-X", "ferry_pack"),
      get("face", "-X", "ferry_pack_device_only"), get("face", "-X", "roofline"), "the sector roofline", base);
  row("-X face, Batch of 1 job", get("face", "-X", "ferry_batch_1job"),
      get("face", "-X", "ferry_batch_1job_device_only"), get("face", "-X", "roofline"), "the sector roofline", "");
  row("-X face, copy_async interior to +X halo", get("face", "-X", "ferry_copy_to_halo"),
      get("face", "-X", "ferry_copy_to_halo_device_only"), get("face", "-X", "copy_roofline"),
      "the sector roofline", "");
  double moved = 0;
  for (const Result& r : results)
    if (r.group == "halo" && r.name == a && r.method == "floor") moved = 2.0 * static_cast<double>(r.bytes);
  std::printf("Astaroth self-exchange: %.1f MB read + written, %.0f GB/s (%.0f GB/s GPU only); floor %.1f us "
              "at the copy rate\n", moved / 1e6, moved / get("halo", a, "ferry_batch") / 1e9,
              moved / get("halo", a, "ferry_batch_device_only") / 1e9, us(get("halo", a, "floor")));
  std::printf("host cost per call: Batch::launch %.2f us, pack_async %.2f us, empty kernel launch %.2f us\n",
              us(get("overhead", a, "host_batch_launch_call")), us(get("overhead", "-X face", "host_pack_async_call")),
              us(get("overhead", "empty kernel", "host_launch_call")));
}

}  // namespace bench
