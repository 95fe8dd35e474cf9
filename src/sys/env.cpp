#include "sys/env.hpp"

#include <cstdlib>

namespace ferry::detail::env {

namespace {

long read(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return end && *end == '\0' ? x : fallback;
}

}  // namespace

bool debug_sync() {
  static const bool v = read("FERRY_DEBUG_SYNC", 0) != 0;
  return v;
}
int gpu_blocks_per_sm() {
  static const int v = static_cast<int>(read("FERRY_GPU_BLOCKS_PER_SM", 0));
  return v;
}
int gpu_threads() {
  static const int v = static_cast<int>(read("FERRY_GPU_THREADS", 0));
  return v;
}

std::int64_t batch_chunk() {
  static const std::int64_t v = read("FERRY_BATCH_CHUNK", 0);
  return v;
}
int batch_order() {
  static const int v = static_cast<int>(read("FERRY_BATCH_ORDER", 1));
  return v;
}

}  // namespace ferry::detail::env
