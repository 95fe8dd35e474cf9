// libferry-mpi: the MPI interposer, built on the MPI profiling interface: each MPI_* function here
// does Ferry's part and calls the PMPI_* one. Load it with LD_PRELOAD, or link it before the MPI
// library. The files: this one (initialization, finalization, communicators and datatypes, the
// ferry_mpi_* exports), send.cpp / recv.cpp / exchange.cpp / persistent.cpp (point-to-point),
// completion.cpp (waits and tests), probes.cpp and early.cpp (probes), coll_*.cpp (collectives),
// pack.cpp (MPI_Pack, MPI_Unpack), typemap.cpp (the MPI's typemap probe), refused.cpp, fortran*.cpp,
// reorder*.cpp. The transport (ferry/transport.hpp) decides each message's
// route and moves it; this layer keeps MPI's semantics.
#include <ferry/ferry_mpi.h>
#include <ferry/registry.hpp>
#include <ferry/transport.hpp>

#include <cstdio>
#include <string>

#include "mpi/boundary.hpp"
#include "mpi/coll.hpp"
#include "mpi/coll_pairs.hpp"
#include "mpi/coll_standin.hpp"
#include "mpi/persistent.hpp"
#include "mpi/requests.hpp"
#include "mpi/typemap.hpp"
#include "sys/env.hpp"

using namespace ferry::mpi_detail;
namespace transport = ferry::transport;

namespace {

// The transport's collective setup (topology, then the stub protocol); a failure leaves the
// interposer without its protocol, never an exception out of MPI_Init.
void start_transport() {
  try {
    transport::init();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-mpi: the transport could not start (%s); Ferry's IPC is off\n", e.what());
  }
  try {
    transport::start_protocol();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-mpi: the stub protocol could not start (%s)\n", e.what());
  }
  hot::init();
}

void say_initialized(const char* how) {
  if (!verbose()) return;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "ferry-mpi: rank %d initialized (%s; GPU engine %s; IPC %s%s)\n", rank, how,
               ferry::gpu::available() ? "available" : "not available",
               transport::protocol_on() ? "on" : "off",
               transport::passthrough() ? "; GPU memory passed through to the CUDA-aware MPI" : "");
  if (rank == 0) std::fputs(ferry::detail::env::settings_text("ferry-mpi: setting ").c_str(), stderr);
}

// MPI_Comm_free / MPI_Comm_disconnect: what Ferry keeps per communicator goes with it.
void forget_comm(MPI_Comm comm) {
  persistent::comm_freed(comm);
  transport::forget(comm);
  coll::forget(comm);
}

}  // namespace

#define FERRY_EXPORT __attribute__((visibility("default")))

extern "C" {

// What each does: ferry/ferry_mpi.h.
FERRY_EXPORT int ferry_mpi_loaded(void) { return 1; }
FERRY_EXPORT long ferry_mpi_ipc_sent(void) { return transport::counters().ipc_sent; }
FERRY_EXPORT long ferry_mpi_ipc_received(void) { return transport::counters().ipc_received; }
FERRY_EXPORT long ferry_mpi_batched_received(void) { return transport::counters().batched; }
FERRY_EXPORT long ferry_mpi_batch_waits(void) { return transport::counters().batch_waits; }
FERRY_EXPORT long ferry_mpi_pipelined_sent(void) { return transport::counters().pipelined; }
FERRY_EXPORT long ferry_mpi_local_sent(void) { return transport::counters().local; }
FERRY_EXPORT long ferry_mpi_collective_messages(void) { return coll::pairs::calls(); }
FERRY_EXPORT long ferry_mpi_collective_pulls(void) { return coll::pairs::pulls(); }
FERRY_EXPORT long ferry_mpi_collective_crossings(void) { return coll::pairs::crossings(); }
FERRY_EXPORT long ferry_mpi_collective_crossing_bytes(void) { return coll::pairs::crossing_bytes(); }
FERRY_EXPORT long ferry_mpi_persistent_standins(void) { return coll::standin::made(); }
FERRY_EXPORT void ferry_mpi_collective_wish(int wish) { coll::pairs::set_wish(wish < 0 ? -1 : wish != 0); }
FERRY_EXPORT const char* ferry_mpi_locality(int peer, int device) {
  try {
    return transport::locality_name(peer, device);
  } catch (const std::exception&) {  // before MPI_Init: no topology yet
    return nullptr;
  }
}
FERRY_EXPORT long ferry_mpi_pending(void) {
  return static_cast<long>(hot::pending.load()) + hot::stand_ins.load();
}
FERRY_EXPORT int ferry_mpi_force_method(const char* name) {
  if (!name) return transport::force_method(std::nullopt), 0;
  auto m = ferry::model::method_named(name);
  if (!m) return -1;
  transport::force_method(m);
  return 0;
}
FERRY_EXPORT int ferry_mpi_force_collectives(const char* name) {
  const std::string n = name ? name : "";
  if (name && n != "native" && n != "messages" && n != "mirrors") return -1;
  coll::pairs::force(!name ? -1 : n == "native" ? 1 : n == "messages" ? 2 : 0);
  return 0;
}
FERRY_EXPORT int ferry_mpi_force_pack(const char* name) {
  if (!name) return transport::force_pack(std::nullopt), 0;
  auto p = ferry::model::pack_named(name);
  if (!p) return -1;
  transport::force_pack(p);
  return 0;
}

int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) {
    start_transport();
    typemap::probe();  // issue 14 hook
    say_initialized("MPI_Init");
  }
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) {
    start_transport();
    typemap::probe();  // issue 14 hook
    say_initialized(*provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE" : "MPI_Init_thread");
  }
  return rc;
}

int MPI_Finalize(void) {
  guard(MPI_COMM_WORLD, [] {
    requests().drain();  // requests the application freed while active
    transport::stop_protocol();
    transport::finalize();
    return MPI_SUCCESS;
  });
  return PMPI_Finalize();
}

int MPI_Comm_free(MPI_Comm* comm) {
  if (comm) forget_comm(*comm);
  return PMPI_Comm_free(comm);
}

int MPI_Comm_disconnect(MPI_Comm* comm) {
  if (comm) forget_comm(*comm);
  return PMPI_Comm_disconnect(comm);
}

int MPI_Type_commit(MPI_Datatype* type) {
  const int rc = PMPI_Type_commit(type);
  if (rc != MPI_SUCCESS) return rc;
  try {
    ferry::commit(*type);
    typemap::classify(*type);  // issue 14 hook
  } catch (const std::exception& e) {
    // The system MPI still handles the type on host buffers; GPU buffers with it will be refused.
    if (verbose()) std::fprintf(stderr, "ferry-mpi: type not translated: %s\n", e.what());
  }
  return rc;
}

int MPI_Type_free(MPI_Datatype* type) {
  if (type && *type != MPI_DATATYPE_NULL) {
    typemap::forget(*type);  // issue 14 hook
    try {
      ferry::release(*type);
    } catch (const std::exception&) {  // never committed through Ferry: nothing cached
    }
  }
  return PMPI_Type_free(type);
}

}  // extern "C"
