// Same-node GPU→GPU messages over CUDA IPC.
//
// Protocol. A send of device memory to another process on this node, large enough that the model
// picks IPC, does not move the data through MPI: the sender sends a stub of kStubBytes on the
// user's communicator with the user's tag (so matching, ANY_SOURCE/ANY_TAG and non-overtaking order
// stay the MPI's own), carrying a random per-job magic, the CUDA IPC handle of the allocation that
// holds the data (the user's buffer when the type is dense, else a device staging buffer the GPU
// engine packed into), the offset in it, the packed size and the sender's GPU. The receiver, on
// any receive of at least kMinBytes whose message is stub-sized and carries the magic, opens the
// handle (cached per sender allocation; a new allocation id at the same address closes the old
// mapping), copies or unpacks straight from the sender's GPU memory over NVLink into its buffer
// (device or host), fixes the status' count to the real size, and acknowledges on a private
// duplicate of MPI_COMM_WORLD. The sender's request completes on that acknowledgement (a rendezvous, like MPI's
// own large-message protocol). If the receiver cannot open the handle, its acknowledgement asks
// for the data and the sender sends it staged on the private communicator. The acknowledgement
// names the receiver's GPU, as the stub names the sender's: each side learns on which GPU its peer
// works, and the model's locality (same GPU or another GPU of the node) follows.
//
// Progress: a receiver may sit in another blocking call while a sender waits for its
// acknowledgement, so every blocking call of the interposer polls pending receives that may hold a
// stub (see Requests::progress) while any exist.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

#include <ferry/model.hpp>

#include "mpi/common.hpp"

namespace ferry::mpi_detail::ipc {

constexpr int kStubBytes = 144;
// Receives smaller than this never hold a stub: no send below it uses IPC.
constexpr i64 kMinBytes = 4096;
// Nor does any send below this use the pipelined method, the one that also crosses nodes.
constexpr i64 kPipelineMinBytes = i64{1} << 20;

// After PMPI_Init: node locality of every rank, the private communicator, the magic.
void init();
void finalize();
bool enabled();
// FERRY_PROTOCOL_TEST=1 (tests only): the stub protocol runs without a GPU, host buffers of large
// sends (blocking and non-blocking) taking the pipelined method, so CI exercises matching,
// probes, truncation and progress of stub messages on machines without a GPU.
bool host_protocol_test();

// The world ranks of a communicator's ranks (cached per communicator until MPI_Comm_free).
Ranks ranks_of(MPI_Comm comm);
// The world rank of `rank` in `comm`, or -1 (intercommunicator, MPI_PROC_NULL, not a rank).
int world_rank(MPI_Comm comm, int rank);
// `rank` of `comm` is another process on this node.
bool same_node(MPI_Comm comm, int rank);
// MPI_Comm_free: forget the communicator's rank table (the handle may be reused).
void forget(MPI_Comm comm);

enum class Mode { standard, sync, ready };

// Sends `count` of `type` from device memory over IPC if the method for it is IPC; returns false
// (and does nothing) when it is not, so the caller stages instead. `request`: null for a blocking
// send, else the request the user waits on. `*rc` is the MPI result.
bool try_send(Mode mode, const void* buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm, MPI_Request* request, int* rc);
// The same with the translated type (persistent sends keep it: the application may free its own).
bool try_send(Mode mode, const void* buf, int count, const std::shared_ptr<const ferry::Type>& t,
              int dest, int tag, MPI_Comm comm, MPI_Request* request, int* rc);

// Sends `count` of `type` from device memory pipelined if the method for it is: chunks of whole
// elements packed into pinned memory while MPI moves the ones before (MPI-ACC); the receiver
// unpacks each chunk as it arrives. A stub on the user's communicator announces the chunks, which
// follow on the private one. `request`: null for a blocking send, which returns once every chunk
// is sent; else the request the user waits on, returned once every chunk is packed and posted
// (the application's buffer is then free). False when not used.
bool try_pipelined(Mode mode, const void* buf, int count, MPI_Datatype type, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request, int* rc);

// A receive into `to` completed with `st` (from a communicator with `ranks`). When the message is
// a stub, the data is fetched into the target now (staging: where the bytes arrived for a staged
// device receive, or null when they arrived in the target itself) and the status fixed; returns
// true and sets *rc (MPI_SUCCESS, or MPI_ERR_TRUNCATE when the real message does not fit). The
// sender is answered whatever happens here.
bool finish_recv(const Target& to, const void* staging, const Ranks& ranks, MPI_Status* st, int* rc);

// The bytes of a stub-sized message `received` from `st`'s source: true if it is a stub, with the
// size of the message it stands for.
bool stub_size(const void* received, const Ranks& ranks, const MPI_Status& st, i64* bytes);

// Staging of GPU data in pinned host memory, packed the way the model picks for its size and
// block size: one-shot (the kernel writes host memory over the bus) or into device memory and
// then one copy. Dense data is one copy either way.
void stage_pack(const void* buf, i64 count, const ferry::Type& t, void* host);
void stage_unpack(const void* host, void* buf, i64 count, const ferry::Type& t);

// Forces a method / pack for the messages that follow (measurements); nullopt: the model decides.
void force_method(std::optional<model::Method> m);
void force_pack(std::optional<model::Pack> p);

// The model's locality of world rank `peer` for data on `device` ("same_gpu", "other_gpu",
// "other_node"; null when IPC is off or the rank does not exist), for tests.
const char* locality_name(int peer, int device);

// Messages sent and received over IPC by this process so far (for tests and benchmarks).
long sent();
long pipelined();
long received();

// The receive may get a stub: from a peer that may send one (same node; any node for 1 MiB or
// more) or MPI_ANY_SOURCE, and large enough (kMinBytes; a blocking receive checks down to
// kStubBytes, where only a truncated message can be a stub).
bool may_get_stub(int count, MPI_Datatype type, int source, MPI_Comm comm, bool blocking = false);

}  // namespace ferry::mpi_detail::ipc
