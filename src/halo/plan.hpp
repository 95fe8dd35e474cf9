// halo/plan.hpp — what a Plan holds: the regions each neighbour pair moves, grouped into copies
// (inside this process) and messages (one per neighbour rank and direction of travel, possibly in
// parts), in the order they are started; and the backend (host or GPU) that moves them.
#pragma once

#include <ferry/halo.hpp>
#include <ferry/type.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "halo/domain.hpp"

namespace ferry::halo {

namespace detail {

// One region of a neighbour pair, both ends (local coordinates of each end's subdomain).
struct Region {
  int src_cell = 0, dst_cell = 0;
  int field = 0;
  int dir = 0;  // the direction the receiver gets it from
  Box src, dst;
  i64 bytes = 0;
};

// One end of a region in this rank's memory: a box of a field of a local subdomain.
struct Piece {
  int sub = 0;
  int field = 0;
  Type type;       // offsets from the field's data pointer
  i64 offset = 0;  // in the message
  i64 bytes = 0;
};

// A range of a message that travels as one MPI message; it holds whole pieces.
struct Part {
  i64 offset = 0, bytes = 0;
  int piece_begin = 0, piece_end = 0;
};

// Everything this rank sends to (or receives from) one rank by one method, in one buffer.
struct Message {
  int peer = -1;
  Method method = Method::staged;
  i64 bytes = 0;
  std::vector<Piece> pieces;  // in the order both ends agree on
  std::vector<Part> parts;
};

// A region moved inside this process: a copy from interior to halo (local), or through a buffer
// by way of the peer path (peer).
struct Copy {
  Method method = Method::local;
  int src_sub = 0, dst_sub = 0, field = 0;
  Type src, dst;
  i64 bytes = 0;
};

// What moves the data: the host engine or the GPU one.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual void start(gpu::Stream stream) = 0;
  virtual bool test() = 0;
  virtual void finish(gpu::Stream stream) = 0;
  virtual void swapped() {}  // the fields' pointers changed (swap)
  virtual void wait() {}     // the GPU work of the last exchange is done (exchange() is blocking)
};

}  // namespace detail

struct Plan::Impl {
  std::shared_ptr<const Domain::Impl> dom;
  MPI_Comm comm = MPI_COMM_NULL;  // the plan's own duplicate: its tags are its own
  Options opt;
  bool device = false;  // the fields are GPU memory
  std::vector<std::vector<Field>> fields;
  std::vector<std::array<int, 3>> order;  // per field: the packed order of its regions (axes)
  int parity = 0;       // 1 after an odd number of swaps: data_next is current
  std::vector<detail::Message> sends, recvs;  // in the order they are started
  std::vector<detail::Copy> copies;           // likewise
  std::unique_ptr<detail::Backend> backend;
  bool in_flight = false;
  Stats stats;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  char* data(int sub, int field) const {
    const Field& f = fields[sub][field];
    return static_cast<char*>(parity && f.data_next ? f.data_next : f.data);
  }
};

namespace detail {
std::unique_ptr<Backend> make_host_backend(Plan::Impl& plan);
std::unique_ptr<Backend> make_device_backend(Plan::Impl& plan);
// The GPU backend's answers for the method choice: can device fields of this plan go over IPC,
// and which of staged and pipelined Ferry's model picks for a message of `bytes` in `block` runs.
bool device_ipc_possible(const Plan::Impl& plan);
Method model_choice(i64 bytes, i64 block, bool same_node);
// Lays out the plan's copies and messages (collective; plan_build.cpp).
void build(Plan::Impl& plan);
}  // namespace detail

}  // namespace ferry::halo
