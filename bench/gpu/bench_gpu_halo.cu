// bench_gpu_pack, part 2: the periodic self-exchange of the Astaroth case on one GPU (issue 15's
// local method, and its baseline (e) in the same run), and the summary table for
// docs/performance.md. Every description is checked against the hand kernel, value by value.
//
//   ferry_batch            one ferry::gpu::Batch of copy moves from the interior straight into the
//                          opposite halo, each +X direction and its -X mirror (the x face, 4 edges,
//                          4 corners) as one interleaved pair (ferry::interleave): 17 moves per
//                          field, 136 in all, one launch
//   ferry_batch_per_direction  the same with every direction alone: 208 moves, one launch
//   ferry_batch_body16     the pairs, and the directions without an x offset (2 KiB rows starting
//                          8 B into a 16 B granule) as a 16-aligned body moved in 16 B words plus
//                          their two 8 B fringes as one pair
//   ferry_3_phases         three launches: the x face pair, then whole halo rows in y (6 KiB runs),
//                          then whole halo planes in z (1.6 MiB runs): edges and corners implicit
//   ferry_copy_async_208   the 208 moves as 208 ferry::gpu::copy_async calls
//   hand_fused             baseline (e): one thread per halo cell of every field and direction,
//                          one launch (the direction found by a search, the cell by divisions)
//   hand_208               baseline (e): one launch per field and direction, one thread per cell
//   floor                  77.3 MB read + 77.3 MB written at the measured device copy rate
#include <ferry/gpu.hpp>
#include <ferry/pack.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
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

// 0: x faces (24 B at both ends of a row), 1: y/z faces (2 KiB rows), 2: edges and corners.
int class_of(const Region& g) {
  const int thin = (g.ext[0] == Cube::r) + (g.ext[1] == Cube::r) + (g.ext[2] == Cube::r);
  return thin > 1 ? 2 : g.ext[0] == Cube::r ? 0 : 1;
}

// One way to describe the exchange as copy moves (fields in shared slots), each move's class
// beside it. Types live in `store` (a deque: moves point at them).
struct Exchange {
  std::vector<ferry::gpu::Move> moves;
  std::vector<int> cls;
  void add(const ferry::Type& s, const ferry::Type& d, int c) {
    for (int f = 0; f < Cube::fields; ++f) {
      moves.push_back({{nullptr, 1, &s, f, 0}, {nullptr, 1, &d, f, 0}});
      cls.push_back(c);
    }
  }
};

struct Describer {
  std::deque<ferry::Type> store;
  const ferry::Type& keep(ferry::Type t) { return store.emplace_back(std::move(t)); }
  const ferry::Type& box(const int start[3], const int ext[3]) { return keep(box_type(start, ext)); }
  // The direction's copy as one move.
  void whole(Exchange& x, const Region& g) { x.add(box(g.from, g.ext), box(g.to, g.ext), class_of(g)); }
  // A +X direction and its -X mirror as one move of interleaved pairs (ferry::interleave).
  void x_pair(Exchange& x, const Region& plus, const Region& minus) {
    x.add(keep(ferry::interleave(box(plus.from, plus.ext), box(minus.from, minus.ext))),
          keep(ferry::interleave(box(plus.to, plus.ext), box(minus.to, minus.ext))), class_of(plus));
  }
  // A box whose rows are the 256 interior values (y/z faces, x edges) as its 16-aligned body
  // (x = 4..257, 2032 B from a 16-aligned address: 16 B words) and its two 8 B fringes (x = 3 and
  // 258) as one interleaved pair.
  void body16(Exchange& x, const Region& g) {
    int from[3] = {g.from[0] + 1, g.from[1], g.from[2]}, to[3] = {g.to[0] + 1, g.to[1], g.to[2]};
    int ext[3] = {g.ext[0] - 2, g.ext[1], g.ext[2]};
    x.add(box(from, ext), box(to, ext), class_of(g));
    int one[3] = {1, g.ext[1], g.ext[2]};
    int from_hi[3] = {g.from[0] + g.ext[0] - 1, g.from[1], g.from[2]};
    int to_hi[3] = {g.to[0] + g.ext[0] - 1, g.to[1], g.to[2]};
    x.add(keep(ferry::interleave(box(g.from, one), box(from_hi, one))),
          keep(ferry::interleave(box(g.to, one), box(to_hi, one))), class_of(g));
  }
};

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
  auto fill_all = [](const std::vector<double*>& v) {
    for (int f = 0; f < Cube::fields; ++f) fill<<<1024, 256>>>(v[static_cast<std::size_t>(f)], Cube::points, 1e9 * f);
  };
  for (int f = 0; f < Cube::fields; ++f) {
    CK(cudaMalloc(&a[static_cast<std::size_t>(f)], field_bytes));
    CK(cudaMalloc(&b[static_cast<std::size_t>(f)], field_bytes));
  }
  fill_all(a);
  fill_all(b);
  double** dev_b;
  CK(cudaMalloc(&dev_b, sizeof(double*) * Cube::fields));
  CK(cudaMemcpy(dev_b, b.data(), sizeof(double*) * Cube::fields, cudaMemcpyHostToDevice));

  // The descriptions: every direction alone (208 moves); each +X direction (face, 4 edges, 4
  // corners) and its -X mirror as one interleaved pair (136 moves: what the halo library should
  // send); the pairs plus 16 B bodies for the 2 KiB rows; and three dimension-ordered phases (the
  // x face pair, then whole halo rows in y, then whole halo planes in z: implicit edges and
  // corners, 3 launches).
  Describer desc;
  Exchange per_direction, pairs, pairs_body16, phase_x, phase_y, phase_z;
  for (const Region& g : regs) {
    desc.whole(per_direction, g);
    if (g.to[0] == 0) continue;  // a -X direction: paired with its mirror below
    if (g.to[0] == Cube::r) {    // no x offset: its rows are 256 values
      desc.whole(pairs, g);
      desc.body16(pairs_body16, g);
      continue;
    }
    const Region* minus = nullptr;
    for (const Region& m : regs)
      if (m.to[0] == 0 && m.to[1] == g.to[1] && m.to[2] == g.to[2]) minus = &m;
    desc.x_pair(pairs, g, *minus);
    desc.x_pair(pairs_body16, g, *minus);
    if (class_of(g) == 0) desc.x_pair(phase_x, g, *minus);
  }
  for (int d : {-1, 1}) {
    const int from = d < 0 ? Cube::n : Cube::r, to = d < 0 ? 0 : Cube::n + Cube::r;
    const Region rows{{0, to, Cube::r}, {0, from, Cube::r}, {Cube::e, Cube::r, Cube::n}};
    const Region planes{{0, 0, to}, {0, 0, from}, {Cube::e, Cube::e, Cube::r}};
    desc.whole(phase_y, rows);
    desc.whole(phase_z, planes);
  }
  std::vector<void*> slots(a.begin(), a.end());
  ferry::gpu::Batch batch(pairs.moves, slots), batch_dir(per_direction.moves, slots),
      batch_b16(pairs_body16.moves, slots), bx(phase_x.moves, slots), by(phase_y.moves, slots),
      bz(phase_z.moves, slots);
  auto phases = [&] {
    bx.launch();
    by.launch();
    bz.launch();
  };

  // The fused hand kernel on b; each of Ferry's descriptions on a, refilled before each: every
  // value of the 8 arrays must agree.
  const unsigned grid = static_cast<unsigned>((cells * Cube::fields + 255) / 256);
  hand_fused<<<grid, 256>>>(dev_b, cells);
  unsigned long long* diff;
  CK(cudaMalloc(&diff, sizeof *diff));
  auto check = [&](const char* what, const std::function<void()>& run) {
    fill_all(a);
    run();
    CK(cudaMemset(diff, 0, sizeof *diff));
    for (int f = 0; f < Cube::fields; ++f)
      count_differences<<<1024, 256>>>(a[static_cast<std::size_t>(f)], b[static_cast<std::size_t>(f)], Cube::points, diff);
    unsigned long long differ = 0;
    CK(cudaMemcpy(&differ, diff, sizeof differ, cudaMemcpyDeviceToHost));
    std::printf("Astaroth self-exchange, %s: %s (%llu values differ from the hand kernel's)\n", what,
                differ ? "DIFFERS" : "agrees on every value of the 8 arrays", differ);
  };
  check("+X/-X pairs", [&] { batch.launch(); });
  check("per direction", [&] { batch_dir.launch(); });
  check("x pairs + 16 B bodies", [&] { batch_b16.launch(); });
  check("3 phases", phases);

  const std::string name = "astaroth 1 GPU";
  auto both = [&](const char* method, const std::function<void()>& run, int reps) {
    record("halo", name, method, bytes, 0, tm.median(run, reps));
    record("halo", name, std::string(method) + "_device_only", bytes, 0, tm.device_median(run, reps));
  };
  both("ferry_batch", [&] { batch.launch(); }, 50);
  both("ferry_batch_per_direction", [&] { batch_dir.launch(); }, 50);
  both("ferry_batch_body16", [&] { batch_b16.launch(); }, 50);
  both("ferry_3_phases", phases, 50);
  both("hand_fused", [&] { hand_fused<<<grid, 256>>>(dev_b, cells); }, 50);
  record("halo", name, "hand_208", bytes, 0, tm.median([&] {
           for (double* f : b)
             for (const Region& g : regs) {
               const long long n = static_cast<long long>(g.ext[0]) * g.ext[1] * g.ext[2];
               hand_box<<<static_cast<unsigned>((n + 255) / 256), 256>>>(f, g);
             }
         }, 20));
  record("halo", name, "ferry_copy_async_208", bytes, 0, tm.median([&] {
           for (const ferry::gpu::Move& m : per_direction.moves)
             ferry::gpu::copy_async(a[static_cast<std::size_t>(m.src.slot)], 1, *m.src.type,
                                    a[static_cast<std::size_t>(m.dst.slot)], 1, *m.dst.type);
         }, 20));
  record("halo", name, "floor", bytes, 0, 2.0 * static_cast<double>(bytes) / copy_rate);
  // The moves by class, to see where the time goes, for each description that differs there.
  struct Part {
    const char* name;
    const Exchange* from;
    int cls;
  };
  const Part parts[] = {{"copy x faces, pairs", &pairs, 0},
                        {"copy x faces, per direction", &per_direction, 0},
                        {"copy y/z faces", &per_direction, 1},
                        {"copy y/z faces, 16 B bodies", &pairs_body16, 1},
                        {"copy edges+corners, pairs", &pairs, 2},
                        {"copy edges+corners, per direction", &per_direction, 2},
                        {"phase y, whole rows", &phase_y, 1},
                        {"phase z, whole planes", &phase_z, 1}};
  for (const Part& p : parts) {
    std::vector<ferry::gpu::Move> part;
    i64 part_bytes = 0;
    for (std::size_t i = 0; i < p.from->moves.size(); ++i) {
      if (p.from->cls[i] != p.cls) continue;
      part.push_back(p.from->moves[i]);
      part_bytes += p.from->moves[i].src.type->size();
    }
    ferry::gpu::Batch b_part(part, slots);
    record("halo", p.name, "ferry_batch_device_only", part_bytes, 0,
           tm.device_median([&] { b_part.launch(); }, 30));
    record("halo", p.name, "floor", part_bytes, 0, 2.0 * static_cast<double>(part_bytes) / copy_rate);
  }
  // The x faces through packed buffers, as a halo exchange with other ranks moves them: pack of
  // the interior faces, unpack into the halos (dense layout), every face alone against each
  // field's +X/-X faces as one pair whose packed side is an interleaved layout of the two regions.
  {
    const Region* plus = nullptr;
    const Region* minus = nullptr;
    for (const Region& g : regs)
      if (class_of(g) == 0) (g.to[0] == 0 ? minus : plus) = &g;
    const ferry::Type& sp = desc.box(plus->from, plus->ext);
    const ferry::Type& sm = desc.box(minus->from, minus->ext);
    const ferry::Type& hp = desc.box(plus->to, plus->ext);
    const ferry::Type& hm = desc.box(minus->to, minus->ext);
    const ferry::Type& src_pair = desc.keep(ferry::interleave(sp, sm));
    const ferry::Type& halo_pair = desc.keep(ferry::interleave(hp, hm));
    const i64 face = sp.size();
    // Packed layout: field f's +X face at 2f * face, its -X face right after.
    const ferry::Type& regions = desc.keep(ferry::interleave(ferry::Type(ferry::make_dense(0, face), 0, face),
                                                             ferry::Type(ferry::make_dense(face, face), 0, face), 24));
    char* packed;
    CK(cudaMalloc(&packed, 2 * face * Cube::fields));
    const int pk = Cube::fields;  // the packed buffer's slot
    std::vector<void*> xslots(a.begin(), a.end());
    xslots.push_back(packed);
    std::vector<ferry::gpu::Move> pack1, unpack1, pack2, unpack2;
    for (int f = 0; f < Cube::fields; ++f) {
      const i64 at = 2 * face * f;
      pack1.push_back({{nullptr, 1, &sp, f, 0}, {nullptr, 0, nullptr, pk, at}});
      pack1.push_back({{nullptr, 1, &sm, f, 0}, {nullptr, 0, nullptr, pk, at + face}});
      unpack1.push_back({{nullptr, 0, nullptr, pk, at}, {nullptr, 1, &hp, f, 0}});
      unpack1.push_back({{nullptr, 0, nullptr, pk, at + face}, {nullptr, 1, &hm, f, 0}});
      pack2.push_back({{nullptr, 1, &src_pair, f, 0}, {nullptr, 1, &regions, pk, at}});
      unpack2.push_back({{nullptr, 1, &regions, pk, at}, {nullptr, 1, &halo_pair, f, 0}});
    }
    ferry::gpu::Batch p1(pack1, xslots), u1(unpack1, xslots), p2(pack2, xslots), u2(unpack2, xslots);
    // The pairs pack the same bytes and unpack the same arrays as the faces alone.
    fill_all(a);
    p1.launch();
    u1.launch();
    for (int f = 0; f < Cube::fields; ++f)
      CK(cudaMemcpy(b[static_cast<std::size_t>(f)], a[static_cast<std::size_t>(f)], field_bytes, cudaMemcpyDeviceToDevice));
    fill_all(a);
    CK(cudaMemset(packed, 0, static_cast<std::size_t>(2 * face * Cube::fields)));
    p2.launch();
    u2.launch();
    CK(cudaMemset(diff, 0, sizeof *diff));
    for (int f = 0; f < Cube::fields; ++f)
      count_differences<<<1024, 256>>>(a[static_cast<std::size_t>(f)], b[static_cast<std::size_t>(f)], Cube::points, diff);
    unsigned long long differ = 0;
    CK(cudaMemcpy(&differ, diff, sizeof differ, cudaMemcpyDeviceToHost));
    std::printf("x faces through packed buffers: pairs %s (%llu values differ)\n",
                differ ? "DIFFER from the faces alone" : "give the faces' arrays", differ);
    const i64 xbytes = 2 * face * Cube::fields;
    auto dev = [&](const char* what, const char* method, ferry::gpu::Batch& bt) {
      record("halo", what, method, xbytes, 24, tm.device_median([&] { bt.launch(); }, 30));
    };
    dev("pack x faces", "ferry_batch_device_only", p1);
    dev("pack x faces", "ferry_batch_pairs_device_only", p2);
    dev("unpack x halos", "ferry_batch_device_only", u1);
    dev("unpack x halos", "ferry_batch_pairs_device_only", u2);
    record("halo", "pack x faces", "floor", xbytes, 24, 2.0 * static_cast<double>(xbytes) / copy_rate);
    record("halo", "unpack x halos", "floor", xbytes, 24, 2.0 * static_cast<double>(xbytes) / copy_rate);
    CK(cudaFree(packed));
  }
  // Host cost of one Batch::launch (what start() of a halo exchange pays to submit it), in
  // bursts short enough that the launch queue never fills (bench_gpu_pack.cu: host_cost).
  record("overhead", name, "host_batch_launch_call", 0, 0, host_cost([&] { batch.launch(); }));
  for (int f = 0; f < Cube::fields; ++f) {
    CK(cudaFree(a[static_cast<std::size_t>(f)]));
    CK(cudaFree(b[static_cast<std::size_t>(f)]));
  }
  CK(cudaFree(dev_b));
  CK(cudaFree(diff));
}

namespace {

double get(const char* group, const std::string& name, const char* method) {
  return get_result(group, name, method);
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
  char base[240];
  const std::string a = "astaroth 1 GPU";
  const double floor = get("halo", a, "floor");
  std::snprintf(base, sizeof base, "hand fused %.1f (GPU only %.1f); hand, 208 launches %.1f; Ferry "
                "copy_async x 208 %.1f", us(get("halo", a, "hand_fused")),
                us(get("halo", a, "hand_fused_device_only")), us(get("halo", a, "hand_208")),
                us(get("halo", a, "ferry_copy_async_208")));
  row("Astaroth self-exchange, +X/-X mirrors as pairs (136 copy moves, 1 launch)", get("halo", a, "ferry_batch"),
      get("halo", a, "ferry_batch_device_only"), floor, "the copy rate", base);
  row("Astaroth self-exchange, every direction alone (208 moves, 1 launch)",
      get("halo", a, "ferry_batch_per_direction"), get("halo", a, "ferry_batch_per_direction_device_only"),
      floor, "the copy rate", "");
  row("Astaroth self-exchange, x pairs + 16 B bodies of the 2 KiB rows (1 launch)",
      get("halo", a, "ferry_batch_body16"), get("halo", a, "ferry_batch_body16_device_only"), floor,
      "the copy rate", "");
  row("Astaroth self-exchange, 3 phases: x pairs, whole y rows, whole z planes (3 launches)",
      get("halo", a, "ferry_3_phases"), get("halo", a, "ferry_3_phases_device_only"), floor,
      "the copy rate", "");
  for (const char* k : {"copy x faces, pairs", "copy x faces, per direction", "copy y/z faces",
                        "copy y/z faces, 16 B bodies", "copy edges+corners, pairs",
                        "copy edges+corners, per direction", "phase y, whole rows", "phase z, whole planes"})
    row(std::string("self-exchange, ") + k + " alone", std::nan(""), get("halo", k, "ferry_batch_device_only"),
        get("halo", k, "floor"), "the copy rate", "");
  for (const char* k : {"pack x faces", "unpack x halos"}) {
    row(std::string("dense layout, ") + k + " alone, every face alone", std::nan(""),
        get("halo", k, "ferry_batch_device_only"), get("halo", k, "floor"), "the copy rate", "");
    row(std::string("dense layout, ") + k + " alone, +X/-X pairs", std::nan(""),
        get("halo", k, "ferry_batch_pairs_device_only"), get("halo", k, "floor"), "the copy rate", "");
  }
  const std::string b = "208 jobs";
  std::snprintf(base, sizeof base, "Ferry, 208 launches %.1f",
                us(get("batch", b, "ferry_separate_launches")));
  row("pack batch, 26 directions x 8 quantities", get("batch", b, "ferry_batch"),
      get("batch", b, "ferry_batch_device_only"), get("batch", b, "roofline"), "the sector roofline", base);
  row("pack batch, x faces as pairs", get("batch", b, "ferry_batch_x_pairs"),
      get("batch", b, "ferry_batch_x_pairs_device_only"), get("batch", b, "roofline"), "the sector roofline", "");
  row("unpack batch, 26 directions x 8 quantities", get("batch", b, "ferry_batch_unpack"),
      get("batch", b, "ferry_batch_unpack_device_only"), get("batch", b, "roofline"), "the sector roofline", "");
  row("unpack batch, x faces as pairs", get("batch", b, "ferry_batch_unpack_x_pairs"),
      get("batch", b, "ferry_batch_unpack_x_pairs_device_only"), get("batch", b, "roofline"),
      "the sector roofline", "");
  for (const char* k : {"x faces", "y/z faces", "edges+corners"}) {
    row(std::string("pack batch, ") + k + " alone", std::nan(""), get("batch", k, "ferry_batch_device_only"),
        get("batch", k, "roofline"), "the sector roofline", "");
    row(std::string("unpack batch, ") + k + " alone", std::nan(""),
        get("batch", k, "ferry_batch_unpack_device_only"), get("batch", k, "roofline"), "the sector roofline", "");
  }
  row("pack batch, x faces as pairs alone", std::nan(""), get("batch", "x faces", "ferry_batch_x_pairs_device_only"),
      get("batch", "x faces", "roofline"), "the sector roofline", "");
  row("unpack batch, x faces as pairs alone", std::nan(""),
      get("batch", "x faces", "ferry_batch_unpack_x_pairs_device_only"), get("batch", "x faces", "roofline"),
      "the sector roofline", "");
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
  const double moved = floor * copy_rate;  // bytes read + written
  std::printf("Astaroth self-exchange: %.1f MB read + written, %.0f GB/s (%.0f GB/s GPU only); floor %.1f us "
              "at the copy rate\n", moved / 1e6, moved / get("halo", a, "ferry_batch") / 1e9,
              moved / get("halo", a, "ferry_batch_device_only") / 1e9, us(floor));
  const char* f = "-X face";
  std::printf("host cost per call (bursts of 50 after a synchronize): Batch::launch (Astaroth) %.2f us, "
              "pack_async %.2f us, Batch of 1 job %.2f us, copy_async %.2f us, empty kernel launch %.2f us, "
              "pack_async's 2 pointer queries %.2f us, the queries then the 1-job launch %.2f us; loops of 2000: "
              "pack_async %.2f us, empty launch %.2f us\n",
              us(get("overhead", a, "host_batch_launch_call")), us(get("overhead", f, "host_pack_async_call")),
              us(get("overhead", f, "host_batch_1job_launch_call")), us(get("overhead", f, "host_copy_async_call")),
              us(get("overhead", "empty kernel", "host_launch_call")), us(get("overhead", f, "host_pointer_queries")),
              us(get("overhead", f, "host_queries_then_batch_launch")),
              us(get("overhead", f, "host_pack_async_loop_2000")),
              us(get("overhead", "empty kernel", "host_launch_loop_2000")));
}

}  // namespace bench
