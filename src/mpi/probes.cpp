// Probes: MPI_Probe, MPI_Iprobe, MPI_Mprobe, MPI_Improbe. A stub-sized message from a process that
// may send stubs is taken early (early.hpp), so the status can say the real size; messages taken
// early answer probes first. Blocking probes serve pending stub receives while they wait.
#include "mpi/boundary.hpp"
#include "mpi/early.hpp"
#include "mpi/requests.hpp"

namespace ferry::mpi_detail {
namespace {

[[gnu::noinline]] int probe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                            MPI_Status* status, bool blocking) noexcept {
  return guard(comm, [&] {
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    for (;;) {
      if (early::probe(source, tag, comm, st, message)) {
        *flag = 1;
        return MPI_SUCCESS;
      }
      int rc = message ? PMPI_Improbe(source, tag, comm, flag, message, st)
                       : PMPI_Iprobe(source, tag, comm, flag, st);
      if (rc != MPI_SUCCESS) return rc;
      if (*flag) {
        if (transport::protocol_on()) {
          bool taken = false;
          rc = early::after_probe(comm, st, message, &taken);
          if (message && !taken) early::remember_message(*message, comm);  // MPI's handle: its Mrecv needs comm
        }
        return rc;
      }
      if (!blocking) return MPI_SUCCESS;
      requests().progress();
    }
  });
}

// MPI_Iprobe found a message (`st`) and nothing was pending: a stub-sized one is taken early.
[[gnu::noinline]] int found(MPI_Comm comm, MPI_Status* st) noexcept {
  return guard(comm, [&] {
    bool taken = false;
    return early::after_probe(comm, st, nullptr, &taken);
  });
}

[[gnu::noinline]] int improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                              MPI_Status* status) noexcept {
  serve();
  if (!transport::protocol_on()) return PMPI_Improbe(source, tag, comm, flag, message, status);
  return probe(source, tag, comm, flag, message, status, false);
}

[[gnu::noinline]] int iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) noexcept {
  serve();
  if (!transport::protocol_on()) return PMPI_Iprobe(source, tag, comm, flag, status);
  return probe(source, tag, comm, flag, nullptr, status, false);
}

}  // namespace
}  // namespace ferry::mpi_detail

using namespace ferry::mpi_detail;

extern "C" {

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  int flag = 0;
  if (!hot::stubs_on && !requests().polling()) return PMPI_Mprobe(source, tag, comm, message, status);
  return probe(source, tag, comm, &flag, message, status, true);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message, MPI_Status* status) {
  return improbe(source, tag, comm, flag, message, status);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  int flag = 0;
  if (!hot::stubs_on && !requests().polling()) return PMPI_Probe(source, tag, comm, status);
  return probe(source, tag, comm, &flag, nullptr, status, true);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  // Polling with nothing to serve or take: MPI answers; only a message it finds may be a stub.
  if (hot::quiet()) {
    if (!hot::stubs_on) return PMPI_Iprobe(source, tag, comm, flag, status);
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Iprobe(source, tag, comm, flag, st);
    return rc == MPI_SUCCESS && *flag ? found(comm, st) : rc;
  }
  return iprobe(source, tag, comm, flag, status);
}

}  // extern "C"
