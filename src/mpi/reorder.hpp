// Rank reordering for the process-topology constructors (MPI_Dist_graph_create_adjacent,
// MPI_Dist_graph_create, MPI_Graph_create, MPI_Cart_create with reorder = 1): what the four share.
//
// What reordering means here (the standard's, read as MPI_Graph_create and MPI_Cart_create state
// it: node i of the virtual topology is the process of rank i in the new communicator). Graph
// vertex v is a *role*: the process that gets new rank v runs it, and its neighbours are vertex
// v's, numbered as new ranks. For the distributed graph constructors the vertices are the ranks of
// comm_old the application names: old rank v described vertex v (its own edges, adjacent form),
// and after reordering the process with new rank v answers MPI_Dist_graph_neighbors with vertex v's
// lists, whichever process described them. The application moves its data by rank (dissertation
// §5.1.1: "actual process data is not moved automatically"; TEMPI does the same). The other reading,
// every process keeping its own edges under new numbers, would leave every byte where it was.
//
// How: every process checks its own arguments; one allgather shares the verdicts, so a bad argument
// on any rank fails the call on every rank; rank 0 gathers the rest, checks what needs the whole
// graph (edges listed at one end only, arguments that differ between ranks), partitions the graph
// (src/place: METIS or the built-in bisection into exactly each node's rank count, then the QAP over
// the node's GPUs; the §4.3 blocks for a Cartesian grid), and scatters each process its verdict, its
// new rank and what it needs to know; then PMPI_Comm_split (key: the new rank) and the MPI's own
// constructor with reorder = 0 on the result, so every topology query is the MPI's.
#pragma once

#include <ferry/place.hpp>
#include <mpi.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace ferry::mpi_detail::reorder {

// Where the processes of a communicator run, as the partitioner sees them.
struct Layout {
  std::vector<place::Slot> slots;  // per rank of the communicator
  place::Matrix gpu_cost;          // seconds per byte between a node's GPUs; empty: GPUs not known
  int nodes = 1;
  int gpus = 0;                    // GPUs per node (the most on any node); 0: not known
  // Nothing to gain: one node, and at most one GPU.
  bool trivial() const { return nodes <= 1 && gpus <= 1; }
};

// Whether a constructor goes through Ferry: reorder requested, FERRY_REORDER on, an
// intracommunicator. Local (every rank answers the same for the same arguments and environment).
bool wanted(MPI_Comm comm, int reorder);

// The layout of `comm`'s processes: the simulated one (FERRY_TOPOLOGY) as the transport has it for
// the world, else discovered now over `comm` (collective: the GPUs processes chose after MPI_Init
// count). ferry::Error if it cannot be had, on every rank alike.
Layout layout(MPI_Comm comm);

// One process's part of the exchange.
struct Local {
  int error = MPI_SUCCESS;   // this process's arguments are bad: the class, and why
  std::string why;
  std::vector<int> payload;  // what rank 0 needs from it
};
// Rank 0's verdict.
struct Decision {
  int error = MPI_SUCCESS;
  std::string why;
  std::vector<int> new_of_old;              // per old rank
  std::vector<std::vector<int>> extra;      // per old rank (or empty: nothing)
  std::string report;                       // FERRY_MPI_VERBOSE: what was done
};
// What each process learns.
struct Outcome {
  int error = MPI_SUCCESS;
  std::string why;
  int new_rank = -1;
  std::vector<int> extra;
};
// Rank 0's part: everyone's payloads (by old rank) to a decision. A ferry::Error it throws becomes
// the decision's error.
using Decide = std::function<Decision(const std::vector<std::vector<int>>& payloads)>;

// The exchange above: collective over `comm`; every rank gets the same error (the first bad rank's,
// else rank 0's), never only some.
Outcome exchange(const char* call, MPI_Comm comm, const Local& mine, const Decide& decide);

// The reordering of the undirected graph of `flows` (vertices: ranks of the communicator, padded
// with isolated vertices up to the layout's size) on `layout`, or of a Cartesian grid (`dims`
// non-empty) when it fills the communicator; with the report for FERRY_MPI_VERBOSE: the cut before
// and after, by link class, and the time the partition and QAP took.
Decision decide(const Layout& layout, const std::vector<place::Flow>& flows,
                const std::vector<int>& dims = {}, const std::vector<int>& periods = {});

// The new communicator's processes: PMPI_Comm_split of `comm` with the new rank as key (`member`
// false: MPI_UNDEFINED, the process gets MPI_COMM_NULL), then `create` on it, and the split freed.
int split_and_create(MPI_Comm comm, const Outcome& o, bool member,
                     const std::function<int(MPI_Comm)>& create, MPI_Comm* out);

// Fails the call the MPI way: the error goes through comm's error handler, the output is
// MPI_COMM_NULL, the class is returned.
int fail(MPI_Comm comm, const char* call, int error, const std::string& why, MPI_Comm* out);
// The same for an exception: a ferry::Error's class, else MPI_ERR_INTERN.
int fail(MPI_Comm comm, const char* call, const std::exception& e, MPI_Comm* out);

// An FNV-1a hash of ints, for telling whether ranks passed the same global arguments.
std::uint64_t hash(const std::vector<int>& v);

}  // namespace ferry::mpi_detail::reorder
