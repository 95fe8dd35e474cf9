// The route of a message (transport.hpp): where its bytes are, and how it travels.
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>
#include <ferry/transport.hpp>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_Query_cuda_support
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>

#include "sys/env.hpp"
#include "sys/error.hpp"
#include "transport/methods.hpp"
#include "transport/wire.hpp"

namespace ferry::transport {

namespace env = detail::env;

const char* name(Method m) {
  switch (m) {
    case Method::host: return "host";
    case Method::passthrough: return "passthrough";
    case Method::staged: return "staged";
    case Method::pipelined: return "pipelined";
    case Method::ipc: return "ipc";
    case Method::local: return "local";
  }
  return "?";
}

// ---------------------------------------------------------------------------- memory

namespace {

bool is_gpu(gpu::Memory m) { return m == gpu::Memory::device || m == gpu::Memory::managed; }

// [lo, hi) byte ranges, relative to the origin, that one element's top-level blocks cover.
void regions(const Type& t, i64 shift, std::vector<std::pair<i64, i64>>* out) {
  const Node& root = *t.root();
  if (root.kind != NodeKind::blocks) {
    out->emplace_back(shift + root.lo, shift + root.hi);
    return;
  }
  for (const Entry& e : root.entries) {
    if (out->size() >= 64) {  // many blocks: the rest as one range (a struct has few members)
      out->emplace_back(shift + root.off + e.disp + e.child->lo, shift + root.hi);
      return;
    }
    if (e.child->bytes > 0)
      out->emplace_back(shift + root.off + e.disp + e.child->lo, shift + root.off + e.disp + e.child->hi);
  }
}

std::uintptr_t address(const void* origin, i64 offset) {
  return reinterpret_cast<std::uintptr_t>(origin) + static_cast<std::uintptr_t>(offset);
}

}  // namespace

Memory locate(const void* origin, i64 count, const Type& type) {
  Memory m;
  if (count <= 0 || type.size() == 0 || !gpu::available()) return m;
  const i64 span_hi = type.true_lb() + type.true_extent() + (count > 1 && type.extent() > 0 ? (count - 1) * type.extent() : 0);
  if (origin != nullptr) {
    const std::uintptr_t lo = address(origin, type.data_lb(count));
    m.alloc = gpu::where(reinterpret_cast<const void*>(lo));
    m.kind = m.alloc.kind;
    m.one_allocation = m.alloc.holds(lo, address(origin, span_hi));
    return m;
  }
  // MPI_BOTTOM: the displacements are addresses, and each block may be in its own allocation.
  std::vector<std::pair<i64, i64>> rs;
  regions(type, 0, &rs);
  if (count > 1) regions(type, (count - 1) * type.extent(), &rs);
  std::sort(rs.begin(), rs.end());
  bool pageable = false, any_gpu = false;
  std::vector<gpu::Allocation> seen;
  for (auto [lo, hi] : rs) {
    const std::uintptr_t a_lo = address(nullptr, lo), a_hi = address(nullptr, hi);
    auto known = std::find_if(seen.begin(), seen.end(), [&](const gpu::Allocation& a) { return a.holds(a_lo, a_hi); });
    const gpu::Allocation a = known != seen.end() ? *known : gpu::where(reinterpret_cast<const void*>(a_lo));
    if (known == seen.end() && a.base) seen.push_back(a);
    if (a.kind == gpu::Memory::host) pageable = true;
    if (is_gpu(a.kind) && !any_gpu) {
      any_gpu = true;
      m.kind = a.kind;
      m.alloc = a;
    }
    if (!is_gpu(m.kind) && a.kind == gpu::Memory::pinned_host && !m.alloc.base) m.alloc = a;
    m.one_allocation = m.one_allocation && (is_gpu(m.kind) ? m.alloc : a).holds(a_lo, a_hi);
  }
  if (any_gpu && pageable)
    detail::fail(MPI_ERR_BUFFER, "the datatype's blocks lie in GPU memory and in pageable host memory "
                                 "at once (MPI_BOTTOM): no engine reaches both; use pinned host memory");
  if (!any_gpu) m.kind = pageable ? gpu::Memory::host : gpu::Memory::pinned_host;
  return m;
}

const char* Route::first() const {
  return reinterpret_cast<const char*>(address(origin, type && count > 0 ? type->data_lb(count) : 0));
}

Route route(const void* origin, i64 count, MPI_Datatype type) {
  std::shared_ptr<const Type> t;
  try {
    t = lookup(type);
  } catch (const Error&) {  // a type Ferry cannot read: host memory, the MPI decides and reports
    Route r;
    r.origin = origin;
    r.count = count;
    return r;
  }
  return route(origin, count, std::move(t));
}

Route route(const void* origin, i64 count, std::shared_ptr<const Type> type) {
  Route r;
  r.origin = origin;
  r.count = count;
  r.type = std::move(type);
  if (!r.type) return r;
  r.bytes = count > 0 ? pack_size(count, *r.type) : 0;
  r.memory = locate(origin, count, *r.type);
  if (r.device()) r.method = passthrough() ? Method::passthrough : Method::staged;
  return r;
}

// ---------------------------------------------------------------------------- methods

Method select(const Choice& c, model::DecisionCache* decisions) {
  if (!c.device) {
    // Tests: large host sends take the pipelined stub protocol, so CI runs it without a GPU.
    const bool test = c.protocol && c.protocol_test && !c.self && c.allow.pipelined &&
                      c.count >= 2 && c.bytes >= model::kPipelinedMinBytes;
    if (!test) return Method::host;
    if (c.forced && *c.forced != model::Method::pipelined) return Method::host;
    if (!c.forced && c.pipeline_min >= 0 && c.bytes < c.pipeline_min) return Method::host;
    return Method::pipelined;
  }
  if (c.passthrough) return Method::passthrough;
  if (!c.protocol) return Method::staged;
  if (c.self) {
    // A send to this process: the receiver moves the data from the sender's layout straight into
    // its own. A rendezvous, so only where the MPI call may wait for its receiver.
    const bool forced_other = c.forced && *c.forced != model::Method::ipc;
    return c.allow.rendezvous && c.allow.local && !forced_other && c.bytes >= kStubMinBytes ? Method::local
                                                                                     : Method::staged;
  }
  const bool node = c.locality != model::Locality::other_node;
  const bool ipc_ok = c.allow.rendezvous && c.ipc_memory && node && c.bytes >= 1;
  const bool pipe_ok = c.allow.pipelined && c.count >= 2 && c.bytes >= model::kPipelinedMinBytes;
  if (c.forced) {
    if (*c.forced == model::Method::ipc && ipc_ok) return Method::ipc;  // below the floor too
    if (*c.forced == model::Method::pipelined && pipe_ok) return Method::pipelined;
    return Method::staged;
  }
  const bool ipc_floor = ipc_ok && c.bytes >= kStubMinBytes;
  if (c.ipc_min >= 0 || c.pipeline_min >= 0) {
    if (c.ipc_min >= 0 && ipc_floor && c.bytes >= c.ipc_min) return Method::ipc;
    if (c.pipeline_min >= 0 && pipe_ok && c.bytes >= c.pipeline_min) return Method::pipelined;
    if (c.ipc_min >= 0 && c.pipeline_min >= 0) return Method::staged;
  }
  if (!decisions) return Method::staged;
  // One threshold set: the model decides the other method.
  const model::Method m =
      decisions->get(c.bytes, c.block, c.locality, c.ipc_min < 0 && ipc_floor).method;
  if (m == model::Method::ipc && ipc_floor) return Method::ipc;
  if (m == model::Method::pipelined && pipe_ok && c.pipeline_min < 0) return Method::pipelined;
  return Method::staged;
}

namespace {

// The method choice's settings, read once by methods::init().
struct Settings {
  std::unique_ptr<model::DecisionCache> decisions;
  std::optional<model::Method> forced;
  std::optional<model::Pack> forced_pack;
  i64 ipc_min = -1, pipeline_min = -1;
  i64 chunk = 0;  // FERRY_PIPELINE_CHUNK, 0: the model's rule
};
Settings& settings() {
  static Settings s;
  return s;
}

}  // namespace

void methods::init() {
  Settings& s = settings();
  s.ipc_min = env::integer_if_set(env::Knob::ipc_min).value_or(-1);
  s.pipeline_min = env::integer_if_set(env::Knob::pipeline_min).value_or(-1);
  s.chunk = env::integer_if_set(env::Knob::pipeline_chunk).value_or(0);
  if (const std::string f = env::text(env::Knob::method); !f.empty()) s.forced = model::method_named(f);
  if (const std::string f = env::text(env::Knob::pack); !f.empty()) s.forced_pack = model::pack_named(f);
  std::string why;
  s.decisions = std::make_unique<model::DecisionCache>(
      std::make_shared<const model::Model>(model::Model::from_environment(&why)));
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (env::flag(env::Knob::mpi_verbose) && rank == 0) {
    std::fprintf(stderr, "ferry-mpi: %s\n", why.c_str());
    std::fprintf(stderr, "ferry-mpi: topology: %s\n", world().describe().c_str());
  }
}

i64 methods::block_of(const Type& t) { return t.blocks() > 0 ? t.size() / t.blocks() : t.size(); }

model::Pack methods::pack_for(i64 bytes, i64 block, model::Direction dir) {
  const Settings& s = settings();
  if (block >= bytes) return model::Pack::one_shot;  // dense: one copy either way
  if (s.forced_pack) return *s.forced_pack;
  if (!s.decisions) return model::Pack::one_shot;
  const model::Decision d = s.decisions->get(bytes, block, model::Locality::other_gpu, false);
  return dir == model::Direction::pack ? d.pack : d.unpack;
}

void choose(Route& r, int peer, Allow allow) {
  r.peer = peer;
  const Settings& s = settings();
  const wire::State& w = wire::state();
  if (!r.type || peer < 0 || (!r.device() && !w.on)) return;
  Choice c;
  c.device = r.device();
  c.ipc_memory = r.memory.kind == gpu::Memory::device;
  c.passthrough = r.method == Method::passthrough;
  c.protocol = w.on;
  c.protocol_test = protocol_test();
  c.self = w.on && peer == w.rank;
  c.bytes = r.bytes;
  c.count = r.count;
  c.block = methods::block_of(*r.type);
  if (w.on && !c.self) r.locality = c.locality = transport::locality(peer, r.memory.alloc.device);
  if (c.self) r.locality = model::Locality::same_gpu;
  c.allow = allow;
  c.forced = s.forced;
  c.ipc_min = s.ipc_min;
  c.pipeline_min = s.pipeline_min;
  r.method = select(c, s.decisions.get());
  if (r.method == Method::staged) r.pack = methods::pack_for(r.bytes, c.block, model::Direction::pack);
}

void choose_unpack(Route& r) {
  if (r.type && r.device())
    r.pack = methods::pack_for(r.bytes, methods::block_of(*r.type), model::Direction::unpack);
}

void force_method(std::optional<model::Method> m) { settings().forced = m; }
void force_pack(std::optional<model::Pack> p) { settings().forced_pack = p; }

const char* locality_name(int peer, int device) {
  if (!wire::state().on || peer < 0 || peer >= world().size()) return nullptr;
  return model::name(locality(peer, device));
}

// ---------------------------------------------------------------------------- pipelined chunks

i64 pipeline_chunk(const model::Model& m, i64 bytes, i64 block, model::Locality l, i64 override_bytes) {
  if (override_bytes > 0) return override_bytes;
  constexpr i64 kFallback = i64{1} << 20;
  i64 best = bytes;
  double best_t = std::numeric_limits<double>::infinity();
  for (i64 c = i64{64} << 10; c <= bytes / 2; c *= 2) {
    const double p = m.predict_pack(model::Pack::one_shot, c, std::min(block, c));
    const double u = m.predict_pack(model::Pack::one_shot, c, std::min(block, c), model::Direction::unpack);
    const double x = m.predict_mpi(l, c);
    if (!std::isfinite(p) || !std::isfinite(u) || !std::isfinite(x)) return std::min(bytes, kFallback);
    const double n = std::ceil(static_cast<double>(bytes) / static_cast<double>(c));
    const double t = p + x + u + (n - 1) * std::max({p, x, u});
    if (t < best_t) best_t = t, best = c;
  }
  return best;
}

i64 methods::chunk_of(const Route& r) {
  const Settings& s = settings();
  const i64 size = r.type->size();
  i64 c = s.decisions ? pipeline_chunk(s.decisions->model(), r.bytes, block_of(*r.type), r.locality, s.chunk)
                      : (s.chunk > 0 ? s.chunk : i64{1} << 20);
  return std::max<i64>(1, c / size) * size;
}

// ---------------------------------------------------------------------------- pass-through

CudaAware mpi_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support() ? CudaAware::yes : CudaAware::no;
#elif defined(MPIX_GPU_SUPPORT_CUDA)
  int supported = 0;
  if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) != MPI_SUCCESS) return CudaAware::unknown;
  return supported ? CudaAware::yes : CudaAware::no;
#else
  return CudaAware::unknown;
#endif
}

bool use_passthrough(const std::string& knob, CudaAware mpi) {
  if (knob == "on") return true;
  if (knob == "off") return false;
  return mpi == CudaAware::yes;  // "auto"
}

}  // namespace ferry::transport
