// ferry/pack.hpp — pack and unpack with the semantics of MPI_Pack / MPI_Unpack.
//
// `position` is a byte offset into the packed buffer, read and advanced exactly as MPI does, so a
// sequence of calls can pack several objects one after another into one buffer and unpack them in
// the same order. The packed bytes are the type map's bytes in order (MPI's native, homogeneous
// representation): byte-for-byte what the system MPI's MPI_Pack writes on the same host.
//
// Buffers may be host or GPU memory: when either is device or managed memory (and Ferry has a GPU),
// the GPU engine moves the data (ferry/gpu.hpp), synchronously; otherwise the CPU engine does.
//
// CPU cost: a dense type is one memcpy; a strided block is one loop nest with one copy per contiguous
// run (inline fixed-size moves for runs of 1, 2, 4, 8, 12, 16, 24, 32, 48 and 64 bytes, memcpy
// otherwise); the general form walks the canonical tree once per element with one copy per run.
//
// A null user buffer (inbuf of pack, outbuf of unpack) is MPI_BOTTOM: the type's displacements are
// absolute addresses.
//
// Errors (ferry::Error with the MPI class, as Open MPI answers where it answers at all): null packed
// buffer or position, negative position or size -> MPI_ERR_ARG; negative count -> MPI_ERR_COUNT;
// null user buffer whose type is not absolute -> MPI_ERR_BUFFER; output too small (pack) or input
// exhausted (unpack) -> MPI_ERR_TRUNCATE; sizes that overflow -> MPI_ERR_COUNT. On error nothing is
// written and position is unchanged.
#pragma once

#include <ferry/type.hpp>

namespace ferry {

// Bytes needed to pack `count` elements of `type` (MPI_Pack_size).
i64 pack_size(i64 count, const Type& type);

// Packs `count` elements of `type` at `inbuf` into outbuf[*position, outsize), advancing *position.
void pack(const void* inbuf, i64 count, const Type& type, void* outbuf, i64 outsize, i64* position);

// Unpacks `count` elements of `type` from inbuf[*position, insize) into `outbuf`, advancing *position.
void unpack(const void* inbuf, i64 insize, i64* position, void* outbuf, i64 count, const Type& type);

// Copies `scount` elements of `stype` at `src` into the layout of `dcount` elements of `dtype` at
// `dst`: exactly what packing src and unpacking the packed bytes into dst gives (a receive from
// oneself, a periodic halo's interior into its halo), without the packed buffer. Both sides must
// hold the same number of bytes (scount x size): a smaller dst is MPI_ERR_TRUNCATE, a larger one
// MPI_ERR_COUNT; negative counts MPI_ERR_COUNT; a null buffer whose type is not absolute
// (MPI_BOTTOM) MPI_ERR_BUFFER. Overlapping src and dst give undefined results. Device or managed
// memory on either side: the GPU engine (ferry::gpu::copy, one kernel), synchronously. Host
// memory: the CPU engine walks the contiguous blocks of both sides at once when both are strided
// (one fixed-size move per block when the block sizes agree) or one is contiguous, and goes
// through a temporary packed buffer otherwise.
void copy(const void* src, i64 scount, const Type& stype, void* dst, i64 dcount, const Type& dtype);

// Two layouts of one shape at two places as ONE layout whose pieces alternate: the first `piece`
// bytes of a, then the first `piece` bytes of b, then a's next `piece` bytes, and so on. The result
// is a strided type with one more dimension, of count 2 and stride b's start minus a's (negative
// when b lies below a), just above the piece.
//
// What it is for: moving many small blocks of two directions at once. A periodic halo's x faces
// are 24 B at both ends of every row; the interior end of one direction shares 32 B sectors with
// the halo end of the other. The copy
//   copy(interleave(src_plus, src_minus), interleave(dst_plus, dst_minus))
// moves src_plus into dst_plus and src_minus into dst_minus (both sides alternate at the same
// packed bytes), and the GPU engine moves a row's two ends, and the next row's, in the same warp
// instruction: the partial halo writes meet the reads of their sectors in L2 instead of each
// costing a DRAM read-modify-write. Packing or unpacking two faces at once works the same way
// with the packed side interleaved too: for two packed buffers `off_b - off_a` bytes apart in one
// allocation, interleave(Type(make_dense(off_a, n), 0, n), Type(make_dense(off_b, n), 0, n), 24)
// is the packed side of 24 B pieces.
//
// piece: bytes per turn; 0 means a's innermost contiguous block. It must divide the innermost
// block of both a and b; cut into pieces of that size, a and b must have the same dimensions
// (counts and strides), differing only in where they start. The result's lower bound and extent
// are a's, so a count > 1 repeats the pair at a's extent. Errors: a or b not strided, sizes or
// shapes that differ, a piece that does not divide the blocks -> Error(MPI_ERR_TYPE); negative
// piece -> MPI_ERR_ARG. Cost: a few small allocations (the type's tree), no data touched.
Type interleave(const Type& a, const Type& b, i64 piece = 0);

}  // namespace ferry
