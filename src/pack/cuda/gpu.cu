// The GPU engine's host side for single calls: device facts, per-type device tables, word-size and
// kernel selection, launches with checked errors. Batches and copies are in batch.cu. Every CUDA
// call besides the launches goes through the GPU layer (gpu/runtime.hpp).
#include <ferry/gpu.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "gpu/runtime.hpp"
#include "pack/cpu/engine.hpp"
#include "pack/cuda/engine.hpp"
#include "pack/cuda/kernels.cuh"
#include "pack/plan_build.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::gpu {

using detail::fail;
using detail::HostPlan;
using detail::PlanHead;
using detail::Plan;

namespace impl {

namespace {
constexpr int kMaxDevices = 64;
}  // namespace

const LaunchInfo& launch_info(int device) {
  static LaunchInfo infos[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  if (device < 0 || device >= kMaxDevices) fail(MPI_ERR_OTHER, "CUDA device index out of range");
  std::call_once(once[device], [device] {
    const gpu::DeviceInfo& d = gpu::device_info(device);
    infos[device].sms = d.sms;
    infos[device].policy = detail::launch_policy(d.major, d.minor);
    if (detail::env::gpu_threads() > 0) infos[device].policy.threads = detail::env::gpu_threads();
    if (detail::env::gpu_blocks_per_sm() > 0)
      infos[device].policy.blocks_per_sm = detail::env::gpu_blocks_per_sm();
  });
  return infos[device];
}

DeviceBytes upload(const void* host, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  DeviceBytes owned(alloc_device(static_cast<i64>(bytes)));
  copy(owned.get(), host, static_cast<i64>(bytes));
  return owned;
}

namespace {

// A type's count-independent plan and, for general forms, its tables in device memory; one per
// (type, device). Looked up on every call: a shared lock and one hash probe. Entries hold the type's
// root weakly: once the type is gone (ferry_type_free and every copy of the Type), a lookup no
// longer matches it and the next insertion frees it. A type whose plan cannot be built keeps its
// error, so later calls fail at once instead of rebuilding.
struct TypeTables {
  std::weak_ptr<const Node> root;
  PlanHead one;
  DeviceBytes pieces;
  DeviceBytes shapes;
  std::vector<detail::Piece> host_pieces;  // for planning on the host (pieces.cu)
  std::vector<detail::Shape> host_shapes;
  std::string error;  // non-empty: the plan could not be built
  int error_class = MPI_SUCCESS;
};

struct TablesKey {
  const Node* root;
  int device;
  bool operator==(const TablesKey& o) const { return root == o.root && device == o.device; }
};
struct TablesHash {
  std::size_t operator()(const TablesKey& k) const {
    return std::hash<const void*>()(k.root) ^ static_cast<std::size_t>(k.device);
  }
};

const TypeTables& tables_for(const Type& type, int device) {
  static std::shared_mutex mutex;
  static auto* cache = new std::unordered_map<TablesKey, std::shared_ptr<TypeTables>, TablesHash>();
  const TablesKey key{type.root().get(), device};
  std::shared_ptr<TypeTables> found;
  {
    std::shared_lock lock(mutex);
    auto it = cache->find(key);
    if (it != cache->end() && !it->second->root.expired()) found = it->second;
  }
  if (!found) {
    auto t = std::make_shared<TypeTables>();
    t->root = type.root();
    try {
      HostPlan host = detail::build_plan(type);
      t->one = host.head;
      if (host.head.plan.npieces) {
        t->pieces = upload(host.pieces.data(), host.pieces.size() * sizeof(detail::Piece));
        t->shapes = upload(host.shapes.data(), host.shapes.size() * sizeof(detail::Shape));
        t->host_pieces = std::move(host.pieces);
        t->host_shapes = std::move(host.shapes);
      }
    } catch (const Error& e) {
      if (e.mpi_error_class() != MPI_ERR_TYPE) throw;  // CUDA trouble: not the type's fault
      t->error = e.what();
      t->error_class = e.mpi_error_class();
    }
    std::vector<std::shared_ptr<TypeTables>> dead;  // freed after the lock is released
    {
      std::unique_lock lock(mutex);
      for (auto it = cache->begin(); it != cache->end();) {
        if (it->second->root.expired()) {
          dead.push_back(std::move(it->second));
          it = cache->erase(it);
        } else {
          ++it;
        }
      }
      auto [it, fresh] = cache->try_emplace(key, t);
      if (!fresh) dead.push_back(std::move(t));  // another thread made them first
      found = it->second;
    }
  }
  if (!found->error.empty()) fail(found->error_class, found->error);
  return *found;  // entries are only erased once their type is gone
}

}  // namespace

PlanHead plan_for(const Type& type, i64 count, int device) {
  // A thread's last plan: a loop of calls on one type (a halo code's faces, a benchmark) skips
  // the shared lock, the hash probe and with_count's rebuild of the shape. The weak reference
  // makes a type freed and another made at the same address miss.
  thread_local struct {
    const Node* root = nullptr;
    std::weak_ptr<const Node> alive;
    i64 count = -1;
    i64 extent = 0;  // a resized copy of a type shares its tree; count steps by the extent
    int device = -1;
    PlanHead head;
  } last;
  if (last.root == type.root().get() && last.count == count && last.extent == type.extent() &&
      last.device == device && !last.alive.expired())
    return last.head;
  const TypeTables& t = tables_for(type, device);
  PlanHead hp = detail::with_count(t.one, type, count);
  hp.plan.pieces = static_cast<const detail::Piece*>(t.pieces.get());
  hp.plan.shapes = static_cast<const detail::Shape*>(t.shapes.get());
  last.root = type.root().get();
  last.alive = type.root();
  last.count = count;
  last.extent = type.extent();
  last.device = device;
  last.head = hp;
  return hp;
}

PlanHead host_plan_for(const Type& type, i64 count, int device) {
  const TypeTables& t = tables_for(type, device);
  PlanHead hp = detail::with_count(t.one, type, count);
  hp.plan.pieces = t.host_pieces.data();
  hp.plan.shapes = t.host_shapes.data();
  return hp;
}

void check_reachable(const void* p, const char* what) {
  if (!reachable(memory_of(p)))
    fail(MPI_ERR_BUFFER, std::string("the ") + what + " is pageable host memory, which a GPU "
                         "kernel cannot reach; use device, managed or mapped pinned host memory");
}

i64 blocks_for(i64 words, const LaunchInfo& info) {
  const i64 tile = i64{info.policy.threads} * detail::kUnroll;
  return std::max<i64>(1, std::min<i64>((words + tile - 1) / tile,
                                        i64{info.sms} * info.policy.blocks_per_sm));
}

}  // namespace impl

using namespace impl;

namespace {

void check_args(const void* origin, i64 count, const Type& type, const void* packed) {
  if (count < 0) fail(MPI_ERR_COUNT, "negative count: " + std::to_string(count));
  if (count == 0 || type.size() == 0) return;
  // A null origin is MPI_BOTTOM (absolute displacements): the data's own address is checked.
  if (packed == nullptr) fail(MPI_ERR_BUFFER, "packed buffer is null");
  check_reachable(first_byte(origin, count, type), "unpacked buffer");
  check_reachable(packed, "packed buffer");
}

template <class Idx, int LW, bool Pack>
void launch_strided(const Plan& pl, char* mem, char* packed, int grid, int threads,
                    Stream s) {
  using detail::StridedPlan;
  using detail::strided_kernel;
  switch (pl.shape.nd) {
    case 1:
      strided_kernel<Idx, LW, 1, Pack><<<grid, threads, 0, s>>>(StridedPlan<1>(pl), mem, packed);
      break;
    case 2:
      strided_kernel<Idx, LW, 2, Pack><<<grid, threads, 0, s>>>(StridedPlan<2>(pl), mem, packed);
      break;
    case 3:
      strided_kernel<Idx, LW, 3, Pack><<<grid, threads, 0, s>>>(StridedPlan<3>(pl), mem, packed);
      break;
    default: strided_kernel<Idx, LW, -1, Pack><<<grid, threads, 0, s>>>(pl, mem, packed);
  }
}

template <class Idx, bool Pack>
void launch_words(const Plan& pl, int lw, char* mem, char* packed, int grid, int threads,
                  Stream s) {
#define FERRY_LW_CASE(LW)                                                                   \
  case LW:                                                                                  \
    if (pl.npieces)                                                                         \
      detail::general_kernel<Idx, LW, Pack><<<grid, threads, 0, s>>>(pl, mem, packed);      \
    else                                                                                    \
      launch_strided<Idx, LW, Pack>(pl, mem, packed, grid, threads, s);                     \
    return;
  switch (lw) {
    FERRY_LW_CASE(0)
    FERRY_LW_CASE(1)
    FERRY_LW_CASE(2)
    FERRY_LW_CASE(3)
    FERRY_LW_CASE(4)
  }
#undef FERRY_LW_CASE
}

}  // namespace

void impl::run_plan(bool pack, PlanHead hp, char* mem, char* pk, int device, Stream stream) {
  if (hp.contiguous) {
    char* at = mem + hp.plan.start;
    copy_async(pack ? pk : at, pack ? at : pk, hp.bytes, stream);
    return;
  }
  const int lw = detail::choose_lw(hp, mem, pk);
  detail::set_word(hp, lw);
  const LaunchInfo& info = launch_info(device);
  const int grid = static_cast<int>(blocks_for(hp.plan.total, info));
  const int threads = info.policy.threads;
  if (hp.wide) {
    if (pack) launch_words<std::uint64_t, true>(hp.plan, lw, mem, pk, grid, threads, stream);
    else launch_words<std::uint64_t, false>(hp.plan, lw, mem, pk, grid, threads, stream);
  } else {
    if (pack) launch_words<std::uint32_t, true>(hp.plan, lw, mem, pk, grid, threads, stream);
    else launch_words<std::uint32_t, false>(hp.plan, lw, mem, pk, grid, threads, stream);
  }
  check_launch(stream);
}

namespace {

void move(bool pack, const void* origin, i64 count, const Type& type, const void* packed,
          Stream stream, Event done) {
  check_args(origin, count, type, packed);
  if (count > 0 && type.size() > 0) {
    const int device = this_device();
    const PlanHead hp = plan_for(type, count, device);
    char* mem = const_cast<char*>(static_cast<const char*>(origin));
    char* pk = const_cast<char*>(static_cast<const char*>(packed));
    if (hp.plan.npieces == 0 || !run_pieces(pack, type, count, mem, pk, device, stream))
      run_plan(pack, hp, mem, pk, device, stream);
  }
  if (done) record(done, stream);
}

}  // namespace

void pack_async(const void* origin, i64 count, const Type& type, void* packed, Stream stream,
                Event done) {
  move(true, origin, count, type, packed, stream, done);
}

void unpack_async(const void* packed, void* origin, i64 count, const Type& type, Stream stream,
                  Event done) {
  move(false, origin, count, type, packed, stream, done);
}

namespace {

// Device scratch for staging through pageable host memory; freed on scope exit.
struct DeviceScratch {
  void* p = nullptr;
  explicit DeviceScratch(i64 bytes) : p(alloc_device(bytes)) {}
  ~DeviceScratch() { free_device(p); }
};

void move_sync(bool pack, const void* origin, i64 count, const Type& type, void* packed) {
  const i64 bytes = detail::checked_mul(count < 0 ? 0 : count, type.size(), MPI_ERR_COUNT,
                                        "packed size");
  const bool mem_ok = reachable(memory_of(first_byte(origin, count, type)));
  const bool packed_ok = reachable(memory_of(packed));
  if (count <= 0 || bytes == 0 || (mem_ok && packed_ok)) {
    move(pack, origin, count, type, packed, nullptr, nullptr);
  } else if (!mem_ok && !packed_ok) {
    if (pack) detail::cpu_pack(static_cast<const char*>(origin), count, type, static_cast<char*>(packed));
    else detail::cpu_unpack(static_cast<const char*>(packed), const_cast<char*>(static_cast<const char*>(origin)), count, type);
    return;
  } else if (mem_ok) {
    // Device data, pageable packed buffer: pack on the GPU into scratch, then copy.
    DeviceScratch scratch(bytes);
    if (pack) {
      move(true, origin, count, type, scratch.p, nullptr, nullptr);
      copy(packed, scratch.p, bytes);
    } else {
      copy(scratch.p, packed, bytes);
      move(false, origin, count, type, scratch.p, nullptr, nullptr);
    }
  } else {
    // Pageable data, device packed buffer: the CPU engine on a host copy of the packed bytes.
    std::vector<char> host(static_cast<std::size_t>(bytes));
    if (pack) {
      detail::cpu_pack(static_cast<const char*>(origin), count, type, host.data());
      copy(packed, host.data(), bytes);
    } else {
      copy(host.data(), packed, bytes);
      detail::cpu_unpack(host.data(), const_cast<char*>(static_cast<const char*>(origin)), count, type);
    }
    return;
  }
  sync_stream(nullptr);
}

}  // namespace

void pack(const void* origin, i64 count, const Type& type, void* packed) {
  move_sync(true, origin, count, type, packed);
}

void unpack(const void* packed, void* origin, i64 count, const Type& type) {
  move_sync(false, origin, count, type, const_cast<void*>(packed));
}

namespace {

struct SpanArgs {
  Span span[kSpansPerLaunch];
};

// Block row y copies span y in words of `Word`: the leading bytes up to the destination's word
// boundary one by one (the source then shares it: the caller checked), the words, the tail.
template <class Word>
__device__ void copy_words(char* d, const char* s, unsigned long long n) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long first = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const auto off = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(d) % sizeof(Word));
  const unsigned long long head = off == 0 ? 0 : sizeof(Word) - off < n ? sizeof(Word) - off : n;
  if (first < head) d[first] = s[first];
  const unsigned long long words = (n - head) / sizeof(Word);
  Word* dw = reinterpret_cast<Word*>(d + head);
  const Word* sw = reinterpret_cast<const Word*>(s + head);
  for (unsigned long long w = first; w < words; w += stride) dw[w] = sw[w];
  for (unsigned long long b = head + words * sizeof(Word) + first; b < n; b += stride) d[b] = s[b];
}

__global__ void copy_spans_kernel(SpanArgs a) {
  const Span sp = a.span[blockIdx.y];
  char* d = static_cast<char*>(sp.dst);
  const char* s = static_cast<const char*>(sp.src);
  const auto n = static_cast<unsigned long long>(sp.bytes);
  // The widest word both addresses reach together after the same number of leading bytes.
  const auto apart = reinterpret_cast<std::uintptr_t>(d) ^ reinterpret_cast<std::uintptr_t>(s);
  if (apart % 16 == 0) copy_words<uint4>(d, s, n);
  else if (apart % 8 == 0) copy_words<unsigned long long>(d, s, n);
  else if (apart % 4 == 0) copy_words<unsigned>(d, s, n);
  else copy_words<char>(d, s, n);
}

}  // namespace

void copy_spans_async(const Span* spans, std::size_t n, Stream stream) {
  constexpr unsigned kThreads = 256;
  for (std::size_t at = 0; at < n; at += kSpansPerLaunch) {
    SpanArgs a{};
    unsigned rows = 0;
    i64 most = 0;
    for (std::size_t k = at; k < std::min(n, at + kSpansPerLaunch); ++k) {
      if (spans[k].bytes < 0) fail(MPI_ERR_ARG, "copy_spans_async: a negative size");
      if (spans[k].bytes == 0) continue;
      a.span[rows++] = spans[k];
      most = std::max(most, spans[k].bytes);
    }
    if (rows == 0) continue;
    // Enough blocks for the largest span at 16 bytes a thread, at most 1024 a row.
    const i64 blocks = std::min<i64>(1024, std::max<i64>(1, (most + kThreads * 16 - 1) / (kThreads * 16)));
    copy_spans_kernel<<<dim3(static_cast<unsigned>(blocks), rows), kThreads, 0, stream>>>(a);
    check_launch(stream);
  }
}

}  // namespace ferry::gpu
