// The C API of the halo library: each call runs its C++ counterpart inside guarded(), which turns
// every exception into an MPI error class and keeps the message for ferry_error_string().
#include <ferry/halo.h>
#include <ferry/halo.hpp>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "sys/error.hpp"

struct ferry_halo_domain_s {
  ferry::halo::Domain domain;
};
struct ferry_halo_plan_s {
  ferry::halo::Plan plan;
};

namespace {

using ferry::detail::fail;
using ferry::detail::guarded;
namespace fh = ferry::halo;

template <class T>
T& handle(T* h, const char* what) {
  if (h == nullptr) fail(MPI_ERR_ARG, std::string("halo: null ") + what);
  return *h;
}

fh::Field to_cpp(const ferry_halo_field& c) {
  fh::Field f;
  f.data = c.data;
  f.data_next = c.data_next;
  f.elem_bytes = c.elem_bytes;
  for (int a = 0; a < 3; ++a) {
    f.alloc[a] = c.alloc[a];
    f.origin[a] = c.origin[a];
    f.strides[a] = c.strides[a];
  }
  f.widths = fh::Widths::axes({c.minus[0], c.minus[1], c.minus[2]}, {c.plus[0], c.plus[1], c.plus[2]});
  for (int k = 0; k < fh::kDirections; ++k)
    if (k != 13 && c.dir_width[k] >= 0) f.widths.set(fh::dir_of(k), c.dir_width[k]);
  return f;
}

// Writes s into buf (len bytes, len >= 1), truncated and NUL-terminated.
void copy_out(const std::string& s, char* buf, int len) {
  const std::size_t n = std::min(s.size(), static_cast<std::size_t>(len - 1));
  std::memcpy(buf, s.data(), n);
  buf[n] = '\0';
}

}  // namespace

extern "C" {

void ferry_halo_field_init(ferry_halo_field* field) {
  if (field == nullptr) return;
  std::memset(field, 0, sizeof *field);
  for (int& w : field->dir_width) w = -1;
}

int ferry_halo_field_dense(ferry_halo_field* field, void* data, long long elem_bytes,
                           const long long extent[3], int width, int order) {
  return guarded([&] {
    if (field == nullptr || extent == nullptr) fail(MPI_ERR_ARG, "halo: null field or extent");
    const fh::Field f = fh::dense_field_bytes(data, elem_bytes, {extent[0], extent[1], extent[2]},
                                              fh::Widths::uniform(width),
                                              order == FERRY_HALO_Z_FASTEST ? fh::Order::z_fastest : fh::Order::x_fastest);
    ferry_halo_field_init(field);
    field->data = data;
    field->elem_bytes = elem_bytes;
    for (int a = 0; a < 3; ++a) {
      field->alloc[a] = f.alloc[a];
      field->origin[a] = f.origin[a];
      field->strides[a] = f.strides[a];
      field->minus[a] = field->plus[a] = width;
    }
  });
}

void ferry_halo_domain_options_init(ferry_halo_domain_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->subdomains = 1;
  o->placement = FERRY_HALO_NODE_AWARE;
  o->seed = 1;
}

int ferry_halo_domain_create(MPI_Comm comm, const long long global[3],
                             const ferry_halo_domain_options* options, ferry_halo_domain* domain) {
  return guarded([&] {
    if (global == nullptr || domain == nullptr) fail(MPI_ERR_ARG, "halo: null global extent or domain");
    *domain = nullptr;
    fh::DomainOptions o;
    if (options != nullptr) {
      for (int a = 0; a < 3; ++a) {
        o.periodic[a] = options->periodic[a] != 0;
        o.grid[a] = options->grid[a];
      }
      o.subdomains = options->subdomains;
      if (options->devices != nullptr && options->subdomains > 0)
        o.devices.assign(options->devices, options->devices + options->subdomains);
      o.placement = options->placement == FERRY_HALO_TRIVIAL  ? fh::Placement::trivial
                    : options->placement == FERRY_HALO_RANDOM ? fh::Placement::random
                                                              : fh::Placement::node_aware;
      o.seed = options->seed;
    }
    auto* h = new ferry_halo_domain_s{fh::Domain::create(comm, {global[0], global[1], global[2]}, o)};
    *domain = h;
  });
}

int ferry_halo_domain_free(ferry_halo_domain* domain) {
  return guarded([&] {
    if (domain == nullptr) fail(MPI_ERR_ARG, "halo: null domain");
    delete *domain;
    *domain = nullptr;
  });
}

int ferry_halo_domain_subdomains(ferry_halo_domain domain, int* count) {
  return guarded([&] {
    if (count == nullptr) fail(MPI_ERR_ARG, "halo: null count");
    *count = static_cast<int>(handle(domain, "domain").domain.local().size());
  });
}

int ferry_halo_domain_subdomain(ferry_halo_domain domain, int i, long long offset[3], long long extent[3],
                                int* device) {
  return guarded([&] {
    const auto& local = handle(domain, "domain").domain.local();
    if (i < 0 || i >= static_cast<int>(local.size())) fail(MPI_ERR_ARG, "halo: no subdomain " + std::to_string(i));
    for (int a = 0; a < 3; ++a) {
      if (offset) offset[a] = local[i].offset[a];
      if (extent) extent[a] = local[i].extent[a];
    }
    if (device) *device = local[i].device;
  });
}

void ferry_halo_options_init(ferry_halo_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->method = FERRY_HALO_AUTO;
  o->graphs = 1;
  o->fused = 1;
  o->priority_stream = 1;
}

int ferry_halo_plan_create(ferry_halo_domain domain, int nsub, int nfields, const ferry_halo_field* fields,
                           const ferry_halo_options* options, ferry_halo_plan* plan) {
  return guarded([&] {
    auto& d = handle(domain, "domain");
    if (plan == nullptr) fail(MPI_ERR_ARG, "halo: null plan");
    *plan = nullptr;
    // Bad counts go through the collective checks of plan(), so the other ranks do not hang.
    std::vector<std::vector<fh::Field>> fs(static_cast<std::size_t>(nsub > 0 ? nsub : 0));
    for (int s = 0; s < nsub; ++s)
      for (int f = 0; f < nfields && fields != nullptr; ++f) fs[s].push_back(to_cpp(fields[s * nfields + f]));
    fh::Options o;
    if (options != nullptr) {
      if (options->method >= 0 && options->method < fh::kMethods) o.method = static_cast<fh::Method>(options->method);
      else if (options->method != FERRY_HALO_AUTO) fail(MPI_ERR_ARG, "halo: no method " + std::to_string(options->method));
      o.graphs = options->graphs != 0;
      o.fused = options->fused != 0;
      o.split_bytes = options->split_bytes;
      o.progress_thread = options->progress_thread != 0;
      o.priority_stream = options->priority_stream != 0;
    }
    auto* h = new ferry_halo_plan_s{fh::plan(d.domain, fs, o)};
    *plan = h;
  });
}

int ferry_halo_plan_free(ferry_halo_plan* plan) {
  return guarded([&] {
    if (plan == nullptr) fail(MPI_ERR_ARG, "halo: null plan");
    delete *plan;
    *plan = nullptr;
  });
}

int ferry_halo_exchange(ferry_halo_plan plan) { return guarded([&] { handle(plan, "plan").plan.exchange(); }); }
int ferry_halo_start(ferry_halo_plan plan, void* stream) {
  return guarded([&] { handle(plan, "plan").plan.start(static_cast<ferry::gpu::Stream>(stream)); });
}
int ferry_halo_finish(ferry_halo_plan plan, void* stream) {
  return guarded([&] { handle(plan, "plan").plan.finish(static_cast<ferry::gpu::Stream>(stream)); });
}
int ferry_halo_exchange_on(ferry_halo_plan plan, void* stream) {
  return guarded([&] {
    auto& p = handle(plan, "plan").plan;
    p.start(static_cast<ferry::gpu::Stream>(stream));
    p.finish(static_cast<ferry::gpu::Stream>(stream));
  });
}
int ferry_halo_test(ferry_halo_plan plan, int* done) {
  return guarded([&] {
    if (done == nullptr) fail(MPI_ERR_ARG, "halo: null done");
    *done = handle(plan, "plan").plan.test() ? 1 : 0;
  });
}
int ferry_halo_swap(ferry_halo_plan plan) { return guarded([&] { handle(plan, "plan").plan.swap(); }); }
int ferry_halo_verify(ferry_halo_plan plan, long long* bad_cells) {
  return guarded([&] {
    const auto r = handle(plan, "plan").plan.verify();
    if (bad_cells) *bad_cells = r.bad_cells;
    if (!r.ok()) ferry::detail::set_last_error(r.first_errors);
  });
}
int ferry_halo_describe(ferry_halo_plan plan, char* buf, int len) {
  return guarded([&] {
    if (buf == nullptr || len < 1) fail(MPI_ERR_ARG, "halo: no room to describe the plan");
    copy_out(handle(plan, "plan").plan.describe(), buf, len);
  });
}

long long ferry_halo_sizeof(int which) {
  switch (which) {
    case FERRY_HALO_SIZEOF_FIELD: return static_cast<long long>(sizeof(ferry_halo_field));
    case FERRY_HALO_SIZEOF_DOMAIN_OPTIONS: return static_cast<long long>(sizeof(ferry_halo_domain_options));
    case FERRY_HALO_SIZEOF_OPTIONS: return static_cast<long long>(sizeof(ferry_halo_options));
    default: return -1;
  }
}

int ferry_halo_domain_grid(ferry_halo_domain domain, long long grid[3]) {
  return guarded([&] {
    if (grid == nullptr) fail(MPI_ERR_ARG, "halo: null grid");
    const fh::Index3 g = handle(domain, "domain").domain.grid();
    for (int a = 0; a < 3; ++a) grid[a] = g[a];
  });
}

int ferry_halo_domain_describe(ferry_halo_domain domain, char* buf, int len) {
  return guarded([&] {
    if (buf == nullptr || len < 1) fail(MPI_ERR_ARG, "halo: no room to describe the domain");
    copy_out(handle(domain, "domain").domain.describe(), buf, len);
  });
}

int ferry_halo_interior(ferry_halo_plan plan, int sub, long long lo[3], long long extent[3]) {
  return guarded([&] {
    if (lo == nullptr || extent == nullptr) fail(MPI_ERR_ARG, "halo: null box");
    const fh::Box b = handle(plan, "plan").plan.interior(sub);
    for (int a = 0; a < 3; ++a) lo[a] = b.lo[a], extent[a] = b.extent[a];
  });
}

int ferry_halo_exterior(ferry_halo_plan plan, int sub, int* count, long long lo[6][3], long long extent[6][3]) {
  return guarded([&] {
    if (count == nullptr || lo == nullptr || extent == nullptr) fail(MPI_ERR_ARG, "halo: null boxes");
    const std::vector<fh::Box> boxes = handle(plan, "plan").plan.exterior(sub);
    if (boxes.size() > 6) fail(MPI_ERR_INTERN, "halo: more than 6 exterior boxes");
    *count = static_cast<int>(boxes.size());
    for (std::size_t i = 0; i < boxes.size(); ++i)
      for (int a = 0; a < 3; ++a) lo[i][a] = boxes[i].lo[a], extent[i][a] = boxes[i].extent[a];
  });
}

int ferry_halo_stats(ferry_halo_plan plan, long long sent[6][3], long long received[6][3], int counts[3]) {
  static_assert(fh::kMethods == 6, "ferry_halo_stats has a row per method");
  return guarded([&] {
    const fh::Stats s = handle(plan, "plan").plan.stats();
    for (int m = 0; m < fh::kMethods; ++m) {
      if (sent) sent[m][0] = s.sent[m].messages, sent[m][1] = s.sent[m].bytes, sent[m][2] = s.sent[m].regions;
      if (received)
        received[m][0] = s.received[m].messages, received[m][1] = s.received[m].bytes,
        received[m][2] = s.received[m].regions;
    }
    if (counts) counts[0] = s.neighbour_ranks, counts[1] = s.pack_launches, counts[2] = s.unpack_launches;
  });
}

int ferry_halo_verify_report(ferry_halo_plan plan, long long* cells_checked, long long* bad_cells, char* errors,
                             int len) {
  return guarded([&] {
    const fh::VerifyResult r = handle(plan, "plan").plan.verify();
    if (cells_checked) *cells_checked = r.cells_checked;
    if (bad_cells) *bad_cells = r.bad_cells;
    if (errors != nullptr && len > 0) copy_out(r.first_errors, errors, len);
  });
}

}  // extern "C"
