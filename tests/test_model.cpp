// The performance model: interpolation, the model file (round trip, malformed and missing files),
// the choice of method and the decision cache.
#include <ferry/error.hpp>
#include <ferry/model.hpp>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace ferry::model;
using ferry::i64;

std::string temp_path(const char* name) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return "/tmp/ferry_test_model_" + std::to_string(getpid()) + "_" + std::to_string(rank) + "_" + name;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Model, CurveInterpolatesLogLog) {
  Curve c{{8, 64, 1024}, {2.0, 4.0, 64.0}};
  EXPECT_DOUBLE_EQ(c.at(8), 2.0);
  EXPECT_DOUBLE_EQ(c.at(64), 4.0);
  EXPECT_DOUBLE_EQ(c.at(1024), 64.0);
  // log-log: halfway between 8 and 64 in log2 (size ~22.6) is halfway between 1 and 2 in log2 time
  EXPECT_NEAR(c.at(23), std::exp2(1.0 + (std::log2(23.0) - 3.0) / 3.0), 1e-9);
  EXPECT_DOUBLE_EQ(c.at(1), 2.0);            // below: the smallest size's time
  EXPECT_DOUBLE_EQ(c.at(4096), 64.0 * 4.0);  // above: the largest size's bandwidth
  EXPECT_TRUE(std::isinf(Curve{}.at(10)));
}

TEST(Model, SurfaceInterpolatesInBothAxes) {
  Surface s{{1024, 4096}, {4, 64}, {{1.0, 4.0}, {4.0, 16.0}}};
  EXPECT_DOUBLE_EQ(s.at(1024, 4), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4096, 64), 16.0);
  EXPECT_NEAR(s.at(2048, 4), 2.0, 1e-12);    // halfway in log2 size
  EXPECT_NEAR(s.at(1024, 16), 2.0, 1e-12);   // halfway in log2 block
  EXPECT_NEAR(s.at(2048, 16), 4.0, 1e-12);   // both
  EXPECT_DOUBLE_EQ(s.at(100, 1), 1.0);       // clamped below
  EXPECT_DOUBLE_EQ(s.at(8192, 64), 32.0);    // time scales with size past the grid
}

TEST(Model, BuiltinChoosesByThresholds) {
  const Model m = Model::builtin();
  EXPECT_EQ(m.choose(8, 8, Locality::other_gpu).method, Method::staged);
  EXPECT_EQ(m.choose(4095, 4095, Locality::same_gpu).method, Method::staged) << "below IPC's floor";
  // IPC costs one host-waited GPU operation, staging two: IPC from its floor on (issue 13).
  EXPECT_EQ(m.choose(4096, 4096, Locality::other_gpu).method, Method::ipc);
  EXPECT_EQ(m.choose(4096, 4096, Locality::same_gpu).method, Method::ipc);
  EXPECT_EQ(m.choose(32 << 10, 8, Locality::same_gpu).method, Method::ipc);
  EXPECT_EQ(m.choose(4096, 4096, Locality::other_node).method, Method::staged);
  EXPECT_EQ(m.choose(1 << 20, 1 << 20, Locality::other_gpu).method, Method::ipc);
  EXPECT_EQ(m.choose(64 << 20, 64 << 20, Locality::other_gpu).method, Method::ipc);
  EXPECT_EQ(m.choose(1 << 20, 1 << 20, Locality::other_gpu, false).method, Method::staged);
  EXPECT_EQ(m.choose(64 << 20, 8, Locality::other_node).method, Method::pipelined);
  EXPECT_EQ(m.choose(64 << 10, 8, Locality::other_node).method, Method::staged);
  // The floors hold whatever the curves say.
  Model cheap_ipc;
  cheap_ipc.set_curve(Method::staged, Locality::other_gpu, Curve{{1, 1 << 30}, {100.0, 1e6}});
  cheap_ipc.set_curve(Method::ipc, Locality::other_gpu, Curve{{1, 1 << 30}, {1.0, 10.0}});
  cheap_ipc.set_curve(Method::pipelined, Locality::other_gpu, Curve{{1, 1 << 30}, {0.5, 5.0}});
  EXPECT_EQ(cheap_ipc.choose(1024, 1024, Locality::other_gpu).method, Method::staged);
  EXPECT_EQ(cheap_ipc.choose(8192, 8192, Locality::other_gpu).method, Method::ipc);
  EXPECT_EQ(cheap_ipc.choose(2 << 20, 8, Locality::other_gpu).method, Method::pipelined);
}

TEST(Model, PackMethodFromSurfaces) {
  Model m = Model::builtin();
  // The built-in surfaces (an H200): one-shot, except for large objects of 1-byte blocks.
  EXPECT_EQ(m.choose(1 << 20, 8, Locality::other_gpu).pack, Pack::one_shot);
  EXPECT_EQ(m.choose(8 << 20, 1, Locality::other_gpu).pack, Pack::device);
  EXPECT_EQ(m.choose(8 << 20, 4096, Locality::other_gpu).pack, Pack::one_shot);
  EXPECT_EQ(m.choose(8 << 20, 8 << 20, Locality::other_gpu).pack, Pack::one_shot);  // dense
  m.set_surface(Pack::device, Surface{{1024, 1 << 20}, {8, 512}, {{5, 5}, {30, 20}}});
  m.set_surface(Pack::one_shot, Surface{{1024, 1 << 20}, {8, 512}, {{3, 3}, {50, 15}}});
  EXPECT_EQ(m.choose(1 << 20, 8, Locality::other_gpu).pack, Pack::device);     // 30 < 50
  EXPECT_EQ(m.choose(1 << 20, 512, Locality::other_gpu).pack, Pack::one_shot); // 15 < 20
  EXPECT_EQ(m.choose(1024, 8, Locality::other_gpu).pack, Pack::one_shot);      // 3 < 5
  // The built-in unpack surfaces (the same H200): one-shot up to about 1 MiB, then via device.
  const Model b = Model::builtin();
  EXPECT_EQ(b.choose(64 << 10, 8, Locality::other_gpu).unpack, Pack::one_shot);
  EXPECT_EQ(b.choose(8 << 20, 8, Locality::other_gpu).unpack, Pack::device);
  EXPECT_EQ(b.choose(8 << 20, 8, Locality::other_gpu).pack, Pack::one_shot);
  // Without unpack surfaces, a receive decides by the pack surfaces...
  Model bare;
  bare.set_surface(Pack::device, Surface{{1024, 1 << 20}, {8, 512}, {{5, 5}, {30, 20}}});
  bare.set_surface(Pack::one_shot, Surface{{1024, 1 << 20}, {8, 512}, {{3, 3}, {50, 15}}});
  EXPECT_EQ(bare.choose(1 << 20, 8, Locality::other_gpu).unpack, Pack::device);
  EXPECT_DOUBLE_EQ(bare.predict_pack(Pack::device, 1 << 20, 8, Direction::unpack), 30.0);
  // ...and by its own once it has them, independently of the send's.
  m.set_surface(Pack::device, Surface{{1024, 1 << 20}, {8, 512}, {{5, 5}, {60, 20}}}, Direction::unpack);
  m.set_surface(Pack::one_shot, Surface{{1024, 1 << 20}, {8, 512}, {{3, 3}, {40, 25}}}, Direction::unpack);
  EXPECT_EQ(m.choose(1 << 20, 8, Locality::other_gpu).pack, Pack::device);       // 30 < 50
  EXPECT_EQ(m.choose(1 << 20, 8, Locality::other_gpu).unpack, Pack::one_shot);   // 40 < 60
  EXPECT_EQ(m.choose(1 << 20, 512, Locality::other_gpu).unpack, Pack::device);   // 20 < 25
  EXPECT_EQ(m.choose(1 << 20, 1 << 20, Locality::other_gpu).unpack, Pack::one_shot);  // dense
}

TEST(Model, FileRoundTrip) {
  Model m = Model::builtin();
  m.info["host"] = "test-host";
  m.set_surface(Pack::device, Surface{{1024, 1 << 20}, {8, 512}, {{5, 5}, {30, 20}}});
  m.set_surface(Pack::one_shot, Surface{{8192}, {8}, {{7.0}}}, Direction::unpack);
  const std::string path = temp_path("roundtrip.json");
  m.save(path);
  const Model back = Model::load(path);
  std::remove(path.c_str());
  EXPECT_EQ(back.info.at("host"), "test-host");
  for (Method me : {Method::staged, Method::pipelined, Method::ipc})
    for (Locality l : {Locality::same_gpu, Locality::other_gpu, Locality::other_node})
      for (i64 b : {1LL, 100LL, 65536LL, 3000000LL, 1LL << 31}) {
        const double want = m.predict(me, l, b), got = back.predict(me, l, b);
        if (std::isinf(want)) {
          EXPECT_TRUE(std::isinf(got));
        } else {
          EXPECT_NEAR(got, want, 1e-9 * want) << name(me) << " " << name(l) << " " << b;
        }
      }
  EXPECT_DOUBLE_EQ(back.predict_pack(Pack::device, 4096, 64), m.predict_pack(Pack::device, 4096, 64));
  EXPECT_DOUBLE_EQ(back.predict_pack(Pack::one_shot, 8192, 8, Direction::unpack), 7.0);
  EXPECT_EQ(back.to_json(), m.to_json());
  for (Locality l : {Locality::same_gpu, Locality::other_gpu, Locality::other_node})
    EXPECT_DOUBLE_EQ(back.predict_mpi(l, 12345), m.predict_mpi(l, 12345)) << name(l);
}

// The MPI's own curve: measured where the file has one (the node's other locality standing in),
// else derived from the staged curve less dense packing and unpacking, never below a quarter of it.
TEST(Model, MpiCurve) {
  Model m;
  m.set_curve(Method::staged, Locality::other_node, Curve{{1, 1 << 20}, {10.0, 100.0}});
  m.set_surface(Pack::one_shot, Surface{{1, 1 << 20}, {1, 1 << 20}, {{2.0, 2.0}, {30.0, 30.0}}});
  m.set_surface(Pack::one_shot, Surface{{1, 1 << 20}, {1, 1 << 20}, {{3.0, 3.0}, {20.0, 20.0}}},
                Direction::unpack);
  EXPECT_DOUBLE_EQ(m.predict_mpi(Locality::other_node, 1 << 20), 50.0);  // 100 - 30 - 20
  EXPECT_DOUBLE_EQ(m.predict_mpi(Locality::other_node, 1), 5.0);         // 10 - 2 - 3
  m.set_surface(Pack::one_shot, Surface{{1}, {1}, {{9.0}}}, Direction::unpack);
  EXPECT_DOUBLE_EQ(m.predict_mpi(Locality::other_node, 1), 2.5) << "a quarter of staged at least";
  m.set_mpi_curve(Locality::same_gpu, Curve{{8, 4096}, {0.5, 2.0}});
  EXPECT_DOUBLE_EQ(m.predict_mpi(Locality::same_gpu, 8), 0.5);
  EXPECT_DOUBLE_EQ(m.predict_mpi(Locality::other_gpu, 4096), 2.0) << "the node's other locality";
  EXPECT_EQ(m.mpi_curve(Locality::other_gpu), nullptr);
  const Model back = Model::from_json(m.to_json());
  EXPECT_DOUBLE_EQ(back.predict_mpi(Locality::same_gpu, 4096), 2.0);
  EXPECT_THROW(Model::from_json(R"({"format": "ferry-model", "version": 2, "methods": {"staged": )"
                                R"({"other_node": {"bytes": [1], "us": [1.0]}}}, "mpi": {"moon": )"
                                R"({"bytes": [1], "us": [1.0]}}})"),
               ferry::Error);
}

// Each malformed text is refused with MPI_ERR_OTHER and a reason naming the problem.
TEST(Model, MalformedFilesAreRefused) {
  const std::string good_curve = R"("bytes": [1, 1024], "us": [2.0, 3.0])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not JSON"},
      {R"({"format": "something-else", "version": 1, "methods": {}})", "not a ferry-model"},
      {R"({"format": "ferry-model", "version": 99, "methods": {}})", "version 99"},
      {R"({"format": "ferry-model", "version": 1})", "no methods"},
      {R"({"format": "ferry-model", "version": 1, "methods": {"teleport": {"same_node": {)" +
           good_curve + "}}}}",
       "unknown method"},
      {R"({"format": "ferry-model", "version": 1, "methods": {"staged": {"moon": {)" + good_curve +
           "}}}}",
       "unknown locality"},
      {R"({"format": "ferry-model", "version": 1, "methods": {"staged": {"same_node":
           {"bytes": [8, 4], "us": [1, 2]}}}})",
       "increase"},
      {R"({"format": "ferry-model", "version": 1, "methods": {"staged": {"same_node":
           {"bytes": [4, 8], "us": [1, -2]}}}})",
       "positive"},
      {R"({"format": "ferry-model", "version": 1, "methods": {"staged": {"same_node":
           {"bytes": [4, 8], "us": [1]}}}})",
       "length"},
      {R"({"format": "ferry-model", "version": 1, "methods": {"staged": {"same_node":
           {"bytes": "many", "us": [1]}}}})",
       "malformed"},
      {R"({"format": "ferry-model", "version": 1, "methods": {"ipc": {"same_node": {)" + good_curve +
           "}}}}",
       "staged"},
      {R"({"format": "ferry-model", "version": 2, "methods": {"staged": {"other_gpu": {)" + good_curve +
           R"(}}}, "unpack": {"sideways": {"bytes": [1], "block": [1], "us": [[1.0]]}}})",
       "unknown unpack method"},
      {R"({"format": "ferry-model", "version": 2, "methods": {"staged": {"other_gpu": {)" + good_curve +
           R"(}}}, "unpack": [1, 2]})",
       "'unpack' is not an object"},
      // Each version's own names: "same_node" only in version 1, the GPUs only from version 2.
      {R"({"format": "ferry-model", "version": 2, "methods": {"staged": {"same_node": {)" + good_curve +
           "}}}}",
       "unknown locality"},
      {R"({"format": "ferry-model", "version": 1, "methods": {"staged": {"same_gpu": {)" + good_curve +
           "}}}}",
       "unknown locality"},
  };
  for (const auto& [text, why] : cases) {
    try {
      Model::from_json(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ferry::Error& e) {
      EXPECT_EQ(e.mpi_error_class(), MPI_ERR_OTHER);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

// A version 1 file has one "same_node" curve per method: it serves both GPUs of the node.
TEST(Model, VersionOneFilesServeBothGpusOfTheNode) {
  const Model m = Model::from_json(
      R"({"format": "ferry-model", "version": 1, "methods": {
            "staged": {"same_node": {"bytes": [1, 1024], "us": [10.0, 20.0]},
                       "other_node": {"bytes": [1, 1024], "us": [30.0, 40.0]}},
            "ipc": {"same_node": {"bytes": [1, 1024], "us": [1.0, 2.0]}}}})");
  for (Locality l : {Locality::same_gpu, Locality::other_gpu}) {
    EXPECT_DOUBLE_EQ(m.predict(Method::staged, l, 1024), 20.0) << name(l);
    EXPECT_DOUBLE_EQ(m.predict(Method::ipc, l, 1), 1.0) << name(l);
    EXPECT_EQ(m.choose(8192, 8192, l).method, Method::ipc) << name(l);
  }
  EXPECT_DOUBLE_EQ(m.predict(Method::staged, Locality::other_node, 1024), 40.0);
  EXPECT_EQ(m.choose(8192, 8192, Locality::other_node).method, Method::staged);  // no IPC off-node
  EXPECT_NE(m.to_json().find("\"version\": 2"), std::string::npos);  // written back as version 2
  // A version 1 file's pack surfaces also decide receives (it has no unpack surfaces).
  const Model p = Model::from_json(
      R"({"format": "ferry-model", "version": 1, "methods": {
            "staged": {"same_node": {"bytes": [1, 1024], "us": [10.0, 20.0]}}},
          "pack": {"device": {"bytes": [1024, 1048576], "block": [8], "us": [[5.0], [30.0]]},
                   "one_shot": {"bytes": [1024, 1048576], "block": [8], "us": [[3.0], [50.0]]}}})");
  EXPECT_EQ(p.choose(1 << 20, 8, Locality::other_gpu).pack, Pack::device);
  EXPECT_EQ(p.choose(1 << 20, 8, Locality::other_gpu).unpack, Pack::device);
  EXPECT_EQ(p.choose(1024, 8, Locality::other_gpu).unpack, Pack::one_shot);
}

// One GPU measures same_gpu only; the other GPU of the node then uses its curves, and the reverse.
// Where both are measured, each locality decides by its own: IPC on one GPU (a device copy) can
// win where IPC to another GPU does not.
TEST(Model, LocalitiesOfTheNode) {
  Model m;
  m.set_curve(Method::staged, Locality::same_gpu, Curve{{1, 1 << 20}, {10.0, 100.0}});
  m.set_curve(Method::ipc, Locality::same_gpu, Curve{{1, 1 << 20}, {20.0, 30.0}});
  EXPECT_DOUBLE_EQ(m.predict(Method::ipc, Locality::other_gpu, 1), 20.0);
  EXPECT_TRUE(std::isinf(m.predict(Method::ipc, Locality::other_node, 1)));
  EXPECT_EQ(m.choose(1 << 20, 1 << 20, Locality::other_gpu).method, Method::ipc);
  m.set_curve(Method::ipc, Locality::other_gpu, Curve{{1, 1 << 20}, {20.0, 300.0}});
  EXPECT_EQ(m.choose(1 << 20, 1 << 20, Locality::same_gpu).method, Method::ipc);
  EXPECT_EQ(m.choose(1 << 20, 1 << 20, Locality::other_gpu).method, Method::staged);
  EXPECT_EQ(m.curve(Method::staged, Locality::other_gpu), nullptr);  // only its own curve
  // The built-in model: IPC on one GPU moves at device-copy speed.
  const Model b = Model::builtin();
  EXPECT_LT(b.predict(Method::ipc, Locality::same_gpu, 64 << 20), b.predict(Method::ipc, Locality::other_gpu, 64 << 20));
  for (Locality l : {Locality::same_gpu, Locality::other_gpu, Locality::other_node})
    EXPECT_EQ(locality_named(name(l)), l);
  EXPECT_FALSE(locality_named("same_node").has_value());
}

TEST(Model, EnvironmentFallsBackToBuiltin) {
  std::string why;
  const std::string missing = temp_path("missing.json");
  setenv("FERRY_MODEL", missing.c_str(), 1);
  Model m = Model::from_environment(&why);
  EXPECT_NE(why.find("cannot read"), std::string::npos) << why;
  EXPECT_EQ(m.info.at("source"), "built-in");

  const std::string broken = temp_path("broken.json");
  write(broken, "{\"format\": \"ferry-model\", \"version\": 1, \"methods\": [");
  setenv("FERRY_MODEL", broken.c_str(), 1);
  m = Model::from_environment(&why);
  EXPECT_NE(why.find("built-in"), std::string::npos) << why;
  EXPECT_EQ(m.choose(1 << 20, 8, Locality::other_gpu).method, Method::ipc);

  Model custom;  // staged always wins
  custom.info["source"] = "custom";
  custom.set_curve(Method::staged, Locality::other_gpu, Curve{{1, 1 << 30}, {1.0, 2.0}});
  const std::string good = temp_path("good.json");
  custom.save(good);
  setenv("FERRY_MODEL", good.c_str(), 1);
  m = Model::from_environment(&why);
  EXPECT_EQ(why, "model " + good);
  EXPECT_EQ(m.info.at("source"), "custom");
  EXPECT_EQ(m.choose(64 << 20, 8, Locality::other_gpu).method, Method::staged);
  unsetenv("FERRY_MODEL");
  std::remove(broken.c_str());
  std::remove(good.c_str());
  EXPECT_NE(Model::default_path().find("/ferry/model-"), std::string::npos);
}

TEST(Model, DecisionCacheAgreesAndFillsOnce) {
  auto model = std::make_shared<const Model>(Model::builtin());
  DecisionCache cache(model);
  const std::vector<i64> sizes = {8, 4096, 65536, 1 << 20, 8 << 20, 64 << 20};
  for (int round = 0; round < 3; ++round)
    for (i64 b : sizes)
      for (Locality l : {Locality::same_gpu, Locality::other_gpu, Locality::other_node}) {
        const Decision d = cache.get(b, 8, l);
        const Decision want = model->choose(b, 8, l);
        EXPECT_EQ(d.method, want.method);
        EXPECT_EQ(d.pack, want.pack);
        EXPECT_EQ(d.unpack, want.unpack);
      }
  EXPECT_EQ(cache.size(), sizes.size() * 3);
  // Concurrent lookups and fills.
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (i64 b = 1; b < (1 << 24); b = b * 3 + t)
        if (cache.get(b, 16, Locality::other_gpu).method != model->choose(b, 16, Locality::other_gpu).method)
          ++wrong[static_cast<std::size_t>(t)];
    });
  for (auto& th : threads) th.join();
  for (int w : wrong) EXPECT_EQ(w, 0);
}

}  // namespace
