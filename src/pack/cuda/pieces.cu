// General forms moved piece by piece (pack/batch_plan.hpp, piece_moves): a struct of large boxes,
// such as one message's halo blocks in 8 field arrays merged into one struct of absolute
// addresses, runs as one launch of the lean batch kernel with a move per box, instead of the
// single-call kernel's search over the pieces for every word (Nsight Compute, the Astaroth case on
// one H200: 266 us in the single-call kernels for what the halo library's batch moves in 92 us).
//
// The moves and chunks of a (type, count[, type, count], direction, device) and the two bases'
// alignment (the word sizes follow it) are planned once and kept in device memory; later calls
// with other buffers of the same alignment reuse them, the pointers travel in the launch.
#include <ferry/gpu.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "pack/batch_plan.hpp"
#include "pack/cuda/batch_kernels.cuh"
#include "pack/cuda/engine.hpp"
#include "sys/env.hpp"

namespace ferry::gpu::impl {

namespace {

enum Kind { kPackKind, kUnpackKind, kCopyKind };

// Everything the moves depend on: the types' trees and extents (a count of elements steps by the
// extent, and a resized copy of a type shares its tree), the counts, and the bases' alignment.
struct Key {
  const Node* src = nullptr;
  const Node* dst = nullptr;  // copies only
  i64 sext = 0, dext = 0;
  i64 scount = 0, dcount = 0;
  int kind = 0, device = 0;
  unsigned smod = 0, dmod = 0;  // the bases' addresses modulo 16
  bool operator==(const Key& o) const {
    return src == o.src && dst == o.dst && sext == o.sext && dext == o.dext && scount == o.scount &&
           dcount == o.dcount && kind == o.kind && device == o.device && smod == o.smod && dmod == o.dmod;
  }
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    std::size_t h = std::hash<const void*>()(k.src);
    for (std::size_t v : {std::hash<const void*>()(k.dst), static_cast<std::size_t>(k.sext),
                          static_cast<std::size_t>(k.dext), static_cast<std::size_t>(k.scount),
                          static_cast<std::size_t>(k.dcount),
                          static_cast<std::size_t>(k.kind * 64 + k.device),
                          static_cast<std::size_t>(k.smod * 16 + k.dmod)})
      h = h * 1000003u ^ v;
    return h;
  }
};

// The plan of one key: whether the pieces fit, and their moves and chunks on the device.
struct Entry {
  std::weak_ptr<const Node> src, dst;
  bool fits = false;
  DeviceBytes table;  // the moves, then the chunks
  const detail::LeanMove* moves = nullptr;
  const detail::Chunk* chunks = nullptr;
  unsigned nchunks = 0;
};

constexpr std::size_t kMaxEntries = 4096;  // beyond: every entry is dropped and planned anew

unsigned mod16(const void* p) { return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(p) % 16); }

void upload_moves(Entry& e, const detail::PieceMoves& pm, int device, bool copy) {
  const LaunchInfo& info = launch_info(device);
  i64 total = 0;
  for (i64 b : pm.bytes) total += b;
  detail::ChunkPolicy policy;
  policy.fixed = detail::env::batch_chunk();
  std::vector<detail::Chunk> chunks =
      detail::partition(pm.bytes, detail::chunk_bytes(total, info.sms, policy));
  // A copy's chunks run in the order of the addresses they read, as a Batch's: blocks that run
  // together touch neighbouring memory, so the partial sectors of a box's 24-byte rows and of the
  // box beside it (a periodic row's two x faces) meet in L2 instead of each being filled from DRAM
  // (one rank's Astaroth exchange to itself: 181 -> 159 us). Packs and unpacks keep the moves'
  // order: in address order the 4-rank exchange's unpacks measured slower (918-924 against
  // 887-890 us, one H200).
  if (copy && detail::env::batch_order() != 0) {
    std::vector<std::uint64_t> key;
    for (const detail::Chunk& c : chunks)
      key.push_back(static_cast<std::uint64_t>(detail::lean_offset_of(pm.moves[c.move], c.begin)) ^
                    (std::uint64_t{1} << 63));  // signed order
    detail::order_chunks(chunks, key);
  }
  if (chunks.empty() || chunks.size() > static_cast<std::size_t>(INT32_MAX)) return;
  const std::size_t mbytes = pm.moves.size() * sizeof(detail::LeanMove);
  std::vector<char> host(mbytes + chunks.size() * sizeof(detail::Chunk));
  std::memcpy(host.data(), pm.moves.data(), mbytes);
  std::memcpy(host.data() + mbytes, chunks.data(), chunks.size() * sizeof(detail::Chunk));
  e.table = upload(host.data(), host.size());
  e.moves = static_cast<const detail::LeanMove*>(e.table.get());
  e.chunks = reinterpret_cast<const detail::Chunk*>(static_cast<const char*>(e.table.get()) + mbytes);
  e.nchunks = static_cast<unsigned>(chunks.size());
  e.fits = true;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<Key, std::shared_ptr<Entry>, KeyHash> map;
};
Cache& the_cache() {
  static auto* c = new Cache();  // never destroyed: entries may be in use at exit
  return *c;
}

// The key's entry, planned by `plan` (PieceMoves -> bool) when it is not kept yet; null when the
// device table could not be made (the single kernel then moves the data).
template <class Plan>
std::shared_ptr<const Entry> entry(const Key& key, const Type& src, const Type* dst, Plan plan) {
  Cache& c = the_cache();
  auto* cache = &c.map;
  {
    std::lock_guard lock(c.mutex);
    auto it = cache->find(key);
    if (it != cache->end() && !it->second->src.expired() && (!dst || !it->second->dst.expired()))
      return it->second;
  }
  auto e = std::make_shared<Entry>();
  e->src = src.root();
  if (dst) e->dst = dst->root();
  detail::PieceMoves pm;
  try {
    if (plan(pm)) upload_moves(*e, pm, key.device, key.kind == kCopyKind);
  } catch (const Error& err) {
    if (err.mpi_error_class() == MPI_ERR_TYPE) throw;  // the type's own fault, as for the single kernel
    return nullptr;  // no device memory for the table: not kept, tried again next time
  }
  std::vector<std::shared_ptr<Entry>> dead;  // freed after the lock is released
  std::lock_guard lock(c.mutex);
  if (cache->size() >= kMaxEntries) {
    for (auto& kv : *cache) dead.push_back(std::move(kv.second));
    cache->clear();
  }
  for (auto it = cache->begin(); it != cache->end();) {
    if (it->second->src.expired() || (it->first.dst && it->second->dst.expired())) {
      dead.push_back(std::move(it->second));
      it = cache->erase(it);
    } else {
      ++it;
    }
  }
  (*cache)[key] = e;
  return e;
}

// One call's general form moved piece by piece: the lean batch kernel with both
// pointers in the arguments, not in a table.
__global__ void __launch_bounds__(detail::kBatchThreads, detail::kBatchMinBlocks)
lean_pieces_kernel(const detail::LeanMove* __restrict__ moves, const detail::Chunk* __restrict__ chunks,
                   const char* src, char* dst) {
  using detail::LeanMove;
  __shared__ std::uint64_t raw[sizeof(LeanMove) / 8];
  const detail::Chunk c = chunks[blockIdx.x];
  const auto* words = reinterpret_cast<const std::uint64_t*>(moves + c.move);
  for (unsigned i = threadIdx.x; i < sizeof(LeanMove) / 8; i += blockDim.x) raw[i] = words[i];
  __syncthreads();
  const LeanMove& m = *reinterpret_cast<const LeanMove*>(raw);
  detail::lean_any(m, src + m.src_off, dst + m.dst_off, c);
}

std::atomic<long> launched{0};

void launch(const Entry& e, const char* src, char* dst, Stream stream) {
  lean_pieces_kernel<<<e.nchunks, detail::kBatchThreads, 0, stream>>>(e.moves, e.chunks, src, dst);
  check_launch(stream);
  launched.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

// Not while the stream is captured: the graph would keep the table's address, and the cache may
// free it when it is full; the single kernel's tables live as long as their type.
bool run_pieces(bool pack, const Type& type, i64 count, char* mem, char* pk, int device, Stream stream) {
  if (!detail::env::pieces() || capturing(stream)) return false;
  const Key key{type.root().get(), nullptr, type.extent(), 0, count, 0, pack ? kPackKind : kUnpackKind, device, mod16(mem), mod16(pk)};
  const auto e = entry(key, type, nullptr, [&](detail::PieceMoves& pm) {
    return detail::piece_moves(host_plan_for(type, count, device), pack, reinterpret_cast<std::uintptr_t>(mem),
                               reinterpret_cast<std::uintptr_t>(pk), detail::PieceLimits{}, pm);
  });
  if (!e || !e->fits) return false;
  if (pack) launch(*e, mem, pk, stream);
  else launch(*e, pk, mem, stream);
  return true;
}

long piece_launches() { return launched.load(std::memory_order_relaxed); }

bool copy_pieces(const Type& stype, i64 scount, const char* src, const Type& dtype, i64 dcount,
                 char* dst, int device, Stream stream) {
  if (!detail::env::pieces() || capturing(stream)) return false;
  const Key key{stype.root().get(), dtype.root().get(), stype.extent(), dtype.extent(), scount, dcount, kCopyKind, device, mod16(src), mod16(dst)};
  const auto e = entry(key, stype, &dtype, [&](detail::PieceMoves& pm) {
    return detail::piece_copy_moves(host_plan_for(stype, scount, device), host_plan_for(dtype, dcount, device),
                                    reinterpret_cast<std::uintptr_t>(src), reinterpret_cast<std::uintptr_t>(dst),
                                    detail::PieceLimits{}, pm);
  });
  if (!e || !e->fits) return false;
  launch(*e, src, dst, stream);
  return true;
}

}  // namespace ferry::gpu::impl
