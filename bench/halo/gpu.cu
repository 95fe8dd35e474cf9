// ferry-halo-bench's own GPU code: buffers, a stream, a spin kernel of set length, a Jacobi kernel,
// and the hand-written kernels of baselines (c) and (e). Written the way a user would write them
// (one thread per element), not with Ferry's engine.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "halo_bench.hpp"

namespace hb::gpu {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

cudaStream_t the_stream() {
  static cudaStream_t s = [] {
    cudaStream_t t;
    check(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), "cudaStreamCreate");
    return t;
  }();
  return s;
}

__global__ void empty_kernel() {}

__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

__global__ void jacobi_kernel(const double* in, double* out, long long ax, long long axy, long long lo0,
                              long long lo1, long long lo2, long long n0, long long n1, long long n2) {
  const long long n = n0 * n1 * n2;
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = (lo0 + t % n0) + ax * (lo1 + t / n0 % n1) + axy * (lo2 + t / n0 / n1);
    double s = in[i - 1] + in[i + 1];
    s = s + in[i - ax];
    s = s + in[i + ax];
    s = s + in[i - axy];
    s = s + in[i + axy];
    out[i] = s * (1.0 / 6.0);
  }
}

// One region: n[0] x n[1] x n[2] elements of `elem` bytes; src/dst byte strides per axis.
struct Region {
  char* src;
  char* dst;
  long long n0, n1, n2;
  long long ss[3], ds[3];
  long long elem;
  long long first;  // index of its first element among all regions (fused)
};

__device__ void copy_elem(char* d, const char* s, long long elem) {
  if (elem == 8) *reinterpret_cast<unsigned long long*>(d) = *reinterpret_cast<const unsigned long long*>(s);
  else if (elem == 4) *reinterpret_cast<unsigned*>(d) = *reinterpret_cast<const unsigned*>(s);
  else
    for (long long b = 0; b < elem; ++b) d[b] = s[b];
}

__device__ void copy_point(const Region& r, long long t) {
  const long long x = t % r.n0, y = t / r.n0 % r.n1, z = t / r.n0 / r.n1;
  copy_elem(r.dst + x * r.ds[0] + y * r.ds[1] + z * r.ds[2], r.src + x * r.ss[0] + y * r.ss[1] + z * r.ss[2], r.elem);
}

__global__ void region_kernel(Region r) {
  const long long n = r.n0 * r.n1 * r.n2;
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<long long>(gridDim.x) * blockDim.x)
    copy_point(r, t);
}

__global__ void fused_kernel(const Region* regions, int count, long long total) {
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<long long>(gridDim.x) * blockDim.x) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (regions[mid].first <= t) lo = mid;
      else hi = mid - 1;
    }
    copy_point(regions[lo], t - regions[lo].first);
  }
}

int grid_for(long long n) { return static_cast<int>(std::min<long long>((n + 255) / 256, 65535)); }

char* at(const fh::Field& f, const Box& b) {
  char* p = static_cast<char*>(f.data);
  for (int a = 0; a < 3; ++a) p += (f.origin[a] + b.lo[a]) * f.strides[a];
  return p;
}

// Every periodic self region (interior -> halo) of the fields.
std::vector<Region> self_regions(const std::vector<fh::Field>& fields, const Index3& e) {
  std::vector<Region> out;
  long long first = 0;
  for (int k = 0; k < fh::kDirections; ++k) {
    const fh::Dir d = fh::dir_of(k);
    for (const fh::Field& f : fields) {
      if (k == 13 || !f.widths.sends(d)) continue;
      const Box rb = recv_box(f.widths, d, e), sb = send_box(f.widths, d, e);
      Region r{at(f, sb), at(f, rb), rb.n[0], rb.n[1], rb.n[2], {}, {}, f.elem_bytes, first};
      for (int a = 0; a < 3; ++a) r.ss[a] = r.ds[a] = f.strides[a];
      first += rb.points();
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

bool available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}
int choose_device(int local_rank) {
  const int n = device_count();
  if (n <= 0 || local_rank < 0) return -1;
  check(cudaSetDevice(local_rank % n), "cudaSetDevice");
  return local_rank % n;
}
int current_device() {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}
void* alloc(i64 bytes, int device) {
  const int was = current_device();
  if (device >= 0) check(cudaSetDevice(device), "cudaSetDevice");
  void* p = nullptr;
  check(cudaMalloc(&p, static_cast<size_t>(bytes)), "cudaMalloc");
  check(cudaMemset(p, 0, static_cast<size_t>(bytes)), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaMemset");
  check(cudaSetDevice(was), "cudaSetDevice");
  return p;
}
void free(void* p) { cudaFree(p); }
// Untimed, and the arrays may be on another GPU than the bench's stream: synchronous copies.
// cudaMemcpy neither waits for the bench's (non-blocking) stream nor, from pageable memory, for
// its own DMA to land: wait for both.
void put(void* dst, const void* src, i64 bytes) {
  check(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice), "H2D");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}
void get(void* dst, const void* src, i64 bytes) {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost), "D2H");
}
void* alloc_host(i64 bytes) {
  void* p = nullptr;
  check(cudaMallocHost(&p, static_cast<size_t>(std::max<i64>(bytes, 1))), "cudaMallocHost");
  return p;
}
void free_host(void* p) { cudaFreeHost(p); }
void stage(void* dst, const void* src, i64 bytes, bool to_host) {
  check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, the_stream()), "cudaMemcpyAsync");
  if (to_host) sync();
}

double p2p_ring_us(i64 bytes, const std::vector<int>& gpus, int iters) {
  const std::size_t n = gpus.size();
  if (n < 2 || bytes <= 0) return 0;
  const int was = current_device();
  std::vector<void*> src(n), dst(n);
  std::vector<cudaStream_t> streams(n);
  for (std::size_t i = 0; i < n; ++i) {
    check(cudaSetDevice(gpus[i]), "cudaSetDevice");
    for (std::size_t j : {(i + 1) % n, (i + n - 1) % n}) {  // the neighbours it writes to, reads from
      const cudaError_t e = cudaDeviceEnablePeerAccess(gpus[j], 0);
      if (e != cudaSuccess) (void)cudaGetLastError();  // already enabled, or no peer access
    }
    check(cudaMalloc(&src[i], static_cast<size_t>(bytes)), "cudaMalloc");
    check(cudaMalloc(&dst[i], static_cast<size_t>(bytes)), "cudaMalloc");
    check(cudaMemset(src[i], 1, static_cast<size_t>(bytes)), "cudaMemset");
    check(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking), "cudaStreamCreate");
  }
  for (std::size_t i = 0; i < n; ++i) {
    check(cudaSetDevice(gpus[i]), "cudaSetDevice");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::vector<double> t;
  for (int it = 0; it < iters + 3; ++it) {  // 3 untimed
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < n; ++i)  // GPU i writes its bytes into GPU i+1, all at once
      check(cudaMemcpyPeerAsync(dst[(i + 1) % n], gpus[(i + 1) % n], src[i], gpus[i], static_cast<size_t>(bytes), streams[i]),
            "cudaMemcpyPeerAsync");
    for (std::size_t i = 0; i < n; ++i) check(cudaStreamSynchronize(streams[i]), "cudaStreamSynchronize");
    if (it >= 3) t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  for (std::size_t i = 0; i < n; ++i) {
    check(cudaSetDevice(gpus[i]), "cudaSetDevice");
    cudaFree(src[i]);
    cudaFree(dst[i]);
    cudaStreamDestroy(streams[i]);
  }
  check(cudaSetDevice(was), "cudaSetDevice");
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
void* stream() { return the_stream(); }
void sync() { check(cudaStreamSynchronize(the_stream()), "cudaStreamSynchronize"); }

double empty_launch_sync_us() {
  std::vector<double> t;
  for (int i = 0; i < 300; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    empty_kernel<<<1, 1, 0, the_stream()>>>();
    check(cudaStreamSynchronize(the_stream()), "empty kernel");
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void spin(double us) {
  static int khz = [] {
    int dev = 0, k = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&k, cudaDevAttrClockRate, dev);
    return k;
  }();
  static int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n;
  }();
  // One warp per SM: the spin holds every SM for the time asked, leaving room for the exchange's
  // kernels beside it, as a stencil kernel that is bound by memory would.
  spin_kernel<<<sms, 32, 0, the_stream()>>>(static_cast<long long>(us * khz / 1000.0));
  check(cudaGetLastError(), "spin kernel");
}

void jacobi(const double* in, double* out, const Index3& alloc_, const Index3& origin, const Box& b) {
  if (b.points() == 0) return;
  const long long ax = alloc_[0], axy = alloc_[0] * alloc_[1];
  const long long o = origin[0] + ax * origin[1] + axy * origin[2];
  jacobi_kernel<<<grid_for(b.points()), 256, 0, the_stream()>>>(in + o, out + o, ax, axy, b.lo[0], b.lo[1], b.lo[2],
                                                                b.n[0], b.n[1], b.n[2]);
  check(cudaGetLastError(), "jacobi kernel");
}

void box_copy(void* field, const fh::Field& f, const Box& b, void* buf, bool unpack) {
  if (b.points() == 0) return;
  fh::Field g = f;
  g.data = field;
  Region r{at(g, b), static_cast<char*>(buf), b.n[0], b.n[1], b.n[2], {}, {}, f.elem_bytes, 0};
  const long long packed[3] = {f.elem_bytes, f.elem_bytes * b.n[0], f.elem_bytes * b.n[0] * b.n[1]};
  for (int a = 0; a < 3; ++a) r.ss[a] = f.strides[a], r.ds[a] = packed[a];
  if (unpack) {
    std::swap(r.src, r.dst);
    for (int a = 0; a < 3; ++a) std::swap(r.ss[a], r.ds[a]);
  }
  region_kernel<<<grid_for(b.points()), 256, 0, the_stream()>>>(r);
  check(cudaGetLastError(), "box kernel");
}

void fused_self(const std::vector<fh::Field>& fields, const Index3& e) {
  static void* key = nullptr;
  static Region* table = nullptr;
  static int count = 0;
  static long long total = 0;
  if (key != fields[0].data) {  // the table of this set of arrays, uploaded once
    const auto regions = self_regions(fields, e);
    if (table) cudaFree(table);
    check(cudaMalloc(&table, regions.size() * sizeof(Region)), "cudaMalloc");
    check(cudaMemcpy(table, regions.data(), regions.size() * sizeof(Region), cudaMemcpyHostToDevice), "table");
    count = static_cast<int>(regions.size());
    total = regions.empty() ? 0 : regions.back().first + regions.back().n0 * regions.back().n1 * regions.back().n2;
    key = fields[0].data;
  }
  if (total == 0) return;
  fused_kernel<<<grid_for(total), 256, 0, the_stream()>>>(table, count, total);
  check(cudaGetLastError(), "fused kernel");
}

void separate_self(const std::vector<fh::Field>& fields, const Index3& e) {
  for (const Region& r : self_regions(fields, e)) {
    region_kernel<<<grid_for(r.n0 * r.n1 * r.n2), 256, 0, the_stream()>>>(r);
    check(cudaGetLastError(), "region kernel");
  }
}

}  // namespace hb::gpu
