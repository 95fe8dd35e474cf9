// Building a Plan: check the fields (collectively), find every region a local subdomain sends or
// receives, pick each neighbour pair's method, group the regions into copies and per-rank messages
// in the order they start (§4.5.5: slowest methods first, largest first), agree on the methods
// with each neighbour rank, and hand the result to the backend.
#include <algorithm>
#include <map>
#include <tuple>

#include "halo/collective.hpp"
#include "halo/field.hpp"
#include "halo/geometry.hpp"
#include "halo/plan.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::halo {

using ferry::detail::fail;

Plan::Impl::~Impl() {
  backend.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

namespace detail {
namespace {

constexpr i64 kMaxPart = i64{1} << 30;      // an MPI count of bytes stays an int
constexpr i64 kPipelineChunk = i64{1} << 20;

// Slowest first (§4.5.5): the reverse of Table 4.1's preference.
int slowness(Method m) {
  switch (m) {
    case Method::pipelined: return 0;
    case Method::staged: return 1;
    case Method::mpi: return 2;
    case Method::ipc: return 3;
    case Method::peer: return 4;
    case Method::local: return 5;
  }
  return 6;
}

std::uint64_t signature(const std::vector<Field>& fs) {
  Hasher h;
  h.add(fs.size());
  for (const Field& f : fs) {
    h.add(static_cast<std::uint64_t>(f.elem_bytes));
    for (const auto& t : f.widths.t_)
      for (int w : t) h.add(static_cast<std::uint64_t>(w));
  }
  return h.h;
}

// Why the fields cannot be planned on this rank, or "".
std::string check_fields(const Plan::Impl& p, bool* device) {
  const Domain::Impl& d = *p.dom;
  if (p.fields.size() != d.local.size())
    return "fields for " + std::to_string(p.fields.size()) + " subdomains, the rank holds " +
           std::to_string(d.local.size());
  const Index3 thinnest = d.min_extent();
  int kinds = 0;  // bit 0: host memory seen, bit 1: device memory seen
  for (std::size_t s = 0; s < p.fields.size(); ++s) {
    const auto& fs = p.fields[s];
    const std::string where = "subdomain " + std::to_string(s) + ", ";
    if (fs.empty()) return where + "no fields";
    if (fs.size() != p.fields[0].size() || signature(fs) != signature(p.fields[0]))
      return where + "its fields differ from subdomain 0's (count, element size or widths)";
    for (std::size_t f = 0; f < fs.size(); ++f) {
      std::string e = check_field(fs[f], static_cast<int>(f), d.local[s].extent);
      if (!e.empty()) return where + e;
      const std::string who = field_name(fs[f], static_cast<int>(f));
      for (int i = 0; i < kDirections; ++i) {
        const Dir dir = dir_of(i);
        if (!fs[f].widths.sends(dir)) continue;
        for (int a = 0; a < 3; ++a)
          if (dir[a] != 0 && (d.grid[a] > 1 || d.periodic[a]) && fs[f].widths.thickness(dir, a) > thinnest[a])
            return where + who + ": width " + std::to_string(fs[f].widths.thickness(dir, a)) +
                   " along axis " + std::to_string(a) + " is larger than the thinnest subdomain (" +
                   std::to_string(thinnest[a]) + " points)";
      }
      for (void* ptr : {fs[f].data, fs[f].data_next}) {
        if (ptr == nullptr) continue;
        const gpu::Memory m = gpu::memory_of(ptr);
        kinds |= m == gpu::Memory::device || m == gpu::Memory::managed ? 2 : 1;
      }
      if ((fs[f].data_next == nullptr) != (p.fields[0][0].data_next == nullptr))
        return where + who + ": some fields have a second array for swap() and some do not";
    }
  }
  if (kinds == 3) return "some fields are host memory and some GPU memory: make one plan for each";
  *device = kinds == 2;
  return {};
}

// Every region with an end in this rank: as receiver from each direction, as sender to each
// neighbour on another rank.
std::vector<Region> collect_regions(const Plan::Impl& p) {
  const Domain::Impl& d = *p.dom;
  const auto& widths_of = [&](int field) -> const Widths& { return p.fields[0][field].widths; };
  const int nfields = static_cast<int>(p.fields[0].size());
  std::vector<Region> out;
  auto add = [&](int src, int dst, int k) {
    const Dir dir = dir_of(k);
    for (int f = 0; f < nfields; ++f) {
      if (!widths_of(f).sends(dir)) continue;
      Region r;
      r.src_cell = src, r.dst_cell = dst, r.field = f, r.dir = k;
      r.src = send_box(widths_of(f), dir, d.extent_of(src));
      r.dst = recv_box(widths_of(f), dir, d.extent_of(dst));
      r.bytes = r.dst.points() * p.fields[0][f].elem_bytes;
      if (r.bytes > 0) out.push_back(r);
    }
  };
  for (const Subdomain& s : d.local) {
    for (int k = 0; k < kDirections; ++k) {
      if (k == 13) continue;
      const int from = d.neighbour(s.id, dir_of(k));
      if (from >= 0) add(from, s.id, k);
      // As sender: the cell at s + e receives from direction -e.
      const int to = d.neighbour(s.id, dir_of(k));
      if (to >= 0 && d.cells[to].rank != d.rank) add(s.id, to, 26 - k);
    }
  }
  return out;
}

Piece make_piece(const Plan::Impl& p, int cell, int field, const Box& box) {
  const Domain::Impl& d = *p.dom;
  Piece pc;
  pc.sub = d.cells[cell].local;
  pc.field = field;
  const Field& f = p.fields[pc.sub][field];
  pc.type = box_type(f, box, p.order[field]);
  pc.bytes = box.points() * f.elem_bytes;
  return pc;
}

// Lays the regions of one message out (canonical order, slabs, parts) for one end.
Message lay_out(const Plan::Impl& p, std::vector<Region> regions, int peer, Method m, bool sending) {
  std::sort(regions.begin(), regions.end(), [](const Region& a, const Region& b) {
    return std::tie(a.src_cell, a.dst_cell, a.field, a.dir) < std::tie(b.src_cell, b.dst_cell, b.field, b.dir);
  });
  const bool mpi = m == Method::staged || m == Method::pipelined || m == Method::mpi;
  i64 limit = p.opt.split_bytes > 0 ? p.opt.split_bytes : m == Method::pipelined ? kPipelineChunk : kMaxPart;
  limit = std::min(limit, kMaxPart);
  Message msg;
  msg.peer = peer;
  msg.method = m;
  for (const Region& r : regions) {
    const int outer = p.order[r.field][2];
    const i64 elem = p.fields[0][r.field].elem_bytes;
    const i64 plane = r.dst.points() / r.dst.extent[outer];
    const auto cuts = mpi ? slabs(r.dst.extent[outer], plane, limit / elem) : slabs(r.dst.extent[outer], 1, 0);
    for (const auto& [start, len] : cuts) {
      Box src = r.src, dst = r.dst;
      src.lo[outer] += start, src.extent[outer] = len;
      dst.lo[outer] += start, dst.extent[outer] = len;
      Piece pc = sending ? make_piece(p, r.src_cell, r.field, src) : make_piece(p, r.dst_cell, r.field, dst);
      pc.offset = msg.bytes;
      msg.bytes += pc.bytes;
      msg.pieces.push_back(std::move(pc));
    }
  }
  const int n = static_cast<int>(msg.pieces.size());
  for (int i = 0; i < n;) {
    Part part{msg.pieces[i].offset, 0, i, i};
    while (part.piece_end < n && (part.bytes == 0 || !mpi || part.bytes + msg.pieces[part.piece_end].bytes <= limit))
      part.bytes += msg.pieces[part.piece_end++].bytes;
    msg.parts.push_back(part);
    i = part.piece_end;
  }
  return msg;
}

Method forced_method(const Options& o) {
  if (o.method) return *o.method;
  const std::string& e = ferry::detail::env::halo_method();
  if (e.empty()) return static_cast<Method>(255);
  if (auto m = method_named(e)) return *m;
  fail(MPI_ERR_ARG, "halo: FERRY_HALO_METHOD=" + e + " is not local, peer, ipc, staged, pipelined or mpi");
}

// The method of a message between two ranks (or a rank and itself, when a transport is forced).
Method message_method(const Plan::Impl& p, Method forced, bool same_node, i64 bytes, i64 block) {
  switch (forced) {
    case Method::staged:
    case Method::pipelined:
    case Method::mpi: return forced;
    case Method::ipc:
      if (same_node) return Method::ipc;
      break;
    default: break;
  }
  if (same_node && (!p.device || device_ipc_possible(p))) return Method::ipc;
  if (!p.device) return Method::staged;
  return model_choice(bytes, block, same_node);
}

}  // namespace

void build(Plan::Impl& p) {
  const Domain::Impl& d = *p.dom;
  bool device = false;
  agree(p.comm, check_fields(p, &device), MPI_ERR_ARG);
  p.device = device;
  Hasher h;
  h.add(signature(p.fields[0])).add(p.device).add(p.fields[0][0].data_next != nullptr);
  const Method forced = forced_method(p.opt);
  h.add(static_cast<std::uint64_t>(forced)).add(static_cast<std::uint64_t>(p.opt.split_bytes));
  agree(p.comm, same_everywhere(p.comm, h.h) ? "" : "halo: the fields (count, element sizes, widths, memory kind, swap arrays) or the options (method, split_bytes) differ between ranks", MPI_ERR_ARG);
  // Both ends of a region must pack it in one order: rank 0's first subdomain decides it per field
  // (its contiguous axis innermost), and a rank whose arrays are laid out otherwise still packs
  // correctly, with a longer stride inside.
  std::vector<int> axes;
  for (const Field& f : p.fields[0])
    for (int a : axis_order(f)) axes.push_back(a);
  MPI_Bcast(axes.data(), static_cast<int>(axes.size()), MPI_INT, 0, p.comm);
  for (std::size_t f = 0; f < p.fields[0].size(); ++f) p.order.push_back({axes[3 * f], axes[3 * f + 1], axes[3 * f + 2]});

  // Regions by transport: copies inside the process, messages per peer rank.
  std::map<int, std::vector<Region>> out, in;
  const bool self_message = forced == Method::staged || forced == Method::pipelined ||
                            forced == Method::mpi || forced == Method::ipc;
  for (const Region& r : collect_regions(p)) {
    const auto& s = d.cells[r.src_cell];
    const auto& t = d.cells[r.dst_cell];
    if (s.rank == d.rank && t.rank == d.rank && !self_message) {
      Copy c;
      c.method = forced == Method::peer || s.device != t.device ? Method::peer : Method::local;
      c.src_sub = s.local, c.dst_sub = t.local, c.field = r.field, c.bytes = r.bytes;
      const Field& fs = p.fields[s.local][r.field];
      c.src = box_type(fs, r.src, p.order[r.field]);
      c.dst = box_type(p.fields[t.local][r.field], r.dst, p.order[r.field]);
      p.copies.push_back(std::move(c));
      continue;
    }
    if (s.rank == d.rank) out[t.rank].push_back(r);
    if (t.rank == d.rank) in[s.rank].push_back(r);
  }
  std::stable_sort(p.copies.begin(), p.copies.end(), [](const Copy& a, const Copy& b) {
    return std::make_tuple(slowness(a.method), -a.bytes) < std::make_tuple(slowness(b.method), -b.bytes);
  });

  // Methods: the sender decides, tells the receiver, which checks the size it expects.
  auto total = [](const std::vector<Region>& rs) {
    i64 b = 0;
    for (const auto& r : rs) b += r.bytes;
    return b;
  };
  auto block = [&](const std::vector<Region>& rs) {  // the typical contiguous run: x rows
    const Region& r = rs.front();
    return r.src.extent[p.order[r.field][0]] * p.fields[0][r.field].elem_bytes;
  };
  std::vector<long long> mine, theirs(2 * in.size());
  std::vector<MPI_Request> reqs;
  for (const auto& [q, rs] : out) {
    const bool same_node = d.node_of_rank[q] == d.node_of_rank[d.rank];
    mine.push_back(static_cast<long long>(message_method(p, forced, same_node, total(rs), block(rs))));
    mine.push_back(total(rs));
  }
  std::size_t k = 0;
  for (const auto& [q, rs] : in) {
    reqs.emplace_back();
    MPI_Irecv(&theirs[2 * k++], 2, MPI_LONG_LONG, q, 0, p.comm, &reqs.back());
  }
  k = 0;
  for (const auto& [q, rs] : out) {
    reqs.emplace_back();
    MPI_Isend(&mine[2 * k++], 2, MPI_LONG_LONG, q, 0, p.comm, &reqs.back());
  }
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  std::string err;
  k = 0;
  for (const auto& [q, rs] : in) {
    if (theirs[2 * k + 1] != total(rs) && err.empty())
      err = "halo: rank " + std::to_string(q) + " sends " + std::to_string(theirs[2 * k + 1]) +
            " bytes, this rank expects " + std::to_string(total(rs)) + " (fields differ between ranks?)";
    p.recvs.push_back(lay_out(p, rs, q, static_cast<Method>(theirs[2 * k]), false));
    ++k;
  }
  agree(p.comm, err, MPI_ERR_ARG);
  k = 0;
  for (const auto& [q, rs] : out) p.sends.push_back(lay_out(p, rs, q, static_cast<Method>(mine[2 * k++]), true));
  auto order = [](const Message& a, const Message& b) {
    return std::make_tuple(slowness(a.method), -a.bytes, a.peer) < std::make_tuple(slowness(b.method), -b.bytes, b.peer);
  };
  std::sort(p.sends.begin(), p.sends.end(), order);
  std::sort(p.recvs.begin(), p.recvs.end(), order);

  // Per exchange: what this rank sends and receives, by method.
  for (const Copy& c : p.copies) {
    for (auto* st : {&p.stats.sent[static_cast<int>(c.method)], &p.stats.received[static_cast<int>(c.method)]}) {
      st->messages += 1, st->bytes += c.bytes, st->regions += 1;
    }
  }
  for (auto [list, st] : {std::pair{&p.sends, &p.stats.sent}, std::pair{&p.recvs, &p.stats.received}})
    for (const Message& m : *list) {
      auto& s = (*st)[static_cast<int>(m.method)];
      s.messages += m.method == Method::ipc ? 1 : static_cast<i64>(m.parts.size());
      s.bytes += m.bytes;
      s.regions += static_cast<i64>(m.pieces.size());
    }
  std::vector<int> ranks;
  for (const auto& [q, rs] : out) ranks.push_back(q);
  for (const auto& [q, rs] : in) ranks.push_back(q);
  std::sort(ranks.begin(), ranks.end());
  p.stats.neighbour_ranks = static_cast<int>(std::unique(ranks.begin(), ranks.end()) - ranks.begin());
}

}  // namespace detail
}  // namespace ferry::halo
