// ferry-halo-bench: Ferry's halo exchange against the baselines users write, on the same arrays in
// the same run. Times are per exchange, the maximum over ranks of each iteration (ranks start each
// iteration together), summarized as median, trimean, quartiles, min and max. Progress on stderr,
// a table on stdout (rank 0), JSON with --json FILE. `--help` lists the options.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "../../tests/halo_grid.hpp"
#include "../local_rank.hpp"
#include "halo_bench.hpp"

namespace hb {

Config parse(int argc, char** argv);  // options.cpp
extern const char* kUsage;

namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

struct Summary {
  double median = 0, trimean = 0, q1 = 0, q3 = 0, min = 0, max = 0;
};
// Per-iteration maxima over ranks, then order statistics.
Summary summarize(std::vector<double> t) {
  MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  std::sort(t.begin(), t.end());
  auto q = [&](double f) { return t[static_cast<std::size_t>(f * static_cast<double>(t.size() - 1) + 0.5)]; };
  Summary s;
  s.min = t.front(), s.max = t.back(), s.q1 = q(0.25), s.median = q(0.5), s.q3 = q(0.75);
  s.trimean = (s.q1 + 2 * s.median + s.q3) / 4;
  return s;
}

// The compute of one iteration: a kernel (or host loop) of set length, or Jacobi on a box; split
// into the interior (during the exchange) and the exterior (after), or all after.
struct Compute {
  const Config& c;
  Arrays& a;
  fh::Plan* plan = nullptr;
  double fraction_interior = 1.0;
  void host_spin(double us) {
    const auto t0 = Clock::now();
    while (us_since(t0) < us) {
    }
  }
  void run(bool interior) {
    if (c.compute_us <= 0 && !c.jacobi) return;
    const double part = interior ? fraction_interior : 1.0 - fraction_interior;
    if (!c.jacobi) {
      if (part <= 0) return;
      if (a.device) gpu::spin(c.compute_us * part);
      else host_spin(c.compute_us * part);
      return;
    }
    for (std::size_t s = 0; s < a.fields.size(); ++s) {
      const fh::Field& f = a.fields[s][0];
      std::vector<fh::Box> boxes;
      if (plan == nullptr) boxes.push_back({{0, 0, 0}, a.dom.local()[s].extent});
      else if (interior) boxes.push_back(plan->interior(static_cast<int>(s)));
      else boxes = plan->exterior(static_cast<int>(s));
      for (const fh::Box& b : boxes) {
        Box bb{b.lo, b.extent};
        if (a.device) {
          gpu::jacobi(static_cast<const double*>(f.data), static_cast<double*>(f.data_next ? f.data_next : f.data),
                      f.alloc, f.origin, bb);
          continue;
        }
        const double* in = static_cast<const double*>(f.data);
        double* out = static_cast<double*>(f.data_next);
        const i64 ax = f.alloc[0], axy = f.alloc[0] * f.alloc[1];
        for (i64 z = 0; z < bb.n[2]; ++z)
          for (i64 y = 0; y < bb.n[1]; ++y)
            for (i64 x = 0; x < bb.n[0]; ++x) {
              const i64 i = (f.origin[0] + bb.lo[0] + x) + ax * (f.origin[1] + bb.lo[1] + y) + axy * (f.origin[2] + bb.lo[2] + z);
              out[i] = (in[i - 1] + in[i + 1] + in[i - ax] + in[i + ax] + in[i - axy] + in[i + axy]) * (1.0 / 6.0);
            }
      }
    }
  }
};

struct Result {
  std::string name, how;
  Summary time, start_host;
  i64 bytes = 0, messages = 0;
  nlohmann::json extra = nlohmann::json::object();
};

// Fills the arrays with known values, runs one exchange, checks every point (halo_grid.hpp).
std::string check_once(const Config& c, Arrays& a, const std::function<void()>& exchange) {
  std::vector<std::vector<std::vector<unsigned char>>> host(a.fields.size());
  for (std::size_t s = 0; s < a.fields.size(); ++s)
    for (std::size_t f = 0; f < a.fields[s].size(); ++f) {
      const fh::Field& fl = a.fields[s][f];
      const i64 bytes = fl.alloc[0] * fl.alloc[1] * fl.alloc[2] * fl.elem_bytes;
      host[s].emplace_back(static_cast<std::size_t>(bytes));
      halo_test::fill(fl, host[s][f].data(), static_cast<int>(f), a.dom.local()[s], 7);
      if (a.device) {
        gpu::put(fl.data, host[s][f].data(), bytes);
        gpu::sync();
      } else {
        std::memcpy(fl.data, host[s][f].data(), static_cast<std::size_t>(bytes));
      }
    }
  exchange();
  std::string err;
  for (std::size_t s = 0; s < a.fields.size(); ++s)
    for (std::size_t f = 0; f < a.fields[s].size(); ++f) {
      const fh::Field& fl = a.fields[s][f];
      const i64 bytes = fl.alloc[0] * fl.alloc[1] * fl.alloc[2] * fl.elem_bytes;
      if (a.device) gpu::get(host[s][f].data(), fl.data, bytes);
      else std::memcpy(host[s][f].data(), fl.data, static_cast<std::size_t>(bytes));
      err += halo_test::check(fl, host[s][f].data(), static_cast<int>(f), a.dom.local()[s], 7, a.dom.global(), a.dom.periodic());
    }
  (void)c;
  int bad = err.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return bad ? (err.empty() ? "wrong on another rank" : err) : "";
}

// Times `iteration` (which must leave the GPU idle when it returns).
Summary time_it(const Config& c, const std::function<void()>& iteration) {
  for (int i = 0; i < c.warmup; ++i) iteration();
  std::vector<double> t;
  for (int i = 0; i < c.iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    iteration();
    t.push_back(us_since(t0));
  }
  return summarize(t);
}

void progress(const Config& c, const std::string& what) {
  if (!c.quiet && rank_of() == 0) std::fprintf(stderr, "ferry-halo-bench: %s\n", what.c_str());
}

Result run_library(const Config& c, Arrays& a, const std::string& method) {
  fh::Options o;
  if (method != "auto") {
    const auto m = fh::method_named(method);
    if (!m) throw std::runtime_error("no method " + method);
    o.method = *m;
  }
  o.graphs = c.graphs;
  o.fused = c.fused;
  o.priority_stream = c.priority;
  o.split_bytes = c.split_bytes;
  fh::Plan plan = fh::plan(a.dom, a.fields, o);
  Result r;
  r.name = "ferry " + method;
  r.how = "ferry::halo, " + std::string(a.device ? "device" : "host") + " arrays" +
          (a.device ? std::string(", graphs ") + (c.graphs ? "on" : "off") + (c.fused ? ", fused" : ", separate launches") +
                      (c.priority ? "" : ", on the caller's stream") : "");
  const fh::Stats st = plan.stats();
  nlohmann::json methods = nlohmann::json::object();
  for (int m = 0; m < fh::kMethods; ++m)
    if (st.sent[m].messages > 0) {
      methods[fh::name(static_cast<fh::Method>(m))] = {{"messages", st.sent[m].messages}, {"bytes", st.sent[m].bytes},
                                                      {"regions", st.sent[m].regions}};
      r.bytes += st.sent[m].bytes;
      r.messages += st.sent[m].messages;
    }
  r.extra["methods"] = methods;
  r.extra["pack_launches"] = st.pack_launches;
  r.extra["unpack_launches"] = st.unpack_launches;
  if (rank_of() == 0 && !c.quiet) std::fprintf(stderr, "%s", plan.describe().c_str());
  if (c.check) {
    const auto v = plan.verify();
    if (!v.ok()) throw std::runtime_error(r.name + ": verify() found " + std::to_string(v.bad_cells) + " bad cells\n" + v.first_errors);
    const std::string e = check_once(c, a, [&] {
      plan.exchange();
      if (a.device) gpu::sync();
    });
    if (!e.empty()) throw std::runtime_error(r.name + " is wrong:\n" + e);
  }
  Compute comp{c, a, c.split_compute ? &plan : nullptr};
  if (c.split_compute) {
    i64 in = 0, all = 0;
    for (std::size_t s = 0; s < a.fields.size(); ++s) in += plan.interior(static_cast<int>(s)).points(), all += fh::Box{{}, a.dom.local()[s].extent}.points();
    comp.fraction_interior = all ? static_cast<double>(in) / static_cast<double>(all) : 0.0;
  }
  auto* stream = static_cast<ferry::gpu::Stream>(a.device ? gpu::stream() : nullptr);
  std::vector<double> submit;
  r.time = time_it(c, [&] {
    const auto t0 = Clock::now();
    plan.start(stream);
    submit.push_back(us_since(t0));
    if (c.split_compute) comp.run(true);
    plan.finish(stream);
    comp.run(!c.split_compute);
    if (a.device) gpu::sync();
  });
  submit.erase(submit.begin(), submit.begin() + c.warmup);
  r.start_host = summarize(submit);
  if (c.compute_us > 0 || c.jacobi) {
    const Summary only = time_it(c, [&] {
      comp.run(true);
      if (c.split_compute) comp.run(false);
      if (a.device) gpu::sync();
    });
    r.extra["compute_only_median_us"] = only.median;
    r.extra["with_exchange_over_compute_only"] = r.time.median / only.median;
  }
  return r;
}

Result run_baseline(const Config& c, Arrays& a, const std::string& which) {
  Baseline b = which == "a"      ? baseline_subarray(c, a)
               : which == "b"    ? baseline_struct(c, a)
               : which == "c"    ? baseline_staging(c, a)
               : which == "d"    ? baseline_alltoallw(c, a)
               : which == "e"    ? baseline_fused_kernel(c, a, false)
               : which == "e208" ? baseline_fused_kernel(c, a, true)
               : which == "hand" ? baseline_hand(c, a, false)
               : which == "dim"  ? baseline_hand(c, a, true)
                                 : throw std::runtime_error("no baseline " + which);
  Result r;
  r.name = b.name;
  r.how = b.how;
  r.bytes = b.bytes;
  r.messages = b.messages;
  // The dim-ordered phases forward corners, so they match only where every corner has a source
  // and the widths are the axis form.
  if (c.check && (which != "dim" || (!c.faces_only && !c.no_corners && c.dir_widths.empty() && c.periodic[0] && c.periodic[1] && c.periodic[2]))) {
    const std::string e = check_once(c, a, b.run);
    if (!e.empty()) throw std::runtime_error(b.name + " is wrong:\n" + e);
  }
  Compute comp{c, a, nullptr};
  r.time = time_it(c, [&] {
    b.run();
    comp.run(true);
    if (a.device) gpu::sync();
  });
  if (b.cleanup) b.cleanup();
  return r;
}

nlohmann::json to_json(const Summary& s) {
  return {{"median_us", s.median}, {"trimean_us", s.trimean}, {"q1_us", s.q1}, {"q3_us", s.q3}, {"min_us", s.min}, {"max_us", s.max}};
}

// The P2P floor of the run: the GPUs the domain uses (on rank 0's node) copy, all at once, the
// bytes each GPU sends to other GPUs per exchange (the largest over GPUs, from `ferry`'s plan) in
// a ring, contiguous. Timed by rank 0 while the others wait. Empty where fewer than 2 GPUs.
nlohmann::json p2p_floor(const Config& c, const Arrays& a, const Result& ferry) {
  i64 off_gpu = 0;
  for (const auto& [method, m] : ferry.extra["methods"].items())
    if (method != "local") off_gpu += m["bytes"].get<i64>();
  std::vector<int> mine;
  for (const fh::Subdomain& s : a.dom.local()) mine.push_back(s.device);
  std::sort(mine.begin(), mine.end());
  mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  i64 per_gpu = mine.empty() ? 0 : off_gpu / static_cast<i64>(mine.size());
  MPI_Allreduce(MPI_IN_PLACE, &per_gpu, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
  const int n = static_cast<int>(mine.size());
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 1; r < size; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<int> gpus(static_cast<std::size_t>(displs.back() + counts.back()));
  MPI_Allgatherv(mine.data(), n, MPI_INT, gpus.data(), counts.data(), displs.data(), MPI_INT, MPI_COMM_WORLD);
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  nlohmann::json j;
  if (gpus.size() < 2 || per_gpu <= 0 || !a.device) return j;
  double us = 0;
  if (rank_of() == 0) us = gpu::p2p_ring_us(per_gpu, gpus, std::max(20, c.iters));
  MPI_Bcast(&us, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  j = {{"bytes_per_gpu", per_gpu}, {"gpus", gpus}, {"median_us", us},
       {"gbps_per_gpu", static_cast<double>(per_gpu) / us / 1e3},
       {"how", "every GPU copies bytes_per_gpu into the next of the ring at once (cudaMemcpyPeerAsync)"}};
  return j;
}

int bench_main(int argc, char** argv) {
  const Config c = parse(argc, argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (c.device && !gpu::available()) {
    if (rank_of() == 0) std::printf("ferry-halo-bench: skipped: --memory device and no usable GPU\n");
    return 77;  // ctest's skip code
  }
  if (c.device) gpu::choose_device(bench::node_rank(MPI_COMM_WORLD));  // where the launcher did not say
  Arrays a;
  make_arrays(c, a);
  if (rank_of() == 0 && !c.quiet) std::fprintf(stderr, "%s\n", a.dom.describe().c_str());
  nlohmann::json out;
  out["ranks"] = size;
  out["memory"] = a.device ? "device" : "host";
  out["global"] = a.dom.global();
  out["grid"] = a.dom.grid();
  out["fields"] = c.fields;
  out["type"] = c.type;
  out["minus"] = c.minus;
  out["plus"] = c.plus;
  out["periodic"] = c.periodic;
  out["iters"] = c.iters;
  if (a.device) out["empty_launch_sync_us"] = gpu::empty_launch_sync_us();
  std::vector<Result> results;
  for (const std::string& m : c.methods) {
    progress(c, "ferry, method " + m);
    results.push_back(run_library(c, a, m));
  }
  for (const std::string& b : c.baselines) {
    progress(c, "baseline " + b);
    results.push_back(run_baseline(c, a, b));
  }
  const fh::PlacementReport pr = a.dom.placement_report();
  out["placement"] = {{"same_gpu", pr.same_gpu}, {"inter_node", pr.inter_node}, {"links", pr.links},
                      {"how", "halo points per exchange (per byte of element) inside one GPU, between nodes, "
                              "and between GPUs of a node per link class [GB/s, points]"}};
  std::vector<int> devs;
  for (const fh::Subdomain& s : a.dom.local()) devs.push_back(s.device);
  out["devices_rank0"] = devs;
  for (const Result& r : results)
    if (r.name.rfind("ferry", 0) == 0) {
      const nlohmann::json f = p2p_floor(c, a, r);
      if (!f.is_null()) out["p2p_floor"] = f;
      break;
    }
  if (rank_of() != 0) return 0;
  std::printf("%-40s %10s %10s %10s %10s %12s %9s\n", "case", "median_us", "trimean", "min", "max", "bytes/rank", "messages");
  for (const Result& r : results) {
    std::printf("%-40s %10.1f %10.1f %10.1f %10.1f %12lld %9lld\n", r.name.c_str(), r.time.median, r.time.trimean,
                r.time.min, r.time.max, static_cast<long long>(r.bytes), static_cast<long long>(r.messages));
    nlohmann::json j = {{"name", r.name}, {"how", r.how}, {"time", to_json(r.time)}, {"bytes", r.bytes}, {"messages", r.messages}};
    if (r.name.rfind("ferry", 0) == 0) j["start_host"] = to_json(r.start_host);
    j.update(r.extra);
    out["cases"].push_back(j);
    if (r.extra.contains("with_exchange_over_compute_only"))
      std::printf("%-40s compute only %.1f us, with exchange / compute only = %.3f\n", "", r.extra["compute_only_median_us"].get<double>(),
                  r.extra["with_exchange_over_compute_only"].get<double>());
    if (r.name.rfind("ferry", 0) == 0)
      std::printf("%-40s start() host time: median %.1f us\n", "", r.start_host.median);
  }
  std::printf("placement: %lld halo points inside GPUs, %lld between nodes", static_cast<long long>(pr.same_gpu),
              static_cast<long long>(pr.inter_node));
  for (const auto& [gbps, points] : pr.links) std::printf(", %lld over %.0f GB/s links", static_cast<long long>(points), gbps);
  std::printf("\n");
  if (out.contains("p2p_floor"))
    std::printf("P2P floor: %lld B per GPU over %zu GPUs at once: %.1f us (%.1f GB/s per GPU)\n",
                static_cast<long long>(out["p2p_floor"]["bytes_per_gpu"].get<i64>()), out["p2p_floor"]["gpus"].size(),
                out["p2p_floor"]["median_us"].get<double>(), out["p2p_floor"]["gbps_per_gpu"].get<double>());
  if (out.contains("empty_launch_sync_us"))
    std::printf("empty launch + synchronize: %.1f us\n", out["empty_launch_sync_us"].get<double>());
  if (!c.json.empty()) std::ofstream(c.json) << out.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace hb

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("%s", hb::kUsage);
      return 0;
    }
  // Device arrays: the rank's GPU before MPI_Init, so that what MPI and Ferry do there uses it.
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--memory") == 0 && std::strcmp(argv[i + 1], "device") == 0)
      hb::gpu::choose_device(bench::env_local_rank());
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  try {
    rc = hb::bench_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-halo-bench: %s\n", e.what());
    rc = 1;
  }
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
