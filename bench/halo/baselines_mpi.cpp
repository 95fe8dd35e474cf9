// The MPI baselines of ferry-halo-bench, on this rank's one subdomain: what users write by hand.
// Their MPI calls go through Ferry's interposer (the bench links it), so device arrays work on a
// non-CUDA-aware MPI; on host arrays the interposer passes them through.
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "halo_bench.hpp"

namespace hb {

namespace {

// Directions that carry data: the receiver's direction index k, and the neighbour rank.
struct Link {
  int k;
  int rank;
};
std::vector<Link> links(const Config& c, const Arrays& a, bool sending) {
  const fh::Widths w = c.widths();
  std::vector<Link> out;
  for (int k = 0; k < fh::kDirections; ++k) {
    if (k == 13 || !w.sends(fh::dir_of(k))) continue;
    // Receiving from direction k: the neighbour at k. Sending into the neighbour's direction k: the
    // neighbour at -k, i.e. direction 26 - k from here.
    const int r = a.neighbour_rank(fh::dir_of(sending ? 26 - k : k));
    if (r >= 0) out.push_back({k, r});
  }
  return out;
}

void need_one_subdomain(const Config& c) {
  if (c.subdomains != 1) throw std::runtime_error("the baselines run with one subdomain per rank (--subdomains 1)");
}

// A subarray type of a box of a field (x fastest: MPI_ORDER_FORTRAN), elements as bytes.
MPI_Datatype subarray(const fh::Field& f, const Box& b) {
  MPI_Datatype elem, t;
  MPI_Type_contiguous(static_cast<int>(f.elem_bytes), MPI_BYTE, &elem);
  int sizes[3], subs[3], starts[3];
  for (int a = 0; a < 3; ++a) {
    sizes[a] = static_cast<int>(f.alloc[a]);
    subs[a] = static_cast<int>(b.n[a]);
    starts[a] = static_cast<int>(f.origin[a] + b.lo[a]);
  }
  MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_FORTRAN, elem, &t);
  MPI_Type_commit(&t);
  MPI_Type_free(&elem);
  return t;
}

// Every field's box of one direction as one type of absolute addresses (buffer MPI_BOTTOM).
MPI_Datatype all_fields(const std::vector<fh::Field>& fs, const fh::Widths& w, int k, bool sending,
                        const Index3& e) {
  std::vector<MPI_Datatype> parts;
  std::vector<MPI_Aint> disp;
  std::vector<int> ones;
  for (const fh::Field& f : fs) {
    const Box b = sending ? send_box(w, fh::dir_of(k), e) : recv_box(w, fh::dir_of(k), e);
    parts.push_back(subarray(f, b));
    MPI_Aint addr;
    MPI_Get_address(f.data, &addr);
    disp.push_back(addr);
    ones.push_back(1);
  }
  MPI_Datatype t;
  MPI_Type_create_struct(static_cast<int>(parts.size()), ones.data(), disp.data(), parts.data(), &t);
  MPI_Type_commit(&t);
  for (MPI_Datatype& p : parts) MPI_Type_free(&p);
  return t;
}

// Posts the receives and sends of a list of (buffer, type, peer, tag) the way --recv says, and
// waits for all of them.
struct Msg {
  void* buf;
  MPI_Datatype type;
  int peer, tag;
};
struct Exchange {
  std::vector<Msg> recv, send;
  std::string mode;
  std::vector<MPI_Request> persistent;
  void setup() {
    if (mode != "persistent") return;
    for (const Msg& m : recv) {
      persistent.emplace_back();
      MPI_Recv_init(m.buf, 1, m.type, m.peer, m.tag, MPI_COMM_WORLD, &persistent.back());
    }
    for (const Msg& m : send) {
      persistent.emplace_back();
      MPI_Send_init(m.buf, 1, m.type, m.peer, m.tag, MPI_COMM_WORLD, &persistent.back());
    }
  }
  void run() {
    if (mode == "persistent") {
      MPI_Startall(static_cast<int>(persistent.size()), persistent.data());
      MPI_Waitall(static_cast<int>(persistent.size()), persistent.data(), MPI_STATUSES_IGNORE);
      return;
    }
    std::vector<MPI_Request> reqs;
    if (mode != "blocking")
      for (const Msg& m : recv) {
        reqs.emplace_back();
        MPI_Irecv(m.buf, 1, m.type, m.peer, m.tag, MPI_COMM_WORLD, &reqs.back());
      }
    for (const Msg& m : send) {
      reqs.emplace_back();
      MPI_Isend(m.buf, 1, m.type, m.peer, m.tag, MPI_COMM_WORLD, &reqs.back());
    }
    if (mode == "blocking")
      for (const Msg& m : recv) MPI_Recv(m.buf, 1, m.type, m.peer, m.tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  }
  void free_all(std::vector<MPI_Datatype>& types) {
    for (MPI_Request& r : persistent) MPI_Request_free(&r);
    for (MPI_Datatype& t : types) MPI_Type_free(&t);
  }
};

i64 region_bytes(const Config& c, const Arrays& a, int k) {
  i64 b = 0;
  for (const fh::Field& f : a.fields[0]) b += recv_box(c.widths(), fh::dir_of(k), a.dom.local()[0].extent).points() * f.elem_bytes;
  return b;
}

}  // namespace

Baseline baseline_subarray(const Config& c, Arrays& a) {
  need_one_subdomain(c);
  auto ex = std::make_shared<Exchange>();
  auto types = std::make_shared<std::vector<MPI_Datatype>>();
  ex->mode = c.recv;
  const Index3 e = a.dom.local()[0].extent;
  const fh::Widths w = c.widths();
  Baseline b{"(a) subarray Isend/Irecv", "MPI_Type_create_subarray per field and direction, Isend/Irecv", {}, 0, 0, {}};
  const int nf = static_cast<int>(a.fields[0].size());
  for (bool sending : {false, true})
    for (const Link& l : links(c, a, sending))
      for (int f = 0; f < nf; ++f) {
        const fh::Field& fl = a.fields[0][f];
        const Box box = sending ? send_box(w, fh::dir_of(l.k), e) : recv_box(w, fh::dir_of(l.k), e);
        types->push_back(subarray(fl, box));
        (sending ? ex->send : ex->recv).push_back({fl.data, types->back(), l.rank, l.k * 64 + f});
        if (sending) b.messages += 1, b.bytes += box.points() * fl.elem_bytes;
      }
  ex->setup();
  b.run = [ex] { ex->run(); };
  b.cleanup = [ex, types] { ex->free_all(*types); };
  return b;
}

Baseline baseline_struct(const Config& c, Arrays& a) {
  need_one_subdomain(c);
  auto ex = std::make_shared<Exchange>();
  auto types = std::make_shared<std::vector<MPI_Datatype>>();
  ex->mode = c.recv;
  const Index3 e = a.dom.local()[0].extent;
  Baseline b{"(b) struct per neighbour", "one struct of subarrays (absolute addresses) per direction", {}, 0, 0, {}};
  for (bool sending : {false, true})
    for (const Link& l : links(c, a, sending)) {
      types->push_back(all_fields(a.fields[0], c.widths(), l.k, sending, e));
      (sending ? ex->send : ex->recv).push_back({MPI_BOTTOM, types->back(), l.rank, l.k});
      if (sending) b.messages += 1, b.bytes += region_bytes(c, a, l.k);
    }
  ex->setup();
  b.run = [ex] { ex->run(); };
  b.cleanup = [ex, types] { ex->free_all(*types); };
  return b;
}

Baseline baseline_alltoallw(const Config& c, Arrays& a) {
  need_one_subdomain(c);
  const Index3 e = a.dom.local()[0].extent;
  struct State {
    MPI_Comm graph = MPI_COMM_NULL;
    std::vector<MPI_Datatype> stypes, rtypes;
    std::vector<int> counts_s, counts_r;
    std::vector<MPI_Aint> displs_s, displs_r;
  };
  auto st = std::make_shared<State>();
  // The j-th message from p to q matches the j-th entry of p among q's sources: both lists in the
  // order of the receiver's direction (links() gives it for sends too).
  auto sends = links(c, a, true);
  auto recvs = links(c, a, false);
  std::vector<int> dst, src;
  Baseline b{"(d) Neighbor_alltoallw", "MPI_Dist_graph_create_adjacent + MPI_Neighbor_alltoallw of struct types", {}, 0, 0, {}};
  for (const Link& l : sends) {
    dst.push_back(l.rank);
    st->stypes.push_back(all_fields(a.fields[0], c.widths(), l.k, true, e));
    b.messages += 1, b.bytes += region_bytes(c, a, l.k);
  }
  for (const Link& l : recvs) {
    src.push_back(l.rank);
    st->rtypes.push_back(all_fields(a.fields[0], c.widths(), l.k, false, e));
  }
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, static_cast<int>(src.size()), src.data(), MPI_UNWEIGHTED,
                                 static_cast<int>(dst.size()), dst.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                 &st->graph);
  st->counts_s.assign(dst.size(), 1);
  st->counts_r.assign(src.size(), 1);
  st->displs_s.assign(dst.size(), 0);
  st->displs_r.assign(src.size(), 0);
  b.run = [st] {
    MPI_Neighbor_alltoallw(MPI_BOTTOM, st->counts_s.data(), st->displs_s.data(), st->stypes.data(), MPI_BOTTOM,
                           st->counts_r.data(), st->displs_r.data(), st->rtypes.data(), st->graph);
  };
  b.cleanup = [st] {
    for (auto* v : {&st->stypes, &st->rtypes})
      for (MPI_Datatype& t : *v) MPI_Type_free(&t);
    MPI_Comm_free(&st->graph);
  };
  return b;
}

namespace {

// Host loops over a box (pack: field -> buffer).
void host_box(char* base, const fh::Field& f, const Box& b, char* buf, bool unpack) {
  const i64 eb = f.elem_bytes, row = b.n[0] * eb;
  for (i64 z = 0; z < b.n[2]; ++z)
    for (i64 y = 0; y < b.n[1]; ++y) {
      char* p = base + (f.origin[0] + b.lo[0]) * f.strides[0] + (f.origin[1] + b.lo[1] + y) * f.strides[1] +
                (f.origin[2] + b.lo[2] + z) * f.strides[2];
      if (unpack) std::memcpy(p, buf, static_cast<std::size_t>(row));
      else std::memcpy(buf, p, static_cast<std::size_t>(row));
      buf += row;
    }
}

}  // namespace

Baseline baseline_hand(const Config& c, Arrays& a, bool dim_ordered) {
  need_one_subdomain(c);
  const bool dev = a.device;
  const Index3 e = a.dom.local()[0].extent;
  const fh::Widths w = c.widths();
  // One phase: directions with their boxes. Dim-ordered: phase a sends the two faces of axis a,
  // widened by the halos of the axes before it (the corners travel in the later phases).
  struct Region {
    int k, rank;
    std::vector<Box> boxes;  // per field (the same box for every field)
    i64 bytes;
    std::vector<char> host;  // host arrays' buffer
    char* hbuf = nullptr;    // where MPI reads or writes: host.data(), or pinned for device arrays
    void* dbuf = nullptr;
  };
  struct Phase {
    std::vector<Region> recv, send;
  };
  auto phases = std::make_shared<std::vector<Phase>>();
  auto box_of = [&](int k, bool sending, int phase_axis) {
    Box b = sending ? send_box(w, fh::dir_of(k), e) : recv_box(w, fh::dir_of(k), e);
    for (int a2 = 0; a2 < phase_axis; ++a2) b.lo[a2] -= c.minus[a2], b.n[a2] += c.minus[a2] + c.plus[a2];
    return b;
  };
  Baseline b{dim_ordered ? "hand, 3 phases (implicit corners)" : (dev ? "(c) hand staging" : "hand pack + MPI"),
             dim_ordered ? "pack loops, 6 messages in x, y, z phases forwarding edges and corners"
                         : dev ? "a pack kernel per direction, D2H, host MPI, H2D, an unpack kernel"
                               : "host pack loops per direction into one buffer, Isend/Irecv, unpack loops",
             {}, 0, 0, {}};
  const int nphase = dim_ordered ? 3 : 1;
  for (int p = 0; p < nphase; ++p) {
    Phase ph;
    for (bool sending : {false, true})
      for (const Link& l : links(c, a, sending)) {
        const fh::Dir d = fh::dir_of(l.k);
        if (dim_ordered && (d[p] == 0 || std::abs(d.x) + std::abs(d.y) + std::abs(d.z) != 1)) continue;
        Region r{l.k, l.rank, {}, 0, {}, nullptr, nullptr};
        for (const fh::Field& f : a.fields[0]) {
          r.boxes.push_back(box_of(l.k, sending, dim_ordered ? p : 0));
          r.bytes += r.boxes.back().points() * f.elem_bytes;
        }
        if (dev) {
          r.dbuf = gpu::alloc(r.bytes, -1);
          r.hbuf = static_cast<char*>(gpu::alloc_host(r.bytes));
        } else {
          r.host.resize(static_cast<std::size_t>(r.bytes));
          r.hbuf = r.host.data();
        }
        if (sending) b.messages += 1, b.bytes += r.bytes;
        (sending ? ph.send : ph.recv).push_back(std::move(r));
      }
    phases->push_back(std::move(ph));
  }
  const std::vector<fh::Field> fields = a.fields[0];
  b.run = [phases, fields, dev] {
    for (Phase& ph : *phases) {
      std::vector<MPI_Request> reqs;
      for (Region& r : ph.recv) {
        reqs.emplace_back();
        MPI_Irecv(r.hbuf, static_cast<int>(r.bytes), MPI_BYTE, r.rank, r.k, MPI_COMM_WORLD, &reqs.back());
      }
      for (Region& r : ph.send) {
        i64 off = 0;
        for (std::size_t f = 0; f < fields.size(); ++f) {
          if (dev) gpu::box_copy(fields[f].data, fields[f], r.boxes[f], static_cast<char*>(r.dbuf) + off, false);
          else host_box(static_cast<char*>(fields[f].data), fields[f], r.boxes[f], r.hbuf + off, false);
          off += r.boxes[f].points() * fields[f].elem_bytes;
        }
        if (dev) gpu::stage(r.hbuf, r.dbuf, r.bytes, true);  // after the pack kernels, waited for
        reqs.emplace_back();
        MPI_Isend(r.hbuf, static_cast<int>(r.bytes), MPI_BYTE, r.rank, r.k, MPI_COMM_WORLD, &reqs.back());
      }
      MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
      for (Region& r : ph.recv) {
        if (dev) gpu::stage(r.dbuf, r.hbuf, r.bytes, false);  // before the unpack kernels
        i64 off = 0;
        for (std::size_t f = 0; f < fields.size(); ++f) {
          if (dev) gpu::box_copy(fields[f].data, fields[f], r.boxes[f], static_cast<char*>(r.dbuf) + off, true);
          else host_box(static_cast<char*>(fields[f].data), fields[f], r.boxes[f], r.hbuf + off, true);
          off += r.boxes[f].points() * fields[f].elem_bytes;
        }
      }
      if (dev) gpu::sync();
    }
  };
  b.cleanup = [phases] {
    for (Phase& ph : *phases)
      for (auto* v : {&ph.recv, &ph.send})
        for (Region& r : *v)
          if (r.dbuf) gpu::free(r.dbuf), gpu::free_host(r.hbuf);
  };
  return b;
}

Baseline baseline_staging(const Config& c, Arrays& a) {
  if (!a.device) throw std::runtime_error("baseline (c) stages device arrays: run with --memory device");
  return baseline_hand(c, a, false);
}

Baseline baseline_fused_kernel(const Config& c, Arrays& a, bool separate) {
  need_one_subdomain(c);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!a.device || size != 1 || !c.periodic[0] || !c.periodic[1] || !c.periodic[2])
    throw std::runtime_error("baseline (e) is one rank, one periodic subdomain, device arrays");
  const Index3 e = a.dom.local()[0].extent;
  const std::vector<fh::Field> fields = a.fields[0];
  Baseline b{separate ? "(e) one launch per field and direction" : "(e) fused hand kernel",
             separate ? "26 x fields launches, one thread per halo cell" : "one kernel, all fields and directions",
             {}, 0, 0, {}};
  for (int k = 0; k < fh::kDirections; ++k)
    if (k != 13 && c.widths().sends(fh::dir_of(k)))
      for (const fh::Field& f : fields) b.messages += 1, b.bytes += recv_box(c.widths(), fh::dir_of(k), e).points() * f.elem_bytes;
  b.run = [fields, e, separate] {
    if (separate) gpu::separate_self(fields, e);
    else gpu::fused_self(fields, e);
    gpu::sync();
  };
  return b;
}

}  // namespace hb
