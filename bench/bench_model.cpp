// bench/bench_model.cpp — what choosing a message's method costs the interposer.
//
//   model/cached_decision       DecisionCache::get on a key already cached (goal: <= 50 ns), over
//                               a working set of 64 message sizes
//   model/choose_uncached       Model::choose: the interpolations a cache miss pays
#include "bench_common.hpp"

#include <ferry/model.hpp>

#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

namespace {

using namespace ferry::model;

std::vector<ferry::i64> working_set() {
  std::vector<ferry::i64> sizes;
  for (int i = 0; i < 64; ++i) sizes.push_back((ferry::i64{1} << (i % 27)) + 8 * i);
  return sizes;
}

void cached_decision(benchmark::State& state) {
  DecisionCache cache(std::make_shared<const Model>(Model::builtin()));
  const auto sizes = working_set();
  for (auto b : sizes) cache.get(b, 64, Locality::other_gpu);
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cache.get(sizes[i], 64, Locality::other_gpu));
    i = (i + 1) & 63;
  }
}


void choose_uncached(benchmark::State& state) {
  const Model m = Model::builtin();
  const auto sizes = working_set();
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.choose(sizes[i], 64, Locality::other_gpu));
    i = (i + 1) & 63;
  }
}
}  // namespace

namespace ferry_bench {
void register_benchmarks(int* /*argc*/, char** /*argv*/) {
  benchmark::RegisterBenchmark("model/cached_decision", cached_decision);
  benchmark::RegisterBenchmark("model/choose_uncached", choose_uncached);
}
}  // namespace ferry_bench
