// The transport's per-message decisions on the CPU build: the method choice from its inputs alone
// (select(), every kind of peer, memory and MPI call, a CUDA-aware MPI's pass-through included, as a
// mock: the lent machines' MPI is not CUDA-aware), FERRY_PASSTHROUGH against what the MPI says, the
// pipelined chunk (MPI-ACC's rule on the model's curves), the route of host buffers (MPI_BOTTOM with
// absolute addresses included), and the type descriptions the stub protocol sends once per receiver.
#include <ferry/error.hpp>
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>
#include <ferry/transport.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "transport/wire.hpp"

namespace {

using namespace ferry::transport;
using ferry::i64;
using ferry::model::Locality;
namespace model = ferry::model;

// A device send of `bytes` to another process of the node, the built-in model deciding.
Choice device_send(i64 bytes, Locality l = Locality::same_gpu) {
  Choice c;
  c.device = true;
  c.ipc_memory = true;
  c.bytes = bytes;
  c.count = bytes / 8;
  c.block = 8;
  c.locality = l;
  return c;
}

model::DecisionCache& builtin() {
  static model::DecisionCache d(std::make_shared<const model::Model>(model::Model::builtin()));
  return d;
}

// ---------------------------------------------------------------------------- select()

TEST(Select, HostRoutesStayHostOutsideTheProtocolTest) {
  Choice c;
  c.bytes = 8 << 20;
  c.count = 1 << 20;
  EXPECT_EQ(select(c, &builtin()), Method::host);
  c.protocol_test = true;  // large host sends take the pipelined protocol, so CI runs it
  EXPECT_EQ(select(c, &builtin()), Method::pipelined);
  c.bytes = 4096;  // below the pipelined floor
  EXPECT_EQ(select(c, &builtin()), Method::host);
  c.bytes = 8 << 20;
  c.allow.pipelined = false;  // persistent sends are never pipelined
  EXPECT_EQ(select(c, &builtin()), Method::host);
}

TEST(Select, CudaAwareMpiTakesGpuMemoryAsItIs) {
  Choice c = device_send(8);
  c.passthrough = true;
  EXPECT_EQ(select(c, &builtin()), Method::passthrough);
  c.bytes = 64 << 20;  // whatever the size or the locality
  c.locality = Locality::other_node;
  EXPECT_EQ(select(c, &builtin()), Method::passthrough);
  c.passthrough = false;
  c.protocol = false;  // no stub protocol: staged
  EXPECT_EQ(select(c, &builtin()), Method::staged);
}

TEST(Select, BuiltinModelTakesIpcOnTheNodeFromTheStubFloor) {
  for (Locality l : {Locality::same_gpu, Locality::other_gpu}) {
    EXPECT_EQ(select(device_send(8, l), &builtin()), Method::staged) << "below the floor";
    EXPECT_EQ(select(device_send(kStubMinBytes - 8, l), &builtin()), Method::staged);
    for (i64 b : {kStubMinBytes, i64{32} << 10, i64{1} << 20, i64{64} << 20})
      EXPECT_EQ(select(device_send(b, l), &builtin()), Method::ipc) << b << " bytes";
  }
  Choice c = device_send(1 << 20, Locality::other_node);
  EXPECT_EQ(select(c, &builtin()), Method::staged);
  c.bytes = 64 << 20;
  c.count = c.bytes / 8;
  EXPECT_EQ(select(c, &builtin()), Method::pipelined) << "large messages across nodes";
}

TEST(Select, IpcNeedsMemoryAPeerCanMapAndARendezvous) {
  Choice c = device_send(1 << 20);
  c.ipc_memory = false;  // managed memory, or an allocation without a handle
  EXPECT_EQ(select(c, &builtin()), Method::staged);
  c = device_send(1 << 20);
  c.allow.rendezvous = false;  // MPI_Bsend must complete locally
  EXPECT_EQ(select(c, &builtin()), Method::staged);
}

TEST(Select, SendsToThisProcessGoLocalWhereTheCallMayWait) {
  Choice c = device_send(1 << 20);
  c.self = true;
  EXPECT_EQ(select(c, &builtin()), Method::local);
  c.allow.local = false;  // a blocking standard send may complete before its receive is posted
  EXPECT_EQ(select(c, &builtin()), Method::staged);
  c.allow.local = true;
  c.bytes = 64;  // below the stub floor: receives this small do not look for stubs
  EXPECT_EQ(select(c, &builtin()), Method::staged);
}

TEST(Select, KnobsOverrideTheModel) {
  Choice c = device_send(64);
  c.forced = model::Method::ipc;  // measurements force IPC below the floor too
  EXPECT_EQ(select(c, &builtin()), Method::ipc);
  c = device_send(8 << 20, Locality::same_gpu);
  c.forced = model::Method::pipelined;
  EXPECT_EQ(select(c, &builtin()), Method::pipelined);
  c.forced = model::Method::staged;
  EXPECT_EQ(select(c, &builtin()), Method::staged);
  // FERRY_IPC_MIN above the message, FERRY_PIPELINE_MIN below it.
  c = device_send(8 << 20);
  c.ipc_min = i64{1} << 40;
  c.pipeline_min = 1 << 20;
  EXPECT_EQ(select(c, &builtin()), Method::pipelined);
  c.ipc_min = 1 << 20;
  EXPECT_EQ(select(c, &builtin()), Method::ipc);
  c.ipc_min = 8192;  // the threshold never goes below the floor
  c.bytes = 4095;
  c.count = 511;
  EXPECT_EQ(select(c, &builtin()), Method::staged);
  // No model: staged where no threshold decides.
  EXPECT_EQ(select(device_send(1 << 20), nullptr), Method::staged);
}

// ---------------------------------------------------------------------------- pass-through

TEST(Passthrough, KnobAgainstWhatTheMpiSays) {
  EXPECT_TRUE(use_passthrough("auto", CudaAware::yes));
  EXPECT_FALSE(use_passthrough("auto", CudaAware::no));
  EXPECT_FALSE(use_passthrough("auto", CudaAware::unknown));
  EXPECT_TRUE(use_passthrough("on", CudaAware::no));
  EXPECT_TRUE(use_passthrough("on", CudaAware::unknown));
  EXPECT_FALSE(use_passthrough("off", CudaAware::yes));
}

TEST(Passthrough, ThisMpiIsNotCudaAwareHere) {
  // CI's Open MPI and MPICH are built without CUDA: the query says no, or the MPI has none.
  EXPECT_NE(mpi_cuda_aware(), CudaAware::yes);
}

// ---------------------------------------------------------------------------- pipelined chunk

double pipeline_time(const model::Model& m, i64 bytes, i64 block, Locality l, i64 c) {
  const double p = m.predict_pack(model::Pack::one_shot, c, std::min(block, c));
  const double u = m.predict_pack(model::Pack::one_shot, c, std::min(block, c), model::Direction::unpack);
  const double x = m.predict_mpi(l, c);
  const double n = std::ceil(static_cast<double>(bytes) / static_cast<double>(c));
  return p + x + u + (n - 1) * std::max({p, x, u});
}

TEST(PipelineChunk, WhereTheStagesBalance) {
  const model::Model m = model::Model::builtin();
  for (i64 bytes : {i64{4} << 20, i64{16} << 20, i64{256} << 20}) {
    for (i64 block : {i64{8}, i64{1024}, i64{1} << 20}) {
      const i64 c = pipeline_chunk(m, bytes, block, Locality::other_node);
      ASSERT_GE(c, 64 << 10);
      ASSERT_LE(c, bytes / 2);
      ASSERT_EQ(c & (c - 1), 0) << "a power of two";
      const double best = pipeline_time(m, bytes, block, Locality::other_node, c);
      for (i64 other = 64 << 10; other <= bytes / 2; other *= 2)
        EXPECT_LE(best, pipeline_time(m, bytes, block, Locality::other_node, other) + 1e-9)
            << bytes << " bytes, block " << block << ": " << c << " against " << other;
      // Never one chunk: the point is to overlap.
      EXPECT_LT(best, pipeline_time(m, bytes, block, Locality::other_node, bytes) + 1e-9);
    }
  }
  EXPECT_EQ(pipeline_chunk(m, 64 << 20, 8, Locality::other_node, 12345), 12345) << "the knob wins";
}

// ---------------------------------------------------------------------------- routes

TEST(Route, HostBuffersOfEveryKind) {
  std::vector<double> v(100);
  Route r = route(v.data(), 10, MPI_DOUBLE);
  EXPECT_FALSE(r.device());
  EXPECT_EQ(r.bytes, 80);
  EXPECT_EQ(r.method, Method::host);
  EXPECT_EQ(r.first(), reinterpret_cast<const char*>(v.data()));
  // A vector type: its lowest byte is the buffer's; its packed size its elements'.
  MPI_Datatype vec;
  MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &vec);
  MPI_Type_commit(&vec);
  ferry::commit(vec);
  r = route(v.data(), 2, vec);
  EXPECT_EQ(r.bytes, 2 * 4 * 8);
  ASSERT_TRUE(r.type);
  ferry::release(vec);
  MPI_Type_free(&vec);
}

TEST(Route, MpiBottomWithAbsoluteAddresses) {
  std::vector<double> a(16, 1.0);
  std::vector<int> b(8, 2);
  MPI_Aint da = 0, db = 0;
  MPI_Get_address(a.data() + 2, &da);
  MPI_Get_address(b.data() + 1, &db);
  int lens[2] = {3, 4};
  MPI_Aint disps[2] = {da, db};
  MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT};
  MPI_Datatype s;
  MPI_Type_create_struct(2, lens, disps, types, &s);
  MPI_Type_commit(&s);
  ferry::commit(s);
  const Route r = route(MPI_BOTTOM, 1, s);
  EXPECT_FALSE(r.device());
  EXPECT_EQ(r.bytes, 3 * 8 + 4 * 4);
  EXPECT_EQ(r.first(), reinterpret_cast<const char*>(std::min(da, db)));
  // What the route's type packs from MPI_BOTTOM: the blocks in the struct's order. (Not the MPI's
  // MPI_Pack as the oracle: MPICH 4.0 refuses MPI_BOTTOM there as a null input buffer.)
  for (int i = 0; i < 16; ++i) a[static_cast<std::size_t>(i)] = 0.5 + i;
  for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(i)] = 100 + i;
  std::vector<char> ours(static_cast<std::size_t>(r.bytes)), want;
  i64 pos = 0;
  ferry::pack(MPI_BOTTOM, 1, *r.type, ours.data(), r.bytes, &pos);
  EXPECT_EQ(pos, r.bytes);
  const char* pa = reinterpret_cast<const char*>(a.data() + 2);
  const char* pb = reinterpret_cast<const char*>(b.data() + 1);
  want.insert(want.end(), pa, pa + 3 * sizeof(double));
  want.insert(want.end(), pb, pb + 4 * sizeof(int));
  EXPECT_EQ(ours, want);
  ferry::release(s);
  MPI_Type_free(&s);
}

// ---------------------------------------------------------------------------- type descriptions

TEST(Describe, WrittenAndReadBackPacksAlike) {
  MPI_Datatype sub, inner, resized;
  const int sizes[3] = {7, 6, 5}, subsizes[3] = {3, 2, 4}, starts[3] = {1, 2, 0};
  MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_FLOAT, &sub);
  MPI_Type_vector(3, 2, 5, MPI_INT, &inner);
  MPI_Type_create_resized(inner, -8, 80, &resized);
  for (MPI_Datatype t : {sub, resized}) {
    MPI_Type_commit(&t);
    ferry::commit(t);
    auto type = ferry::lookup(t);
    const std::vector<char> text = wire::Describe::write(*type);
    const ferry::Type back = wire::Describe::read(text);
    EXPECT_EQ(back.size(), type->size());
    EXPECT_EQ(back.extent(), type->extent());
    EXPECT_EQ(back.true_lb(), type->true_lb());
    std::vector<unsigned char> src(4096);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
    const i64 bytes = 3 * type->size();
    std::vector<char> a(static_cast<std::size_t>(bytes)), b(a.size());
    i64 pa = 0, pb = 0;
    ferry::pack(src.data() + 1024, 3, *type, a.data(), bytes, &pa);
    ferry::pack(src.data() + 1024, 3, back, b.data(), bytes, &pb);
    EXPECT_EQ(a, b);
    EXPECT_EQ(wire::Describe::key_of(text), wire::Describe::key_of(wire::Describe::write(back)));
    ferry::release(t);
  }
  MPI_Type_free(&sub);
  MPI_Type_free(&inner);
  MPI_Type_free(&resized);
}

TEST(Describe, MalformedTextIsRefused) {
  std::vector<char> junk(40, '\x7f');
  EXPECT_THROW(wire::Describe::read(junk), ferry::Error);
  EXPECT_THROW(wire::Describe::read({}), ferry::Error);
}

}  // namespace
