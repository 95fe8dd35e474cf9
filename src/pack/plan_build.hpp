// pack/plan_build.hpp — building a Plan (plan.hpp) from a committed type and a count, on the host.
#pragma once

#include <ferry/type.hpp>

#include <cstdint>
#include <vector>

#include "pack/plan.hpp"

namespace ferry::detail {

// The count-dependent part of a plan: small, copied per call.
struct PlanHead {
  Plan plan;                // plan.pieces / plan.shapes are bound by the user of the plan;
                            // plan.total is set for the chosen word size by set_word()
  int max_lw = 4;           // widest word (log2 bytes) the layout allows
  bool contiguous = false;  // one run of `bytes` at plan.start: a plain memcpy
  bool wide = false;        // needs 64-bit indices (2^31 words or more at 1-byte words)
  i64 bytes = 0;            // packed bytes
};

struct HostPlan {
  PlanHead head;
  std::vector<Piece> pieces;  // general form only; the same for every count
  std::vector<Shape> shapes;
};

// The plan of one element; its pieces and shapes do not depend on the count, so the GPU engine
// uploads them once per type. Throws Error(MPI_ERR_TYPE) for shapes beyond kMaxDims dimensions or
// general forms that unroll to more than 2^22 pieces.
HostPlan build_plan(const Type& type);
// Turns the plan of one element (`one`, from build_plan(type)) into the plan of `count` elements:
// count becomes the outermost dimension, merged into the one below when it continues its stride.
PlanHead with_count(const PlanHead& one, const Type& type, i64 count);
inline HostPlan build_plan(const Type& type, i64 count) {
  HostPlan hp = build_plan(type);
  hp.head = with_count(hp.head, type, count);
  return hp;
}

// log2 of the widest word (<= 16 bytes) the address allows.
int address_lw(std::uintptr_t address);

// The word size for moving this plan between these two addresses.
inline int choose_lw(const PlanHead& hp, const void* mem_origin, const void* packed) {
  int lw = hp.max_lw;
  int a = address_lw(reinterpret_cast<std::uintptr_t>(mem_origin) +
                     static_cast<std::uintptr_t>(hp.plan.start));
  int b = address_lw(reinterpret_cast<std::uintptr_t>(packed));
  return lw < a ? (lw < b ? lw : b) : (a < b ? a : b);
}

// Sets plan.total for words of 1 << lw bytes.
inline void set_word(PlanHead& hp, int lw) { hp.plan.total = hp.bytes >> lw; }

// Runs the plan on the CPU word by word, with the GPU kernels' index arithmetic: the reference
// that tests the addressing without a GPU.
void emulate(const HostPlan& hp, int lw, char* origin, char* packed, bool pack);

}  // namespace ferry::detail
