// Host mirrors of a collective's GPU buffers: the system MPI runs the collective (reductions
// included, on any datatype) on pinned host memory with the buffer's own layout.
//
// A mirror covers the span its runs reach; its inputs are copied in (the span in one copy when the
// runs fill most of it, else each run's span). A span that leaves the allocation of its first byte
// (MPI_BOTTOM with absolute addresses of several allocations) gets a sparse mirror instead: an
// anonymous mapping reserved without memory, each input run packed by the GPU engine (which reads
// the type map's bytes only) and unpacked into it on the CPU, so only the pages the runs touch
// exist and nothing between the allocations is read. Only the type map's bytes of its output runs go
// back: a dense run in one copy, any other packed on the CPU and unpacked by one kernel, so bytes
// between and inside the runs, which the application may be changing meanwhile, are never
// overwritten. Every copy of a call is queued on the legacy stream and waited for once: a
// collective on GPU buffers costs one host-waited GPU operation before the MPI and one after, and
// no allocation (pinned memory comes from the pool).
#pragma once

#include <ferry/transport.hpp>

#include <functional>
#include <memory>
#include <vector>

#include "mpi/hot.hpp"

namespace ferry::mpi_detail::coll {

// `count` elements of `type`, `disp` bytes from the buffer. Runs that are not `out` are only read.
struct Run {
  std::shared_ptr<const Type> type;
  i64 disp;
  i64 count;
  bool out;
};

class Mirror {
 public:
  Mirror(const void* buf, std::vector<Run> runs);
  ~Mirror();
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;
  // Where the application's buffer origin lies in the mirror (what the MPI is given).
  void* ptr() const;
  // Queue the copy of the inputs into the mirror, or the output runs back (legacy stream).
  void fill();
  void drain();

 private:
  char* user_;
  std::vector<Run> runs_;
  i64 lo_ = 0, hi_ = 0;
  void* host_ = nullptr;              // the span [lo_, hi_): pinned, or sparse
  bool sparse_ = false;               // an anonymous mapping whose pages exist where runs are
  std::vector<void*> packed_;         // pinned, one per non-dense output run (until the wait)
};

// The mirrors of one collective call: inputs filled before the MPI runs, outputs drained after it,
// each side waited for once.
class Mirrors {
 public:
  // A buffer argument: GPU memory gets a mirror (filled if `in`, drained if `out`); returns what
  // the MPI is given.
  void* add(const void* buf, std::vector<Run> runs, bool in, bool out);
  // Before the MPI call: waits for the inputs' copies.
  void ready();
  // After it: the outputs go back, waited for.
  void done();
  bool any() const { return !all_.empty(); }

 private:
  std::vector<std::shared_ptr<Mirror>> all_, outs_;
  bool filled_ = false;
};

}  // namespace ferry::mpi_detail::coll
