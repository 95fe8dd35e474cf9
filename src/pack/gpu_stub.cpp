// The GPU engine's stand-in for builds without CUDA: nothing is reachable, every call says why.
#include <ferry/gpu.hpp>

#include "pack/host_pages.hpp"
#include "sys/error.hpp"

namespace ferry::gpu {

// Never filled: nothing is GPU memory here (host_pages.hpp).
std::atomic<std::uintptr_t> host_pages::table[host_pages::kSlots] = {};

namespace {
[[noreturn]] void no_cuda() {
  detail::fail(MPI_ERR_OTHER, "Ferry was built without CUDA: the GPU engine is not available");
}
}  // namespace

bool available() noexcept { return false; }
int current_device() noexcept { return -1; }
int context_device() noexcept { return -1; }
std::uint64_t device_key(int) noexcept { return 0; }
void set_device(int) {}
Memory memory_of(const void*) { return Memory::host; }
Allocation allocation_of(const void*) { return {Memory::host, nullptr, 0, 0, -1}; }
void settle(const Allocation&) {}
void* alloc_pinned(i64) { no_cuda(); }
void free_pinned(void*) noexcept {}
void copy(void*, const void*, i64) { no_cuda(); }
void pack_async(const void*, i64, const Type&, void*, Stream, Event) { no_cuda(); }
void unpack_async(const void*, void*, i64, const Type&, Stream, Event) { no_cuda(); }
void pack(const void*, i64, const Type&, void*) { no_cuda(); }
void unpack(const void*, void*, i64, const Type&) { no_cuda(); }
void copy_async(const void*, i64, const Type&, void*, i64, const Type&, Stream, Event) { no_cuda(); }
void copy(const void*, i64, const Type&, void*, i64, const Type&) { no_cuda(); }

struct Batch::Impl {};
Batch::Batch(Direction, const std::vector<Job>&) { no_cuda(); }
Batch::Batch(const std::vector<Move>&, const std::vector<void*>&) { no_cuda(); }
Batch::~Batch() = default;
Batch::Batch(Batch&&) noexcept = default;
Batch& Batch::operator=(Batch&&) noexcept = default;
void Batch::launch(Stream, Event) { no_cuda(); }
void Batch::rebind(std::size_t, void*, void*) { no_cuda(); }
void Batch::set_slot(std::size_t, void*) { no_cuda(); }
void Batch::upload(Stream) { no_cuda(); }
std::size_t Batch::size() const { return 0; }

}  // namespace ferry::gpu
