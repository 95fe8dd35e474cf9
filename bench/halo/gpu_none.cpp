// ferry-halo-bench without CUDA: the GPU cases say why they cannot run.
#include <stdexcept>

#include "halo_bench.hpp"

namespace hb::gpu {

namespace {
[[noreturn]] void none() { throw std::runtime_error("ferry-halo-bench was built without CUDA: no GPU cases"); }
}  // namespace

bool available() { return false; }
int device_count() { return 0; }
int choose_device(int) { return -1; }
int current_device() { return -1; }
void* alloc(i64, int) { none(); }
double p2p_ring_us(i64, const std::vector<int>&, int) { none(); }
void free(void*) {}
void put(void*, const void*, i64) { none(); }
void get(void*, const void*, i64) { none(); }
void* alloc_host(i64) { none(); }
void free_host(void*) {}
void stage(void*, const void*, i64, bool) { none(); }
void* stream() { return nullptr; }
void sync() {}
double empty_launch_sync_us() { none(); }
void spin(double) { none(); }
void jacobi(const double*, double*, const Index3&, const Index3&, const Box&) { none(); }
void box_copy(void*, const fh::Field&, const Box&, void*, bool) { none(); }
void fused_self(const std::vector<fh::Field>&, const Index3&) { none(); }
void separate_self(const std::vector<fh::Field>&, const Index3&) { none(); }

}  // namespace hb::gpu
