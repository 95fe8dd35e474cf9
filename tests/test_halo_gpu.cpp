// The halo library on the GPU backend (device arrays), under mpiexec -n 1, 2 and 4 on one GPU
// (CUDA MPS) or several: random grids, widths, layouts and element sizes, every method forced,
// graphs on and off, fused and separate launches, swap(), start/finish on the user's stream ordered
// after work already queued there; every allocated point checked (halo_grid.hpp) and verify().
// Exits 77 (skipped) without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "halo_grid.hpp"

namespace {

using namespace halo_test;

int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size_of() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
bool all_ok(const std::string& err) {
  int bad = err.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return bad == 0;
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// Host arrays (the reference images) and their device twins.
struct DeviceArrays {
  Arrays host;
  std::vector<void*> dev;              // one per host allocation
  std::vector<fh::Field> fields;       // the device description
  ~DeviceArrays() {
    for (void* p : dev) cudaFree(p);
  }
};

// On the subdomain's GPU (`device`), the current one restored after.
void make_device(const Layout& L, const Index3& n, int device, DeviceArrays& d) {
  d.host = make_arrays(L, n);
  d.fields = d.host.fields;
  int was = 0;
  ASSERT_EQ(cudaGetDevice(&was), cudaSuccess);
  if (device >= 0) ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  for (auto& m : d.host.mem) {
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, m.size()), cudaSuccess);
    d.dev.push_back(p);
  }
  ASSERT_EQ(cudaSetDevice(was), cudaSuccess);
  // Point each field (and its second array) at the same offset of the device twin.
  for (fh::Field& f : d.fields)
    for (void** ptr : {&f.data, &f.data_next})
      for (std::size_t k = 0; k < d.host.mem.size() && *ptr; ++k) {
        auto* base = d.host.mem[k].data();
        auto* at = static_cast<unsigned char*>(*ptr);
        if (at >= base && at < base + d.host.mem[k].size()) {
          *ptr = static_cast<char*>(d.dev[k]) + (at - base);
          break;
        }
      }
}

void upload(DeviceArrays& d, cudaStream_t s) {
  for (std::size_t k = 0; k < d.dev.size(); ++k)
    ASSERT_EQ(cudaMemcpyAsync(d.dev[k], d.host.mem[k].data(), d.host.mem[k].size(), cudaMemcpyHostToDevice, s), cudaSuccess);
}
void download(DeviceArrays& d, cudaStream_t s) {
  for (std::size_t k = 0; k < d.dev.size(); ++k)
    ASSERT_EQ(cudaMemcpyAsync(d.host.mem[k].data(), d.dev[k], d.host.mem[k].size(), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
}

// One configuration: `rounds` exchanges with swaps, each checked.
void run(const fh::Domain& dom, const Layout& L, const fh::Options& opt, int rounds, const std::string& what) {
  std::vector<std::unique_ptr<DeviceArrays>> arrays;
  std::vector<std::vector<fh::Field>> fields;
  for (const auto& sub : dom.local()) {
    arrays.push_back(std::make_unique<DeviceArrays>());
    make_device(L, sub.extent, sub.device, *arrays.back());
    fields.push_back(arrays.back()->fields);
  }
  fh::Plan plan = fh::plan(dom, fields, opt);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // A large memset queued first: an exchange that did not wait for the stream would pack the
  // arrays before the upload behind it lands.
  void* slow = nullptr;
  CUDA_OK(cudaMalloc(&slow, std::size_t{256} << 20));
  int parity = 0;
  std::string err;
  for (int round = 0; round < rounds && err.empty(); ++round) {
    for (std::size_t sub = 0; sub < fields.size(); ++sub) {
      const auto& hf = arrays[sub]->host.fields;
      for (std::size_t f = 0; f < hf.size(); ++f)
        fill(hf[f], static_cast<unsigned char*>(parity ? hf[f].data_next : hf[f].data), static_cast<int>(f), dom.local()[sub], round);
    }
    CUDA_OK(cudaMemsetAsync(slow, round, std::size_t{256} << 20, s));
    for (auto& a : arrays) upload(*a, s);
    plan.start(reinterpret_cast<ferry::gpu::Stream>(s));
    plan.finish(reinterpret_cast<ferry::gpu::Stream>(s));
    for (auto& a : arrays) download(*a, s);
    for (std::size_t sub = 0; sub < fields.size(); ++sub) {
      const auto& hf = arrays[sub]->host.fields;
      for (std::size_t f = 0; f < hf.size(); ++f)
        err += check(hf[f], static_cast<const unsigned char*>(parity ? hf[f].data_next : hf[f].data), static_cast<int>(f),
                     dom.local()[sub], round, dom.global(), dom.periodic());
    }
    if (L.second) {
      plan.swap();
      parity ^= 1;
    }
  }
  cudaFree(slow);
  cudaStreamDestroy(s);
  ASSERT_TRUE(all_ok(err)) << what << "\n" << err << plan.describe();
  const auto v = plan.verify();
  EXPECT_TRUE(v.ok()) << what << ": " << v.first_errors;
}

TEST(HaloGpu, RandomGridsMethodsGraphsSwap) {
  unsigned long long seed = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (const char* e = std::getenv("FERRY_SEED")) seed = std::strtoull(e, nullptr, 10);
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  if (rank_of() == 0) std::printf("seed %llu\n", seed);
  std::mt19937_64 g(seed);
  const fh::Method methods[] = {fh::Method::local, fh::Method::peer, fh::Method::ipc, fh::Method::staged, fh::Method::pipelined};
  const i64 sizes[] = {1, 2, 4, 8, 12, 16};
  int cases = 20;
  if (const char* e = std::getenv("FERRY_HALO_CASES")) cases = std::atoi(e);  // fewer under sanitizers
  for (int c = 0; c < cases; ++c) {
    fh::DomainOptions o;
    o.subdomains = 1 + static_cast<int>(g() % 2);
    for (int a = 0; a < 3; ++a) o.periodic[a] = g() % 2;
    Index3 global{};
    for (int a = 0; a < 3; ++a) global[a] = std::max<i64>(8 + static_cast<i64>(g() % 17), 3 * size_of() * o.subdomains);
    fh::Domain dom = fh::Domain::create(MPI_COMM_WORLD, global, o);
    Layout L;
    fh::Widths w = fh::Widths::uniform(1 + static_cast<int>(g() % 2));
    if (g() % 3 == 0) w.faces_only();
    for (int f = 0; f < 1 + static_cast<int>(g() % 3); ++f) {
      L.elem.push_back(sizes[g() % 6]);
      L.widths.push_back(w);
    }
    L.order = static_cast<int>(g() % 3);
    L.pad = static_cast<int>(g() % 2);
    L.second = g() % 2;
    fh::Options opt;
    if (g() % 4 != 0) opt.method = methods[g() % 5];
    opt.graphs = g() % 2;
    opt.fused = g() % 4 != 0;
    opt.priority_stream = g() % 3 != 0;  // false: on the test's own stream
    if (g() % 3 == 0) opt.split_bytes = 4096;
    std::ostringstream what;
    what << "case " << c << ": " << global[0] << "x" << global[1] << "x" << global[2] << " method "
         << (opt.method ? fh::name(*opt.method) : "model") << " graphs " << opt.graphs << " fused " << opt.fused << " priority " << opt.priority_stream;
    run(dom, L, opt, 3, what.str());
    if (HasFatalFailure()) return;
  }
}

// The latency case of the issue (64^3, one float, width 1, periodic) in one process with two
// subdomains on one GPU: the peer path forced runs on one GPU.
TEST(HaloGpu, PeerPathOnOneGpu) {
  fh::DomainOptions o;
  o.periodic = {true, true, true};
  o.subdomains = 2;
  fh::Domain dom = fh::Domain::create(MPI_COMM_WORLD, {64, 64, 64}, o);
  Layout L;
  L.elem = {4};
  L.widths = {fh::Widths::uniform(1)};
  fh::Options opt;
  opt.method = fh::Method::peer;
  run(dom, L, opt, 2, "peer on one GPU");
}

// Subdomains on every GPU of the machine (up to 4) in each process: the peer path between GPUs
// (one copy per pair of GPUs), the model's choice and forced, graphs on and off. Skipped with
// fewer than 2 GPUs.
TEST(HaloGpu, SubdomainsOnSeveralGpus) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) GTEST_SKIP() << "needs 2 GPUs";
  fh::DomainOptions o;
  o.periodic = {true, true, false};
  o.subdomains = std::min(n, 4);
  for (int i = 0; i < o.subdomains; ++i) o.devices.push_back(i);
  fh::Domain dom = fh::Domain::create(MPI_COMM_WORLD, {40, 24, 20}, o);
  Layout L;
  L.elem = {8, 4};
  L.widths = {fh::Widths::uniform(2), fh::Widths::uniform(1)};
  L.second = true;
  for (int k = 0; k < 3; ++k) {
    fh::Options opt;
    opt.graphs = k != 1;
    if (k == 2) opt.method = fh::Method::peer;
    run(dom, L, opt, 3, "subdomains on " + std::to_string(o.subdomains) + " GPUs, case " + std::to_string(k));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
