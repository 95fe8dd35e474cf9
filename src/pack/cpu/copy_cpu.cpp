// Copies between two layouts on the CPU. Strided to strided walks the contiguous blocks of both
// sides at once: equal block sizes (halo boxes of arrays of the same element type) copy one block
// per step with a fixed-size move, others copy the overlap of the current blocks.
#include <algorithm>
#include <cstring>
#include <vector>

#include "pack/cpu/engine.hpp"

namespace ferry::detail {

namespace {

// The contiguous blocks of `count` elements of a strided type, in packed order.
class Blocks {
 public:
  Blocks(char* origin, i64 count, i64 extent, const StridedBlock& sb)
      : at_(origin + sb.start), block_(sb.counts[0]) {
    for (int d = 1; d < sb.ndims(); ++d)
      dims_.push_back({sb.counts[static_cast<std::size_t>(d)], sb.strides[static_cast<std::size_t>(d)], 0});
    if (count > 1) {  // count is one more dimension, merged where the elements continue a stride
      if (dims_.empty() && block_ == extent) block_ *= count;
      else if (!dims_.empty() && dims_.back().count * dims_.back().stride == extent) dims_.back().count *= count;
      else dims_.push_back({count, extent, 0});
    }
  }
  char* at() const { return at_; }
  i64 block() const { return block_; }
  // To the next block (mixed-radix increment; wraps to the first after the last).
  void next() {
    for (Dim& d : dims_) {
      at_ += d.stride;
      if (++d.index < d.count) return;
      at_ -= d.stride * d.count;
      d.index = 0;
    }
  }

 private:
  struct Dim {
    i64 count, stride, index;
  };
  char* at_;
  i64 block_;
  std::vector<Dim> dims_;
};

template <std::size_t B>
void same_blocks(Blocks& s, Blocks& d, i64 n) {
  for (i64 i = 0; i < n; ++i, s.next(), d.next()) std::memcpy(d.at(), s.at(), B);
}

void same_blocks_any(Blocks& s, Blocks& d, i64 n) {
  const auto b = static_cast<std::size_t>(s.block());
  for (i64 i = 0; i < n; ++i, s.next(), d.next()) std::memcpy(d.at(), s.at(), b);
}

void strided_copy(Blocks s, Blocks d, i64 bytes) {
  if (s.block() == d.block()) {
    const i64 n = bytes / s.block();
    switch (s.block()) {
      case 1: return same_blocks<1>(s, d, n);
      case 2: return same_blocks<2>(s, d, n);
      case 4: return same_blocks<4>(s, d, n);
      case 8: return same_blocks<8>(s, d, n);
      case 12: return same_blocks<12>(s, d, n);
      case 16: return same_blocks<16>(s, d, n);
      case 24: return same_blocks<24>(s, d, n);
      case 32: return same_blocks<32>(s, d, n);
      case 48: return same_blocks<48>(s, d, n);
      case 64: return same_blocks<64>(s, d, n);
      default: return same_blocks_any(s, d, n);
    }
  }
  char* ps = s.at();
  char* pd = d.at();
  i64 rs = s.block(), rd = d.block();
  while (bytes > 0) {
    const i64 n = std::min(rs, rd);
    std::memcpy(pd, ps, static_cast<std::size_t>(n));
    ps += n;
    pd += n;
    rs -= n;
    rd -= n;
    bytes -= n;
    if (bytes == 0) break;
    if (rs == 0) {
      s.next();
      ps = s.at();
      rs = s.block();
    }
    if (rd == 0) {
      d.next();
      pd = d.at();
      rd = d.block();
    }
  }
}

}  // namespace

void cpu_copy(const char* src, i64 scount, const Type& stype, char* dst, i64 dcount,
              const Type& dtype) {
  const i64 bytes = scount * stype.size();
  if (bytes == 0) return;
  if (stype.dense()) return cpu_unpack(src + stype.true_lb(), dst, dcount, dtype);
  if (dtype.dense()) return cpu_pack(src, scount, stype, dst + dtype.true_lb());
  if (stype.strided() && dtype.strided())
    return strided_copy(Blocks(const_cast<char*>(src), scount, stype.extent(), *stype.strided()),
                        Blocks(dst, dcount, dtype.extent(), *dtype.strided()), bytes);
  std::vector<char> packed(static_cast<std::size_t>(bytes));
  cpu_pack(src, scount, stype, packed.data());
  cpu_unpack(packed.data(), dst, dcount, dtype);
}

}  // namespace ferry::detail
