// MPI-4's large-count entry points (MPI_Send_c, ...), served by Ferry's int ones. MPICH's mpi_f08
// bindings call them for every call, and C programs may: without these, such calls bypass Ferry
// and hand GPU memory to an MPI that cannot take it.
//
// A count that fits an int goes to the int entry as it is. A larger one goes as one element of a
// contiguous type of that many (MPI_Type_contiguous_c, committed and freed through Ferry; MPI lets
// a type be freed while an operation that uses it is pending). Reductions cannot take a derived
// type with a predefined operation, and the pack calls have int positions: past INT_MAX they go to
// the MPI's own _c call when every buffer is host memory, and return MPI_ERR_COUNT on GPU memory.
// A negative count goes to the int entry as -1, whose MPI reports it.
//
// Compiled against an MPI-4 header only (Open MPI 4.1 is MPI-3.1: none of this exists there).
#include <mpi.h>

#if MPI_VERSION >= 4

#include <ferry/gpu.hpp>

#include <climits>

namespace {

// One count of the large-count interface as the int interface's (count, type).
class Counted {
 public:
  // `pending`: the call returns before the operation ends (non-blocking, persistent): a type made
  // here is kept.
  Counted(MPI_Count count, MPI_Datatype type, bool pending = false)
      : count_(count < 0 ? -1 : static_cast<int>(count)), type_(type) {
    if (count <= INT_MAX) return;
    rc_ = PMPI_Type_contiguous_c(count, type, &made_);
    if (rc_ == MPI_SUCCESS) rc_ = MPI_Type_commit(&made_);
    count_ = 1;
    type_ = made_;
    if (pending) made_ = MPI_DATATYPE_NULL;
  }
  ~Counted() {
    if (made_ != MPI_DATATYPE_NULL) MPI_Type_free(&made_);
  }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  int rc() const { return rc_; }
  int count() const { return count_; }
  MPI_Datatype type() const { return type_; }

 private:
  int count_;
  MPI_Datatype type_;
  MPI_Datatype made_ = MPI_DATATYPE_NULL;
  int rc_ = MPI_SUCCESS;
};

bool fits(MPI_Count c) { return c <= INT_MAX; }

// No buffer is GPU memory (MPI_IN_PLACE and null are not).
bool host(const void* a, const void* b = nullptr) {
  for (const void* p : {a, b})
    if (p != nullptr && p != MPI_IN_PLACE && ferry::gpu::reachable(ferry::gpu::where(p).kind)) return false;
  return true;
}

}  // namespace

// One count and type as Counted c, then `call` (which reads c): blocking, or pending (P).
#define FERRY_C1(count, type, call)         \
  Counted c(count, type);                   \
  if (c.rc() != MPI_SUCCESS) return c.rc(); \
  return call
#define FERRY_C1P(count, type, call)        \
  Counted c(count, type, true);             \
  if (c.rc() != MPI_SUCCESS) return c.rc(); \
  return call

extern "C" {

// ---------------------------------------------------------------------------- point to point

#define FERRY_SEND_C(NAME)                                                                          \
  int NAME##_c(const void* buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) { \
    FERRY_C1(count, type, NAME(buf, c.count(), c.type(), dest, tag, comm));                         \
  }
#define FERRY_ISEND_C(NAME)                                                                       \
  int NAME##_c(const void* buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, \
               MPI_Request* request) {                                                            \
    FERRY_C1P(count, type, NAME(buf, c.count(), c.type(), dest, tag, comm, request));             \
  }
FERRY_SEND_C(MPI_Send)
FERRY_SEND_C(MPI_Bsend)
FERRY_SEND_C(MPI_Ssend)
FERRY_SEND_C(MPI_Rsend)
FERRY_ISEND_C(MPI_Isend)
FERRY_ISEND_C(MPI_Ibsend)
FERRY_ISEND_C(MPI_Issend)
FERRY_ISEND_C(MPI_Irsend)
FERRY_ISEND_C(MPI_Send_init)
FERRY_ISEND_C(MPI_Bsend_init)
FERRY_ISEND_C(MPI_Ssend_init)
FERRY_ISEND_C(MPI_Rsend_init)

int MPI_Recv_c(void* buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  FERRY_C1(count, type, MPI_Recv(buf, c.count(), c.type(), source, tag, comm, status));
}
int MPI_Irecv_c(void* buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                MPI_Request* request) {
  FERRY_C1P(count, type, MPI_Irecv(buf, c.count(), c.type(), source, tag, comm, request));
}
int MPI_Recv_init_c(void* buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                    MPI_Request* request) {
  FERRY_C1P(count, type, MPI_Recv_init(buf, c.count(), c.type(), source, tag, comm, request));
}
int MPI_Mrecv_c(void* buf, MPI_Count count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  FERRY_C1(count, type, MPI_Mrecv(buf, c.count(), c.type(), message, status));
}
int MPI_Imrecv_c(void* buf, MPI_Count count, MPI_Datatype type, MPI_Message* message, MPI_Request* request) {
  FERRY_C1P(count, type, MPI_Imrecv(buf, c.count(), c.type(), message, request));
}
int MPI_Sendrecv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                   void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag,
                   MPI_Comm comm, MPI_Status* status) {
  Counted s(sendcount, sendtype);
  if (s.rc() != MPI_SUCCESS) return s.rc();
  FERRY_C1(recvcount, recvtype, MPI_Sendrecv(sendbuf, s.count(), s.type(), dest, sendtag, recvbuf, c.count(),
                                             c.type(), source, recvtag, comm, status));
}
int MPI_Sendrecv_replace_c(void* buf, MPI_Count count, MPI_Datatype type, int dest, int sendtag, int source,
                           int recvtag, MPI_Comm comm, MPI_Status* status) {
  FERRY_C1(count, type, MPI_Sendrecv_replace(buf, c.count(), c.type(), dest, sendtag, source, recvtag, comm, status));
}

// ---------------------------------------------------------------------------- packing

int MPI_Pack_c(const void* inbuf, MPI_Count incount, MPI_Datatype type, void* outbuf, MPI_Count outsize,
               MPI_Count* position, MPI_Comm comm) {
  if (fits(incount) && fits(outsize) && position && fits(*position)) {
    int at = static_cast<int>(*position);
    const int rc = MPI_Pack(inbuf, static_cast<int>(incount), type, outbuf, static_cast<int>(outsize), &at, comm);
    if (rc == MPI_SUCCESS) *position = at;
    return rc;
  }
  if (host(inbuf, outbuf)) return PMPI_Pack_c(inbuf, incount, type, outbuf, outsize, position, comm);
  return MPI_ERR_COUNT;
}
int MPI_Unpack_c(const void* inbuf, MPI_Count insize, MPI_Count* position, void* outbuf, MPI_Count outcount,
                 MPI_Datatype type, MPI_Comm comm) {
  if (fits(insize) && fits(outcount) && position && fits(*position)) {
    int at = static_cast<int>(*position);
    const int rc = MPI_Unpack(inbuf, static_cast<int>(insize), &at, outbuf, static_cast<int>(outcount), type, comm);
    if (rc == MPI_SUCCESS) *position = at;
    return rc;
  }
  if (host(inbuf, outbuf)) return PMPI_Unpack_c(inbuf, insize, position, outbuf, outcount, type, comm);
  return MPI_ERR_COUNT;
}

// ---------------------------------------------------------------------------- collectives

int MPI_Bcast_c(void* buffer, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm) {
  FERRY_C1(count, type, MPI_Bcast(buffer, c.count(), c.type(), root, comm));
}
int MPI_Ibcast_c(void* buffer, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request) {
  FERRY_C1P(count, type, MPI_Ibcast(buffer, c.count(), c.type(), root, comm, request));
}

#define FERRY_UNPAREN(...) __VA_ARGS__

// (send count, type; receive count, type) collectives: FERRY_SR_C(non-blocking, name, (, the other
// parameters), their names).
#define FERRY_SR_C(PENDING, NAME, PARAMS, ...)                                                        \
  int NAME##_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,         \
               MPI_Count recvcount, MPI_Datatype recvtype FERRY_UNPAREN PARAMS) {                      \
    Counted s(sendcount, sendtype, PENDING);                                                            \
    if (s.rc() != MPI_SUCCESS) return s.rc();                                                           \
    Counted c(recvcount, recvtype, PENDING);                                                            \
    if (c.rc() != MPI_SUCCESS) return c.rc();                                                           \
    return NAME(sendbuf, s.count(), s.type(), recvbuf, c.count(), c.type(), __VA_ARGS__);              \
  }
FERRY_SR_C(false, MPI_Gather, (, int root, MPI_Comm comm), root, comm)
FERRY_SR_C(true, MPI_Igather, (, int root, MPI_Comm comm, MPI_Request* request), root, comm, request)
FERRY_SR_C(false, MPI_Scatter, (, int root, MPI_Comm comm), root, comm)
FERRY_SR_C(true, MPI_Iscatter, (, int root, MPI_Comm comm, MPI_Request* request), root, comm, request)
FERRY_SR_C(false, MPI_Allgather, (, MPI_Comm comm), comm)
FERRY_SR_C(true, MPI_Iallgather, (, MPI_Comm comm, MPI_Request* request), comm, request)
FERRY_SR_C(false, MPI_Alltoall, (, MPI_Comm comm), comm)
FERRY_SR_C(true, MPI_Ialltoall, (, MPI_Comm comm, MPI_Request* request), comm, request)
FERRY_SR_C(false, MPI_Neighbor_allgather, (, MPI_Comm comm), comm)
FERRY_SR_C(true, MPI_Ineighbor_allgather, (, MPI_Comm comm, MPI_Request* request), comm, request)
FERRY_SR_C(false, MPI_Neighbor_alltoall, (, MPI_Comm comm), comm)
FERRY_SR_C(true, MPI_Ineighbor_alltoall, (, MPI_Comm comm, MPI_Request* request), comm, request)

// Reductions, the same form: the int entry when the count fits; else the MPI's own on host memory.
#define FERRY_REDUCE_C(NAME, PARAMS, ...)                                                                 \
  int NAME##_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op FERRY_UNPAREN PARAMS) { \
    if (fits(count)) return NAME(sendbuf, recvbuf, count < 0 ? -1 : static_cast<int>(count), type, op, __VA_ARGS__); \
    if (host(sendbuf, recvbuf)) return P##NAME##_c(sendbuf, recvbuf, count, type, op, __VA_ARGS__);      \
    return MPI_ERR_COUNT;                                                                                 \
  }
FERRY_REDUCE_C(MPI_Allreduce, (, MPI_Comm comm), comm)
FERRY_REDUCE_C(MPI_Iallreduce, (, MPI_Comm comm, MPI_Request* request), comm, request)
FERRY_REDUCE_C(MPI_Reduce, (, int root, MPI_Comm comm), root, comm)
FERRY_REDUCE_C(MPI_Ireduce, (, int root, MPI_Comm comm, MPI_Request* request), root, comm, request)
FERRY_REDUCE_C(MPI_Scan, (, MPI_Comm comm), comm)
FERRY_REDUCE_C(MPI_Iscan, (, MPI_Comm comm, MPI_Request* request), comm, request)
FERRY_REDUCE_C(MPI_Exscan, (, MPI_Comm comm), comm)
FERRY_REDUCE_C(MPI_Iexscan, (, MPI_Comm comm, MPI_Request* request), comm, request)
FERRY_REDUCE_C(MPI_Reduce_scatter_block, (, MPI_Comm comm), comm)
FERRY_REDUCE_C(MPI_Ireduce_scatter_block, (, MPI_Comm comm, MPI_Request* request), comm, request)

// ---------------------------------------------------------------------------- persistent collectives

// The MPI-4 inits (Ferry's stand-ins and plans behind the int ones, coll_standin.hpp): a type made
// for a large count is kept, as every start uses it.
int MPI_Bcast_init_c(void* buffer, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Info info,
                     MPI_Request* request) {
  FERRY_C1P(count, type, MPI_Bcast_init(buffer, c.count(), c.type(), root, comm, info, request));
}
#define FERRY_INIT_PARAMS , MPI_Info info, MPI_Request* request
FERRY_SR_C(true, MPI_Gather_init, (, int root, MPI_Comm comm FERRY_INIT_PARAMS), root, comm, info, request)
FERRY_SR_C(true, MPI_Scatter_init, (, int root, MPI_Comm comm FERRY_INIT_PARAMS), root, comm, info, request)
FERRY_SR_C(true, MPI_Allgather_init, (, MPI_Comm comm FERRY_INIT_PARAMS), comm, info, request)
FERRY_SR_C(true, MPI_Alltoall_init, (, MPI_Comm comm FERRY_INIT_PARAMS), comm, info, request)
FERRY_SR_C(true, MPI_Neighbor_allgather_init, (, MPI_Comm comm FERRY_INIT_PARAMS), comm, info, request)
FERRY_SR_C(true, MPI_Neighbor_alltoall_init, (, MPI_Comm comm FERRY_INIT_PARAMS), comm, info, request)
FERRY_REDUCE_C(MPI_Allreduce_init, (, MPI_Comm comm FERRY_INIT_PARAMS), comm, info, request)
FERRY_REDUCE_C(MPI_Reduce_init, (, int root, MPI_Comm comm FERRY_INIT_PARAMS), root, comm, info, request)
FERRY_REDUCE_C(MPI_Scan_init, (, MPI_Comm comm FERRY_INIT_PARAMS), comm, info, request)
FERRY_REDUCE_C(MPI_Exscan_init, (, MPI_Comm comm FERRY_INIT_PARAMS), comm, info, request)
FERRY_REDUCE_C(MPI_Reduce_scatter_block_init, (, MPI_Comm comm FERRY_INIT_PARAMS), comm, info, request)
#undef FERRY_INIT_PARAMS

}  // extern "C"

#endif  // MPI_VERSION >= 4
