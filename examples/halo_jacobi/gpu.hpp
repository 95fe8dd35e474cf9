// halo_jacobi/gpu.hpp — the example's own GPU code (its compute kernel and buffers), behind a small
// interface so that the driver builds without CUDA too (gpu_none.cpp says so then).
#pragma once

#include <cstddef>

#include "stencil.hpp"

namespace hj {

bool gpu_built();
void* gpu_alloc(std::size_t bytes);  // zeroed device memory
void gpu_free(void* p);
void gpu_put(void* dst, const void* src, std::size_t bytes);
void gpu_get(void* dst, const void* src, std::size_t bytes);
void* gpu_stream_create();
void gpu_stream_destroy(void* stream);
void gpu_sync(void* stream);
void gpu_step(const Step& s, void* stream);

}  // namespace hj
