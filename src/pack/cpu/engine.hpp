// pack/cpu/engine.hpp — the CPU engine: moves `count` elements between user memory and a packed
// buffer. Arguments are already validated by pack.cpp.
#pragma once

#include <ferry/type.hpp>

namespace ferry::detail {

// user memory (origin of element 0) -> packed
void cpu_pack(const char* origin, i64 count, const Type& type, char* packed);
// packed -> user memory
void cpu_unpack(const char* packed, char* origin, i64 count, const Type& type);
// user memory in one layout -> user memory in another (equal sizes): what packing src and
// unpacking the result into dst gives, without the packed buffer where both are strided or one
// is contiguous; through a temporary packed buffer otherwise.
void cpu_copy(const char* src, i64 scount, const Type& stype, char* dst, i64 dcount,
              const Type& dtype);

}  // namespace ferry::detail
