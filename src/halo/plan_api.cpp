// The Plan's public calls: creation, exchange, swap, interior/exterior regions, statistics.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "halo/collective.hpp"
#include "halo/plan.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::halo {

using ferry::detail::fail;

Plan::Plan() = default;
Plan::~Plan() {
  if (impl_ && impl_->in_flight) {
    try {  // buffers are freed below: the exchange must not be left running into them
      impl_->backend->finish(nullptr);
    } catch (...) {
    }
  }
}
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;
Plan::Plan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Plan plan(const Domain& domain, const std::vector<std::vector<Field>>& fields, const Options& options) {
  auto p = std::make_unique<Plan::Impl>();
  p->dom = domain.shared();
  MPI_Comm_dup(p->dom->comm, &p->comm);
  p->opt = options;
  p->fields = fields;
  std::string err;
  if (options.split_bytes < 0) err = "halo: negative split_bytes " + std::to_string(options.split_bytes);
  if (options.progress_thread) {
    int level = 0;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
      err = "halo: a progress thread needs MPI_THREAD_MULTIPLE (MPI_Init_thread)";
  }
  detail::agree(p->comm, err, MPI_ERR_ARG);
  detail::build(*p);
  p->backend = p->device ? detail::make_device_backend(*p) : detail::make_host_backend(*p);
  Plan result(std::move(p));
  if (ferry::detail::env::halo_verbose() && result.impl_->dom->rank == 0)
    std::fprintf(stderr, "%s\n", result.describe().c_str());
  return result;
}

namespace {
Plan::Impl& live(const std::unique_ptr<Plan::Impl>& p) {
  if (!p) fail(MPI_ERR_ARG, "halo: the plan is empty (moved from or default-constructed)");
  return *p;
}
}  // namespace

void Plan::start(gpu::Stream stream) {
  Impl& p = live(impl_);
  if (p.in_flight) fail(MPI_ERR_OTHER, "halo: start() while an exchange is in flight: call finish() first");
  p.backend->start(stream);
  p.in_flight = true;
}

void Plan::finish(gpu::Stream stream) {
  Impl& p = live(impl_);
  if (!p.in_flight) fail(MPI_ERR_OTHER, "halo: finish() without start()");
  p.backend->finish(stream);
  p.in_flight = false;
}

bool Plan::test() {
  Impl& p = live(impl_);
  return !p.in_flight || p.backend->test();
}

void Plan::exchange() {
  start(nullptr);
  finish(nullptr);
  impl_->backend->wait();
}

void Plan::swap() {
  Impl& p = live(impl_);
  if (p.in_flight) fail(MPI_ERR_OTHER, "halo: swap() while an exchange is in flight");
  if (p.fields.empty() || p.fields[0].empty() || p.fields[0][0].data_next == nullptr)
    fail(MPI_ERR_ARG, "halo: swap() needs fields with a second array (Field::data_next)");
  p.parity ^= 1;
  p.backend->swapped();
}

Box Plan::interior(int s) const {
  const Impl& p = live(impl_);
  if (s < 0 || s >= static_cast<int>(p.fields.size())) fail(MPI_ERR_ARG, "halo: no subdomain " + std::to_string(s));
  const Index3 n = p.dom->local[s].extent;
  Box b;
  for (int a = 0; a < 3; ++a) {
    int lo = 0, hi = 0;
    for (const Field& f : p.fields[s]) lo = std::max(lo, f.widths.side(a, -1)), hi = std::max(hi, f.widths.side(a, +1));
    b.lo[a] = std::min<i64>(lo, n[a]);
    b.extent[a] = std::max<i64>(0, n[a] - lo - hi);
  }
  return b;
}

std::vector<Box> Plan::exterior(int s) const {
  const Box in = interior(s);
  const Index3 n = impl_->dom->local[s].extent;
  std::vector<Box> out;
  if (in.points() == 0) {
    out.push_back({{0, 0, 0}, n});
    return out;
  }
  // Slabs below and above the interior along z (whole xy planes), then y (interior z), then x.
  Box rest{{0, 0, 0}, n};
  for (int a = 2; a >= 0; --a) {
    Box lo = rest, hi = rest;
    lo.lo[a] = 0, lo.extent[a] = in.lo[a];
    hi.lo[a] = in.lo[a] + in.extent[a], hi.extent[a] = n[a] - hi.lo[a];
    if (lo.points() > 0) out.push_back(lo);
    if (hi.points() > 0) out.push_back(hi);
    rest.lo[a] = in.lo[a], rest.extent[a] = in.extent[a];
  }
  return out;
}

Stats Plan::stats() const { return live(impl_).stats; }

std::string Plan::describe() const {
  const Impl& p = live(impl_);
  std::ostringstream os;
  os << "halo plan on rank " << p.dom->rank << ": " << p.fields.size() << " subdomain(s) x "
     << p.fields[0].size() << " field(s), " << (p.device ? "GPU" : "host") << " memory, "
     << p.stats.neighbour_ranks << " neighbour rank(s)";
  if (p.device) os << ", " << p.stats.pack_launches << " pack + " << p.stats.unpack_launches << " unpack launch(es)";
  os << "\n  method      sent: messages        bytes  regions   received: messages        bytes\n";
  for (int m = 0; m < kMethods; ++m) {
    const auto& s = p.stats.sent[m];
    const auto& r = p.stats.received[m];
    if (s.messages == 0 && r.messages == 0) continue;
    char line[160];
    std::snprintf(line, sizeof line, "  %-10s %15lld %12lld %8lld %19lld %12lld\n", name(static_cast<Method>(m)),
                  static_cast<long long>(s.messages), static_cast<long long>(s.bytes),
                  static_cast<long long>(s.regions), static_cast<long long>(r.messages),
                  static_cast<long long>(r.bytes));
    os << line;
  }
  return os.str();
}

}  // namespace ferry::halo
