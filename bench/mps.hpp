// bench/mps.hpp — whether this process's GPU work goes through CUDA MPS, for what bench_pingpong
// and ferry-measure record: two ranks on one GPU without MPS are time-sliced (about 150 us a
// message), so a figure means little without it.
//
// Asked of the CUDA driver: device attribute 133, cudaDevAttrMpsEnabled ("contexts created on this
// device will be shared via MPS"), once the process has its context. A driver that does not know
// the attribute: the MPS control daemon's socket in its pipe directory ($CUDA_MPS_PIPE_DIRECTORY,
// default /tmp/nvidia-mps), which is there while a daemon serves the clients that use it.
#pragma once

#include <cuda_runtime.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace ferry_bench {

struct Mps {
  int on = -1;              // 1, 0, or -1: not known (no GPU)
  std::string detected_by;  // "cuda attribute", "pipe directory", "no GPU"
  const char* json() const { return on < 0 ? "null" : on ? "true" : "false"; }
  const char* word() const { return on < 0 ? "unknown" : on ? "on" : "off"; }
};

inline Mps mps_state(int device) {
  Mps m;
  if (device < 0) {
    m.detected_by = "no GPU";
    return m;
  }
  int v = 0;
  if (cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(133), device) == cudaSuccess) {
    m.on = v != 0;
    m.detected_by = "cuda attribute";
    return m;
  }
  cudaGetLastError();  // an unknown attribute: not an error for the caller
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string control = std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control";
  struct stat st {};
  m.on = stat(control.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  m.detected_by = "pipe directory";
  return m;
}

}  // namespace ferry_bench
