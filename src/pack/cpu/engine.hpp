// pack/cpu/engine.hpp — the CPU engine: moves `count` elements between user memory and a packed
// buffer. Arguments are already validated by pack.cpp.
#pragma once

#include <ferry/type.hpp>

namespace ferry::detail {

// user memory (origin of element 0) -> packed
void cpu_pack(const char* origin, i64 count, const Type& type, char* packed);
// packed -> user memory
void cpu_unpack(const char* packed, char* origin, i64 count, const Type& type);

}  // namespace ferry::detail
