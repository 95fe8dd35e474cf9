// Batches (many packs, unpacks and copies in one launch, with a pointer table the host rewrites in
// stream order) and single copies from one layout into another.
#include <ferry/gpu.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <exception>
#include <cstring>
#include <string>
#include <vector>

#include "pack/batch_plan.hpp"
#include "pack/cpu/engine.hpp"
#include "pack/cuda/batch_kernels.cuh"
#include "pack/cuda/engine.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::gpu {

using namespace impl;
using detail::Chunk;
using detail::fail;
using detail::GeneralMove;
using detail::LeanMove;
using detail::PlanHead;
using detail::SidePlan;

namespace {

// Bytes a copy moves: both sides must hold the same number.
i64 copy_bytes(i64 scount, const Type& stype, i64 dcount, const Type& dtype) {
  if (scount < 0 || dcount < 0)
    fail(MPI_ERR_COUNT, "negative count: " + std::to_string(std::min(scount, dcount)));
  const i64 s = detail::checked_mul(scount, stype.size(), MPI_ERR_COUNT, "source size");
  const i64 d = detail::checked_mul(dcount, dtype.size(), MPI_ERR_COUNT, "destination size");
  if (d < s)
    fail(MPI_ERR_TRUNCATE, "copy destination holds " + std::to_string(d) + " bytes, the source " +
                               std::to_string(s));
  if (d > s)
    fail(MPI_ERR_COUNT, "copy destination holds " + std::to_string(d) + " bytes, more than the "
                        "source's " + std::to_string(s) + ": a copy fills its destination exactly");
  return s;
}

template <int LW>
void launch_lean_copy(const LeanMove& m, const char* src, char* dst, std::uint32_t words,
                      int grid, Stream s) {
  if (m.kind == detail::kCopySame)
    detail::lean_copy_kernel<LW, detail::kCopySame><<<grid, detail::kBatchThreads, 0, s>>>(m, src, dst, words);
  else
    detail::lean_copy_kernel<LW, detail::kCopyTwo><<<grid, detail::kBatchThreads, 0, s>>>(m, src, dst, words);
}

template <class Idx>
void launch_general_copy(const GeneralMove& m, const char* src, char* dst, Idx words, int grid,
                         Stream s) {
#define FERRY_COPY_CASE(LW)                                                                   \
  case LW:                                                                                    \
    detail::general_copy_kernel<Idx, LW><<<grid, detail::kBatchThreads, 0, s>>>(m, src, dst,  \
                                                                                words);       \
    return;
  switch (m.lw) {
    FERRY_COPY_CASE(0)
    FERRY_COPY_CASE(1)
    FERRY_COPY_CASE(2)
    FERRY_COPY_CASE(3)
    FERRY_COPY_CASE(4)
  }
#undef FERRY_COPY_CASE
}

int copy_grid(i64 words, int lw, const LaunchInfo& info) {
  const i64 tile = i64{detail::kBatchThreads} * (lw >= 4 ? 2 : detail::kUnroll);
  return static_cast<int>(std::max<i64>(
      1, std::min<i64>((words + tile - 1) / tile, i64{info.sms} * info.policy.blocks_per_sm)));
}

}  // namespace

void copy_async(const void* src, i64 scount, const Type& stype, void* dst, i64 dcount,
                const Type& dtype, Stream stream, Event done) {
  const i64 bytes = copy_bytes(scount, stype, dcount, dtype);
  if (bytes > 0) {
    check_reachable(first_byte(src, scount, stype), "copy source");
    check_reachable(first_byte(dst, dcount, dtype), "copy destination");
    const int device = this_device();
    const PlanHead hs = plan_for(stype, scount, device);
    const PlanHead hd = plan_for(dtype, dcount, device);
    char* s = const_cast<char*>(static_cast<const char*>(src));
    char* d = static_cast<char*>(dst);
    if (hs.contiguous && hd.contiguous) {
      copy_async(d + hd.plan.start, s + hs.plan.start, bytes, stream);
    } else if (hs.contiguous) {
      run_plan(false, hd, d, s + hs.plan.start, device, stream);
    } else if (hd.contiguous) {
      run_plan(true, hs, s, d + hd.plan.start, device, stream);
    } else if ((hs.plan.npieces == 0 && hd.plan.npieces == 0) ||
               !copy_pieces(stype, scount, s, dtype, dcount, d, device, stream)) {
      const SidePlan a{true, hs, reinterpret_cast<std::uintptr_t>(s)};
      const SidePlan b{true, hd, reinterpret_cast<std::uintptr_t>(d)};
      const int lw = detail::move_lw(a, b);
      const i64 words = bytes >> lw;
      const int grid = copy_grid(words, lw, launch_info(device));
      if (detail::lean_fits(hs) && detail::lean_fits(hd)) {
        const LeanMove m = detail::make_lean(a, b, lw, 0, 0);
        const auto w = static_cast<std::uint32_t>(words);
        switch (lw) {
          case 0: launch_lean_copy<0>(m, s, d, w, grid, stream); break;
          case 1: launch_lean_copy<1>(m, s, d, w, grid, stream); break;
          case 2: launch_lean_copy<2>(m, s, d, w, grid, stream); break;
          case 3: launch_lean_copy<3>(m, s, d, w, grid, stream); break;
          default: launch_lean_copy<4>(m, s, d, w, grid, stream);
        }
      } else {
        const GeneralMove m = detail::make_general(a, b, lw, 0, 0);
        if (m.wide) launch_general_copy<std::uint64_t>(m, s, d, static_cast<std::uint64_t>(words), grid, stream);
        else launch_general_copy<std::uint32_t>(m, s, d, static_cast<std::uint32_t>(words), grid, stream);
      }
      check_launch(stream);
    }
  }
  if (done) record(done, stream);
}

void copy(const void* src, i64 scount, const Type& stype, void* dst, i64 dcount,
          const Type& dtype) {
  const i64 bytes = copy_bytes(scount, stype, dcount, dtype);
  if (bytes == 0) return;
  const bool src_ok = reachable(memory_of(first_byte(src, scount, stype)));
  const bool dst_ok = reachable(memory_of(first_byte(dst, dcount, dtype)));
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  if (src_ok && dst_ok) {
    copy_async(src, scount, stype, dst, dcount, dtype, nullptr, nullptr);
    sync_stream(nullptr);
  } else if (!src_ok && !dst_ok) {
    detail::cpu_copy(s, scount, stype, d, dcount, dtype);
  } else if (src_ok) {  // the GPU packs, the CPU unpacks into pageable memory
    std::vector<char> host(static_cast<std::size_t>(bytes));
    pack(src, scount, stype, host.data());
    detail::cpu_unpack(host.data(), d, dcount, dtype);
  } else {
    std::vector<char> host(static_cast<std::size_t>(bytes));
    detail::cpu_pack(s, scount, stype, host.data());
    unpack(host.data(), dst, dcount, dtype);
  }
}

namespace {

// Up to kCopiesPerLaunch lean copies of copy_many_async, passed by value: block b works for copy
// k where first[k] <= b < first[k + 1], as copy_async's grid-stride loop would with that many blocks.
struct LeanCopies {
  LeanMove move[kCopiesPerLaunch];
  const char* src[kCopiesPerLaunch];
  char* dst[kCopiesPerLaunch];
  std::uint32_t words[kCopiesPerLaunch];
  std::uint32_t first[kCopiesPerLaunch + 1];
  std::uint32_t n;
};
static_assert(sizeof(LeanCopies) <= 4000, "kernel parameters: at most 4 KB on every GPU");

template <int LW>
__device__ __forceinline__ void copies_loop(const LeanMove& m, const char* src, char* dst,
                                            std::uint32_t block, std::uint32_t blocks,
                                            std::uint32_t words) {
  const std::uint32_t tile = blockDim.x * detail::batch_unroll<LW>();
  const std::uint32_t first = block * tile + threadIdx.x, step = blocks * tile;
  switch (m.kind) {
    case detail::kPack: return detail::lean_loop<LW, detail::kPack>(m, src, dst, first, words, step);
    case detail::kUnpack: return detail::lean_loop<LW, detail::kUnpack>(m, src, dst, first, words, step);
    case detail::kCopySame: return detail::lean_loop<LW, detail::kCopySame>(m, src, dst, first, words, step);
    default: return detail::lean_loop<LW, detail::kCopyTwo>(m, src, dst, first, words, step);
  }
}

__global__ void __launch_bounds__(detail::kBatchThreads)
lean_copies_kernel(const __grid_constant__ LeanCopies c) {
  std::uint32_t k = 0;
  while (k + 1 < c.n && c.first[k + 1] <= blockIdx.x) ++k;
  const LeanMove& m = c.move[k];
  const char* src = c.src[k] + m.src_off;
  char* dst = c.dst[k] + m.dst_off;
  const std::uint32_t block = blockIdx.x - c.first[k], blocks = c.first[k + 1] - c.first[k];
  switch (m.lw) {
    case 0: return copies_loop<0>(m, src, dst, block, blocks, c.words[k]);
    case 1: return copies_loop<1>(m, src, dst, block, blocks, c.words[k]);
    case 2: return copies_loop<2>(m, src, dst, block, blocks, c.words[k]);
    case 3: return copies_loop<3>(m, src, dst, block, blocks, c.words[k]);
    default: return copies_loop<4>(m, src, dst, block, blocks, c.words[k]);
  }
}

std::atomic<long> copies_launched{0};

}  // namespace

long impl::copies_launches() { return copies_launched.load(std::memory_order_relaxed); }

void copy_many_async(const Copy* copies, std::size_t n, Stream stream) {
  LeanCopies args{};
  std::uint32_t blocks = 0;
  auto launch = [&] {  // the queued copies, once (a failed launch is not tried again)
    if (args.n == 0) return;
    args.first[args.n] = blocks;
    const LeanCopies a = args;
    const std::uint32_t grid = blocks;
    args = LeanCopies{};
    blocks = 0;
    lean_copies_kernel<<<grid, detail::kBatchThreads, 0, stream>>>(a);
    check_launch(stream);
    copies_launched.fetch_add(1, std::memory_order_relaxed);
  };
  int device = -1;
  std::exception_ptr failed;
  for (std::size_t k = 0; k < n; ++k) try {
    const Copy& c = copies[k];
    if (!c.stype || !c.dtype) fail(MPI_ERR_TYPE, "copy_many_async: a copy without a type");
    const i64 bytes = copy_bytes(c.scount, *c.stype, c.dcount, *c.dtype);
    if (bytes == 0) continue;
    check_reachable(first_byte(c.src, c.scount, *c.stype), "copy source");
    check_reachable(first_byte(c.dst, c.dcount, *c.dtype), "copy destination");
    if (device < 0) device = this_device();
    const PlanHead hs = plan_for(*c.stype, c.scount, device);
    const PlanHead hd = plan_for(*c.dtype, c.dcount, device);
    // A contiguous side is packed bytes from its first byte on: its type's word size does not
    // bind (MPI_BYTE's would make every word one byte), only the address does.
    auto side = [](const void* p, const PlanHead& h) {
      const auto at = reinterpret_cast<std::uintptr_t>(p);
      return h.contiguous ? SidePlan{false, {}, at + static_cast<std::uintptr_t>(h.plan.start)}
                          : SidePlan{true, h, at};
    };
    const SidePlan a = side(c.src, hs), b = side(c.dst, hd);
    const int lw = detail::move_lw(a, b);
    const i64 words = bytes >> lw;
    if ((hs.contiguous && hd.contiguous) || (!hs.contiguous && !detail::lean_fits(hs)) ||
        (!hd.contiguous && !detail::lean_fits(hd)) || words > INT32_MAX) {
      // one cudaMemcpyAsync, or the general kernels
      copy_async(c.src, c.scount, *c.stype, c.dst, c.dcount, *c.dtype, stream, nullptr);
      continue;
    }
    const auto grid = static_cast<std::uint32_t>(copy_grid(words, lw, launch_info(device)));
    if (args.n == kCopiesPerLaunch || blocks > INT32_MAX - grid) {
      try {  // those copies failed; this one still goes in the next launch
        launch();
      } catch (...) {
        if (!failed) failed = std::current_exception();
      }
    }
    args.move[args.n] = detail::make_lean(a, b, lw, 0, 0);
    args.src[args.n] = reinterpret_cast<const char*>(a.base);
    args.dst[args.n] = reinterpret_cast<char*>(b.base);
    args.words[args.n] = static_cast<std::uint32_t>(words);
    args.first[args.n] = blocks;
    blocks += grid;
    ++args.n;
  } catch (...) {  // the others still go; the first error is thrown after them
    if (!failed) failed = std::current_exception();
  }
  try {
    launch();
  } catch (...) {
    if (!failed) failed = std::current_exception();
  }
  if (failed) std::rethrow_exception(failed);
}

// The host keeps a mirror of the device table: slot pointers, then one record per move, then the
// chunks, all as 8-byte words. Changing a pointer changes words of the mirror and notes them;
// upload() sends the noted words.
struct Batch::Impl {
  struct SideInfo {
    const Type* type = nullptr;  // null: packed
    i64 count = 0;
    std::uint32_t slot = 0;
    i64 offset = 0;  // bytes from the slot's pointer
    bool own = false;  // a slot of this side alone (rebind), not a shared one (set_slot)
    PlanHead head;
  };
  struct MoveInfo {
    SideInfo src, dst;
    i64 bytes = 0;
  };

  int device = 0;
  bool lean = true;
  std::size_t shared_slots = 0;
  std::vector<MoveInfo> moves;
  std::vector<std::vector<std::uint32_t>> users;  // non-empty moves using each slot
  std::size_t record_words = 0;                    // one move record, in 8-byte words
  std::size_t moves_at = 0, chunks_at = 0;         // where the regions start, in words
  std::uint32_t nchunks = 0;
  std::vector<std::uint64_t> host;
  std::vector<std::uint32_t> dirty;
  std::vector<char> noted;
  DeviceBytes table;

  char* slot_ptr(std::uint32_t slot) const { return reinterpret_cast<char*>(host[slot]); }
  char* base(const SideInfo& s) const { return slot_ptr(s.slot) + s.offset; }
  SidePlan plan_of(const SideInfo& s) const {
    SidePlan p;
    p.typed = s.type != nullptr;
    p.head = s.head;
    p.base = reinterpret_cast<std::uintptr_t>(base(s));
    return p;
  }

  void set_word(std::size_t at, std::uint64_t v) {
    if (host[at] == v) return;
    host[at] = v;
    if (!noted[at]) {
      noted[at] = 1;
      dirty.push_back(static_cast<std::uint32_t>(at));
    }
  }

  // Rewrites move i's record from the current pointers (its word size follows their alignment).
  void write_record(std::size_t i) {
    const MoveInfo& m = moves[i];
    if (m.bytes == 0) return;
    const SidePlan s = plan_of(m.src), d = plan_of(m.dst);
    const int lw = detail::move_lw(s, d);
    std::vector<std::uint64_t> words(record_words, 0);
    if (lean) {
      const LeanMove r = detail::make_lean(s, d, lw, m.src.offset, m.dst.offset);
      std::memcpy(words.data(), &r, sizeof r);
    } else {
      const GeneralMove r = detail::make_general(s, d, lw, m.src.offset, m.dst.offset);
      std::memcpy(words.data(), &r, sizeof r);
    }
    for (std::size_t w = 0; w < record_words; ++w) set_word(moves_at + i * record_words + w, words[w]);
  }

  void point(std::uint32_t slot, void* p) {
    for (std::uint32_t i : users[slot]) {  // the new buffer must be reachable for every user
      const MoveInfo& m = moves[i];
      for (const SideInfo* s : {&m.src, &m.dst})
        if (s->slot == slot) {
          const char* at = static_cast<char*>(p) + s->offset;
          check_reachable(s->type ? first_byte(at, s->count, *s->type) : at, "rebound buffer");
        }
    }
    set_word(slot, reinterpret_cast<std::uintptr_t>(p));
    for (std::uint32_t i : users[slot]) write_record(i);
  }
};

namespace {

std::vector<Move> moves_of(Direction direction, const std::vector<Job>& jobs) {
  std::vector<Move> moves;
  for (const Job& j : jobs) {
    if (j.type == nullptr) fail(MPI_ERR_TYPE, "batch job without a type");
    Side typed{j.origin, j.count, j.type, -1, 0};
    Side packed{j.packed, 0, nullptr, -1, 0};
    if (direction == Direction::pack) moves.push_back({typed, packed});
    else moves.push_back({packed, typed});
  }
  return moves;
}

}  // namespace

Batch::Batch(Direction direction, const std::vector<Job>& jobs) : Batch(moves_of(direction, jobs)) {}

Batch::Batch(const std::vector<Move>& moves, const std::vector<void*>& slots)
    : impl_(std::make_unique<Impl>()) {
  Impl& b = *impl_;
  b.device = this_device();
  b.shared_slots = slots.size();
  std::vector<void*> table(slots.begin(), slots.end());
  auto resolve = [&](const Side& side, std::size_t i) {
    Impl::SideInfo s;
    s.type = side.type;
    s.count = side.type ? side.count : 0;
    if (side.type && side.count < 0)
      fail(MPI_ERR_COUNT, "move " + std::to_string(i) + ": negative count " + std::to_string(side.count));
    if (side.slot >= 0) {
      if (static_cast<std::size_t>(side.slot) >= slots.size())
        fail(MPI_ERR_ARG, "move " + std::to_string(i) + ": slot " + std::to_string(side.slot) +
                              " of " + std::to_string(slots.size()));
      s.slot = static_cast<std::uint32_t>(side.slot);
      s.offset = side.offset;
    } else {
      s.slot = static_cast<std::uint32_t>(table.size());
      s.own = true;
      table.push_back(side.ptr);
    }
    return s;
  };
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const Move& mv = moves[i];
    if (!mv.src.type && !mv.dst.type)
      fail(MPI_ERR_TYPE, "move " + std::to_string(i) + " has no type on either side");
    Impl::MoveInfo m;
    m.src = resolve(mv.src, i);
    m.dst = resolve(mv.dst, i);
    if (m.src.type && m.dst.type) m.bytes = copy_bytes(m.src.count, *m.src.type, m.dst.count, *m.dst.type);
    else if (m.src.type) m.bytes = detail::checked_mul(m.src.count, m.src.type->size(), MPI_ERR_COUNT, "packed size");
    else m.bytes = detail::checked_mul(m.dst.count, m.dst.type->size(), MPI_ERR_COUNT, "packed size");
    // A packed buffer may be null only when there is nothing to move (as for pack_async).
    for (const Side* side : {&mv.src, &mv.dst})
      if (!side->type && side->slot < 0 && side->ptr == nullptr && m.bytes > 0)
        fail(MPI_ERR_BUFFER, "move " + std::to_string(i) + ": its packed buffer is null");
    for (Impl::SideInfo* s : {&m.src, &m.dst})
      if (s->type && m.bytes > 0) {
        s->head = plan_for(*s->type, s->count, b.device);
        b.lean = b.lean && detail::lean_fits(s->head);
      }
    b.moves.push_back(m);
  }
  b.users.resize(table.size());
  for (std::uint32_t i = 0; i < b.moves.size(); ++i) {
    const Impl::MoveInfo& m = b.moves[i];
    if (m.bytes == 0) continue;
    b.users[m.src.slot].push_back(i);
    if (m.dst.slot != m.src.slot) b.users[m.dst.slot].push_back(i);
  }

  // Chunks: sizes from the whole batch, ordered by the address of their first data byte.
  const LaunchInfo& info = launch_info(b.device);
  std::vector<i64> sizes;
  i64 total = 0;
  for (const Impl::MoveInfo& m : b.moves) {
    sizes.push_back(m.bytes);
    total += m.bytes;
  }
  detail::ChunkPolicy policy;
  policy.fixed = detail::env::batch_chunk();
  std::vector<Chunk> chunks = detail::partition(sizes, detail::chunk_bytes(total, info.sms, policy));
  for (Chunk& c : chunks) {
    c.src_slot = b.moves[c.move].src.slot;
    c.dst_slot = b.moves[c.move].dst.slot;
  }
  if (detail::env::batch_order() != 0) {
    std::vector<std::uint64_t> key;
    for (const Chunk& c : chunks) {
      const Impl::MoveInfo& m = b.moves[c.move];
      const Impl::SideInfo& s = m.src.type ? m.src : m.dst;
      SidePlan sp;
      sp.typed = true;
      sp.head = s.head;
      key.push_back(reinterpret_cast<std::uintptr_t>(static_cast<char*>(table[s.slot]) + s.offset) +
                    static_cast<std::uint64_t>(detail::side_offset_of(sp, c.begin, 0)));
    }
    detail::order_chunks(chunks, key);
  }
  if (chunks.size() > static_cast<std::size_t>(INT32_MAX)) fail(MPI_ERR_OTHER, "batch needs too many blocks");
  b.nchunks = static_cast<std::uint32_t>(chunks.size());

  // The table: slots | records | chunks.
  b.record_words = (b.lean ? sizeof(LeanMove) : sizeof(GeneralMove)) / 8;
  b.moves_at = table.size();
  b.chunks_at = b.moves_at + b.moves.size() * b.record_words;
  b.host.assign(b.chunks_at + chunks.size() * sizeof(Chunk) / 8, 0);
  b.noted.assign(b.host.size(), 0);
  for (std::size_t k = 0; k < table.size(); ++k) b.host[k] = reinterpret_cast<std::uintptr_t>(table[k]);
  std::memcpy(b.host.data() + b.chunks_at, chunks.data(), chunks.size() * sizeof(Chunk));
  for (std::size_t i = 0; i < b.moves.size(); ++i) {
    const Impl::MoveInfo& m = b.moves[i];
    if (m.bytes == 0) continue;
    for (const Impl::SideInfo* s : {&m.src, &m.dst}) {
      const char* at = b.base(*s);
      check_reachable(s->type ? first_byte(at, s->count, *s->type) : at,
                      s->type ? "typed buffer of a batch move" : "packed buffer of a batch move");
    }
    b.write_record(i);
  }
  b.dirty.clear();
  std::fill(b.noted.begin(), b.noted.end(), 0);
  b.table = impl::upload(b.host.data(), b.host.size() * 8);
}

Batch::~Batch() = default;
Batch::Batch(Batch&&) noexcept = default;
Batch& Batch::operator=(Batch&&) noexcept = default;

std::size_t Batch::size() const { return impl_ ? impl_->moves.size() : 0; }

void Batch::rebind(std::size_t move, void* src, void* dst) {
  if (!impl_) fail(MPI_ERR_ARG, "rebind of a moved-from Batch");
  Impl& b = *impl_;
  if (move >= b.moves.size())
    fail(MPI_ERR_ARG, "rebind of move " + std::to_string(move) + " of " + std::to_string(b.moves.size()));
  const Impl::MoveInfo& m = b.moves[move];
  for (auto [side, p] : {std::pair{&m.src, src}, std::pair{&m.dst, dst}}) {
    if (p == nullptr) continue;
    if (!side->own)
      fail(MPI_ERR_ARG, "move " + std::to_string(move) + " reads its buffer from slot " +
                            std::to_string(side->slot) + ": change it with set_slot");
    b.point(side->slot, p);
  }
}

void Batch::set_slot(std::size_t slot, void* ptr) {
  if (!impl_) fail(MPI_ERR_ARG, "set_slot of a moved-from Batch");
  if (slot >= impl_->shared_slots)
    fail(MPI_ERR_ARG, "slot " + std::to_string(slot) + " of " + std::to_string(impl_->shared_slots));
  impl_->point(static_cast<std::uint32_t>(slot), ptr);
}

void Batch::upload(Stream stream) {
  if (!impl_) fail(MPI_ERR_ARG, "upload of a moved-from Batch");
  Impl& b = *impl_;
  if (b.dirty.empty()) return;
  if (capturing(stream))
    fail(MPI_ERR_ARG, "Batch pointers changed: upload them before capturing the launch (a captured "
                      "upload would restore these pointers at every replay)");
  auto* table = static_cast<std::uint64_t*>(b.table.get());
  for (std::size_t at = 0; at < b.dirty.size(); at += detail::kPatchEntries) {
    detail::Patch patch{};
    patch.n = static_cast<std::uint32_t>(std::min<std::size_t>(detail::kPatchEntries, b.dirty.size() - at));
    for (std::uint32_t k = 0; k < patch.n; ++k) {
      patch.index[k] = b.dirty[at + k];
      patch.value[k] = b.host[b.dirty[at + k]];
    }
    detail::patch_kernel<<<1, 256, 0, stream>>>(table, patch);
    check_launch(stream);
  }
  for (std::uint32_t w : b.dirty) b.noted[w] = 0;
  b.dirty.clear();
}

void Batch::launch(Stream stream, Event done) {
  if (!impl_) fail(MPI_ERR_ARG, "launch of a moved-from Batch");
  Impl& b = *impl_;
  upload(stream);
  if (b.nchunks > 0) {
    auto* table = static_cast<std::uint64_t*>(b.table.get());
    const auto* chunks = reinterpret_cast<const Chunk*>(table + b.chunks_at);
    if (b.lean)
      detail::lean_batch_kernel<<<b.nchunks, detail::kBatchThreads, 0, stream>>>(
          table, reinterpret_cast<const LeanMove*>(table + b.moves_at), chunks);
    else
      detail::general_batch_kernel<<<b.nchunks, detail::kBatchThreads, 0, stream>>>(
          table, reinterpret_cast<const GeneralMove*>(table + b.moves_at), chunks);
    check_launch(stream);
  }
  if (done) record(done, stream);
}

}  // namespace ferry::gpu
