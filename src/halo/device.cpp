// The GPU backend's exchanges. start(stream): each GPU's stream waits for the user's stream, then
// (from a graph where there is one GPU) waits for its IPC receivers' "buffer free" flags, packs
// every region in one launch (copies for the local method, puts straight into the receivers' IPC
// buffers, packs for staged, pipelined, MPI and peer messages) and raises "data ready"; pipelined
// parts are copied to pinned memory in chunks with an event each; nothing waits on the host.
// finish(stream): the host hands each MPI part to MPI once its event fired and takes in the
// parts that arrive (pipelined ones go to the GPU as they land), then each GPU waits for its IPC
// senders' "data ready" flags, unpacks everything in one launch, frees its IPC buffers, and the
// user's stream waits for that. Receives into a host buffer are posted only once the previous
// exchange's unpack has read it (a query, never a wait).
#include <ferry/model.hpp>

#include "halo/device.hpp"
#include "halo/wait.hpp"
#include "sys/error.hpp"

namespace ferry::halo::detail {

bool device_ipc_possible(const Plan::Impl&) { return gpu::available(); }

Method model_choice(i64 bytes, i64 block, bool same_node) {
  static const model::Model m = model::Model::from_environment();
  const auto d = m.choose(bytes, block, same_node ? model::Locality::other_gpu : model::Locality::other_node, false);
  return d.method == model::Method::pipelined ? Method::pipelined : Method::staged;
}

void enqueue_start(DeviceBackendState&, DeviceBackendState::Dev& d) {
  for (std::uint32_t* f : d.send_freed) {  // take each receiver's "buffer free" token
    gpu::wait_value32(d.run, f, 1, gpu::Until::eq);
    gpu::write_value32(d.run, f, 0);
  }
  for (gpu::Batch& b : d.pack) b.launch(d.run);
  for (std::uint32_t* f : d.send_ready) gpu::write_value32(d.run, f, 1);  // "data ready"
}

void enqueue_finish(DeviceBackendState&, DeviceBackendState::Dev& d) {
  for (std::uint32_t* f : d.recv_ready) {
    gpu::wait_value32(d.run, f, 1, gpu::Until::eq);
    gpu::write_value32(d.run, f, 0);
  }
  for (gpu::Batch& b : d.unpack) b.launch(d.run);
  for (std::uint32_t* f : d.recv_freed) gpu::write_value32(d.run, f, 1);  // give the token back
}

namespace {

using Dev = DeviceBackendState::Dev;
using End = DeviceBackendState::End;

class DeviceBackend final : public Backend {
 public:
  explicit DeviceBackend(Plan::Impl& p) : p_(p) {
    try {
      setup_devices(p, s_);
    } catch (...) {
      release_devices(s_);
      throw;
    }
  }
  ~DeviceBackend() override { release_devices(s_); }
  void start(gpu::Stream user) override;
  bool test() override { return progress(); }
  void finish(gpu::Stream user) override;
  void swapped() override;
  void wait() override {
    for (Dev& d : s_.devs) gpu::sync_stream(d.run);
  }

 private:
  bool progress();
  bool devices_idle(const End& e, bool packed) const;
  Plan::Impl& p_;
  DeviceBackendState s_;
};

bool DeviceBackend::devices_idle(const End& e, bool packed) const {
  for (int k : e.devs)
    if (!gpu::event_idle(packed ? s_.devs[k].packed : s_.devs[k].done)) return false;
  return true;
}

void DeviceBackend::start(gpu::Stream user) {
  for (End& e : s_.in) {
    e.done = e.msg->method == Method::ipc;
    std::fill(e.posted.begin(), e.posted.end(), 0);
  }
  for (End& e : s_.out) {
    e.done = e.msg->method == Method::ipc;
    std::fill(e.posted.begin(), e.posted.end(), 0);
  }
  // Receives into host buffers the previous unpack has finished reading: posted now (the rest in
  // progress()), so most messages find their receive waiting.
  for (End& e : s_.in)
    if (!e.done && devices_idle(e, false)) {
      MPI_Startall(static_cast<int>(e.reqs.size()), e.reqs.data());
      e.posted.assign(e.posted.size(), 2);  // 2: posted, not arrived
    }
  // The user's stream belongs to the current device: its event comes from that GPU's state.
  Dev* here = &s_.devs.front();
  for (Dev& d : s_.devs)
    if (d.device == gpu::current_device()) here = &d;
  if (!s_.direct) gpu::record(here->user, user);
  for (Dev& d : s_.devs) {
    gpu::DeviceScope scope(d.device);
    d.run = s_.direct ? user : d.stream;
    if (!s_.direct) gpu::stream_wait_event(d.run, here->user);
    if (d.needs_upload) {  // swap(): new pointers, in stream order before the launches
      for (auto* v : {&d.pack, &d.unpack})
        for (gpu::Batch& b : *v) b.upload(d.run);
      d.needs_upload = false;
    }
    // A peer copy must not overwrite the destination's buffer before its last unpack read it.
    for (auto& pc : s_.peers)
      if (pc.src == static_cast<int>(&d - s_.devs.data())) gpu::stream_wait_event(d.run, s_.devs[pc.dst].done);
    if (s_.graphs) gpu::launch(d.start_graph, d.run);
    else enqueue_start(s_, d);
    if (s_.need_packed) gpu::record(d.packed, d.run);
  }
  for (auto& pc : s_.peers) {
    Dev& src = s_.devs[pc.src];
    gpu::DeviceScope scope(src.device);
    gpu::copy_peer_async(pc.dst_buf, s_.devs[pc.dst].device, pc.src_buf, src.device, pc.bytes, src.run);
    gpu::record(pc.copied, src.run);
  }
  // Pipelined sends: the packed buffer goes to pinned memory part by part, each with an event.
  for (End& e : s_.out) {
    if (e.msg->method != Method::pipelined) continue;
    Dev& home = s_.devs[e.home];
    gpu::DeviceScope scope(home.device);
    for (int k : e.devs)
      if (k != e.home) gpu::stream_wait_event(home.run, s_.devs[k].packed);
    for (std::size_t i = 0; i < e.msg->parts.size(); ++i) {
      const Part& part = e.msg->parts[i];
      gpu::copy_d2h_async(e.host + part.offset, e.dev + part.offset, part.bytes, home.run);
      gpu::record(e.part_events[i], home.run);
    }
  }
  progress();
}

bool DeviceBackend::progress() {
  bool all = true;
  for (End& e : s_.out) {
    if (e.done) continue;
    const bool pipelined = e.msg->method == Method::pipelined;
    bool posted_all = true;
    for (std::size_t i = 0; i < e.posted.size(); ++i) {
      if (e.posted[i]) continue;
      if (pipelined ? !gpu::event_idle(e.part_events[i]) : !devices_idle(e, true)) {
        posted_all = false;
        if (!pipelined) break;
        continue;
      }
      MPI_Start(&e.reqs[i]);
      e.posted[i] = 1;
    }
    if (posted_all) {
      int flag = 0;
      MPI_Testall(static_cast<int>(e.reqs.size()), e.reqs.data(), &flag, MPI_STATUSES_IGNORE);
      e.done = flag != 0;
    }
    all &= e.done;
  }
  for (End& e : s_.in) {
    if (e.done) continue;
    if (!e.posted.empty() && e.posted[0] == 0) {  // not posted yet: the last unpack still reads
      if (!devices_idle(e, false)) {
        all = false;
        continue;
      }
      MPI_Startall(static_cast<int>(e.reqs.size()), e.reqs.data());
      e.posted.assign(e.posted.size(), 2);
    }
    bool complete = true;
    for (std::size_t i = 0; i < e.reqs.size(); ++i) {
      if (e.posted[i] == 1) continue;
      int flag = 0;
      MPI_Test(&e.reqs[i], &flag, MPI_STATUS_IGNORE);
      if (!flag) {
        complete = false;
        continue;
      }
      e.posted[i] = 1;
      if (e.msg->method == Method::pipelined) {  // to the GPU while the other parts travel
        Dev& home = s_.devs[e.home];
        gpu::DeviceScope scope(home.device);
        const Part& part = e.msg->parts[i];
        gpu::copy_h2d_async(e.dev + part.offset, e.host + part.offset, part.bytes, home.run);
        gpu::record(e.part_events[i], home.run);
      }
    }
    e.done = complete;
    all &= complete;
  }
  return all;
}

void DeviceBackend::finish(gpu::Stream user) {
  Waiter w("the halo exchange's messages from other nodes");
  while (!progress()) w.pause();
  for (std::size_t k = 0; k < s_.devs.size(); ++k) {
    Dev& d = s_.devs[k];
    gpu::DeviceScope scope(d.device);
    for (End& e : s_.in)  // parts copied to the GPU on another GPU's stream
      if (e.msg->method == Method::pipelined && e.home != static_cast<int>(k))
        for (gpu::Event ev : e.part_events) gpu::stream_wait_event(d.run, ev);
    for (auto& pc : s_.peers)
      if (pc.dst == static_cast<int>(k)) gpu::stream_wait_event(d.run, pc.copied);
    if (!d.unpack.empty() || !d.recv_ready.empty()) {  // else nothing of this GPU's is left
      if (s_.graphs) gpu::launch(d.finish_graph, d.run);
      else enqueue_finish(s_, d);
    }
    gpu::record(d.done, d.run);
    if (!s_.direct) gpu::stream_wait_event(user, d.done);
  }
}

void DeviceBackend::swapped() {
  for (Dev& d : s_.devs) {
    for (auto* v : {&d.pack, &d.unpack})
      for (gpu::Batch& b : *v)
        for (std::size_t sub = 0; sub < p_.fields.size(); ++sub)
          for (std::size_t f = 0; f < p_.fields[sub].size(); ++f)
            b.set_slot(static_cast<std::size_t>(slot_of(p_, static_cast<int>(sub), static_cast<int>(f))),
                       p_.data(static_cast<int>(sub), static_cast<int>(f)));
    d.needs_upload = true;
  }
}

}  // namespace

std::unique_ptr<Backend> make_device_backend(Plan::Impl& plan) { return std::make_unique<DeviceBackend>(plan); }

}  // namespace ferry::halo::detail
