// Verification mode: every interior point gets a value that is a function of its field and global
// coordinate, every halo point a sentinel of its own; after one exchange each halo point must hold
// the value of the global point it mirrors (wrapped on periodic axes) where a neighbour exists and
// its width reaches, its sentinel elsewhere, and the interior must be unchanged. Bugs that pass
// tests silently are this field's classic (uDALES#377, GHEX#222): every point is checked.
#include <chrono>
#include <cstring>
#include <sstream>

#include "halo/collective.hpp"
#include "halo/field.hpp"
#include "halo/plan.hpp"
#include "sys/error.hpp"

namespace ferry::halo {

namespace {

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// The bytes of one element: a hash of (salt, field, three coordinates, kind).
void element(char* out, i64 bytes, std::uint64_t salt, int field, const Index3& c, int kind) {
  std::uint64_t h = mix(salt ^ (static_cast<std::uint64_t>(field) << 56) ^ static_cast<std::uint64_t>(kind) << 48);
  for (int a = 0; a < 3; ++a) h = mix(h ^ static_cast<std::uint64_t>(c[a] + 0x40000000LL));
  for (i64 k = 0; k < bytes; k += 8) {
    const std::uint64_t w = mix(h + static_cast<std::uint64_t>(k));
    std::memcpy(out + k, &w, static_cast<std::size_t>(std::min<i64>(8, bytes - k)));
  }
}

std::string hex(const char* p, i64 n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (i64 i = 0; i < std::min<i64>(n, 16); ++i) {
    s += d[(p[i] >> 4) & 15];
    s += d[p[i] & 15];
  }
  return n > 16 ? s + "..." : s;
}

// One field's memory as the host sees it: the array itself, or a copy of a GPU array.
struct Image {
  char* mem = nullptr;    // host memory of the span (the array, or `copy`)
  char* device = nullptr;
  std::vector<char> copy, backup;
  i64 span = 0;
  void load() {
    if (device) gpu::copy(mem, device, span);
  }
  void store() {
    if (device) gpu::copy(device, mem, span);
  }
};

}  // namespace

VerifyResult Plan::verify() {
  if (!impl_) ferry::detail::fail(MPI_ERR_ARG, "halo: the plan is empty");
  Impl& p = *impl_;
  if (p.in_flight) ferry::detail::fail(MPI_ERR_OTHER, "halo: verify() while an exchange is in flight");
  const Domain::Impl& d = *p.dom;
  unsigned long long salt = static_cast<unsigned long long>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  MPI_Bcast(&salt, 1, MPI_UNSIGNED_LONG_LONG, 0, p.comm);

  std::vector<std::vector<Image>> img(p.fields.size());
  for (std::size_t s = 0; s < p.fields.size(); ++s)
    for (std::size_t f = 0; f < p.fields[s].size(); ++f) {
      Image im;
      im.span = detail::span_bytes(p.fields[s][f]);
      char* data = p.data(static_cast<int>(s), static_cast<int>(f));
      if (p.device) {
        im.device = data;
        im.copy.resize(static_cast<std::size_t>(im.span));
        im.mem = im.copy.data();
      } else {
        im.mem = data;
      }
      im.backup.resize(static_cast<std::size_t>(im.span));
      im.load();
      std::memcpy(im.backup.data(), im.mem, static_cast<std::size_t>(im.span));
      img[s].push_back(std::move(im));
    }

  // Visits every allocated point of a field: (local coordinate, byte offset, inside the interior).
  auto each_point = [&](int s, int f, auto&& fn) {
    const Field& fl = p.fields[s][f];
    Index3 q;
    for (q[2] = 0; q[2] < fl.alloc[2]; ++q[2])
      for (q[1] = 0; q[1] < fl.alloc[1]; ++q[1])
        for (q[0] = 0; q[0] < fl.alloc[0]; ++q[0]) {
          Index3 l{};
          i64 off = 0;
          bool inside = true;
          for (int a = 0; a < 3; ++a) {
            l[a] = q[a] - fl.origin[a];
            off += q[a] * fl.strides[a];
            inside &= l[a] >= 0 && l[a] < d.local[s].extent[a];
          }
          fn(l, off, inside);
        }
  };
  for (std::size_t s = 0; s < p.fields.size(); ++s)
    for (std::size_t f = 0; f < p.fields[s].size(); ++f) {
      Image& im = img[s][f];
      const Subdomain& sub = d.local[s];
      const i64 eb = p.fields[s][f].elem_bytes;
      im.load();  // fields may share an allocation: start from the others' fills
      each_point(static_cast<int>(s), static_cast<int>(f), [&](const Index3& l, i64 off, bool inside) {
        if (inside) element(im.mem + off, eb, salt, static_cast<int>(f), {sub.offset[0] + l[0], sub.offset[1] + l[1], sub.offset[2] + l[2]}, 0);
        else element(im.mem + off, eb, salt, static_cast<int>(f), {l[0], l[1], l[2] + 1000003LL * sub.id}, 1);
      });
      im.store();
    }

  exchange();

  i64 checked = 0, bad = 0;
  std::ostringstream first;
  std::vector<char> want(64);
  for (std::size_t s = 0; s < p.fields.size(); ++s)
    for (std::size_t f = 0; f < p.fields[s].size(); ++f) {
      Image& im = img[s][f];
      im.load();
      const Subdomain& sub = d.local[s];
      const Field& fl = p.fields[s][f];
      if (static_cast<i64>(want.size()) < fl.elem_bytes) want.resize(static_cast<std::size_t>(fl.elem_bytes));
      each_point(static_cast<int>(s), static_cast<int>(f), [&](const Index3& l, i64 off, bool inside) {
        Index3 g{sub.offset[0] + l[0], sub.offset[1] + l[1], sub.offset[2] + l[2]};
        bool mirrored = inside;
        Dir dir;
        if (!inside) {
          int comp[3];
          for (int a = 0; a < 3; ++a) comp[a] = l[a] < 0 ? -1 : l[a] >= sub.extent[a] ? 1 : 0;
          dir = {comp[0], comp[1], comp[2]};
          bool reach = true;  // within the width of the region from `dir`
          for (int a = 0; a < 3; ++a) {
            const i64 depth = l[a] < 0 ? -l[a] : l[a] - sub.extent[a] + 1;
            if (comp[a] != 0 && depth > fl.widths.thickness(dir, a)) reach = false;
          }
          reach &= fl.widths.sends(dir);
          if (reach && d.neighbour(sub.id, dir) >= 0) {
            mirrored = true;
            for (int a = 0; a < 3; ++a) g[a] = (g[a] % d.global[a] + d.global[a]) % d.global[a];
          }
        }
        if (mirrored) element(want.data(), fl.elem_bytes, salt, static_cast<int>(f), g, 0);
        else element(want.data(), fl.elem_bytes, salt, static_cast<int>(f), {l[0], l[1], l[2] + 1000003LL * sub.id}, 1);
        ++checked;
        if (std::memcmp(want.data(), im.mem + off, static_cast<std::size_t>(fl.elem_bytes)) == 0) return;
        if (bad++ < 5)
          first << "rank " << d.rank << " subdomain " << s << " " << detail::field_name(fl, static_cast<int>(f))
                << " point (" << l[0] << "," << l[1] << "," << l[2] << ")"
                << (inside ? " interior" : mirrored ? " halo" : " halo without neighbour")
                << (mirrored && !inside ? " of global (" + std::to_string(g[0]) + "," + std::to_string(g[1]) + "," + std::to_string(g[2]) + ")" : std::string())
                << ": expected " << hex(want.data(), fl.elem_bytes) << " got " << hex(im.mem + off, fl.elem_bytes) << "\n";
      });
    }
  // Restore in reverse order, so that arrays sharing memory end as they began.
  for (std::size_t s = img.size(); s-- > 0;)
    for (std::size_t f = img[s].size(); f-- > 0;) {
      Image& im = img[s][f];
      std::memcpy(im.mem, im.backup.data(), static_cast<std::size_t>(im.span));
      im.store();
    }

  VerifyResult r;
  long long v[2] = {checked, bad}, sum[2] = {0, 0};
  MPI_Allreduce(v, sum, 2, MPI_LONG_LONG, MPI_SUM, p.comm);
  r.cells_checked = sum[0];
  r.bad_cells = sum[1];
  if (r.bad_cells > 0) {
    try {
      detail::agree(p.comm, bad ? first.str() : std::string(), MPI_ERR_OTHER);
    } catch (const Error& e) {
      r.first_errors = e.what();
    }
  }
  return r;
}

}  // namespace ferry::halo
