// The receivers of the stub protocol (transport.hpp, receive()): IPC, local and pipelined.
#include <ferry/pack.hpp>
#include <ferry/transport.hpp>

#include <algorithm>
#include <cstring>

#include "gpu/runtime.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"
#include "transport/methods.hpp"
#include "transport/wire.hpp"

namespace ferry::transport {

namespace {

using wire::Stub;

// Answers a sender however the receive ends, so it never waits for ever: kAckDone unless the
// receiver asks for the data (need_data), before receiving it.
struct Answer {
  int peer, tag;
  std::uint64_t word[2];
  bool sent = false;
  void send() {
    if (!sent) PMPI_Send(word, 2, MPI_UINT64_T, peer, tag, wire::state().ctl);
    sent = true;
  }
  void need_data() {
    word[0] = wire::kAckNeedData;
    send();
  }
  ~Answer() { send(); }
};

}  // namespace

// A receive whose copy is queued: answered, then its mapping let go, once the batch settles.
struct ReceiveBatch::Held {
  IpcCache::Lease mapped;
  Answer ack;
  std::shared_ptr<const void> keep;  // the sender's layout (a description, a local record)
};

namespace {

// Moves the acknowledgement (answered by the batch now, not by the receiver's scope) and what the
// queued copy reads into a deferred receive, whose copy went on `s` (or the legacy stream).
// Without memory for it, the batch and that stream are drained first (ReceiveBatch::drain): the
// copy runs while its source is still held and its sender not yet answered.
std::unique_ptr<ReceiveBatch::Held> defer(Answer& ack, IpcCache::Lease mapped, std::shared_ptr<const void> keep,
                                          ReceiveBatch& batch, gpu::Stream s, bool legacy) {
  std::unique_ptr<ReceiveBatch::Held> h;
  try {
    h.reset(new ReceiveBatch::Held{std::move(mapped), ack, std::move(keep)});
  } catch (...) {
    batch.drain(s, legacy);
    throw;
  }
  ack.sent = true;
  return h;
}

std::uint64_t key_of(const Target& to) { return to.device ? gpu::device_key(to.gpu) : 0; }

// The data, staged on the private communicator after a kAckNeedData.
void receive_staged(const Stub& s, int sw, i64 take, const Target& to) {
  Buffer host(pinned_pool(), s.bytes);
  PMPI_Recv(host.get(), static_cast<int>(s.bytes), MPI_BYTE, sw, wire::data_tag(s.seq), wire::state().ctl,
            MPI_STATUS_IGNORE);
  unstage(host.get(), take, to, 0, true);
}

const void* at(const void* p, i64 offset) {
  return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(offset));
}

// `scount` elements of `stype` at `sorigin` (GPU memory: this process's, or a peer's mapped over
// IPC), `sbytes` in all, into the target, of which `take` bytes fit, queued on `s` when the whole
// message lands in whole elements of GPU memory: one copy or one kernel from the sender's layout
// straight into the receiver's. False (nothing queued) otherwise. `device_source`: the source is
// device memory; `batch`: a batch that launches a typed copy with others (copy_many_async), and
// with `spans` a contiguous one too (the source then is GPU memory of this GPU).
bool queue_typed(const void* sorigin, i64 scount, const std::shared_ptr<const Type>& st, i64 sbytes, i64 take,
                 const Target& to, gpu::Stream s, bool device_source, ReceiveBatch* batch = nullptr,
                 bool spans = false) {
  const Type& stype = *st;
  const Type& rt = *to.type;
  const i64 rsize = rt.size();
  if (!to.device || take != sbytes || rsize <= 0 || take % rsize != 0) return false;
  const char* sfirst = static_cast<const char*>(at(sorigin, stype.data_lb(scount)));
  char* rfirst = to.element(0) + rt.true_lb();
  if (stype.dense() && rt.dense()) {
    // Said device to device where it is: cudaMemcpyDefault asks the driver about both pointers.
    if (batch && spans) batch->add_span({rfirst, sfirst, take}, s);
    else if (device_source) gpu::copy_d2d_async(rfirst, sfirst, take, s);
    else gpu::copy_async(rfirst, sfirst, take, s);
  } else if (rt.dense()) {
    gpu::pack_async(sorigin, scount, stype, rfirst, s);
  } else if (stype.dense()) {
    gpu::unpack_async(sfirst, to.buf, take / rsize, rt, s);
  } else if (batch) {
    batch->add_copy(sorigin, scount, st, to.buf, take / rsize, to.type, s);
  } else {
    gpu::copy_async(sorigin, scount, stype, to.buf, take / rsize, rt, s);
  }
  return true;
}

// `take` packed bytes at `src` (GPU memory) queued on `s` into a GPU target that they fill with
// whole elements: one copy, or one unpack. False (nothing queued) otherwise.
bool queue_packed(const char* src, i64 take, const Target& to, gpu::Stream s, ReceiveBatch* spans = nullptr) {
  const Type& t = *to.type;
  const i64 size = t.size();
  if (!to.device || size <= 0 || take % size != 0) return false;
  if (t.dense() && spans) {
    spans->add_span({to.element(0) + t.true_lb(), src, take}, s);
  } else if (t.dense()) {
    gpu::copy_d2d_async(to.element(0) + t.true_lb(), src, take, s);
  } else {
    gpu::unpack_async(src, to.buf, take / size, t, s);
  }
  return true;
}

// As queue_typed, waiting for it; any other message is packed into a device or pinned buffer and
// delivered from there.
void deliver_typed(const void* sorigin, i64 scount, const std::shared_ptr<const Type>& stype, i64 sbytes,
                   i64 take, const Target& to, gpu::Stream s, bool legacy, bool device_source) {
  auto wait = [&] {
    if (legacy) methods::wait_legacy();
    else gpu::sync_stream(s);
  };
  if (take <= 0 || to.type->size() <= 0) return;
  if (queue_typed(sorigin, scount, stype, sbytes, take, to, s, device_source)) return wait();
  if (to.device) {  // truncated or ending inside an element: pack, then deliver the leading bytes
    const Buffer dev(device_pool(gpu::this_device()), sbytes);
    gpu::pack_async(sorigin, scount, *stype, dev.get(), s);
    wait();
    methods::deliver_packed(static_cast<const char*>(dev.get()), take, to);
    return;
  }
  Buffer host(pinned_pool(), sbytes);  // a host target: packed over the bus, unpacked by the CPU
  gpu::pack_async(sorigin, scount, *stype, host.get(), s);
  wait();
  unstage(host.get(), take, to, 0, true);
}

// IPC: the receiver pulls from the sender's GPU memory (mapped once per allocation), then answers.
void fetch_ipc(const Stub& s, int sw, i64 take, const Target& to, ReceiveBatch* batch) {
  const wire::State& w = wire::state();
  // Held until after the acknowledgement (declared first, released last).
  IpcCache::Lease mapped;
  Answer ack{sw, wire::ack_tag(s.seq), {wire::kAckDone, key_of(to)}};
  std::shared_ptr<const Type> stype;
  if (s.type_key != 0 && (s.flags & wire::kDescribed)) {  // on its way whatever happens here
    MPI_Status st;
    PMPI_Probe(sw, wire::desc_tag(s.seq), w.ctl, &st);
    int n = 0;
    PMPI_Get_count(&st, MPI_BYTE, &n);
    std::vector<char> text(static_cast<std::size_t>(std::max(n, 0)));
    PMPI_Recv(text.data(), n, MPI_BYTE, sw, wire::desc_tag(s.seq), w.ctl, MPI_STATUS_IGNORE);
    stype = wire::describe().learn(sw, s.type_key, text);
  } else if (s.type_key != 0) {
    stype = wire::describe().known(sw, s.type_key);
  }
  mapped = ipc_cache().open(s.sender, s.base, s.alloc_id, s.handle);
  // A pack the sender did not wait for: this process's stream waits for its event first.
  const gpu::Event ready = mapped && (s.flags & wire::kReady) ? wire::ready().opened(s) : nullptr;
  if (!mapped || (s.type_key != 0 && !stype) || ((s.flags & wire::kReady) && !ready)) {
    // The handle did not open here (another node's, or the allocation is mapped in this process
    // already: IpcCache), the layout is not known, or the pack's event did not open: the data
    // comes staged.
    ack.need_data();
    if (batch) batch->settle();  // the staged data may come from a sender waiting for an answer
    receive_staged(s, sw, take, to);
    return;
  }
  const char* first = static_cast<const char*>(mapped.get()) + s.offset;
  const void* sorigin = stype ? at(first, -stype->data_lb(s.count)) : nullptr;
  // The batch's kernel copies only within this GPU (another needs peer access; cudaMemcpy does not).
  // A copy after a pack not done yet goes on a stream of its own (a few in turn) after its event.
  const bool spans = batch && !ready && to.device && to.gpu == gpu::this_device() && s.gpu == key_of(to);
  gpu::Stream on = wire::stream();
  if (ready && batch) {
    try {
      on = wire::ready().stream();
      gpu::stream_wait_event(on, ready);
    } catch (const Error&) {  // no stream to wait on: this receive waits on the host below
      batch = nullptr;
    }
  }
  if (batch && take > 0 &&
      (s.type_key == 0 ? queue_packed(first, take, to, on, spans ? batch : nullptr)
                       : queue_typed(sorigin, s.count, stype, s.bytes, take, to, on, true, batch, spans))) {
    batch->add(defer(ack, std::move(mapped), stype, *batch, on, false), on, false);
    return;
  }
  if (ready) gpu::sync_event(ready);
  if (s.type_key == 0) {
    methods::deliver_packed(first, take, to);
  } else {
    deliver_typed(sorigin, s.count, stype, s.bytes, take, to, wire::stream(), false, true);
  }
}  // ~Answer acknowledges

// Local: the sender is this process; its record says where the data is.
void receive_local(const Stub& s, i64 take, const Target& to, ReceiveBatch* batch) {
  const wire::State& w = wire::state();
  Answer ack{w.rank, wire::ack_tag(s.seq), {wire::kAckDone, 0}};
  const auto rec = methods::local_find(static_cast<i64>(s.base));
  if (!rec) {
    ack.need_data();
    if (batch) batch->settle();
    receive_staged(s, w.rank, take, to);
    return;
  }
  if (to.device && rec->device >= 0 && to.gpu >= 0 && rec->device != to.gpu && gpu::can_access_peer(to.gpu, rec->device))
    gpu::enable_peer_access(rec->device);  // the peer method: another GPU of this process
  // On the legacy stream: ordered after the application's work there, as a cudaMemcpy would be.
  if (batch && take > 0 &&
      queue_typed(rec->origin, rec->count, rec->type, s.bytes, take, to, gpu::legacy_stream(), false, batch)) {
    const gpu::Stream legacy = gpu::legacy_stream();
    batch->add(defer(ack, IpcCache::Lease{}, rec, *batch, legacy, true), legacy, true);
    return;
  }
  deliver_typed(rec->origin, rec->count, rec->type, s.bytes, take, to, gpu::legacy_stream(), true, false);
}

// Pipelined: every chunk's receive is posted at once into one pinned buffer; as each arrives, the
// whole receive elements it completes are unpacked while the next chunks come in.
void receive_pipelined(const Stub& s, int sw, i64 take, const Target& to) {
  const i64 chunk = s.offset;
  if (chunk <= 0) return;
  const i64 nchunks = (s.bytes + chunk - 1) / chunk;
  Buffer host(pinned_pool(), s.bytes);
  char* base = static_cast<char*>(host.get());
  std::vector<MPI_Request> r(static_cast<std::size_t>(nchunks));
  for (i64 c = 0; c < nchunks; ++c)
    PMPI_Irecv(base + c * chunk, static_cast<int>(std::min(chunk, s.bytes - c * chunk)), MPI_BYTE, sw,
               wire::data_tag(s.seq), wire::state().ctl, &r[static_cast<std::size_t>(c)]);
  const Type& t = *to.type;
  const i64 size = t.size();
  const bool on_gpu = to.device && gpu::available();
  i64 done = 0;  // elements unpacked
  try {
    for (i64 c = 0; c < nchunks; ++c) {
      PMPI_Wait(&r[static_cast<std::size_t>(c)], MPI_STATUS_IGNORE);
      const i64 covered = size ? std::min(take, (c + 1) * chunk) / size : 0;
      if (covered <= done || t.dense()) continue;
      if (on_gpu) {  // asynchronous: overlaps the next chunks' arrival
        gpu::unpack_async(base + done * size, to.element(done), covered - done, t, wire::stream());
      } else {
        unstage(base + done * size, (covered - done) * size, to, done, true);
      }
      done = covered;
    }
  } catch (...) {
    for (auto& q : r) PMPI_Wait(&q, MPI_STATUS_IGNORE);  // the sender's chunks must all arrive
    if (on_gpu) wire::quiesce(wire::stream());
    throw;
  }
  if (on_gpu) gpu::sync_stream(wire::stream());
  unstage(base + done * size, take - done * size, to, done, true);  // dense data, or the partial tail
}

}  // namespace

bool receive(const Target& to, const void* received, const Ranks& ranks, MPI_Status* st, int* rc,
             ReceiveBatch* batch) {
  if (batch && !ReceiveBatch::enabled()) batch = nullptr;
  const wire::State& w = wire::state();
  if (!w.on || st->MPI_SOURCE < 0 || !to.type) return false;
  int got = 0;
  PMPI_Get_count(st, MPI_BYTE, &got);
  if (got != kStubBytes) return false;
  const int sw = ranks.to_world(st->MPI_SOURCE);
  if (sw < 0) return false;
  const Type& t = *to.type;
  std::vector<char> packed;
  if (!received) {  // the bytes went into the application's host buffer, laid out by its type
    if (t.size() <= 0) return false;
    const i64 elems = std::min(to.count, (kStubBytes + t.size() - 1) / t.size());
    packed.resize(static_cast<std::size_t>(elems * t.size()));
    i64 pos = 0;
    ferry::pack(to.buf, elems, t, packed.data(), static_cast<i64>(packed.size()), &pos);
    if (pos < kStubBytes) return false;
    received = packed.data();
  }
  Stub s;
  if (!wire::parse(received, sw, &s) || (s.kind == wire::kLocal) != (sw == w.rank)) return false;
  const i64 capacity = to.capacity();
  const i64 take = std::min(s.bytes, capacity);
  switch (s.kind) {
    case wire::kIpc:
      learn_gpu(sw, s.gpu);
      fetch_ipc(s, sw, take, to, batch);
      wire::stats().ipc_received.fetch_add(1);
      break;
    case wire::kLocal: receive_local(s, take, to, batch); break;
    default:
      learn_gpu(sw, s.gpu);
      if (batch) batch->settle();  // its chunks may come from a sender waiting for an answer
      receive_pipelined(s, sw, take, to);
  }
  PMPI_Status_set_elements_x(st, MPI_BYTE, take);
  *rc = s.bytes > capacity ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
  if (*rc != MPI_SUCCESS) st->MPI_ERROR = *rc;
  return true;
}

ReceiveBatch::ReceiveBatch() = default;
ReceiveBatch::~ReceiveBatch() { settle(); }

bool ReceiveBatch::enabled() {
  static const bool on = detail::env::flag(detail::env::Knob::batch_receive);
  return on;
}

void ReceiveBatch::add(std::unique_ptr<Held> h, gpu::Stream s, bool legacy) {
  try {  // no room: the copies queued for `h` run while it still holds their source
    if (held_.capacity() == held_.size()) held_.reserve(2 * held_.size() + 1);
    if (!legacy && streams_.capacity() == streams_.size()) streams_.reserve(2 * streams_.size() + 1);
  } catch (...) {
    drain(s, legacy);
    throw;
  }
  held_.push_back(std::move(h));
  ++queued_;
  wire::stats().batched.fetch_add(1);
  if (legacy) {
    legacy_ = true;
  } else if (std::find(streams_.begin(), streams_.end(), s) == streams_.end()) {
    streams_.push_back(s);
  }
}

// Copies of this batch's receives not launched yet: contiguous ones, typed ones (with their types),
// each kind on one stream (a copy on another launches those queued).
struct ReceiveBatch::Queue {
  std::vector<gpu::Span> spans;
  gpu::Stream span_stream = nullptr;
  std::vector<gpu::Copy> copies;
  std::vector<std::shared_ptr<const Type>> types;
  gpu::Stream copy_stream = nullptr;
};

void ReceiveBatch::add_span(const gpu::Span& span, gpu::Stream s) {
  if (!queue_) queue_ = std::make_unique<Queue>();
  if (!queue_->spans.empty() && s != queue_->span_stream) launch_queued();
  queue_->span_stream = s;
  queue_->spans.push_back(span);
}

void ReceiveBatch::add_copy(const void* src, i64 scount, std::shared_ptr<const Type> stype, void* dst,
                            i64 dcount, std::shared_ptr<const Type> dtype, gpu::Stream s) {
  if (!queue_) queue_ = std::make_unique<Queue>();
  if (!queue_->copies.empty() && s != queue_->copy_stream) launch_queued();
  Queue& q = *queue_;
  if (q.types.capacity() < q.types.size() + 2) q.types.reserve(2 * q.types.size() + 2);  // may throw: first
  q.copies.push_back({src, scount, stype.get(), dst, dcount, dtype.get()});
  q.copy_stream = s;
  q.types.push_back(std::move(stype));
  q.types.push_back(std::move(dtype));
}

void ReceiveBatch::launch_queued() {
  if (!queue_ || (queue_->spans.empty() && queue_->copies.empty())) return;
  const Queue q = std::exchange(*queue_, Queue{});  // launched or failed: not again
  try {
    if (!q.spans.empty()) gpu::copy_spans_async(q.spans.data(), q.spans.size(), q.span_stream);
    if (!q.copies.empty()) gpu::copy_many_async(q.copies.data(), q.copies.size(), q.copy_stream);
  } catch (const Error& e) {  // those receives did not get their data: settle() reports it
    if (rc_ == MPI_SUCCESS) rc_ = e.mpi_error_class();
    throw;
  }
}

void ReceiveBatch::close() {
  launch_queued();
  if (held_.empty() || !events_.empty()) return;
  std::vector<gpu::Stream> streams = streams_;
  if (legacy_) streams.push_back(gpu::legacy_stream());
  try {
    for (gpu::Stream s : streams) {
      events_.push_back(gpu::create_event());
      gpu::record(events_.back(), s);
    }
  } catch (...) {  // settle() then waits for the streams instead
    for (gpu::Event e : events_) gpu::destroy_event(e);
    events_.clear();
    throw;
  }
}

// A receive that could not join (no memory) may have queued or launched its copy on `s` (legacy:
// the legacy stream): its source, still held by the caller, must outlive it.
void ReceiveBatch::drain(gpu::Stream s, bool legacy) noexcept {
  settle();
  if (!legacy) return wire::quiesce(s);
  try {
    methods::wait_legacy();
  } catch (...) {  // the context is failing: what the caller throws says enough
  }
}

bool ReceiveBatch::done() const {
  for (gpu::Event e : events_)
    if (!gpu::event_idle(e)) return false;
  return true;
}

int ReceiveBatch::settle() noexcept {
  auto launch_noting = [this] {  // launch_queued, its error kept
    const int e = detail::guarded([this] { launch_queued(); });
    if (rc_ == MPI_SUCCESS) rc_ = e;
  };
  if (held_.empty()) {  // copies of a receive that could not join (no memory): run them, wait
    if (!queue_ || (queue_->spans.empty() && queue_->copies.empty())) return rc_;
    const bool spans = !queue_->spans.empty(), copies = !queue_->copies.empty();
    const gpu::Stream on[2] = {queue_->span_stream, queue_->copy_stream};
    launch_noting();
    if (spans) wire::quiesce(on[0]);
    if (copies) wire::quiesce(on[1]);
    return rc_;
  }
  wire::stats().batch_waits.fetch_add(1);
  launch_noting();
  auto wait = [this](auto&& f, gpu::Stream s) {
    try {
      f();
    } catch (const Error& e) {
      if (rc_ == MPI_SUCCESS) rc_ = e.mpi_error_class();
      if (s) wire::quiesce(s);
    } catch (...) {
      if (rc_ == MPI_SUCCESS) rc_ = MPI_ERR_INTERN;
    }
  };
  if (!events_.empty()) {
    for (gpu::Event e : events_) wait([e] { gpu::sync_event(e); }, nullptr);
    for (gpu::Event e : events_) gpu::destroy_event(e);
    events_.clear();
  } else {
    for (gpu::Stream s : streams_) wait([s] { gpu::sync_stream(s); }, s);
    if (legacy_) wait([] { methods::wait_legacy(); }, nullptr);
  }
  streams_.clear();
  legacy_ = false;
  auto held = std::move(held_);
  held_.clear();
  held.clear();  // each answers its sender (a failed send of an answer is the sender's to see)
  return rc_;
}

bool stub_size(const void* received, const Ranks& ranks, const MPI_Status& st, i64* bytes) {
  Stub s;
  if (!wire::parse(received, ranks.to_world(st.MPI_SOURCE), &s)) return false;
  *bytes = s.bytes;
  return true;
}

}  // namespace ferry::transport
