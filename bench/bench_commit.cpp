// bench/bench_commit.cpp — what committing a datatype costs in Ferry.
//
// For each equivalent description of the §5.1.3 3D object and for the 256^3 radius-3 halo faces:
//   commit/translate/<type>        ferry::translate(): translation + canonicalization + StridedBlock,
//                                  the work done at MPI_Type_commit (goal: <= 5 us per type)
//   commit/translate_raw/<type>    ferry::translate_raw(): the translation alone
//   commit/canonicalize/<type>     ferry::canonicalize() of the raw translation
//   commit/ferry_type_commit+free/<type>
//                                  C API commit (translation + registry insert) and free, as a pair
//   commit/lookup/<type>           ferry::lookup() of the committed type (what every pack call does)
//   commit/c_pack_size/<type>      ferry_pack_size(1, type): C API lookup + size
//   commit/mpi_build_commit_free/<type>
//                                  reference: building the type with MPI, MPI_Type_commit and
//                                  MPI_Type_free in Open MPI (its own commit cost)
// plus commit/lookup/MPI_DOUBLE, a named type.
//
// Counters: raw_nodes and canon_nodes (IR size before and after canonicalization), runs (contiguous
// blocks per element), bytes (type size), as_expected (1 when the canonical form is the StridedBlock
// worked out by hand and, for the 3D object, the canonical tree equals the reference description's,
// subarray_float). The label is the canonical form.
#include "bench_common.hpp"

#include <ferry/error.hpp>
#include <ferry/ferry.h>
#include <ferry/registry.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ferry_bench {
namespace {

struct CommitCase {
  TypeRecipe recipe;
  MPI_Datatype dt = MPI_DATATYPE_NULL;
  std::string error;  // non-empty when Ferry could not translate the type
  std::string canonical;
  double raw_nodes = 0, canon_nodes = 0, runs = 0, bytes = 0, as_expected = 0;
  bool committed_in_ferry = false;
};

// Owned for the whole run; benchmarks hold pointers into it.
std::vector<std::unique_ptr<CommitCase>>& cases() {
  static std::vector<std::unique_ptr<CommitCase>> c;
  return c;
}

void set_counters(benchmark::State& st, const CommitCase& c) {
  st.counters["raw_nodes"] = c.raw_nodes;
  st.counters["canon_nodes"] = c.canon_nodes;
  st.counters["runs"] = c.runs;
  st.counters["bytes"] = c.bytes;
  st.counters["as_expected"] = c.as_expected;
  st.SetLabel(c.canonical);
}

// Runs the benchmark loop, turning a Ferry exception into a skipped benchmark.
template <class Body>
void guarded(benchmark::State& st, const CommitCase& c, Body body) {
  if (!c.error.empty()) {
    st.SkipWithError(c.error.c_str());
    for (auto _ : st) {
    }
    return;
  }
  try {
    body();
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  set_counters(st, c);
}

void bm_translate(benchmark::State& st, const CommitCase* c) {
  guarded(st, *c, [&] {
    for (auto _ : st) {
      ferry::Type t = ferry::translate(c->dt);
      benchmark::DoNotOptimize(t);
    }
  });
}

void bm_translate_raw(benchmark::State& st, const CommitCase* c) {
  guarded(st, *c, [&] {
    for (auto _ : st) {
      ferry::NodePtr n = ferry::translate_raw(c->dt);
      benchmark::DoNotOptimize(n);
    }
  });
}

void bm_canonicalize(benchmark::State& st, const CommitCase* c) {
  guarded(st, *c, [&] {
    const ferry::NodePtr raw = ferry::translate_raw(c->dt);
    for (auto _ : st) {
      ferry::NodePtr n = ferry::canonicalize(raw);
      benchmark::DoNotOptimize(n);
    }
  });
}

void bm_capi_commit_free(benchmark::State& st, const CommitCase* c) {
  guarded(st, *c, [&] {
    // The type stays committed in Ferry for the lookup benchmarks; free it for this loop.
    if (c->committed_in_ferry && ferry_type_free(c->dt) != MPI_SUCCESS)
      throw std::runtime_error(std::string("ferry_type_free: ") + ferry_error_string());
    for (auto _ : st) {
      int rc = ferry_type_commit(c->dt);
      rc |= ferry_type_free(c->dt);
      if (rc != MPI_SUCCESS) {
        st.SkipWithError(ferry_error_string());
        break;
      }
    }
    if (c->committed_in_ferry && ferry_type_commit(c->dt) != MPI_SUCCESS)
      throw std::runtime_error(std::string("ferry_type_commit: ") + ferry_error_string());
  });
}

void bm_lookup(benchmark::State& st, const CommitCase* c) {
  guarded(st, *c, [&] {
    for (auto _ : st) {
      std::shared_ptr<const ferry::Type> t = ferry::lookup(c->dt);
      benchmark::DoNotOptimize(t.get());
    }
  });
}

void bm_c_pack_size(benchmark::State& st, const CommitCase* c) {
  guarded(st, *c, [&] {
    for (auto _ : st) {
      int size = 0;
      if (ferry_pack_size(1, c->dt, &size) != MPI_SUCCESS) {
        st.SkipWithError(ferry_error_string());
        break;
      }
      benchmark::DoNotOptimize(size);
    }
  });
}

void bm_mpi_build_commit_free(benchmark::State& st, const CommitCase* c) {
  for (auto _ : st) {
    MPI_Datatype t = c->recipe.build();
    check_mpi(MPI_Type_free(&t), "MPI_Type_free");
  }
  st.SetLabel(c->recipe.how);
}

void bm_lookup_named(benchmark::State& st) {
  try {
    for (auto _ : st) {
      std::shared_ptr<const ferry::Type> t = ferry::lookup(MPI_DOUBLE);
      benchmark::DoNotOptimize(t.get());
    }
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

void add_case(const TypeRecipe& recipe, const CommitCase* ref) {
  auto c = std::make_unique<CommitCase>();
  c->recipe = recipe;
  c->dt = recipe.build();
  try {
    const ferry::NodePtr raw = ferry::translate_raw(c->dt);
    const ferry::Type t = ferry::translate(c->dt);
    c->raw_nodes = static_cast<double>(raw->nodes);
    c->canon_nodes = static_cast<double>(t.root()->nodes);
    c->runs = static_cast<double>(t.blocks());
    c->bytes = static_cast<double>(t.size());
    c->canonical = canonical_summary(t);
    if (t.size() != size_of(c->dt)) {
      c->error = "ferry size " + std::to_string(t.size()) + " != MPI size " +
                 std::to_string(size_of(c->dt));
    }
    bool ok = !recipe.expect || (t.strided() && *t.strided() == *recipe.expect);
    if (ref != nullptr && ref->error.empty())
      ok = ok && ferry::equal(ferry::translate(ref->dt).root(), t.root());
    c->as_expected = ok ? 1 : 0;
    if (!ok) {
      std::fprintf(stderr, "bench_commit: %s: canonical form %s is not the expected %s%s\n",
                   recipe.name.c_str(), c->canonical.c_str(),
                   recipe.expect ? ferry::to_string(*recipe.expect).c_str() : "(none)",
                   ref ? " or differs from the reference tree" : "");
    }
  } catch (const std::exception& e) {
    c->error = std::string("ferry::translate: ") + e.what();
  }
  if (c->error.empty()) {
    if (ferry_type_commit(c->dt) == MPI_SUCCESS) {
      c->committed_in_ferry = true;
    } else {
      c->error = std::string("ferry_type_commit: ") + ferry_error_string();
    }
  }
  const CommitCase* p = c.get();
  const std::string& n = recipe.name;
  auto us = benchmark::kMicrosecond;
  benchmark::RegisterBenchmark(("commit/translate/" + n).c_str(), bm_translate, p)->Unit(us);
  benchmark::RegisterBenchmark(("commit/translate_raw/" + n).c_str(), bm_translate_raw, p)->Unit(us);
  benchmark::RegisterBenchmark(("commit/canonicalize/" + n).c_str(), bm_canonicalize, p)->Unit(us);
  benchmark::RegisterBenchmark(("commit/ferry_type_commit+free/" + n).c_str(), bm_capi_commit_free, p)
      ->Unit(us);
  benchmark::RegisterBenchmark(("commit/lookup/" + n).c_str(), bm_lookup, p)->Unit(us);
  benchmark::RegisterBenchmark(("commit/c_pack_size/" + n).c_str(), bm_c_pack_size, p)->Unit(us);
  benchmark::RegisterBenchmark(("commit/mpi_build_commit_free/" + n).c_str(),
                               bm_mpi_build_commit_free, p)
      ->Unit(us);
  cases().push_back(std::move(c));
}

}  // namespace

void register_benchmarks(int* /*argc*/, char** /*argv*/) {
  const CommitCase* ref = nullptr;
  for (const TypeRecipe& r : object3d_recipes()) {
    add_case(r, ref);
    if (ref == nullptr) ref = cases().back().get();
  }
  for (const TypeRecipe& r : halo_recipes(/*with_listing=*/true)) add_case(r, nullptr);
  benchmark::RegisterBenchmark("commit/lookup/MPI_DOUBLE", bm_lookup_named)
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace ferry_bench
