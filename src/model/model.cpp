#include <ferry/model.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>

#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::model {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& why) { detail::fail(MPI_ERR_OTHER, "performance model: " + why); }

double lg(double x) { return std::log2(x); }

// Index i with xs[i] <= x < xs[i+1], clamped to [0, n-2]; n >= 2.
std::size_t segment(const std::vector<i64>& xs, i64 x) {
  auto it = std::upper_bound(xs.begin(), xs.end(), x);
  std::size_t i = it == xs.begin() ? 0 : static_cast<std::size_t>(it - xs.begin()) - 1;
  return std::min(i, xs.size() - 2);
}

double lerp_log(i64 x0, double y0, i64 x1, double y1, i64 x) {
  const double f = (lg(static_cast<double>(x)) - lg(static_cast<double>(x0))) /
                   (lg(static_cast<double>(x1)) - lg(static_cast<double>(x0)));
  return std::exp2(lg(y0) + f * (lg(y1) - lg(y0)));
}

void check_axis(const std::vector<i64>& xs, const char* what) {
  if (xs.empty()) bad(std::string(what) + ": no sizes");
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] <= 0) bad(std::string(what) + ": sizes must be positive");
    if (i && xs[i] <= xs[i - 1]) bad(std::string(what) + ": sizes must increase");
  }
}

void check_time(double t, const char* what) {
  if (!(t > 0) || !std::isfinite(t)) bad(std::string(what) + ": times must be positive and finite");
}

// A synthetic curve latency + size / bandwidth at powers of two, for the built-in model.
Curve line(double latency_us, double gbps) {
  Curve c;
  for (i64 b = 1; b <= (i64{1} << 30); b *= 2) {
    c.bytes.push_back(b);
    c.us.push_back(latency_us + static_cast<double>(b) / (gbps * 1e3));
  }
  return c;
}

Curve curve_from(const json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("bytes") || !j.contains("us")) bad(what + ": needs bytes and us");
  Curve c;
  c.bytes = j.at("bytes").get<std::vector<i64>>();
  c.us = j.at("us").get<std::vector<double>>();
  check_axis(c.bytes, what.c_str());
  if (c.us.size() != c.bytes.size()) bad(what + ": bytes and us differ in length");
  for (double t : c.us) check_time(t, what.c_str());
  return c;
}

Surface surface_from(const json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("bytes") || !j.contains("block") || !j.contains("us"))
    bad(what + ": needs bytes, block and us");
  Surface s;
  s.bytes = j.at("bytes").get<std::vector<i64>>();
  s.block = j.at("block").get<std::vector<i64>>();
  s.us = j.at("us").get<std::vector<std::vector<double>>>();
  check_axis(s.bytes, what.c_str());
  check_axis(s.block, what.c_str());
  if (s.us.size() != s.bytes.size()) bad(what + ": us needs one row per size");
  for (auto& row : s.us) {
    if (row.size() != s.block.size()) bad(what + ": us needs one column per block size");
    for (double t : row) check_time(t, what.c_str());
  }
  return s;
}

}  // namespace

namespace {
// Names by enum value (the enums count from 0 in declaration order).
constexpr const char* kMethodNames[] = {"staged", "pipelined", "ipc"};
constexpr const char* kLocalityNames[] = {"same_gpu", "other_gpu", "other_node"};
constexpr const char* kPackNames[] = {"device", "one_shot"};

template <std::size_t N, class E>
const char* name_in(const char* const (&names)[N], E e) {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : "?";
}
template <class E, std::size_t N>
std::optional<E> named_in(const char* const (&names)[N], const std::string& s) {
  for (std::size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}
}  // namespace

const char* name(Method m) { return name_in(kMethodNames, m); }
const char* name(Locality l) { return name_in(kLocalityNames, l); }
const char* name(Pack p) { return name_in(kPackNames, p); }
std::optional<Method> method_named(const std::string& s) { return named_in<Method>(kMethodNames, s); }
std::optional<Locality> locality_named(const std::string& s) { return named_in<Locality>(kLocalityNames, s); }
std::optional<Pack> pack_named(const std::string& s) { return named_in<Pack>(kPackNames, s); }

double Curve::at(i64 size) const {
  if (bytes.empty()) return std::numeric_limits<double>::infinity();
  if (size <= bytes.front() || bytes.size() == 1) {
    if (bytes.size() == 1 && size > bytes.front())
      return us.front() * static_cast<double>(size) / static_cast<double>(bytes.front());
    return us.front();
  }
  if (size >= bytes.back()) return us.back() * static_cast<double>(size) / static_cast<double>(bytes.back());
  const std::size_t i = segment(bytes, size);
  return lerp_log(bytes[i], us[i], bytes[i + 1], us[i + 1], size);
}

double Surface::at(i64 size, i64 block_size) const {
  if (empty()) return std::numeric_limits<double>::infinity();
  auto clamp = [](const std::vector<i64>& xs, i64 x) { return std::min(std::max(x, xs.front()), xs.back()); };
  const i64 x = clamp(bytes, size), y = clamp(block, block_size);
  // Along the block axis at the two neighbouring sizes, then along the size axis.
  auto row_at = [&](std::size_t r) {
    if (block.size() == 1) return us[r][0];
    const std::size_t j = segment(block, y);
    return lerp_log(block[j], us[r][j], block[j + 1], us[r][j + 1], y);
  };
  double t;
  if (bytes.size() == 1) {
    t = row_at(0);
  } else {
    const std::size_t i = segment(bytes, x);
    t = lerp_log(bytes[i], row_at(i), bytes[i + 1], row_at(i + 1), x);
  }
  // Beyond the largest object measured: time scales with size.
  return size > bytes.back() ? t * static_cast<double>(size) / static_cast<double>(bytes.back()) : t;
}

Model Model::builtin() {
  // Measured on one H100 under CUDA MPS, two ranks sharing it (ferry-measure --quick, 2026-11-25
  // 18:46 UTC; docs/performance.md "Built-in model"): staged 16.9 us at 1 B and 5.8 GB/s (16 MiB:
  // 2,900 us); IPC 13.5 us at its 4 KiB floor and 1.37 TB/s (64 MiB: 62.5 us); pipelined as
  // measured at 1, 4, 16 and 64 MiB. IPC to another GPU: measured on two H200s (below). Both
  // methods across nodes: estimates (below).
  Model m;
  m.info["source"] = "built-in";
  const Curve pipelined_one_node{{1 << 20, 4 << 20, 16 << 20, 64 << 20},
                                 {211.0, 700.7, 2475.2, 12372.1}};
  for (Locality l : {Locality::same_gpu, Locality::other_gpu}) {
    m.set_curve(Method::staged, l, line(16.9, 5.8));
    m.set_curve(Method::pipelined, l, pipelined_one_node);
  }
  // Across nodes, estimates: staging as copies at the bus rate around the network's (13 us +
  // 12 GB/s), the pipelined method overlapping them (126.8 us + 25 GB/s).
  m.set_curve(Method::staged, Locality::other_node, line(13.0, 12.0));
  m.set_curve(Method::pipelined, Locality::other_node, line(126.8, 25.0));
  // IPC to another GPU of the node, measured between two H200s over NVLink (ferry-measure --quick,
  // one rank per GPU, 2026-11-28 17:12 UTC; docs/img/model_h200_2gpu.json, held-out check 28/28).
  m.set_curve(Method::ipc, Locality::other_gpu,
              Curve{{4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20},
                    {10.7, 10.6, 11.0, 11.9, 13.7, 22.1, 55.1, 184.9}});
  m.set_curve(Method::ipc, Locality::same_gpu, line(13.5, 1370.0));
  // The MPI alone between host buffers of one node (Open MPI 4.1, shared memory; bench_pingpong's
  // host rows on the H100 and H200 machines), for the pipelined chunk rule.
  const Curve host{{8, 4096, 65536, 1 << 20, 16 << 20}, {0.4, 2.4, 9.0, 100.0, 1600.0}};
  for (Locality l : {Locality::same_gpu, Locality::other_gpu, Locality::other_node}) m.set_mpi_curve(l, host);
  // Pack surfaces (µs; object size x contiguous block size) as ferry-measure measured them on an
  // H200 (docs/img/model_h200_1gpu.json, 2026-11-23): packing on the device and copying once beats
  // the one-shot kernel over the bus only for large objects of 1-byte blocks.
  const std::vector<i64> sizes{4096, 65536, 1048576, 8388608}, blocks{1, 8, 64, 512, 4096};
  m.set_surface(Pack::device, Surface{sizes, blocks,
                                      {{9.4, 9.0, 15.4, 9.7, 8.3},
                                       {11.0, 16.5, 12.1, 17.3, 11.6},
                                       {35.8, 34.6, 34.8, 28.8, 28.7},
                                       {179.0, 168.2, 168.3, 168.1, 168.4}}});
  m.set_surface(Pack::one_shot, Surface{sizes, blocks,
                                        {{8.1, 6.9, 7.0, 7.9, 3.4},
                                         {8.2, 9.2, 8.1, 8.9, 7.9},
                                         {33.2, 27.3, 26.8, 26.7, 27.1},
                                         {244.4, 166.8, 166.5, 166.4, 166.6}}});
  // Unpack surfaces (docs/img/model_h200_1gpu_v2.json, 2026-11-23 16:29 UTC): one-shot up to
  // about 1 MiB; above it, one copy into device memory and unpacking there is 4 % faster, and
  // far faster for 1-byte blocks.
  m.set_surface(Pack::device, Surface{sizes, blocks,
                                      {{8.0, 8.2, 8.0, 8.3, 7.8},
                                       {15.5, 15.7, 15.6, 15.8, 15.6},
                                       {28.0, 27.2, 26.9, 27.0, 26.8},
                                       {176.2, 165.9, 163.7, 164.6, 164.3}}},
                Direction::unpack);
  m.set_surface(Pack::one_shot, Surface{sizes, blocks,
                                        {{7.3, 7.4, 7.6, 7.5, 4.2},
                                         {9.6, 10.6, 9.9, 9.5, 9.6},
                                         {43.3, 28.1, 27.8, 27.9, 27.9},
                                         {236.2, 171.1, 171.2, 171.3, 171.2}}},
                Direction::unpack);
  return m;
}

void Model::set_curve(Method m, Locality l, Curve c) { curves_[{m, l}] = std::move(c); }
void Model::set_mpi_curve(Locality l, Curve c) { mpi_[l] = std::move(c); }

const Curve* Model::mpi_curve(Locality l) const {
  auto it = mpi_.find(l);
  return it == mpi_.end() || it->second.empty() ? nullptr : &it->second;
}

double Model::predict_mpi(Locality l, i64 bytes) const {
  const Curve* c = mpi_curve(l);
  if (!c && l == Locality::same_gpu) c = mpi_curve(Locality::other_gpu);
  if (!c && l == Locality::other_gpu) c = mpi_curve(Locality::same_gpu);
  if (c) return c->at(bytes);
  const double staged = predict(Method::staged, l, bytes);
  const double rest = staged - predict_pack(Pack::one_shot, bytes, bytes) -
                      predict_pack(Pack::one_shot, bytes, bytes, Direction::unpack);
  return std::isfinite(rest) ? std::max(rest, staged / 4) : staged / 4;
}
void Model::set_surface(Pack p, Surface s, Direction d) { surfaces_[{d, p}] = std::move(s); }

const Curve* Model::curve(Method m, Locality l) const {
  auto it = curves_.find({m, l});
  return it == curves_.end() || it->second.empty() ? nullptr : &it->second;
}

double Model::predict(Method m, Locality l, i64 bytes) const {
  const Curve* c = curve(m, l);
  if (!c && l == Locality::same_gpu) c = curve(m, Locality::other_gpu);
  if (!c && l == Locality::other_gpu) c = curve(m, Locality::same_gpu);
  return c ? c->at(bytes) : std::numeric_limits<double>::infinity();
}

double Model::predict_pack(Pack p, i64 bytes, i64 block, Direction d) const {
  auto it = surfaces_.find({d, p});
  if (it == surfaces_.end() && d == Direction::unpack) {
    const bool any_unpack = surfaces_.count({Direction::unpack, Pack::device}) ||
                            surfaces_.count({Direction::unpack, Pack::one_shot});
    if (!any_unpack) it = surfaces_.find({Direction::pack, p});
  }
  return it == surfaces_.end() ? std::numeric_limits<double>::infinity() : it->second.at(bytes, block);
}

Decision Model::choose(i64 bytes, i64 block, Locality l, bool ipc_possible) const {
  Decision d{Method::staged, Pack::one_shot, Pack::one_shot};
  double best = predict(Method::staged, l, bytes);
  if (bytes >= kPipelinedMinBytes) {
    const double t = predict(Method::pipelined, l, bytes);
    if (t < best) best = t, d.method = Method::pipelined;
  }
  if (ipc_possible && l != Locality::other_node && bytes >= kIpcMinBytes) {
    const double t = predict(Method::ipc, l, bytes);
    if (t < best) best = t, d.method = Method::ipc;
  }
  if (block > 0 && block < bytes) {
    for (Direction dir : {Direction::pack, Direction::unpack})
      if (predict_pack(Pack::device, bytes, block, dir) < predict_pack(Pack::one_shot, bytes, block, dir))
        (dir == Direction::pack ? d.pack : d.unpack) = Pack::device;
  }
  return d;
}

std::string Model::to_json() const {
  json j;
  j["format"] = "ferry-model";
  j["version"] = kFormatVersion;
  j["info"] = info;
  json methods = json::object();
  for (auto& [key, c] : curves_)
    methods[name(key.first)][name(key.second)] = {{"bytes", c.bytes}, {"us", c.us}};
  j["methods"] = methods;
  if (!mpi_.empty()) {
    json mpi = json::object();
    for (auto& [l, c] : mpi_) mpi[name(l)] = {{"bytes", c.bytes}, {"us", c.us}};
    j["mpi"] = mpi;
  }
  json packs = json::object(), unpacks = json::object();
  for (auto& [key, s] : surfaces_)
    (key.first == Direction::pack ? packs : unpacks)[name(key.second)] = {
        {"bytes", s.bytes}, {"block", s.block}, {"us", s.us}};
  j["pack"] = packs;
  if (!unpacks.empty()) j["unpack"] = unpacks;
  return j.dump(1);
}

Model Model::from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    bad(std::string("not JSON: ") + e.what());
  }
  try {
    if (!j.is_object() || j.value("format", "") != "ferry-model") bad("not a ferry-model file");
    const int version = j.value("version", -1);
    if (version != kFormatVersion && version != 1)
      bad("format version " + std::to_string(version) + ", this Ferry reads 1 and " +
          std::to_string(kFormatVersion));
    Model m;
    if (j.contains("info"))
      for (auto& [k, v] : j.at("info").items()) m.info[k] = v.is_string() ? v.get<std::string>() : v.dump();
    if (!j.contains("methods") || !j.at("methods").is_object()) bad("no methods");
    for (auto& [mname, per] : j.at("methods").items()) {
      auto method = method_named(mname);
      if (!method) bad("unknown method '" + mname + "'");
      if (!per.is_object()) bad("method '" + mname + "' is not an object");
      for (auto& [lname, c] : per.items()) {
        if (version == 1 && lname == "same_node") {  // one curve for the node's GPUs
          m.set_curve(*method, Locality::same_gpu, curve_from(c, mname + "/" + lname));
          m.set_curve(*method, Locality::other_gpu, curve_from(c, mname + "/" + lname));
          continue;
        }
        auto loc = locality_named(lname);
        if (!loc || (version == 1 && *loc != Locality::other_node))
          bad("unknown locality '" + lname + "'");
        m.set_curve(*method, *loc, curve_from(c, mname + "/" + lname));
      }
    }
    if (j.contains("mpi")) {  // optional: the MPI's own curves (older files have none)
      if (!j.at("mpi").is_object()) bad("'mpi' is not an object");
      for (auto& [lname, c] : j.at("mpi").items()) {
        auto loc = locality_named(lname);
        if (!loc) bad("unknown locality '" + lname + "' in mpi");
        m.set_mpi_curve(*loc, curve_from(c, "mpi/" + lname));
      }
    }
    bool staged = false;
    for (Locality l : {Locality::same_gpu, Locality::other_gpu, Locality::other_node})
      staged = staged || m.curve(Method::staged, l);
    if (!staged) bad("no curve for the staged method");
    for (Direction dir : {Direction::pack, Direction::unpack}) {
      const std::string section = dir == Direction::pack ? "pack" : "unpack";
      if (!j.contains(section)) continue;
      if (!j.at(section).is_object()) bad("'" + section + "' is not an object");
      for (auto& [pname, sj] : j.at(section).items()) {
        auto p = pack_named(pname);
        if (!p) bad("unknown " + section + " method '" + pname + "'");
        m.set_surface(*p, surface_from(sj, section + "/" + pname), dir);
      }
    }
    return m;
  } catch (const json::exception& e) {
    bad(std::string("malformed: ") + e.what());
  }
}

Model Model::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) bad("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return from_json(ss.str());
  } catch (const Error& e) {
    bad(path + ": " + e.what());
  }
}

void Model::save(const std::string& path) const {
  std::ofstream out(path);
  if (!out) bad("cannot write " + path);
  out << to_json() << "\n";
  if (!out) bad("cannot write " + path);
}

std::string Model::default_path() {
  const std::string dir = detail::env::cache_dir();
  if (dir.empty()) return "";
  return dir + "/ferry/model-" + detail::env::hostname() + ".json";
}

Model Model::from_environment(std::string* why) {
  std::string path;
  bool explicit_path = false;
  if (std::string e = detail::env::text(detail::env::Knob::model); !e.empty()) {
    path = std::move(e);
    explicit_path = true;
  } else {
    path = default_path();
  }
  if (!path.empty() && (explicit_path || std::ifstream(path).good())) {
    try {
      Model m = load(path);
      if (why) *why = "model " + path;
      return m;
    } catch (const Error& e) {
      if (why) *why = std::string(e.what()) + "; using the built-in model";
      return builtin();
    }
  }
  if (why) *why = "built-in model";
  return builtin();
}

Decision DecisionCache::get(i64 bytes, i64 block, Locality l, bool ipc_possible) {
  const Key k{bytes, block, static_cast<std::uint8_t>(l), ipc_possible};
  {
    std::shared_lock lock(mutex_);
    auto it = cache_.find(k);
    if (it != cache_.end()) return it->second;
  }
  const Decision d = model_->choose(bytes, block, l, ipc_possible);
  std::unique_lock lock(mutex_);
  cache_.emplace(k, d);
  return d;
}

std::size_t DecisionCache::size() const {
  std::shared_lock lock(mutex_);
  return cache_.size();
}

}  // namespace ferry::model
