// Host mirrors of collective buffers (mirror.hpp).
#include "mpi/mirror.hpp"

#include <ferry/pack.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/runtime.hpp"
#include "sys/error.hpp"
#include "mpi/requests.hpp"

namespace ferry::mpi_detail::coll {
namespace {

char* at(const void* p, i64 bytes) {
  return reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(bytes));
}

// The byte range [lo, hi) a run's elements reach, relative to the buffer.
std::pair<i64, i64> reach(const Run& r) {
  const i64 span = (r.count - 1) * r.type->extent();
  return {r.disp + r.type->true_lb() + std::min<i64>(span, 0),
          r.disp + r.type->true_lb() + r.type->true_extent() + std::max<i64>(span, 0)};
}

bool empty(const Run& r) { return r.count <= 0 || r.type->size() == 0; }

}  // namespace

Mirror::Mirror(const void* buf, std::vector<Run> runs) : user_(const_cast<char*>(static_cast<const char*>(buf))), runs_(std::move(runs)) {
  bool any = false;
  for (const Run& r : runs_) {
    if (empty(r)) continue;
    auto [lo, hi] = reach(r);
    lo_ = any ? std::min(lo_, lo) : lo;
    hi_ = any ? std::max(hi_, hi) : hi;
    any = true;
  }
  if (!any) return;
  // A span inside one allocation gets a pinned mirror, filled by copies. A span that is not
  // (MPI_BOTTOM with the absolute addresses of several allocations, or blocks far apart) holds
  // memory no copy may read, and may be huge: it gets a sparse mirror.
  const gpu::Allocation a = gpu::allocation_of(at(user_, lo_));
  const auto first = reinterpret_cast<std::uintptr_t>(at(user_, lo_));
  const auto base = reinterpret_cast<std::uintptr_t>(a.base);
  if (a.kind != gpu::Memory::host && a.base && base <= first &&
      first + static_cast<std::uintptr_t>(hi_ - lo_) <= base + static_cast<std::uintptr_t>(a.size)) {
    host_ = pool().get(hi_ - lo_);
    return;
  }
  void* m = mmap(nullptr, static_cast<std::size_t>(hi_ - lo_), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    detail::fail(MPI_ERR_NO_MEM, "collective on GPU memory: no address space for a host mirror of the " +
                                     std::to_string(hi_ - lo_) + " bytes its blocks span");
  host_ = m;
  sparse_ = true;
}

Mirror::~Mirror() {
  if (sparse_) munmap(host_, static_cast<std::size_t>(hi_ - lo_));
  else transport::pinned_pool().put(host_);
  for (void* p : packed_) transport::pinned_pool().put(p);
}

void* Mirror::ptr() const { return host_ ? at(host_, -lo_) : user_; }

void Mirror::fill() {
  if (!host_) return;
  if (sparse_) {  // each run through the GPU engine, which reads its type map's bytes only
    for (const Run& r : runs_) {
      if (empty(r)) continue;
      const i64 bytes = pack_size(r.count, *r.type);
      transport::Buffer packed(pool(), bytes);
      gpu::pack(at(user_, r.disp), r.count, *r.type, packed.get());
      i64 pos = 0;
      ferry::unpack(packed.get(), bytes, &pos, at(ptr(), r.disp), r.count, *r.type);
    }
    return;
  }
  i64 data = 0;
  for (const Run& r : runs_)
    if (!empty(r)) data += reach(r).second - reach(r).first;
  const gpu::Stream s = gpu::legacy_stream();
  if (2 * data >= hi_ - lo_ || runs_.size() > 64) {  // the span in one copy
    gpu::copy_async(host_, at(user_, lo_), hi_ - lo_, s);
    return;
  }
  for (const Run& r : runs_) {  // few runs far apart: each its own copy
    if (empty(r)) continue;
    auto [lo, hi] = reach(r);
    gpu::copy_async(at(host_, lo - lo_), at(user_, lo), hi - lo, s);
  }
}

void Mirror::drain() {
  if (!host_) return;
  const gpu::Stream s = gpu::legacy_stream();
  for (const Run& r : runs_) {
    if (!r.out || empty(r)) continue;
    if (r.type->dense()) {  // the type map is the run's bytes
      const i64 first = r.disp + r.type->data_lb(r.count);
      gpu::copy_async(at(user_, first), at(host_, first - lo_), r.count * r.type->size(), s);
      continue;
    }
    const i64 bytes = pack_size(r.count, *r.type);
    void* packed = pool().get(bytes);
    packed_.push_back(packed);
    i64 pos = 0;
    ferry::pack(at(ptr(), r.disp), r.count, *r.type, packed, bytes, &pos);
    gpu::unpack_async(packed, at(user_, r.disp), r.count, *r.type, s);  // one-shot from pinned memory
  }
}

void* Mirrors::add(const void* buf, std::vector<Run> runs, bool in, bool out) {
  auto m = std::make_shared<Mirror>(buf, std::move(runs));
  if (in) {
    m->fill();
    filled_ = true;
  }
  all_.push_back(m);
  if (out) outs_.push_back(m);
  return m->ptr();
}

void Mirrors::ready() {
  if (filled_) gpu::wait_legacy();
  filled_ = false;
}

void Mirrors::done() {
  if (outs_.empty()) return;
  for (auto& m : outs_) m->drain();
  gpu::wait_legacy();
  outs_.clear();
}

}  // namespace ferry::mpi_detail::coll
