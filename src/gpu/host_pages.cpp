// The table of host_pages.hpp, in every build (empty without CUDA: nothing is GPU memory there).
#include "gpu/host_pages.hpp"

namespace ferry::gpu {

std::atomic<std::uintptr_t> host_pages::table[host_pages::kSlots] = {};

}  // namespace ferry::gpu
