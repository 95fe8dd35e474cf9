// The GPU pack engine's stand-in for builds without CUDA: every call says why it cannot run.
// (The GPU layer's own stub, devices, memory and copies, is gpu/stub.cpp.)
#include <ferry/gpu.hpp>

#include "sys/error.hpp"

namespace ferry::gpu {

namespace {
[[noreturn]] void no_cuda() {
  detail::fail(MPI_ERR_OTHER, "Ferry was built without CUDA: the GPU engine is not available");
}
}  // namespace

void pack_async(const void*, i64, const Type&, void*, Stream, Event) { no_cuda(); }
void unpack_async(const void*, void*, i64, const Type&, Stream, Event) { no_cuda(); }
void pack(const void*, i64, const Type&, void*) { no_cuda(); }
void unpack(const void*, void*, i64, const Type&) { no_cuda(); }
void copy_async(const void*, i64, const Type&, void*, i64, const Type&, Stream, Event) { no_cuda(); }
void copy(const void*, i64, const Type&, void*, i64, const Type&) { no_cuda(); }
void copy_spans_async(const Span*, std::size_t n, Stream) {
  if (n > 0) no_cuda();
}
void copy_many_async(const Copy*, std::size_t n, Stream) {
  if (n > 0) no_cuda();
}

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
