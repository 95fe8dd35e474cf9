// pack/batch_plan.hpp — planning a batch on the host: each move's word size and kernel record, and
// the split of all moves into chunks of about equal bytes, one per CUDA block. No CUDA here, so CI
// tests all of it (tests/test_plan.cpp).
//
// Why chunks: a halo batch mixes 1.5 MiB faces, 18 KiB edges and 216 B corners. Giving each move
// its own blocks and letting every block search for its move (the first batch kernel) cost a
// dependent search per block that moved only 8 KiB; here block b reads chunk b directly, every
// chunk but a move's last has the same size, and the size is chosen from the batch's total so that
// the grid fills the GPU several times over without blocks too small to hide their setup.
#pragma once

#include <cstdint>
#include <vector>

#include "pack/job.hpp"
#include "pack/plan_build.hpp"

namespace ferry::detail {

// One side of a move as the planner sees it: a plan (typed) or packed bytes, and where it starts.
struct SidePlan {
  bool typed = false;
  PlanHead head;               // typed only: the plan of count elements, tables bound
  std::uintptr_t base = 0;     // the side's pointer (slot pointer + offset)
};

// log2 of the widest word (<= 16 B) both sides allow: each typed side's own layout, and the
// alignment of each side's first byte.
int move_lw(const SidePlan& src, const SidePlan& dst);

// The side fits the lean kernel: strided, at most 3 dimensions, fewer than 2^31 bytes, strides
// below 2^31 bytes.
bool lean_fits(const PlanHead& hp);

// The lean shape of a plan at word size lw (lean_fits(hp) must hold).
Shape3 make_shape3(const PlanHead& hp, int lw);

// The same block and counts (strides may differ): one index computation serves both sides.
bool same_counts(const Shape3& a, const Shape3& b);

// The kernel records of a move of `bytes` packed bytes at word size lw. A copy whose source or
// destination is one contiguous run becomes an unpack or a pack of that run; a copy between shapes
// of the same block and counts (strides may differ: interleaved faces) divides once per word.
LeanMove make_lean(const SidePlan& src, const SidePlan& dst, int lw, std::int64_t src_off,
                   std::int64_t dst_off);
GeneralMove make_general(const SidePlan& src, const SidePlan& dst, int lw, std::int64_t src_off,
                         std::int64_t dst_off);

// A general form moved piece by piece (piece_plan.cpp): one lean move per (outer element, piece),
// each with its own word size. A struct of boxes at their own addresses (a halo's fields, one
// message's blocks merged) then runs the lean kernel's chunked loops instead of a search over the
// pieces for every word, and a 24-byte row of one field is not held to the word size of another
// field's. Pieces of more than 3 dimensions (boxes of several equally spaced fields) go as slices
// of their outer dimensions. The plans' tables (pieces, shapes) must point at host memory here.
struct PieceLimits {
  std::int64_t max_moves = 4096;      // more: the single kernel (the table would cost more)
  std::int64_t min_mean_bytes = 512;  // smaller moves on average: a block per piece wastes it
};
struct PieceMoves {
  std::vector<LeanMove> moves;
  std::vector<std::int64_t> bytes;  // packed bytes of each move
};
// Pack (mem -> packed) or unpack (packed -> mem) of a general form hp. False, with `out` empty,
// when hp is not a general form or the limits refuse.
bool piece_moves(const PlanHead& hp, bool pack, std::uintptr_t mem, std::uintptr_t packed,
                 const PieceLimits& limits, PieceMoves& out);
// A copy between two plans of the same size (any forms): their segments paired, each cut where the
// other side's boundaries fall (between slices, or inside a contiguous run). False, with `out`
// empty, when the limits refuse.
bool piece_copy_moves(const PlanHead& src, const PlanHead& dst, std::uintptr_t s, std::uintptr_t d,
                      const PieceLimits& limits, PieceMoves& out);

// How big a chunk is: about total / (sms * waves), rounded to 16 B, within [min_bytes, max_bytes]
// (max_bytes 0: the default). `fixed` > 0 replaces the choice (FERRY_BATCH_CHUNK).
struct ChunkPolicy {
  std::int64_t min_bytes = 4096;   // each thread of a 256-thread block moves >= 2 words of 8 B
  std::int64_t max_bytes = 32768;  // 4 loop trips of 8 B words: the block's setup (two dependent
                                   // loads) is under a fifth of its life
  int waves = 8;                   // grid >= 8 blocks per SM when the batch is large enough
  std::int64_t fixed = 0;
};
std::int64_t chunk_bytes(std::int64_t total, int sms, const ChunkPolicy& policy);

// Splits moves of the given packed sizes into chunks of at most `chunk` bytes (a multiple of 16):
// each move of n bytes gets ceil(n / chunk) chunks of equal size rounded up to 16 B, in move
// order; moves of 0 bytes get none. Slots are left 0 for the caller.
std::vector<Chunk> partition(const std::vector<std::int64_t>& bytes, std::int64_t chunk);

// Reorders chunks by `key` (stable): the batch passes the address of each chunk's first data byte,
// so blocks that run at the same time work on neighbouring memory — a copy from a row's -X
// interior to its +X halo then meets the +X copy's partial writes of the same sectors in L2.
void order_chunks(std::vector<Chunk>& chunks, const std::vector<std::uint64_t>& key);

// Address (from the side's base) of the first byte of packed byte `at` of a side, for ordering;
// exact for strided plans, the start of the plan for general forms.
std::int64_t side_offset_of(const SidePlan& side, std::int64_t at, int lw);

// Offset from its slot's pointer of the source byte that packed byte `at` of a lean move reads:
// the key that orders a piece-by-piece copy's chunks.
std::int64_t lean_offset_of(const LeanMove& m, std::int64_t at);

// The moves as the kernels would run them, on the CPU, chunk by chunk and word by word with the
// kernels' index arithmetic: the reference that tests the records and the partition without a GPU.
// `slots` holds each slot's pointer; general plans must point at host tables.
void emulate_lean(const std::vector<LeanMove>& moves, const std::vector<Chunk>& chunks,
                  const std::vector<char*>& slots);
void emulate_general(const std::vector<GeneralMove>& moves, const std::vector<Chunk>& chunks,
                     const std::vector<char*>& slots);

}  // namespace ferry::detail
