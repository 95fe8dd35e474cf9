// The host backend: fields in host memory, packed by the CPU engine. Its methods: local copies,
// MPI messages (staged: one buffer per neighbour rank, persistent requests, parts unpacked as they
// land), and IPC: the sender packs straight into the receiver's buffer in a node-shared window,
// with the two-way handshake of GHEX#223 — "data ready" (sender -> receiver) and "buffer free"
// (receiver -> sender) — as flag words in the receiver's segment. The same protocol the GPU
// backend runs with device-side flags, so CI exercises its races with many ranks.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "halo/plan.hpp"
#include "halo/shm.hpp"
#include "halo/wait.hpp"
#include "pack/cpu/engine.hpp"
#include "sys/error.hpp"

namespace ferry::halo::detail {
namespace {

class HostBackend final : public Backend {
 public:
  explicit HostBackend(Plan::Impl& p);
  ~HostBackend() override;
  void start(gpu::Stream) override;
  bool test() override;
  void finish(gpu::Stream) override;

 private:
  struct End {
    Message* msg = nullptr;
    char* buf = nullptr;                 // MPI: own buffer; IPC: the receiver's buffer
    std::uint64_t* ready = nullptr;      // IPC flags, in the receiver's segment
    std::uint64_t* freed = nullptr;
    std::vector<MPI_Request> reqs;       // MPI: one persistent request per part
    std::vector<char> arrived;           // receive: parts unpacked this exchange
    bool done = false;
  };

  bool progress();  // true when everything of this exchange is done
  bool try_put(End& e);
  void pack_part(const Message& m, const Part& part, char* buf);
  void unpack_part(const Message& m, const Part& part, const char* buf);
  void run_copies();
  void progress_loop();

  Plan::Impl& p_;
  std::unique_ptr<SharedWindow> window_;
  std::vector<std::vector<char>> buffers_;
  std::vector<End> out_, in_;
  std::vector<char> scratch_, scratch2_;
  // The optional progress thread (Options::progress_thread).
  std::mutex mu_;
  std::condition_variable cv_;
  bool active_ = false, stop_ = false;
  std::thread thread_;
};

HostBackend::HostBackend(Plan::Impl& p) : p_(p) {
  const auto& d = *p.dom;
  int tag_ub_ok = 1;
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(p.comm, MPI_TAG_UB, &ub, &flag);
  const long tag_ub = flag ? *static_cast<int*>(ub) : 32767;
  for (auto* list : {&p.sends, &p.recvs})
    for (const Message& m : *list)
      if (static_cast<long>(m.parts.size()) + 2 > tag_ub) tag_ub_ok = 0;
  MPI_Allreduce(MPI_IN_PLACE, &tag_ub_ok, 1, MPI_INT, MPI_MIN, p.comm);
  if (!tag_ub_ok)
    ferry::detail::fail(MPI_ERR_ARG, "halo: split_bytes cuts a message into more parts than MPI has tags");

  // IPC: this rank's segment holds, per incoming IPC message, two flag lines and the buffer.
  std::int64_t seg = 0;
  std::vector<long long> offsets;
  for (const Message& m : p.recvs)
    if (m.method == Method::ipc) {
      offsets.push_back(seg);
      seg += 2 * kLine + (m.bytes + kLine - 1) / kLine * kLine;
    }
  // Every buffer starts free: its `freed` flag is 1 before any sender can look.
  window_ = std::make_unique<SharedWindow>(p.comm, d.node_of_rank[d.rank], seg, [&](char* mine) {
    for (long long off : offsets) flag_store(reinterpret_cast<std::uint64_t*>(mine + off + kLine), 1);
  });
  std::vector<long long> remote;
  for (const Message& m : p.sends)
    if (m.method == Method::ipc) remote.push_back(0);
  std::vector<MPI_Request> reqs;
  std::size_t k = 0;
  for (const Message& m : p.sends)
    if (m.method == Method::ipc) {
      reqs.emplace_back();
      MPI_Irecv(&remote[k++], 1, MPI_LONG_LONG, m.peer, 1, p.comm, &reqs.back());
    }
  k = 0;
  for (const Message& m : p.recvs)
    if (m.method == Method::ipc) {
      reqs.emplace_back();
      MPI_Isend(&offsets[k++], 1, MPI_LONG_LONG, m.peer, 1, p.comm, &reqs.back());
    }
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);

  std::size_t ipc_out = 0, ipc_in = 0;
  i64 largest = 0;
  for (auto [list, ends, sending] : {std::tuple{&p.sends, &out_, true}, std::tuple{&p.recvs, &in_, false}}) {
    for (Message& m : *list) {
      End e;
      e.msg = &m;
      if (m.method == Method::ipc) {
        char* base = sending ? window_->segment(m.peer) + remote[ipc_out++] : window_->mine() + offsets[ipc_in++];
        e.ready = reinterpret_cast<std::uint64_t*>(base);
        e.freed = reinterpret_cast<std::uint64_t*>(base + kLine);
        e.buf = base + 2 * kLine;
      } else {
        buffers_.emplace_back(static_cast<std::size_t>(m.bytes));
        e.buf = buffers_.back().data();
        for (std::size_t i = 0; i < m.parts.size(); ++i) {
          const Part& part = m.parts[i];
          MPI_Request r;
          const int tag = static_cast<int>(i) + 2;
          if (sending) MPI_Send_init(e.buf + part.offset, static_cast<int>(part.bytes), MPI_BYTE, m.peer, tag, p.comm, &r);
          else MPI_Recv_init(e.buf + part.offset, static_cast<int>(part.bytes), MPI_BYTE, m.peer, tag, p.comm, &r);
          e.reqs.push_back(r);
        }
        e.arrived.assign(m.parts.size(), 0);
      }
      ends->push_back(std::move(e));
    }
  }
  for (const Copy& c : p.copies) largest = std::max(largest, c.bytes);
  scratch_.resize(static_cast<std::size_t>(largest));
  for (const Copy& c : p.copies)
    if (c.method == Method::peer) scratch2_.resize(static_cast<std::size_t>(largest));
  if (p.opt.progress_thread) thread_ = std::thread([this] { progress_loop(); });
}

HostBackend::~HostBackend() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto* ends : {&out_, &in_})
    for (End& e : *ends)
      for (MPI_Request& r : e.reqs)
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

void HostBackend::pack_part(const Message& m, const Part& part, char* buf) {
  for (int i = part.piece_begin; i < part.piece_end; ++i) {
    const Piece& pc = m.pieces[i];
    ferry::detail::cpu_pack(p_.data(pc.sub, pc.field), 1, pc.type, buf + pc.offset);
  }
}

void HostBackend::unpack_part(const Message& m, const Part& part, const char* buf) {
  for (int i = part.piece_begin; i < part.piece_end; ++i) {
    const Piece& pc = m.pieces[i];
    ferry::detail::cpu_unpack(buf + pc.offset, p_.data(pc.sub, pc.field), 1, pc.type);
  }
}

bool HostBackend::try_put(End& e) {
  if (e.done) return true;
  // "Buffer free": the receiver has unpacked the previous exchange. Taking the token (1 -> 0) and
  // handing over "data ready" (0 -> 1) keep one value each, as the GPU's graph-captured flag
  // operations must (device.cpp): only the sender clears `freed` and sets `ready`.
  if (flag_load(e.freed) != 1) return false;
  flag_store(e.freed, 0);
  for (const Part& part : e.msg->parts) pack_part(*e.msg, part, e.buf);
  flag_store(e.ready, 1);
  e.done = true;
  return true;
}

void HostBackend::run_copies() {
  for (const Copy& c : p_.copies) {
    if (c.method == Method::local) {  // interior to halo in one walk, no buffer
      ferry::detail::cpu_copy(p_.data(c.src_sub, c.field), 1, c.src, p_.data(c.dst_sub, c.field), 1, c.dst);
      continue;
    }
    // The peer path: pack, move to the other side's buffer, unpack.
    ferry::detail::cpu_pack(p_.data(c.src_sub, c.field), 1, c.src, scratch_.data());
    std::memcpy(scratch2_.data(), scratch_.data(), static_cast<std::size_t>(c.bytes));
    ferry::detail::cpu_unpack(scratch2_.data(), p_.data(c.dst_sub, c.field), 1, c.dst);
  }
}

bool HostBackend::progress() {
  bool all = true;
  for (End& e : out_) {
    if (e.done) continue;
    if (e.msg->method == Method::ipc) {
      all &= try_put(e);
    } else {
      int flag = 0;
      MPI_Testall(static_cast<int>(e.reqs.size()), e.reqs.data(), &flag, MPI_STATUSES_IGNORE);
      e.done = flag != 0;
      all &= e.done;
    }
  }
  for (End& e : in_) {
    if (e.done) continue;
    if (e.msg->method == Method::ipc) {
      if (flag_load(e.ready) != 1) {
        all = false;
        continue;
      }
      flag_store(e.ready, 0);
      for (const Part& part : e.msg->parts) unpack_part(*e.msg, part, e.buf);
      flag_store(e.freed, 1);
      e.done = true;
      continue;
    }
    bool complete = true;
    for (std::size_t i = 0; i < e.reqs.size(); ++i) {
      if (e.arrived[i]) continue;
      int flag = 0;
      MPI_Test(&e.reqs[i], &flag, MPI_STATUS_IGNORE);
      if (!flag) {
        complete = false;
        continue;
      }
      unpack_part(*e.msg, e.msg->parts[i], e.buf);  // the parts that landed, while others travel
      e.arrived[i] = 1;
    }
    e.done = complete;
    all &= complete;
  }
  return all;
}

void HostBackend::start(gpu::Stream) {
  std::unique_lock<std::mutex> lk(mu_);
  for (End& e : in_) {
    e.done = false;
    if (!e.reqs.empty()) {
      std::fill(e.arrived.begin(), e.arrived.end(), 0);
      MPI_Startall(static_cast<int>(e.reqs.size()), e.reqs.data());
    }
  }
  // Slowest first, largest first (the order of p_.sends): their time runs while faster ones start.
  for (End& e : out_) {
    e.done = false;
    if (e.msg->method == Method::ipc) {
      try_put(e);
      continue;
    }
    for (std::size_t i = 0; i < e.msg->parts.size(); ++i) {
      pack_part(*e.msg, e.msg->parts[i], e.buf);
      MPI_Start(&e.reqs[i]);
    }
  }
  run_copies();
  progress();
  if (thread_.joinable()) {
    active_ = true;
    lk.unlock();
    cv_.notify_all();
  }
}

bool HostBackend::test() {
  std::lock_guard<std::mutex> lk(mu_);
  return progress();
}

void HostBackend::finish(gpu::Stream) {
  Waiter w("the halo exchange's messages from its neighbours");
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (progress()) {
        active_ = false;
        return;
      }
    }
    w.pause();
  }
}

void HostBackend::progress_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    cv_.wait(lk, [&] { return stop_ || active_; });
    if (stop_) break;
    if (progress()) {
      active_ = false;
      continue;
    }
    lk.unlock();
    std::this_thread::yield();
    lk.lock();
  }
}

}  // namespace

std::unique_ptr<Backend> make_host_backend(Plan::Impl& plan) { return std::make_unique<HostBackend>(plan); }

}  // namespace ferry::halo::detail
