// The example built without CUDA: --device is refused with this message.
#include <stdexcept>

#include "gpu.hpp"

namespace hj {

namespace {
[[noreturn]] void none() { throw std::runtime_error("halo_jacobi was built without CUDA: --device is not available"); }
}  // namespace

bool gpu_built() { return false; }
void* gpu_alloc(std::size_t) { none(); }
void gpu_free(void*) {}
void gpu_put(void*, const void*, std::size_t) { none(); }
void gpu_get(void*, const void*, std::size_t) { none(); }
void* gpu_stream_create() { none(); }
void gpu_stream_destroy(void*) {}
void gpu_sync(void*) { none(); }
void gpu_step(const Step&, void*) { none(); }

}  // namespace hj
