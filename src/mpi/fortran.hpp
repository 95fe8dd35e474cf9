// The Fortran entries of the calls Ferry serves (Open MPI).
//
// Why: Open MPI's Fortran bindings (mpif.h and `use mpi`: libmpi_mpifh; `use mpi_f08`:
// libmpi_usempif08, whose mpi_send_f08_ calls libmpi_mpifh's ompi_send_f) call PMPI_* directly,
// so a Fortran program never reaches Ferry's MPI_* functions. Ferry therefore defines the Fortran
// symbols themselves, in every name mangling Open MPI exports (mpi_send, mpi_send_, mpi_send__,
// MPI_SEND) and the f08 ones (mpi_send_f08_, mpi_send_f08). Each converts its arguments and calls
// Ferry's C entry (MPI_Send), so a Fortran program gets everything a C program gets.
//
// Conventions (checked against Debian's Open MPI 4.1 and gfortran 12): every argument by
// reference; handles are MPI_Fint (f2c/c2f); a status is MPI_STATUS_SIZE integers; LOGICAL is a
// default integer, 1 for true; ierror may be absent (a null pointer) in f08; choice buffers are
// addresses (Open MPI 4.1's f08 bindings take them TKR-ignored, not as TS 29113 descriptors, and
// pass them on unchanged), where the addresses of Open MPI's common blocks mpi_fortran_bottom_ and
// mpi_fortran_in_place_ mean MPI_BOTTOM and MPI_IN_PLACE. So the f08 symbols share the mpif.h
// entries' code.
//
// MPICH needs this only for request completion: its Fortran bindings (libmpichfort, mpif.h,
// `use mpi` and the f08 TS 29113 ones) call MPI_* for the rest, which Ferry interposes, but
// PMPI_* for the waits, tests and starts (fortran_requests.cpp).
#pragma once

#include <mpi.h>

#include <atomic>
#include <new>
#include <vector>

#include "sys/error.hpp"

namespace ferry::mpi_detail::fortran {

using F = MPI_Fint;
static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran INTEGER arrays are passed as C int arrays");
// MPI_STATUS_SIZE: Open MPI's mpif.h sizes a Fortran status as the C MPI_Status in integers.
constexpr int kStatusSize = static_cast<int>(sizeof(MPI_Status) / sizeof(MPI_Fint));

// Fortran calls that went through these entries (ferry_mpi_fortran_calls()).
extern std::atomic<long> calls;

// The C buffer for a Fortran choice argument: MPI_BOTTOM and MPI_IN_PLACE for their sentinels.
void* buffer(const void* p) noexcept;

inline MPI_Comm comm(const F* f) { return MPI_Comm_f2c(*f); }
inline MPI_Datatype type(const F* f) { return MPI_Type_f2c(*f); }
inline MPI_Op op(const F* f) { return MPI_Op_f2c(*f); }
inline F logical(int c) { return c ? 1 : 0; }

// `p` is one of the manglings of a sentinel common block (weak symbols: those the MPI lacks are
// null, which a Fortran argument never is).
inline bool is_sentinel(const void* p, const char* a, const char* b, const char* c, const char* d) {
  return p != nullptr && (p == a || p == b || p == c || p == d);
}

// MPICH's `use mpi_f08` passes its own sentinels for MPI_STATUS(ES)_IGNORE: the objects
// MPIR_F08_MPI_STATUS(ES)_IGNORE_OBJ, which MPI_F08_STATUS(ES)_IGNORE point to.
inline bool f08_ignored(const F* f, bool many) {
#if defined(MPICH) && MPI_VERSION >= 4
  const void* p = f;
  return many ? (p == MPI_F08_STATUSES_IGNORE || p == MPIR_F08_MPI_STATUSES_IGNORE_OBJ)
              : (p == MPI_F08_STATUS_IGNORE || p == &MPIR_F08_MPI_STATUS_IGNORE_OBJ);
#else
  (void)f;
  (void)many;
  return false;
#endif
}

// An output status: MPI_STATUS_IGNORE for Fortran's, else converted back by done().
class Status {
 public:
  explicit Status(F* f) : f_(f) {}
  MPI_Status* c() { return ignored() ? MPI_STATUS_IGNORE : &c_; }
  void done() {
    if (!ignored()) MPI_Status_c2f(&c_, f_);
  }

 private:
  bool ignored() const { return f_ == nullptr || f_ == MPI_F_STATUS_IGNORE || f08_ignored(f_, false); }
  F* f_;
  MPI_Status c_{};
};

// An array of n output statuses (MPI_STATUS_SIZE integers each).
class Statuses {
 public:
  Statuses(F* f, int n) : f_(f), c_(ignored() ? 0 : static_cast<std::size_t>(n > 0 ? n : 0)) {}
  MPI_Status* c() { return ignored() ? MPI_STATUSES_IGNORE : c_.data(); }
  // The first n (or those at `indices`, 0-based C indices, for the "some" forms) go back.
  void done(int n) {
    for (int i = 0; !ignored() && i < n; ++i) MPI_Status_c2f(&c_[static_cast<std::size_t>(i)], f_ + i * kStatusSize);
  }

 private:
  bool ignored() const { return f_ == nullptr || f_ == MPI_F_STATUSES_IGNORE || f08_ignored(f_, true); }
  F* f_;
  std::vector<MPI_Status> c_;
};

// An array of n requests, converted in and (each slot, completed ones as MPI_REQUEST_NULL) back.
class Requests {
 public:
  Requests(F* f, int n) : f_(f), c_(static_cast<std::size_t>(n > 0 ? n : 0)) {
    for (std::size_t i = 0; i < c_.size(); ++i) c_[i] = MPI_Request_f2c(f_[i]);
  }
  MPI_Request* c() { return c_.data(); }
  void done() {
    for (std::size_t i = 0; i < c_.size(); ++i) f_[i] = MPI_Request_c2f(c_[i]);
  }

 private:
  F* f_;
  std::vector<MPI_Request> c_;
};

// n datatype handles (the w-collectives).
inline std::vector<MPI_Datatype> types(const F* f, int n) {
  std::vector<MPI_Datatype> t(static_cast<std::size_t>(n > 0 ? n : 0));
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = MPI_Type_f2c(f[i]);
  return t;
}

// The boundary of every Fortran entry: counts the call, runs `body` (which returns the C
// entry's result) and stores the result in ierror where the caller gave one. Nothing thrown gets
// out: Ferry's C entries report their own errors; what is left here is memory for the converted
// arrays.
template <class Body>
void entry(F* ierror, Body body) noexcept {
  calls.fetch_add(1, std::memory_order_relaxed);
  int rc;
  try {
    rc = body();
  } catch (const std::bad_alloc&) {
    ferry::detail::set_last_error("Fortran entry: out of memory for its converted arguments");
    rc = MPI_ERR_NO_MEM;
  } catch (...) {
    rc = MPI_ERR_INTERN;
  }
  if (ierror) *ierror = rc;
}

}  // namespace ferry::mpi_detail::fortran

// One Fortran entry: defines `lower_` and its other manglings as aliases (mpif.h / use mpi:
// lower, lower__, UPPER; use mpi_f08: lower_f08_, lower_f08). The body follows the macro.
#define FERRY_FORTRAN_ALIAS(name, target, params) \
  extern "C" __attribute__((visibility("default"), alias(#target))) void name params;
#define FERRY_FORTRAN(lower, UPPER, params)                  \
  extern "C" __attribute__((visibility("default"))) void lower##_ params; \
  FERRY_FORTRAN_ALIAS(lower, lower##_, params)               \
  FERRY_FORTRAN_ALIAS(lower##__, lower##_, params)           \
  FERRY_FORTRAN_ALIAS(UPPER, lower##_, params)               \
  FERRY_FORTRAN_ALIAS(lower##_f08_, lower##_, params)        \
  FERRY_FORTRAN_ALIAS(lower##_f08, lower##_, params)         \
  extern "C" void lower##_ params
