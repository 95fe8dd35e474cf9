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

double halo_timeout() {
  static const double v = [] {
    const char* e = std::getenv("FERRY_HALO_TIMEOUT");
    if (e == nullptr || *e == '\0') return 0.0;
    char* end = nullptr;
    const double x = std::strtod(e, &end);
    return end && *end == '\0' && x > 0 ? x : 0.0;
  }();
  return v;
}
bool halo_verbose() {
  static const bool v = read("FERRY_HALO_VERBOSE", 0) != 0;
  return v;
}
const char* halo_method() {
  static const char* v = [] {
    const char* e = std::getenv("FERRY_HALO_METHOD");
    return e ? e : "";
  }();
  return v;
}

}  // namespace ferry::detail::env
