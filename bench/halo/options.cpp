// ferry-halo-bench's options and the arrays they describe.
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "../local_rank.hpp"
#include "halo_bench.hpp"

namespace hb {

const char* kUsage = R"(ferry-halo-bench [options]   (under mpiexec; every rank gets the same options)

Grid
  --local X Y Z          points per subdomain (weak scaling: global = local x grid)
  --global X Y Z         points of the whole grid (default 64 64 64)
  --grid X Y Z           subdomains per axis (default: prime factors, nodes then GPUs)
  --subdomains K         subdomains per rank (default 1; baselines need 1)
  --devices LIST|spread  GPU of each of the rank's subdomains (cycled), e.g. 0,1; spread: subdomain
                         i of node-local rank r on GPU (r * K + i) % GPUs. Default: every subdomain
                         on the rank's GPU (node-local rank % GPUs)
  --placement P          trivial | random | node_aware (default)
  --periodic AXES        periodic axes, e.g. xyz (default) or xy; "none" for none
Fields
  --fields N             fields per subdomain (default 1)
  --type T               float | double | int8 | int16 | int32 | int64 | cfloat | cdouble | bytesN
  --width W              halo width on every side (default 1)
  --widths MX MY MZ PX PY PZ   minus and plus widths per axis
  --faces-only | --no-corners  skip edges and corners, or corners (26-value form)
  --dir-width K W        direction K = (x+1)+3(y+1)+9(z+1) gets width W (26-value form; repeat)
Ferry
  --methods LIST         comma list of runs: auto (the model picks) or a forced method: local, peer,
                         ipc, staged, pipelined, mpi (default auto); none: baselines only
  --memory host|device   where the arrays are (default host)
  --graphs on|off        CUDA graphs for the GPU-only part (default on)
  --priority on|off      a high-priority stream of Ferry's per GPU (default), or the caller's stream
  --fused | --separate   one pack and one unpack launch per GPU, or one per region
  --split BYTES          split MPI messages above BYTES
Baselines (same arrays, same run; one subdomain per rank)
  --baselines LIST       comma list: a (subarray per field and direction, Isend/Irecv), b (one
                         struct type per neighbour), c (hand staging: pack kernel per direction,
                         D2H, host MPI, H2D, unpack; device arrays), d (Neighbor_alltoallw), e (one
                         GPU: fused hand kernel), e208 (one launch per field and direction), hand
                         (host pack loops + MPI, 26 messages), dim (3 phases forwarding corners,
                         6 messages: implicit corners); "all" = every one that applies
  --recv MODE            baselines' receives: preposted (Irecv first, default), persistent, blocking
Overlap
  --compute US           a compute kernel (host: busy loop) of US microseconds per iteration
  --jacobi               a Jacobi 7-point kernel on field 0 (double) instead
  --split-compute        interior between start and finish, exterior after (default: all after)
Run
  --iters N --warmup N   timed and untimed iterations (default 50, 5)
  --check                verify every halo cell once per case before timing
  --json FILE            results as JSON
  --quiet                no progress on stderr
)";

fh::Widths Config::widths() const {
  fh::Widths w = fh::Widths::axes(minus, plus);
  if (faces_only) w.faces_only();
  if (no_corners) w.no_corners();
  for (const auto& [k, v] : dir_widths) w.set(fh::dir_of(k), v);
  return w;
}

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

i64 type_size(const std::string& t) {
  if (t == "float" || t == "int32") return 4;
  if (t == "double" || t == "int64" || t == "cfloat") return 8;
  if (t == "int8") return 1;
  if (t == "int16") return 2;
  if (t == "cdouble") return 16;
  if (t.rfind("bytes", 0) == 0 && t.size() > 5) return std::stoll(t.substr(5));
  throw std::runtime_error("unknown --type " + t);
}

}  // namespace

Config parse(int argc, char** argv) {
  Config c;
  bool all_baselines = false;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(s + " needs a value");
      return argv[++i];
    };
    auto next3 = [&](Index3& v) {
      for (int k = 0; k < 3; ++k) v[k] = std::stoll(next());
    };
    if (s == "--local") next3(c.local);
    else if (s == "--global") next3(c.global);
    else if (s == "--grid") next3(c.grid);
    else if (s == "--subdomains") c.subdomains = std::stoi(next());
    else if (s == "--devices") {
      const std::string v = next();
      c.devices.clear();
      if (v == "spread") c.devices.push_back(-2);
      else
        for (const std::string& d : split_list(v)) c.devices.push_back(std::stoi(d));
      if (c.devices.empty()) throw std::runtime_error("--devices takes a list of GPUs or spread");
    }
    else if (s == "--placement") {
      const std::string p = next();
      c.placement = p == "trivial" ? fh::Placement::trivial : p == "random" ? fh::Placement::random : fh::Placement::node_aware;
      if (p != "trivial" && p != "random" && p != "node_aware") throw std::runtime_error("unknown placement " + p);
    } else if (s == "--periodic") {
      const std::string p = next();
      c.periodic = {false, false, false};
      if (p != "none")
        for (char ch : p) {
          if (ch < 'x' || ch > 'z') throw std::runtime_error("--periodic takes x, y, z or none");
          c.periodic[ch - 'x'] = true;
        }
    } else if (s == "--fields") c.fields = std::stoi(next());
    else if (s == "--type") c.type = next(), c.elem = type_size(c.type);
    else if (s == "--width") {
      const int w = std::stoi(next());
      c.minus = c.plus = {w, w, w};
    } else if (s == "--widths") {
      for (int& w : c.minus) w = std::stoi(next());
      for (int& w : c.plus) w = std::stoi(next());
    } else if (s == "--faces-only") c.faces_only = true;
    else if (s == "--no-corners") c.no_corners = true;
    else if (s == "--dir-width") {
      const int k = std::stoi(next());
      c.dir_widths.emplace_back(k, std::stoi(next()));
    } else if (s == "--methods") {
      c.methods = split_list(next());
      if (c.methods.size() == 1 && c.methods[0] == "none") c.methods.clear();
    } else if (s == "--memory") {
      const std::string m = next();
      if (m != "host" && m != "device") throw std::runtime_error("--memory host or device");
      c.device = m == "device";
    } else if (s == "--graphs") c.graphs = next() == "on";
    else if (s == "--priority") c.priority = next() == "on";
    else if (s == "--fused") c.fused = true;
    else if (s == "--separate") c.fused = false;
    else if (s == "--split") c.split_bytes = std::stoll(next());
    else if (s == "--baselines") {
      const std::string b = next();
      if (b == "all") all_baselines = true;
      else c.baselines = split_list(b);
    } else if (s == "--recv") {
      c.recv = next();
      if (c.recv != "preposted" && c.recv != "persistent" && c.recv != "blocking") throw std::runtime_error("--recv preposted, persistent or blocking");
    } else if (s == "--compute") c.compute_us = std::stod(next());
    else if (s == "--jacobi") c.jacobi = true;
    else if (s == "--split-compute") c.split_compute = true;
    else if (s == "--iters") c.iters = std::stoi(next());
    else if (s == "--warmup") c.warmup = std::stoi(next());
    else if (s == "--check") c.check = true;
    else if (s == "--json") c.json = next();
    else if (s == "--quiet") c.quiet = true;
    else throw std::runtime_error("unknown option " + s + " (--help lists them)");
  }
  if (c.iters < 1 || c.warmup < 0) throw std::runtime_error("--iters must be at least 1");
  if (c.jacobi && c.type != "double") throw std::runtime_error("--jacobi needs --type double");
  if (!c.devices.empty() && (c.compute_us > 0 || c.jacobi))
    throw std::runtime_error("--compute and --jacobi run on the rank's GPU: not with --devices");
  if (all_baselines) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    c.baselines = {"hand", "a", "b", "d"};
    if (c.device) c.baselines.push_back("c");
    if (c.device && size == 1 && c.periodic[0] && c.periodic[1] && c.periodic[2]) {
      c.baselines.push_back("e");
      c.baselines.push_back("e208");
    }
  }
  return c;
}

int Arrays::neighbour_rank(fh::Dir d) const {
  const fh::Subdomain& s = dom.local()[0];
  Index3 n = s.coord;
  const Index3 g = dom.grid();
  for (int a = 0; a < 3; ++a) {
    n[a] += d[a];
    if (n[a] < 0 || n[a] >= g[a]) {
      if (!dom.periodic()[a]) return -1;
      n[a] = (n[a] + g[a]) % g[a];
    }
  }
  return dom.owner(dom.at(n).id);
}

Arrays::~Arrays() {
  for (void* p : mem) {
    if (device) gpu::free(p);
    else std::free(p);
  }
}

void make_arrays(const Config& c, Arrays& a) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (c.device && !gpu::available()) throw std::runtime_error("--memory device: no usable GPU");
  fh::DomainOptions o;
  o.periodic = c.periodic;
  o.subdomains = c.subdomains;
  o.grid = c.grid;
  o.placement = c.placement;
  o.halo_hint = c.widths();
  Index3 global = c.global;
  if (c.local[0] > 0) {
    Index3 dims = c.grid;
    if (dims[0] == 0) {
      int d[3] = {0, 0, 0};
      MPI_Dims_create(size * c.subdomains, 3, d);
      dims = {d[0], d[1], d[2]};
      o.grid = dims;
    }
    for (int k = 0; k < 3; ++k) global[k] = c.local[k] * dims[k];
  } else if (global[0] == 0) {
    global = {64, 64, 64};
  }
  if (c.device && !c.devices.empty()) {
    const int local = bench::node_rank(MPI_COMM_WORLD);
    const int n = gpu::device_count();
    for (int i = 0; i < c.subdomains; ++i) {
      const int d = c.devices[0] == -2 ? (local * c.subdomains + i) % n : c.devices[static_cast<std::size_t>(i) % c.devices.size()];
      if (d < 0 || d >= n) throw std::runtime_error("--devices: no GPU " + std::to_string(d) + " (" + std::to_string(n) + " visible)");
      o.devices.push_back(d);
    }
  }
  a.dom = fh::Domain::create(MPI_COMM_WORLD, global, o);
  a.device = c.device;
  const fh::Widths w = c.widths();
  for (const fh::Subdomain& s : a.dom.local()) {
    std::vector<fh::Field> fs;
    for (int f = 0; f < c.fields; ++f) {
      fh::Field fl = fh::dense_field_bytes(nullptr, c.elem, s.extent, w, fh::Order::x_fastest, nullptr, "f" + std::to_string(f));
      const i64 bytes = fl.alloc[0] * fl.alloc[1] * fl.alloc[2] * c.elem;
      for (int copy = 0; copy < (c.jacobi ? 2 : 1); ++copy) {
        void* p = c.device ? gpu::alloc(bytes, s.device) : std::calloc(static_cast<std::size_t>(bytes), 1);
        if (p == nullptr) throw std::runtime_error("out of memory");
        a.mem.push_back(p);
        (copy == 0 ? fl.data : fl.data_next) = p;
      }
      fs.push_back(fl);
    }
    a.fields.push_back(fs);
  }
}

}  // namespace hb
