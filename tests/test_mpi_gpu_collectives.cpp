// The interposer's collectives on GPU buffers (cudaMalloc), under mpiexec -n 2 and -n 4, each rank
// on GPU rank % devices: the calls of test_mpi_collectives (every blocking, non-blocking and
// neighbourhood collective, contiguous and derived types, in place, zero counts), with both
// buffers in GPU memory and with either one on the host. Inputs are copied to the GPU and results
// back; each must equal the result the MPI itself gives on host buffers, including every int it
// leaves alone: the gaps between and inside the receive buffer's elements keep their initial
// values, so a mirror that wrote back more than the type map fails. Exits 77 (skipped) where
// there is no GPU.
#define FERRY_COLLECTIVES_CATALOGUE_ONLY
#include <cuda_runtime.h>

#include "test_mpi_collectives.cpp"

namespace collectives {
namespace {

class DeviceMemory : public Memory {
 public:
  void* put(const std::vector<int>& v) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, (v.size() + 1) * sizeof(int));
    EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
    if (!v.empty())
      EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice),
                cudaSuccess);
    return p;
  }
  std::vector<int> get(const void* p, std::size_t n) override {
    std::vector<int> v(n);
    if (n) EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  void set(void* p, const std::vector<int>& v) override {
    if (!v.empty()) EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void release(void* p) override { cudaFree(p); }
  bool device() const override { return true; }
};

class GpuCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
    ASSERT_GT(devices, 0);
    ASSERT_EQ(cudaSetDevice(place(MPI_COMM_WORLD).me % devices), cudaSuccess);
  }
  // Both buffers on the GPU, then one of them on the host.
  void check_all(const std::vector<Case>& cases) {
    EXPECT_GE(cases.size(), layouts().size());
    for (const Case& c : cases) {
      check(c, device, device, " (GPU buffers)");
      check(c, host, device, " (host send buffer, GPU receive buffer)");
      check(c, device, host, " (GPU send buffer, host receive buffer)");
    }
  }
  DeviceMemory device;
  HostMemory host;
};

#define FERRY_GPU_TEST(Name, cases) \
  TEST_F(GpuCollectives, Name) {    \
    check_all(cases());             \
  }
FERRY_COLLECTIVES(FERRY_GPU_TEST)
#undef FERRY_GPU_TEST

}  // namespace
}  // namespace collectives
