// Completion: every wait and test, MPI_Cancel, MPI_Request_get_status, MPI_Request_free. With no
// request of Ferry's and no persistent stand-in active, each goes straight to MPI. Otherwise the
// stand-ins are swapped in for the call (persistent.hpp), blocking forms become a loop of their test
// form that serves pending stub receives, and each completed request of Ferry's is finished
// (Requests::complete: unpack, stub data, finish step).
#include <optional>

#include "mpi/boundary.hpp"
#include "mpi/persistent.hpp"
#include "mpi/requests.hpp"

namespace ferry::mpi_detail {
namespace {

// Completes our requests among those PMPI just finished: `done` indices into `orig`. Returns the
// call's result, MPI_ERR_IN_STATUS when finishing one failed (its status says).
// `before`: the epoch taken before the MPI call (Requests::complete).
int complete_all(const std::vector<MPI_Request>& orig, const int* done, int ndone, MPI_Status* st,
                 bool indexed_status, int rc, std::uint64_t before) {
  // Staged receives into GPU memory among them: their copies wait for the GPU once, at the end.
  std::optional<transport::UnstageBatch> unstaged;
  if (ndone > 0 && !hot::no_requests()) unstaged.emplace();
  if (ndone > 1 && hot::stubs.load(std::memory_order_acquire) > 0) {
    // Stub receives among them fetch their data together: one wait for the GPU, not one each.
    std::vector<Requests::Arrived> arrived;
    for (int k = 0; k < ndone; ++k) {
      const int i = done ? done[k] : k;
      const MPI_Status& s = st[indexed_status ? i : k];
      if (orig[static_cast<std::size_t>(i)] == MPI_REQUEST_NULL) continue;
      if (rc == MPI_ERR_IN_STATUS && s.MPI_ERROR != MPI_SUCCESS) continue;
      arrived.push_back({orig[static_cast<std::size_t>(i)], 0, s, before});
    }
    if (arrived.size() > 1) requests().fetch_stubs(arrived);
  }
  for (int k = 0; k < ndone; ++k) {
    const int i = done ? done[k] : k;
    if (orig[static_cast<std::size_t>(i)] == MPI_REQUEST_NULL) continue;
    MPI_Status* s = &st[indexed_status ? i : k];
    const int e = requests().complete(orig[static_cast<std::size_t>(i)], s, rc == MPI_ERR_IN_STATUS, before);
    if (e > 0) {
      s->MPI_ERROR = e;
      rc = MPI_ERR_IN_STATUS;
    }
  }
  const int waited = unstaged ? unstaged->settle() : MPI_SUCCESS;
  return waited != MPI_SUCCESS && rc == MPI_SUCCESS ? waited : rc;
}

// The handles of one wait or test call (the caller's copy from before the call, which outlives
// this), claimed for this thread while it runs (Requests::claim).
class Claim {
 public:
  Claim(const MPI_Request* orig, int n) : orig_(orig), n_(hot::no_requests() ? 0 : n) {
    if (n_ > 0) requests().claim(orig_, n_, true);
  }
  ~Claim() {
    if (n_ > 0) requests().claim(orig_, n_, false);
  }
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;

 private:
  const MPI_Request* orig_;
  int n_;
};

// The single-request forms: `call` is PMPI_Wait (serving) or PMPI_Test.
template <class Call>
int one(MPI_Request* request, int* flag, MPI_Status* status, Call call) noexcept {
  return guard(MPI_COMM_WORLD, [&] {
    persistent::Swap swap(1, request);
    const MPI_Request orig = *request;
    const Claim claim(&orig, 1);
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    const std::uint64_t before = requests().epoch();
    int rc = call(request, flag, st);
    if (rc != MPI_SUCCESS && orig != MPI_REQUEST_NULL) requests().drop(orig, before);
    if (rc == MPI_SUCCESS && *flag && orig != MPI_REQUEST_NULL) {
      transport::UnstageBatch own;  // a staged unpack is done before the call returns
      const int e = requests().complete(orig, st, false, before);
      if (e > 0) rc = e;
      const int waited = own.settle();
      if (rc == MPI_SUCCESS) rc = waited;
    }
    return rc;
  });
}

[[gnu::noinline]] int wait(MPI_Request* request, MPI_Status* status) noexcept {
  int flag = 1;
  return one(request, &flag, status, [](MPI_Request* r, int*, MPI_Status* st) { return wait_serving(r, st); });
}

[[gnu::noinline]] int test(MPI_Request* request, int* flag, MPI_Status* status) noexcept {
  return one(request, flag, status, [](MPI_Request* r, int* f, MPI_Status* st) {
    serve();
    return PMPI_Test(r, f, st);
  });
}

// The "all" forms; `blocking`: a wait, a loop of the test form while stub receives are pending.
[[gnu::noinline]] int all(int count, MPI_Request* reqs, int* flag, MPI_Status* statuses, bool blocking) noexcept {
  return guard(MPI_COMM_WORLD, [&] {
    persistent::Swap swap(count, reqs);
    if (!blocking) serve();
    std::vector<MPI_Request> orig(reqs, reqs + count);
    const Claim claim(orig.data(), count);
    Statuses st(count, statuses);
    const std::uint64_t before = requests().epoch();
    int rc;
    if (blocking && !requests().polling()) {
      rc = PMPI_Waitall(count, reqs, st.use);
      *flag = 1;
    } else {
      // A wait for all: the stubs its passes fetch share their GPU waits (Requests::KeepOpen).
      std::optional<Requests::KeepOpen> keep;
      if (blocking) keep.emplace();
      for (;;) {
        rc = PMPI_Testall(count, reqs, flag, st.use);
        if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || *flag || !blocking) break;
        requests().progress();
      }
    }
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *flag)
      rc = complete_all(orig, nullptr, count, st.use, true, rc, before);
    return rc;
  });
}

[[gnu::noinline]] int any(int count, MPI_Request* reqs, int* index, int* flag, MPI_Status* status,
                          bool blocking) noexcept {
  return guard(MPI_COMM_WORLD, [&] {
    persistent::Swap swap(count, reqs);
    if (!blocking) serve();
    std::vector<MPI_Request> orig(reqs, reqs + count);
    const Claim claim(orig.data(), count);
    const std::uint64_t before = requests().epoch();
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc;
    if (blocking && !requests().polling()) {
      rc = PMPI_Waitany(count, reqs, index, st);
      *flag = 1;
    } else {
      for (;;) {
        rc = PMPI_Testany(count, reqs, index, flag, st);
        if (rc != MPI_SUCCESS || *flag || !blocking) break;
        requests().progress();
      }
    }
    if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED) {
      rc = complete_all(orig, index, 1, st, false, rc, before);
      if (rc == MPI_ERR_IN_STATUS) rc = st->MPI_ERROR;
    }
    return rc;
  });
}

[[gnu::noinline]] int some(int incount, MPI_Request* reqs, int* outcount, int* indices, MPI_Status* statuses,
                           bool blocking) noexcept {
  return guard(MPI_COMM_WORLD, [&] {
    persistent::Swap swap(incount, reqs);
    if (!blocking) serve();
    std::vector<MPI_Request> orig(reqs, reqs + incount);
    const Claim claim(orig.data(), incount);
    Statuses st(incount, statuses);
    const std::uint64_t before = requests().epoch();
    int rc;
    if (blocking && !requests().polling()) {
      rc = PMPI_Waitsome(incount, reqs, outcount, indices, st.use);
    } else {
      for (;;) {
        rc = PMPI_Testsome(incount, reqs, outcount, indices, st.use);
        if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || *outcount != 0 || !blocking) break;
        requests().progress();
      }
    }
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED)
      rc = complete_all(orig, indices, *outcount, st.use, false, rc, before);
    return rc;
  });
}

[[gnu::noinline]] int cancel(MPI_Request* request) noexcept {
  return guard(MPI_COMM_WORLD, [&] {
    MPI_Request in = persistent::inner(*request);
    if (in != MPI_REQUEST_NULL) return PMPI_Cancel(&in);  // the stand-in is what is under way
    // A stub send cannot be taken back (MPI lets a cancel fail: the request then completes
    // normally and MPI_Test_cancelled says false); a cancelled staged receive unpacks nothing.
    if (!requests().cancellable(*request)) return MPI_SUCCESS;
    return PMPI_Cancel(request);
  });
}

[[gnu::noinline]] int get_status(MPI_Request request, int* flag, MPI_Status* status) noexcept {
  return guard(MPI_COMM_WORLD, [&] {
    if (MPI_Request in = persistent::inner(request); in != MPI_REQUEST_NULL) request = in;
    serve();
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Request_get_status(request, flag, st);
    if (rc == MPI_SUCCESS && *flag) requests().deliver_early(request, st);
    return rc;
  });
}

[[gnu::noinline]] int request_free(MPI_Request* request) noexcept {
  return guard(MPI_COMM_WORLD, [&] {
    persistent::forget(*request);
    if (!hot::no_requests()) {
      const MPI_Request r = *request;
      if (requests().forget_persistent(r) == 1) return PMPI_Request_free(request);
      if (requests().detach(r)) {  // active: Ferry completes it in progress
        *request = MPI_REQUEST_NULL;
        return MPI_SUCCESS;
      }
    }
    return PMPI_Request_free(request);
  });
}

}  // namespace
}  // namespace ferry::mpi_detail

using namespace ferry::mpi_detail;

extern "C" {

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (hot::idle()) return PMPI_Wait(request, status);
  return wait(request, status);
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (hot::idle()) return PMPI_Test(request, flag, status);
  return test(request, flag, status);
}

int MPI_Waitall(int count, MPI_Request requests_[], MPI_Status statuses[]) {
  if (hot::idle()) return PMPI_Waitall(count, requests_, statuses);
  int flag = 0;
  return all(count, requests_, &flag, statuses, true);
}

int MPI_Testall(int count, MPI_Request requests_[], int* flag, MPI_Status statuses[]) {
  if (hot::idle()) return PMPI_Testall(count, requests_, flag, statuses);
  return all(count, requests_, flag, statuses, false);
}

int MPI_Waitany(int count, MPI_Request requests_[], int* index, MPI_Status* status) {
  if (hot::idle()) return PMPI_Waitany(count, requests_, index, status);
  int flag = 0;
  return any(count, requests_, index, &flag, status, true);
}

int MPI_Testany(int count, MPI_Request requests_[], int* index, int* flag, MPI_Status* status) {
  if (hot::idle()) return PMPI_Testany(count, requests_, index, flag, status);
  return any(count, requests_, index, flag, status, false);
}

int MPI_Waitsome(int incount, MPI_Request requests_[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (hot::idle()) return PMPI_Waitsome(incount, requests_, outcount, indices, statuses);
  return some(incount, requests_, outcount, indices, statuses, true);
}

int MPI_Testsome(int incount, MPI_Request requests_[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (hot::idle()) return PMPI_Testsome(incount, requests_, outcount, indices, statuses);
  return some(incount, requests_, outcount, indices, statuses, false);
}

int MPI_Cancel(MPI_Request* request) {
  if (!request || hot::idle()) return PMPI_Cancel(request);
  return cancel(request);
}

// A completed receive's buffer is the application's once MPI says so here too: Ferry puts staged
// or stub data in place before reporting completion.
int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  if (hot::idle() || request == MPI_REQUEST_NULL) return PMPI_Request_get_status(request, flag, status);
  return get_status(request, flag, status);
}

// MPI_Request_free returns at once: an active request of ours stays with Ferry, which completes
// it in progress; an inactive persistent one is forgotten.
int MPI_Request_free(MPI_Request* request) {
  if (!request || *request == MPI_REQUEST_NULL || (hot::no_requests() && hot::remembered.load() == 0))
    return PMPI_Request_free(request);
  return request_free(request);
}

}  // extern "C"
