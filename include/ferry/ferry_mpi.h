/* ferry/ferry_mpi.h — what libferry-mpi exports besides the MPI_* functions it interposes.
 *
 * For programs, tests and tools that talk to the interposer: whether it is loaded, what it did
 * (counters), and forcing its method choice for measurements. Link with Ferry::mpi (or load
 * libferry-mpi.so with LD_PRELOAD and look the symbols up with dlsym: a program that links them
 * directly cannot run without the interposer). All functions are thread-safe and never fail. */
#ifndef FERRY_FERRY_MPI_H
#define FERRY_FERRY_MPI_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1: the interposer is loaded (a program looks this symbol up to tell). */
int ferry_mpi_loaded(void);

/* Messages this process sent and received over CUDA IPC so far. */
long ferry_mpi_ipc_sent(void);
long ferry_mpi_ipc_received(void);
/* Messages this process sent pipelined (chunks staged while MPI moves the ones before). */
long ferry_mpi_pipelined_sent(void);
/* Messages of GPU data this process sent to itself by the local method (one copy or kernel from
 * the sender's layout into the receiver's, no staging). */
long ferry_mpi_local_sent(void);
/* Receives whose GPU wait a batch shared (FERRY_BATCH_RECEIVE: the stubs that complete together
 * queue their copies and wait once), and the waits those batches made. */
long ferry_mpi_batched_received(void);
long ferry_mpi_batch_waits(void);
/* Collective calls this process made as Ferry's own (MPI_Alltoall(v/w) and the neighbourhood
 * alltoall(v/w) and allgather(v) on GPU buffers: each block a message with its own method, or read
 * in place) rather than through the MPI's collective on host copies. */
long ferry_mpi_collective_messages(void);
/* Of those, the calls whose blocks every process read in place from the senders' GPU memory
 * (FERRY_PULL: a blocking call on one node, every block contiguous device memory). */
long ferry_mpi_collective_pulls(void);
/* Messages those collectives sent to a process on another node (simulated nodes included): with
 * FERRY_AGGREGATE, one per ordered pair of nodes that exchange data in a persistent neighbourhood
 * collective, not one per block. */
long ferry_mpi_collective_crossings(void);
/* The bytes of those messages (with ferry_mpi_neighbor_alltoallv_init_ids, duplicates sent once). */
long ferry_mpi_collective_crossing_bytes(void);
/* Persistent collective requests made as Ferry's stand-ins on host mirrors (the init calls of
 * MPI-4 and Open MPI's MPIX_ with GPU memory at some process that Ferry's messages do not take:
 * each start runs the non-blocking form through Ferry) rather than by the MPI's own init. */
long ferry_mpi_persistent_standins(void);
/* For tests: whether Ferry's messages should take MPI_Alltoall(v/w) and the neighbourhood
 * collectives is agreed by every process of a communicator at the first call of each kind on it
 * (any process with GPU buffers there: all take Ferry's messages). `wish` 1 or 0 makes this
 * process take part as if its buffers were or were not GPU memory; -1 goes back to its buffers. */
void ferry_mpi_collective_wish(int wish);

/* Calls of a Fortran program that went through Ferry's own Fortran entries (Open MPI, whose
 * Fortran bindings call PMPI_* directly, so Ferry defines mpi_send_, mpi_send_f08_, ... itself).
 * Always 0 under MPICH: its Fortran bindings call the C MPI_* functions, which Ferry interposes. */
long ferry_mpi_fortran_calls(void);

/* The datatype constructs the system MPI packs against the standard's typemap, as Ferry's probe
 * at MPI_Init found them, comma-separated ("" when none, and before MPI_Init). Open MPI 4.1:
 * "(h)vector stride of -1 byte". Host buffers of committed types that use such a construct go
 * through Ferry's engine (README: "The standard's typemap"). The string is static. */
const char* ferry_mpi_wrong_typemaps(void);

/* Where world rank `peer` receives, seen from data on CUDA device `device`, as the model's
 * locality: "same_gpu", "other_gpu" (also while its GPU is not known yet) or "other_node"; NULL
 * when Ferry's IPC is off or there is no such rank. The string is static. */
const char* ferry_mpi_locality(int peer, int device);

/* Requests Ferry is still finishing (its table of requests, and active stand-ins of persistent
 * requests): 0 once everything the application started has completed. */
long ferry_mpi_pending(void);

/* Forces the method ("staged", "pipelined", "ipc") or the staging pack ("device", "one_shot") of
 * the messages that follow, for measurements; NULL gives the choice back to the model. Returns 0,
 * or -1 for a name it does not know (and changes nothing). Not synchronized with messages in
 * flight: call it between messages. */
int ferry_mpi_force_method(const char* name);
int ferry_mpi_force_pack(const char* name);
/* Forces how MPI_Alltoall(v/w) and the neighbourhood alltoall(v/w) and allgather(v) take the calls
 * that follow on GPU buffers: "native" (Ferry's: read in place where FERRY_PULL can, else each block
 * a message of Ferry's), "messages" (each block a message of Ferry's), "mirrors" (the MPI's
 * own collective on host copies of GPU buffers); NULL gives the choice back (GPU buffers: native,
 * unless FERRY_NATIVE_COLLECTIVES=0). Every process of a call must force alike. Returns 0, or -1
 * for a name it does not know. For measurements (bench_alltoall). */
int ferry_mpi_force_collectives(const char* name);

/* The stream the data of this thread's sends is produced on (a cudaStream_t; NULL: none). Ferry
 * then reads a GPU send buffer (MPI_Send and its modes, MPI_Isend, persistent sends from the
 * request's creation, MPI_Sendrecv, MPI_Pack) only after the work queued on that stream before the
 * call, so a kernel that writes the buffer need not be followed by a synchronize:
 *     my_kernel<<<g, b, 0, s>>>(dev_buf);
 *     ferry_mpi_set_stream(s);
 *     MPI_Send(dev_buf, n, MPI_DOUBLE, peer, 0, comm);   // sends the kernel's output
 * Without a stream, MPI's semantics stay: the data must be complete when the call is made. Cost:
 * one host wait for the stream per send of GPU data. Always returns 0. */
int ferry_mpi_set_stream(void* stream);
void* ferry_mpi_get_stream(void);
/* The keyvals of the same stream as an attribute (overriding the thread's): of a communicator
 * (MPI_Comm_set_attr(comm, *comm_keyval, stream)) or of a datatype (MPI_Type_set_attr; wins over
 * the communicator's). Copied with MPI_Comm_dup / MPI_Type_dup. Made at the first call, which needs
 * an initialized MPI (else MPI_ERR_OTHER); either pointer may be NULL. */
int ferry_mpi_stream_keyvals(int* comm_keyval, int* type_keyval);

/* MPI_Neighbor_alltoallv_init with the values named: sendids[sdispls[i] + k] is the id of element k
 * of the block to out-neighbour i (the ids array is indexed like sendbuf, in elements of sendtype).
 * The elements this process sends under one id must hold the same value: where the blocks between
 * nodes are aggregated (FERRY_AGGREGATE), each crosses to a node once, however many of its
 * processes take it, and is handed out there (the locality-aware de-duplication of Bienz et al.).
 * The result of every start is MPI_Neighbor_alltoallv's; the ids are read at this call only. Host
 * and GPU buffers; a collective call over a process topology, made at every process with this
 * entry; MPI_Start / MPI_Wait / MPI_Request_free as for any persistent request. The MPI's error
 * class on bad arguments (MPI_ERR_OTHER at the processes whose own arguments were good). */
int ferry_mpi_neighbor_alltoallv_init_ids(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                          const long long sendids[], MPI_Datatype sendtype, void* recvbuf,
                                          const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                                          MPI_Comm comm, MPI_Info info, MPI_Request* request);

#ifdef __cplusplus
}
#endif

#endif /* FERRY_FERRY_MPI_H */
