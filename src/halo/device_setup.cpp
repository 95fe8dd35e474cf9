// The GPU backend's setup: a high-priority stream per GPU, buffers per message (pinned host memory
// for staging, device memory for pipelining and CUDA-aware MPI, the receiver's device memory for
// IPC), the IPC handshake (receivers export buffer and flags, senders map them through the
// transport's IPC cache; a mapping that fails turns that message into a staged one on both ends),
// one pack and one unpack batch per GPU over a pointer table of every field, and their graphs.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include <ferry/pack.hpp>

#include "halo/device.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::halo::detail {

using ferry::detail::fail;

namespace {

using Dev = DeviceBackendState::Dev;

const char* why(transport::IpcCache::Status st) {
  switch (st) {
    case transport::IpcCache::Status::ok: return "mapped";
    case transport::IpcCache::Status::already_mapped: return "already mapped in this process";
    default: return "the handle did not open";
  }
}
using End = DeviceBackendState::End;

void* device_alloc(DeviceBackendState& s, int dev, i64 bytes) {
  gpu::DeviceScope scope(s.devs[dev].device);
  void* p = gpu::alloc_device(std::max<i64>(bytes, 1));
  s.device_allocs.push_back(p);
  s.device_alloc_dev.push_back(s.devs[dev].device);
  return p;
}

char* pinned_alloc(DeviceBackendState& s, i64 bytes) {
  void* p = gpu::alloc_pinned(std::max<i64>(bytes, 1));
  s.pinned_allocs.push_back(p);
  return static_cast<char*>(p);
}

// What a receiver tells a sender about an IPC message: its buffer and flags, or that it refuses.
struct IpcOffer {
  transport::Export buffer;
  transport::Export flags;
  int ok = 0;
};

int world_rank(MPI_Comm comm, int rank) {
  MPI_Group g, w;
  MPI_Comm_group(comm, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &w);
  int out = MPI_UNDEFINED;
  MPI_Group_translate_ranks(g, 1, &rank, w, &out);
  MPI_Group_free(&g);
  MPI_Group_free(&w);
  return out;
}

// Buffers and persistent requests of an MPI message end (staged, pipelined, mpi).
void mpi_end(Plan::Impl& p, DeviceBackendState& s, End& e, bool sending) {
  const Message& m = *e.msg;
  if (m.bytes > INT32_MAX && m.parts.size() == 1)
    fail(MPI_ERR_ARG, "halo: a message of " + std::to_string(m.bytes) + " bytes needs split_bytes");
  if (m.method != Method::mpi) e.host = pinned_alloc(s, m.bytes);
  if (m.method != Method::staged) e.dev = static_cast<char*>(device_alloc(s, e.home, m.bytes));
  char* base = m.method == Method::mpi ? e.dev : e.host;
  for (std::size_t i = 0; i < m.parts.size(); ++i) {
    const Part& part = m.parts[i];
    MPI_Request r;
    const int tag = static_cast<int>(i) + 4;
    if (sending) MPI_Send_init(base + part.offset, static_cast<int>(part.bytes), MPI_BYTE, m.peer, tag, p.comm, &r);
    else MPI_Recv_init(base + part.offset, static_cast<int>(part.bytes), MPI_BYTE, m.peer, tag, p.comm, &r);
    e.reqs.push_back(r);
    if (m.method == Method::pipelined) {
      gpu::DeviceScope scope(s.devs[e.home].device);
      e.part_events.push_back(gpu::create_event());
    }
  }
  e.posted.assign(m.parts.size(), 0);
}

void make_ends(Plan::Impl& p, DeviceBackendState& s, std::vector<Message>& msgs, std::vector<End>& ends) {
  for (Message& m : msgs) {
    End e;
    e.msg = &m;
    for (const Piece& pc : m.pieces) {
      const int k = s.sub_dev[pc.sub];
      if (std::find(e.devs.begin(), e.devs.end(), k) == e.devs.end()) e.devs.push_back(k);
    }
    e.home = m.pieces.empty() ? 0 : s.sub_dev[m.pieces.front().sub];
    ends.push_back(std::move(e));
  }
  (void)p;
}

// The IPC handshake. Receivers allocate the buffer and the two flags (ready = 0, freed = 1) and
// offer them; senders map them and answer whether they could. A message that cannot go over IPC
// (a mapping refused, or pieces on several GPUs of one process) is staged on both ends.
void ipc_handshake(Plan::Impl& p, DeviceBackendState& s) {
  std::vector<IpcOffer> offers_in(s.out.size()), offers_out(s.in.size());
  std::vector<int> answers_out(s.out.size(), 0), answers_in(s.in.size(), 0);
  std::vector<MPI_Request> reqs;
  for (std::size_t i = 0; i < s.out.size(); ++i)
    if (s.out[i].msg->method == Method::ipc) {
      reqs.emplace_back();
      MPI_Irecv(&offers_in[i], sizeof(IpcOffer), MPI_BYTE, s.out[i].msg->peer, 2, p.comm, &reqs.back());
    }
  for (std::size_t i = 0; i < s.in.size(); ++i) {
    End& e = s.in[i];
    if (e.msg->method != Method::ipc) continue;
    IpcOffer& o = offers_out[i];
    if (e.devs.size() == 1) {
      // The buffer and its flags in one allocation: one handle for the sender to map (two small
      // allocations may share a driver block, which the driver maps only once per process).
      const i64 at = (e.msg->bytes + kFlagBytes - 1) / kFlagBytes * kFlagBytes;
      e.dev = static_cast<char*>(device_alloc(s, e.home, at + 2 * kFlagBytes));
      auto* flags = reinterpret_cast<std::uint32_t*>(e.dev + at);
      std::vector<std::uint32_t> init(2 * kFlagBytes / 4, 0);
      init[kFlagBytes / 4] = 1;  // freed: the buffer starts free
      gpu::copy(flags, init.data(), 2 * kFlagBytes);
      e.ready = flags;
      e.freed = flags + kFlagBytes / 4;
      o.ok = transport::export_pointer(e.dev, &o.buffer) && transport::export_pointer(flags, &o.flags) ? 1 : 0;
      if (!o.ok && ferry::detail::env::halo_verbose())
        std::fprintf(stderr, "ferry halo: no IPC handle for a receive buffer from rank %d: staged\n", e.msg->peer);
    }
    reqs.emplace_back();
    MPI_Isend(&o, sizeof(IpcOffer), MPI_BYTE, e.msg->peer, 2, p.comm, &reqs.back());
  }
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  reqs.clear();
  for (std::size_t i = 0; i < s.out.size(); ++i) {
    End& e = s.out[i];
    if (e.msg->method != Method::ipc) continue;
    const IpcOffer& o = offers_in[i];
    int me = 0;
    MPI_Comm_rank(p.comm, &me);
    if (o.ok && e.devs.size() == 1 && e.msg->peer == me) {
      // A forced put to this process itself: its own buffer, no mapping (CUDA opens no handle of
      // the process that made it).
      for (End& r : s.in)
        if (r.msg->peer == me && r.msg->method == Method::ipc && r.dev) {
          e.remote = r.dev;
          e.ready = r.ready;
          e.freed = r.freed;
          answers_out[i] = 1;
        }
    } else if (o.ok && e.devs.size() == 1) {
      gpu::DeviceScope scope(s.devs[e.home].device);
      const int peer = world_rank(p.comm, e.msg->peer);
      e.lease = transport::ipc_cache().open(peer, o.buffer.base, o.buffer.id, o.buffer.handle);
      e.flag_lease = transport::ipc_cache().open(peer, o.flags.base, o.flags.id, o.flags.handle);
      if ((!e.lease || !e.flag_lease) && ferry::detail::env::halo_verbose())
        std::fprintf(stderr, "ferry halo: rank %d: the buffer of rank %d did not map here (%s, flags %s): staged\n",
                     me, e.msg->peer, why(e.lease.status()), why(e.flag_lease.status()));
      if (e.lease && e.flag_lease) {
        e.remote = static_cast<char*>(e.lease.get()) + o.buffer.offset;
        auto* flags = reinterpret_cast<std::uint32_t*>(static_cast<char*>(e.flag_lease.get()) + o.flags.offset);
        e.ready = flags;
        e.freed = flags + kFlagBytes / 4;
        answers_out[i] = 1;
      }
    }
    reqs.emplace_back();
    MPI_Isend(&answers_out[i], 1, MPI_INT, e.msg->peer, 3, p.comm, &reqs.back());
  }
  for (std::size_t i = 0; i < s.in.size(); ++i)
    if (s.in[i].msg->method == Method::ipc) {
      reqs.emplace_back();
      MPI_Irecv(&answers_in[i], 1, MPI_INT, s.in[i].msg->peer, 3, p.comm, &reqs.back());
    }
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  for (std::size_t i = 0; i < s.out.size(); ++i)
    if (s.out[i].msg->method == Method::ipc && !answers_out[i]) s.out[i].msg->method = Method::staged;
  for (std::size_t i = 0; i < s.in.size(); ++i)
    if (s.in[i].msg->method == Method::ipc && !answers_in[i]) s.in[i].msg->method = Method::staged;
  // The flags each GPU's stream handles, for the messages still going over IPC.
  for (End& e : s.out)
    if (e.msg->method == Method::ipc) {
      s.devs[e.home].send_ready.push_back(e.ready);
      s.devs[e.home].send_freed.push_back(e.freed);
    }
  for (End& e : s.in)
    if (e.msg->method == Method::ipc) {
      s.devs[e.home].recv_ready.push_back(e.ready);
      s.devs[e.home].recv_freed.push_back(e.freed);
    } else {
      e.dev = nullptr;  // a refused IPC buffer is not this message's (staged) buffer
    }
}

// Rows of at most this many bytes are worth pairing (the x faces' 24 B rows, the edges'); longer
// rows fill whole sectors anyway.
constexpr i64 kPairRowBytes = 256;

bool short_rows(const Type& t) { return t.blocks() > 0 && t.size() / t.blocks() <= kPairRowBytes; }

// The local copies of GPU k. Two copies of one field between the same two arrays with boxes of one
// shape (a periodic self-exchange's +X and -X faces, and its edges) become one move of
// ferry::interleave pairs: a row's two ends are then moved by one warp instruction, and the
// partial-sector writes of one direction meet the reads of the other in L2 (the self-exchange of
// bench_gpu_pack --halo: 125 us paired against 160 us per direction on an H100). Copies that do
// not pair (other shapes, long rows) stay single moves.
template <class Typed>
void local_copies(Plan::Impl& p, DeviceBackendState& s, int k, std::vector<gpu::Move>& pack,
                  const Typed& typed) {
  std::vector<const Copy*> mine;
  for (const Copy& c : p.copies)
    if (c.method == Method::local && s.sub_dev[c.src_sub] == k) mine.push_back(&c);
  std::vector<char> used(mine.size(), 0);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (used[i]) continue;
    const Copy& a = *mine[i];
    const bool pairable = short_rows(a.src) && short_rows(a.dst);
    for (std::size_t j = i + 1; pairable && j < mine.size(); ++j) {
      const Copy& b = *mine[j];
      if (used[j] || b.src_sub != a.src_sub || b.dst_sub != a.dst_sub || b.field != a.field ||
          b.bytes != a.bytes)
        continue;
      try {
        Type src = interleave(a.src, b.src), dst = interleave(a.dst, b.dst);
        s.paired.push_back(std::move(src));
        const Type* ps = &s.paired.back();
        s.paired.push_back(std::move(dst));
        pack.push_back({typed(a.src_sub, a.field, ps), typed(a.dst_sub, a.field, &s.paired.back())});
        used[i] = used[j] = 1;
        break;
      } catch (const Error&) {
        // not one shape: try the next candidate
      }
    }
    if (!used[i]) pack.push_back({typed(a.src_sub, a.field, &a.src), typed(a.dst_sub, a.field, &a.dst)});
  }
}

// The pack and unpack moves of one GPU (index k), in the plan's order (slowest first).
void batches_for(Plan::Impl& p, DeviceBackendState& s, int k, std::vector<gpu::Move>& pack,
                 std::vector<gpu::Move>& unpack) {
  auto typed = [&](int sub, int field, const Type* t) {
    gpu::Side side;
    side.slot = slot_of(p, sub, field);
    side.count = 1;
    side.type = t;
    return side;
  };
  auto packed = [](char* at) {
    gpu::Side side;
    side.ptr = at;
    return side;
  };
  for (End& e : s.out) {
    const Method m = e.msg->method;
    char* target = m == Method::ipc ? e.remote : m == Method::staged ? e.host : e.dev;
    for (const Piece& pc : e.msg->pieces)
      if (s.sub_dev[pc.sub] == k) pack.push_back({typed(pc.sub, pc.field, &pc.type), packed(target + pc.offset)});
  }
  for (auto& pcpy : s.peers)
    if (pcpy.src == k)
      for (auto [c, at] : pcpy.parts) pack.push_back({typed(c->src_sub, c->field, &c->src), packed(pcpy.src_buf + at)});
  local_copies(p, s, k, pack, typed);
  for (End& e : s.in) {
    const Method m = e.msg->method;
    char* source = m == Method::staged ? e.host : e.dev;
    for (const Piece& pc : e.msg->pieces)
      if (s.sub_dev[pc.sub] == k) unpack.push_back({packed(source + pc.offset), typed(pc.sub, pc.field, &pc.type)});
  }
  for (auto& pcpy : s.peers)
    if (pcpy.dst == k)
      for (auto [c, at] : pcpy.parts) unpack.push_back({packed(pcpy.dst_buf + at), typed(c->dst_sub, c->field, &c->dst)});
}

void capture(DeviceBackendState& s, Dev& d) {
  gpu::DeviceScope scope(d.device);
  d.run = d.stream;  // captured on Ferry's stream; the graph may be launched on any
  for (int part = 0; part < 2; ++part) {
    gpu::begin_capture(d.stream);
    try {
      if (part == 0) enqueue_start(s, d);
      else enqueue_finish(s, d);
    } catch (...) {
      gpu::destroy_graph(gpu::end_capture(d.stream));
      throw;
    }
    gpu::Graph g = gpu::end_capture(d.stream);
    (part == 0 ? d.start_graph : d.finish_graph) = gpu::instantiate(g);
    gpu::destroy_graph(g);
  }
}

}  // namespace

void setup_devices(Plan::Impl& p, DeviceBackendState& s) {
  const Domain::Impl& dom = *p.dom;
  s.fused = p.opt.fused;
  for (std::size_t i = 0; i < dom.local.size(); ++i) {
    const int device = dom.local[i].device;
    if (device < 0) fail(MPI_ERR_ARG, "halo: subdomain " + std::to_string(i) + " has GPU fields but no GPU (DomainOptions::devices)");
    auto [it, fresh] = s.dev_index.try_emplace(device, static_cast<int>(s.devs.size()));
    if (fresh) {
      gpu::DeviceScope scope(device);
      Dev d;
      d.device = device;
      d.stream = gpu::create_stream(p.opt.priority_stream ? gpu::stream_priorities().greatest : 0);
      d.user = gpu::create_event();
      d.packed = gpu::create_event();
      d.done = gpu::create_event();
      s.devs.push_back(std::move(d));
    }
    s.sub_dev.push_back(it->second);
  }
  // Several GPUs in one process order their parts with events between the exchange's steps,
  // which a graph of one stream cannot hold: graphs are for the one-GPU case.
  s.graphs = p.opt.graphs && s.devs.size() == 1;
  s.direct = !p.opt.priority_stream && s.devs.size() == 1;
  for (Dev& d : s.devs) d.run = d.stream;
  make_ends(p, s, p.sends, s.out);
  make_ends(p, s, p.recvs, s.in);
  ipc_handshake(p, s);
  for (End& e : s.out)
    if (e.msg->method != Method::ipc) mpi_end(p, s, e, true);
  for (End& e : s.in)
    if (e.msg->method != Method::ipc) mpi_end(p, s, e, false);
  std::map<std::pair<int, int>, std::size_t> pair_of;  // (source, destination GPU) -> s.peers
  for (Copy& c : p.copies)
    if (c.method == Method::peer) {
      const int src = s.sub_dev[c.src_sub], dst = s.sub_dev[c.dst_sub];
      auto [it, fresh] = pair_of.try_emplace({src, dst}, s.peers.size());
      if (fresh) {
        s.peers.emplace_back();
        s.peers.back().src = src, s.peers.back().dst = dst;
      }
      DeviceBackendState::PeerCopy& pc = s.peers[it->second];
      pc.parts.emplace_back(&c, pc.bytes);
      pc.bytes += (c.bytes + 255) / 256 * 256;  // each part 256-byte aligned
    }
  for (DeviceBackendState::PeerCopy& pc : s.peers) {
    // Without peer access the copy between GPUs is staged through host memory by the driver:
    // 20 times slower over NVLink.
    const int from = s.devs[pc.src].device, to = s.devs[pc.dst].device;
    if (from != to && gpu::can_access_peer(from, to)) {
      gpu::DeviceScope scope(from);
      gpu::enable_peer_access(to);
    }
    pc.src_buf = static_cast<char*>(device_alloc(s, pc.src, pc.bytes));
    pc.dst_buf = static_cast<char*>(device_alloc(s, pc.dst, pc.bytes));
    gpu::DeviceScope scope(s.devs[pc.src].device);
    pc.copied = gpu::create_event();
  }
  std::vector<void*> slots;
  for (std::size_t sub = 0; sub < p.fields.size(); ++sub)
    for (std::size_t f = 0; f < p.fields[sub].size(); ++f) slots.push_back(p.data(static_cast<int>(sub), static_cast<int>(f)));
  p.stats.pack_launches = p.stats.unpack_launches = 0;
  for (std::size_t k = 0; k < s.devs.size(); ++k) {
    std::vector<gpu::Move> pack, unpack;
    batches_for(p, s, static_cast<int>(k), pack, unpack);
    gpu::DeviceScope scope(s.devs[k].device);
    for (auto [moves, batches] : {std::pair{&pack, &s.devs[k].pack}, std::pair{&unpack, &s.devs[k].unpack}}) {
      if (moves->empty()) continue;
      if (s.fused) batches->emplace_back(*moves, slots);
      else
        for (const gpu::Move& m : *moves) batches->emplace_back(std::vector<gpu::Move>{m}, slots);
    }
    p.stats.pack_launches += static_cast<int>(s.devs[k].pack.size());
    p.stats.unpack_launches += static_cast<int>(s.devs[k].unpack.size());
  }
  // The methods may have changed (IPC refused): recount what travels how.
  for (auto* st : {&p.stats.sent, &p.stats.received}) *st = {};
  for (const Copy& c : p.copies)
    for (auto* st : {&p.stats.sent[static_cast<int>(c.method)], &p.stats.received[static_cast<int>(c.method)]})
      st->messages += c.method == Method::peer ? 0 : 1, st->bytes += c.bytes, st->regions += 1;
  for (auto* st : {&p.stats.sent, &p.stats.received})  // peer: one copy per pair of GPUs
    (*st)[static_cast<int>(Method::peer)].messages += static_cast<i64>(s.peers.size());
  for (auto [ends, st] : {std::pair{&s.out, &p.stats.sent}, std::pair{&s.in, &p.stats.received}})
    for (const End& e : *ends) {
      auto& x = (*st)[static_cast<int>(e.msg->method)];
      x.messages += e.msg->method == Method::ipc ? 1 : static_cast<i64>(e.msg->parts.size());
      x.bytes += e.msg->bytes;
      x.regions += static_cast<i64>(e.msg->pieces.size());
    }
  for (const End& e : s.out) s.need_packed |= e.msg->method == Method::staged || e.msg->method == Method::mpi;
  if (s.graphs)
    for (Dev& d : s.devs) capture(s, d);
}

void release_devices(DeviceBackendState& s) noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  for (Dev& d : s.devs) {
    try {
      gpu::sync_stream(d.stream);
    } catch (...) {
    }
    gpu::destroy_graph_exec(d.start_graph);
    gpu::destroy_graph_exec(d.finish_graph);
    d.pack.clear();
    d.unpack.clear();
  }
  for (auto* ends : {&s.out, &s.in})
    for (End& e : *ends) {
      if (!finalized)
        for (MPI_Request& r : e.reqs)
          if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
      for (gpu::Event ev : e.part_events) gpu::destroy_event(ev);
      e.lease = {};
      e.flag_lease = {};
    }
  for (auto& pc : s.peers) gpu::destroy_event(pc.copied);
  for (std::size_t i = 0; i < s.device_allocs.size(); ++i) gpu::free_device(s.device_allocs[i]);
  for (void* p : s.pinned_allocs) gpu::free_pinned(p);
  for (Dev& d : s.devs) {
    gpu::destroy_event(d.user);
    gpu::destroy_event(d.packed);
    gpu::destroy_event(d.done);
    gpu::destroy_stream(d.stream);
  }
}

}  // namespace ferry::halo::detail
