// bench/halo/halo_bench.hpp — what ferry-halo-bench's parts share: the run's configuration, the
// arrays of this rank's subdomain(s), the geometry of the 26 regions (written here, apart from the
// library's, so the baselines do not inherit its bugs), and the baselines' entry points.
#pragma once

#include <ferry/halo.hpp>
#include <mpi.h>

#include <array>
#include <functional>
#include <string>
#include <vector>

namespace hb {

namespace fh = ferry::halo;
using fh::i64;
using fh::Index3;

struct Config {
  Index3 local{0, 0, 0}, global{0, 0, 0}, grid{0, 0, 0};
  int subdomains = 1, fields = 1;
  // GPU of each of this rank's subdomains (cycled); empty: the rank's GPU (node-local rank % GPUs);
  // {-2}: "spread", subdomain i of node-local rank r on GPU (r * subdomains + i) % GPUs.
  std::vector<int> devices;
  std::string type = "double";
  i64 elem = 8;
  std::array<int, 3> minus{1, 1, 1}, plus{1, 1, 1};
  std::vector<std::pair<int, int>> dir_widths;  // 26-value overrides (index, width)
  bool faces_only = false, no_corners = false;
  std::array<bool, 3> periodic{true, true, true};
  std::vector<std::string> methods{"auto"};  // library runs: auto (the model) or a forced method
  std::vector<std::string> baselines;        // a b c d e hand dim
  fh::Placement placement = fh::Placement::node_aware;
  bool device = false, fused = true, graphs = true, priority = true;
  std::string recv = "preposted";  // baselines: preposted | persistent | blocking
  double compute_us = 0;           // overlap: a compute kernel of this length (0: none)
  bool jacobi = false;             // overlap with a real Jacobi kernel instead of a fixed length
  bool split_compute = false;      // interior during the exchange, exterior after
  int iters = 50, warmup = 5;
  i64 split_bytes = 0;
  bool check = false, quiet = false;
  std::string json;
  fh::Widths widths() const;
};

// A box of points in a subdomain's local coordinates.
struct Box {
  Index3 lo{}, n{};
  i64 points() const { return n[0] * n[1] * n[2]; }
};
inline Box recv_box(const fh::Widths& w, fh::Dir d, const Index3& e) {
  Box b;
  for (int a = 0; a < 3; ++a) {
    const i64 t = w.thickness(d, a);
    b.lo[a] = d[a] == 0 ? 0 : d[a] < 0 ? -t : e[a];
    b.n[a] = d[a] == 0 ? e[a] : t;
  }
  return b;
}
// What the neighbour in direction d sends into that box, in its own coordinates (extent e).
inline Box send_box(const fh::Widths& w, fh::Dir d, const Index3& e) {
  Box b;
  for (int a = 0; a < 3; ++a) {
    const i64 t = w.thickness(d, a);
    b.lo[a] = d[a] == 0 ? 0 : d[a] < 0 ? e[a] - t : 0;
    b.n[a] = d[a] == 0 ? e[a] : t;
  }
  return b;
}

// This rank's arrays: one allocation per field (and subdomain), dense, x fastest, halo on all sides.
struct Arrays {
  fh::Domain dom;
  std::vector<std::vector<fh::Field>> fields;  // [subdomain][field]
  std::vector<void*> mem;
  bool device = false;
  // The only subdomain's neighbour in direction d: rank, or -1 past an open boundary (baselines
  // run with one subdomain per rank).
  int neighbour_rank(fh::Dir d) const;
  ~Arrays();
};

// Makes the domain and arrays of the configuration (collective).
void make_arrays(const Config& c, Arrays& a);

// One exchange of a baseline, and what it sends per exchange.
struct Baseline {
  std::string name, how;
  std::function<void()> run;
  i64 messages = 0, bytes = 0;
  std::function<void()> cleanup;
};
// MPI baselines on this rank's one subdomain (host or device arrays, through Ferry's interposer):
// (a) Isend/Irecv of a subarray type per field and direction, (b) one struct type per neighbour
// direction, (d) MPI_Neighbor_alltoallw, hand: pack loops per direction into host buffers + MPI,
// dim: the same in three dimension-ordered phases that forward corners (6 messages).
Baseline baseline_subarray(const Config& c, Arrays& a);
Baseline baseline_struct(const Config& c, Arrays& a);
Baseline baseline_alltoallw(const Config& c, Arrays& a);
Baseline baseline_hand(const Config& c, Arrays& a, bool dim_ordered);
// GPU baselines: (c) hand staging (a pack kernel per face, D2H, host MPI, H2D, unpack kernel);
// (e) one GPU, one rank, all periodic: the fused hand kernel, and one launch per field and
// direction (one thread per halo cell).
Baseline baseline_staging(const Config& c, Arrays& a);
Baseline baseline_fused_kernel(const Config& c, Arrays& a, bool separate_launches);

// The bench's own GPU code (bench/halo/gpu.cu, or gpu_none.cpp without CUDA).
namespace gpu {
bool available();
int device_count();                  // visible GPUs (0 without)
int choose_device(int local_rank);   // this process's GPU: local_rank % count (-1: none)
int current_device();
void* alloc(i64 bytes, int device);  // zeroed, on `device` (-1: the current one)
void free(void* p);
void put(void* dst, const void* src, i64 bytes);
void get(void* dst, const void* src, i64 bytes);
void* alloc_host(i64 bytes);  // pinned
void free_host(void* p);
// A copy on the bench's stream (after the kernels before it); to_host: and waits for it.
void stage(void* dst, const void* src, i64 bytes, bool to_host);
void* stream();                 // the bench's stream (created once)
void sync();                    // synchronize it
double empty_launch_sync_us();  // an empty kernel + synchronize, median of many
void spin(double us);           // a kernel that runs for about `us` on the stream
// Jacobi 7-point on a box of a dense x-fastest double field (in -> out).
void jacobi(const double* in, double* out, const Index3& alloc, const Index3& origin, const Box& b);
// Packs (unpack = false) or unpacks a box of a field with a device buffer, one thread per element.
void box_copy(void* field, const fh::Field& f, const Box& b, void* buf, bool unpack);
// One kernel for every (field, direction) of a periodic one-subdomain grid, interior -> halo.
void fused_self(const std::vector<fh::Field>& fields, const Index3& extent);
// The same as one launch per field and direction.
void separate_self(const std::vector<fh::Field>& fields, const Index3& extent);
// The P2P floor: every GPU of `gpus` copies `bytes` into the next one of the ring at the same
// time (two GPUs: both directions at once), contiguous, peer access on where the pair has it.
// Median wall time of `iters` (us).
double p2p_ring_us(i64 bytes, const std::vector<int>& gpus, int iters);
}  // namespace gpu

}  // namespace hb
