// bench/bench_pack_cpu.cpp — CPU pack and unpack throughput: Ferry against the system MPI.
//
// Every case is one committed MPI datatype and one host object of it. For each case, in this order
// (so that a case's numbers are taken close together in time on a noisy machine):
//   pack/ferry/<case>      ferry::pack with the ferry::Type from ferry::translate
//   pack/mpi/<case>        MPI_Pack on the same object into the same buffer
//   unpack/ferry/<case>    ferry::unpack
//   unpack/mpi/<case>      MPI_Unpack
//   pack/ferry_c/<case>, unpack/ferry_c/<case>
//                          the C API (ferry_pack / ferry_unpack: registry lookup + the same engine);
//                          with --capi=1 for every case, --capi=halo for the halo faces only
// Cases:
//   2d/obj=<bytes>/blk=<bytes>  MPI_Type_vector(obj/blk, blk, 512, MPI_BYTE): objects of 64 B .. 16 MiB
//                               (powers of 4) in blocks of 1 .. 512 B at a 512-byte pitch; skipped
//                               when blk > obj or when the object spans more than --max_span_mib
//                               (default 1024) of memory (1-byte blocks of 4 MiB span 2 GiB).
//   halo/-X, -Y, -Z, -Z_planes  the faces of halo_recipes() (bench_common.hpp).
//
// Before a case's first benchmark, Ferry's output is checked against MPI's: the packed bytes must be
// identical, and unpacking must write the same memory (compared over the whole span, or through a
// repack above 256 MiB). A case that fails is reported as an error for Ferry, not measured.
// Disable with --verify=0.
//
// Counters: bytes_per_second (Google Benchmark's, B/s of packed data), GBps (the same in 1e9 B/s),
// bytes (packed bytes per call), runs (contiguous blocks per object). The label is Ferry's canonical
// form of the type. Rates are per second of the benchmark thread's CPU time (Google Benchmark's
// default), not wall-clock: on a shared machine the time the thread spends descheduled would otherwise
// land in whichever benchmark happened to run then. Both sides copy single-threaded and never block,
// so on an idle machine the two agree. Caches are warm after the first iteration for objects that fit.
#include "bench_common.hpp"

#include <ferry/ferry.h>
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace ferry_bench {
namespace {

constexpr int kPitch = 512;
constexpr i64 kFullCompareMax = i64{256} << 20;

struct PackCase {
  std::string name;  // "2d/obj=1024/blk=8", "halo/-X"
  std::string how;   // the MPI construction
  MPI_Datatype dt = MPI_DATATYPE_NULL;
  i64 size = 0;  // packed bytes
  i64 span = 0;  // bytes of memory one object needs from the origin
  ferry::Type type;
  std::string canonical;
  std::string error;    // Ferry failed on this case: its benchmarks are skipped with this message
  bool capi = false;    // ferry_type_commit succeeded
  bool checked = false;
};

struct Buffers {
  char* src = nullptr;     // the packed-from objects, filled with a pattern
  char* dst = nullptr;     // the unpacked-into objects
  char* packed = nullptr;  // the packed bytes
  char* packed2 = nullptr; // for verification
};

Buffers g_buf;
bool g_verify = true;

std::vector<std::unique_ptr<PackCase>>& cases() {
  static std::vector<std::unique_ptr<PackCase>> c;
  return c;
}

char* alloc_bytes(i64 n) {
  const std::size_t bytes = (static_cast<std::size_t>(n) + 4095) / 4096 * 4096 + 4096;
  void* p = std::aligned_alloc(4096, bytes);
  if (p == nullptr) die("out of memory allocating " + std::to_string(bytes) + " bytes");
  return static_cast<char*>(p);
}

i64 g_span_cap = 0, g_size_cap = 0;

// Grows the buffers to hold a case (the cases that run decide how much memory the run takes).
// Every page is touched here, so no benchmark pays for first-touch faults.
void ensure_buffers(i64 span, i64 size) {
  if (span > g_span_cap) {
    std::free(g_buf.src);
    std::free(g_buf.dst);
    g_buf.src = alloc_bytes(span);
    g_buf.dst = alloc_bytes(span);
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (i64 i = 0; i < span; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      g_buf.src[i] = static_cast<char>(x >> 24);
    }
    std::memset(g_buf.dst, 0, static_cast<std::size_t>(span));
    g_span_cap = span;
  }
  if (size > g_size_cap) {
    std::free(g_buf.packed);
    std::free(g_buf.packed2);
    g_buf.packed = alloc_bytes(size);
    g_buf.packed2 = alloc_bytes(size);
    std::memset(g_buf.packed, 0, static_cast<std::size_t>(size));
    std::memset(g_buf.packed2, 0, static_cast<std::size_t>(size));
    g_size_cap = size;
  }
}

std::string mpi_error(int rc) {
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return msg;
}

// Checks Ferry against MPI on one case; returns "" or what went wrong.
std::string verify(PackCase& c) {
  const int isize = static_cast<int>(c.size);
  int mpos = 0;
  int rc = MPI_Pack(g_buf.src, 1, c.dt, g_buf.packed2, isize, &mpos, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) die(c.name + ": MPI_Pack: " + mpi_error(rc));
  if (mpos != isize) die(c.name + ": MPI_Pack wrote " + std::to_string(mpos) + " bytes");

  std::memset(g_buf.packed, 0, static_cast<std::size_t>(c.size));
  i64 pos = 0;
  ferry::pack(g_buf.src, 1, c.type, g_buf.packed, c.size, &pos);
  if (pos != c.size) return "ferry::pack advanced position by " + std::to_string(pos);
  if (std::memcmp(g_buf.packed, g_buf.packed2, static_cast<std::size_t>(c.size)) != 0)
    return "ferry::pack bytes differ from MPI_Pack";

  if (c.capi) {
    std::memset(g_buf.packed, 0, static_cast<std::size_t>(c.size));
    int cpos = 0;
    if (ferry_pack(g_buf.src, 1, c.dt, g_buf.packed, isize, &cpos) != MPI_SUCCESS)
      return std::string("ferry_pack: ") + ferry_error_string();
    if (cpos != isize || std::memcmp(g_buf.packed, g_buf.packed2, static_cast<std::size_t>(c.size)) != 0)
      return "ferry_pack bytes differ from MPI_Pack";
  }

  const std::size_t span = static_cast<std::size_t>(c.span);
  std::memset(g_buf.dst, 0, span);
  pos = 0;
  ferry::unpack(g_buf.packed2, c.size, &pos, g_buf.dst, 1, c.type);
  if (pos != c.size) return "ferry::unpack advanced position by " + std::to_string(pos);
  if (c.span <= kFullCompareMax) {
    std::vector<char> ref(span, 0);
    mpos = 0;
    rc = MPI_Unpack(g_buf.packed2, isize, &mpos, ref.data(), 1, c.dt, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) die(c.name + ": MPI_Unpack: " + mpi_error(rc));
    if (std::memcmp(ref.data(), g_buf.dst, span) != 0)
      return "ferry::unpack wrote different memory than MPI_Unpack";
  } else {
    mpos = 0;
    rc = MPI_Pack(g_buf.dst, 1, c.dt, g_buf.packed, isize, &mpos, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) die(c.name + ": MPI_Pack: " + mpi_error(rc));
    if (std::memcmp(g_buf.packed, g_buf.packed2, static_cast<std::size_t>(c.size)) != 0)
      return "ferry::unpack did not put the packed bytes where MPI_Pack reads them";
  }
  return "";
}

// Common start of every benchmark: checks the case once; false when it must not be measured.
bool ready(benchmark::State& st, PackCase& c, bool ferry_side) {
  ensure_buffers(c.span, c.size);
  if (!c.checked) {
    c.checked = true;
    if (c.error.empty() && g_verify) {
      try {
        c.error = verify(c);
      } catch (const std::exception& e) {
        c.error = e.what();
      }
      if (!c.error.empty())
        std::fprintf(stderr, "bench_pack_cpu: %s: %s\n", c.name.c_str(), c.error.c_str());
    }
  }
  if (ferry_side && !c.error.empty()) {
    st.SkipWithError(c.error.c_str());
    for (auto _ : st) {
    }
    return false;
  }
  return true;
}

void finish(benchmark::State& st, const PackCase& c) {
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) * c.size);
  st.counters["GBps"] = benchmark::Counter(static_cast<double>(c.size) * 1e-9,
                                           benchmark::Counter::kIsIterationInvariantRate);
  st.counters["bytes"] = static_cast<double>(c.size);
  if (c.error.empty()) st.counters["runs"] = static_cast<double>(c.type.blocks());
  st.SetLabel(c.canonical.empty() ? c.how : c.canonical);
}

void bm_pack_ferry(benchmark::State& st, PackCase* c) {
  if (!ready(st, *c, true)) return;
  try {
    for (auto _ : st) {
      i64 pos = 0;
      ferry::pack(g_buf.src, 1, c->type, g_buf.packed, c->size, &pos);
      benchmark::ClobberMemory();
    }
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  finish(st, *c);
}

void bm_unpack_ferry(benchmark::State& st, PackCase* c) {
  if (!ready(st, *c, true)) return;
  try {
    for (auto _ : st) {
      i64 pos = 0;
      ferry::unpack(g_buf.packed, c->size, &pos, g_buf.dst, 1, c->type);
      benchmark::ClobberMemory();
    }
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  finish(st, *c);
}

void bm_pack_ferry_c(benchmark::State& st, PackCase* c) {
  if (!ready(st, *c, true)) return;
  const int isize = static_cast<int>(c->size);
  for (auto _ : st) {
    int pos = 0;
    if (ferry_pack(g_buf.src, 1, c->dt, g_buf.packed, isize, &pos) != MPI_SUCCESS) {
      st.SkipWithError(ferry_error_string());
      return;
    }
    benchmark::ClobberMemory();
  }
  finish(st, *c);
}

void bm_unpack_ferry_c(benchmark::State& st, PackCase* c) {
  if (!ready(st, *c, true)) return;
  const int isize = static_cast<int>(c->size);
  for (auto _ : st) {
    int pos = 0;
    if (ferry_unpack(g_buf.packed, isize, &pos, g_buf.dst, 1, c->dt) != MPI_SUCCESS) {
      st.SkipWithError(ferry_error_string());
      return;
    }
    benchmark::ClobberMemory();
  }
  finish(st, *c);
}

void bm_pack_mpi(benchmark::State& st, PackCase* c) {
  ready(st, *c, false);
  const int isize = static_cast<int>(c->size);
  for (auto _ : st) {
    int pos = 0;
    const int rc = MPI_Pack(g_buf.src, 1, c->dt, g_buf.packed, isize, &pos, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
      st.SkipWithError(("MPI_Pack: " + mpi_error(rc)).c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  finish(st, *c);
}

void bm_unpack_mpi(benchmark::State& st, PackCase* c) {
  ready(st, *c, false);
  const int isize = static_cast<int>(c->size);
  for (auto _ : st) {
    int pos = 0;
    const int rc = MPI_Unpack(g_buf.packed, isize, &pos, g_buf.dst, 1, c->dt, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
      st.SkipWithError(("MPI_Unpack: " + mpi_error(rc)).c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  finish(st, *c);
}

void add_case(const std::string& name, const std::string& how, MPI_Datatype dt) {
  auto c = std::make_unique<PackCase>();
  c->name = name;
  c->how = how;
  c->dt = dt;
  c->size = size_of(dt);
  c->span = span_of(dt);
  try {
    c->type = ferry::translate(dt);
    c->canonical = canonical_summary(c->type);
    if (c->type.size() != c->size)
      c->error = "ferry size " + std::to_string(c->type.size()) + " != MPI size " +
                 std::to_string(c->size);
  } catch (const std::exception& e) {
    c->error = std::string("ferry::translate: ") + e.what();
  }
  if (c->error.empty()) c->capi = ferry_type_commit(dt) == MPI_SUCCESS;
  cases().push_back(std::move(c));
}

void register_case(PackCase* c, bool capi) {
  const std::string& n = c->name;
  benchmark::RegisterBenchmark(("pack/ferry/" + n).c_str(), bm_pack_ferry, c);
  benchmark::RegisterBenchmark(("pack/mpi/" + n).c_str(), bm_pack_mpi, c);
  benchmark::RegisterBenchmark(("unpack/ferry/" + n).c_str(), bm_unpack_ferry, c);
  benchmark::RegisterBenchmark(("unpack/mpi/" + n).c_str(), bm_unpack_mpi, c);
  if (capi) {
    benchmark::RegisterBenchmark(("pack/ferry_c/" + n).c_str(), bm_pack_ferry_c, c);
    benchmark::RegisterBenchmark(("unpack/ferry_c/" + n).c_str(), bm_unpack_ferry_c, c);
  }
}

}  // namespace

void register_benchmarks(int* argc, char** argv) {
  std::string v;
  i64 max_span = i64{1024} << 20;
  if (take_flag(argc, argv, "max_span_mib", &v)) max_span = std::atoll(v.c_str()) << 20;
  // --capi=0 (default): no C API benchmarks; 1: for every case; halo: for the halo faces only.
  std::string capi = "0";
  take_flag(argc, argv, "capi", &capi);
  if (capi != "0" && capi != "1" && capi != "halo") die("--capi must be 0, 1 or halo");
  if (take_flag(argc, argv, "verify", &v)) g_verify = v != "0";

  for (i64 obj = 64; obj <= (i64{16} << 20); obj *= 4) {
    for (int blk = 1; blk <= kPitch; blk *= 2) {
      if (blk > obj) continue;
      const i64 nblocks = obj / blk;
      const i64 span = (nblocks - 1) * kPitch + blk;
      if (span > max_span) continue;
      const std::string name = "2d/obj=" + std::to_string(obj) + "/blk=" + std::to_string(blk);
      const std::string how = "vector(" + std::to_string(nblocks) + ", " + std::to_string(blk) +
                              ", 512, MPI_BYTE)";
      add_case(name, how, vector2d(static_cast<int>(nblocks), blk, kPitch));
    }
  }
  for (const TypeRecipe& r : halo_recipes(/*with_listing=*/false)) {
    // "halo_-X" -> "halo/-X"
    add_case("halo/" + r.name.substr(5), r.how, r.build());
  }
  for (const auto& c : cases()) {
    const bool is_halo = c->name.compare(0, 5, "halo/") == 0;
    register_case(c.get(), capi == "1" || (capi == "halo" && is_halo));
  }
}

}  // namespace ferry_bench
