// The calls Ferry does not serve (src/mpi/refused.def), through the interposer.
//
// Built twice. test_mpi_refused: host buffers, so each call must do exactly what the MPI does
// (one-sided communication in fences and passive epochs, dynamic windows, local reduction, the
// buffered-send buffer, external32, every MPI-IO read and write form) and the data is checked.
// test_mpi_gpu_refused (FERRY_REFUSED_DEVICE, exit 77 without a GPU): each call handed device
// memory returns MPI_ERR_BUFFER through its object's error handler, and ferry_error_string()
// names the call. Both end by checking that they called every entry of the table.
#include <ferry/ferry.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#ifdef FERRY_REFUSED_DEVICE
#include <cuda_runtime.h>
#endif

namespace {

const std::vector<std::string> kTable = {
#define FERRY_REFUSED(group, name, ...) #name,
#define FERRY_REFUSED_C(...)
#include "mpi/refused.def"
#undef FERRY_REFUSED_C
#undef FERRY_REFUSED
};

#define FERRY_C(name) name
#define FERRY_REFUSED_SUITE RefusedOnHost
using Position = MPI_Aint;
#include "test_mpi_refused_host.hpp"

#ifndef FERRY_REFUSED_DEVICE

TEST(RefusedOnHost, DynamicWindow) {
  const int me = rank(), n = size(), right = (me + 1) % n, left = (me + n - 1) % n;
  std::vector<int> mem(2, -1);
  MPI_Win win;
  if (!make_dynamic_window(&win)) {
    // Recorded as called: a host buffer goes straight to the MPI, which cannot attach here.
    called().insert("MPI_Win_attach");
    GTEST_SKIP() << "this MPI cannot create dynamic windows (MPI_Win_create_dynamic failed)";
  }
  ASSERT_EQ(CALL(MPI_Win_attach, win, mem.data(), 2 * sizeof(int)), MPI_SUCCESS);
  MPI_Aint mine = 0;
  MPI_Get_address(mem.data(), &mine);
  std::vector<MPI_Aint> addr(static_cast<std::size_t>(n));
  MPI_Allgather(&mine, 1, MPI_AINT, addr.data(), 1, MPI_AINT, MPI_COMM_WORLD);
  const int v[2] = {300 + me, 301 + me};
  MPI_Win_fence(0, win);
  EXPECT_EQ(MPI_Put(v, 2, MPI_INT, right, addr[static_cast<std::size_t>(right)], 2, MPI_INT, win), MPI_SUCCESS);
  MPI_Win_fence(0, win);
  EXPECT_EQ(mem[0], 300 + left);
  EXPECT_EQ(mem[1], 301 + left);
  MPI_Win_detach(win, mem.data());
  MPI_Win_free(&win);
}

#else  // FERRY_REFUSED_DEVICE

void expect_refused(int rc, const char* name) {
  EXPECT_EQ(rc, MPI_ERR_BUFFER) << name;
  const std::string says = ferry_error_string();
  EXPECT_NE(says.find(name), std::string::npos) << name << ": " << says;
}
#define REFUSED(name, ...) expect_refused(CALL(name, __VA_ARGS__), #name)

class DeviceMemory {
 public:
  DeviceMemory() { EXPECT_EQ(cudaMalloc(&p_, 4096), cudaSuccess); }
  ~DeviceMemory() { cudaFree(p_); }
  int* get() const { return static_cast<int*>(p_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

 private:
  void* p_ = nullptr;
};

TEST(RefusedOnDevice, OneSided) {
  DeviceMemory d;
  int* dev = d.get();
  const int right = (rank() + 1) % size();
  MPI_Win win;
  REFUSED(MPI_Win_create, dev, 4096, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  std::vector<int> host(4, 0);
  ASSERT_NE(make_window(host, &win), nullptr) << "neither MPI_Win_create nor MPI_Win_allocate made a window";
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  MPI_Win_fence(0, win);
  int h = 0;
  REFUSED(MPI_Put, dev, 1, MPI_INT, right, 0, 1, MPI_INT, win);
  REFUSED(MPI_Get, dev, 1, MPI_INT, right, 0, 1, MPI_INT, win);
  REFUSED(MPI_Accumulate, dev, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_SUM, win);
  REFUSED(MPI_Get_accumulate, &h, 1, MPI_INT, dev, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_SUM, win);
  REFUSED(MPI_Fetch_and_op, dev, &h, MPI_INT, right, 0, MPI_SUM, win);
  REFUSED(MPI_Compare_and_swap, &h, &h, dev, MPI_INT, right, 0, win);
  MPI_Win_fence(0, win);
  MPI_Win_lock_all(0, win);
  MPI_Request r = MPI_REQUEST_NULL;
  REFUSED(MPI_Rput, dev, 1, MPI_INT, right, 0, 1, MPI_INT, win, &r);
  REFUSED(MPI_Rget, dev, 1, MPI_INT, right, 0, 1, MPI_INT, win, &r);
  REFUSED(MPI_Raccumulate, dev, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_SUM, win, &r);
  REFUSED(MPI_Rget_accumulate, dev, 1, MPI_INT, &h, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_SUM, win, &r);
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  // Ferry refuses device memory before the MPI sees the window, so where the MPI has no dynamic
  // windows an allocated one stands in.
  std::vector<int> stand_in(1, 0);
  if (!make_dynamic_window(&win))
    ASSERT_NE(make_window(stand_in, &win), nullptr) << "no window of any kind";
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  REFUSED(MPI_Win_attach, win, dev, 4096);
  MPI_Win_free(&win);
}

TEST(RefusedOnDevice, LocalReductionBufferAndExternal32) {
  DeviceMemory d;
  int* dev = d.get();
  int h[4] = {};
  MPI_Aint pos = 0;
  REFUSED(MPI_Reduce_local, h, dev, 4, MPI_INT, MPI_SUM);
  REFUSED(MPI_Buffer_attach, dev, 4096);
  REFUSED(MPI_Pack_external, "external32", dev, 4, MPI_INT, h, sizeof h, &pos);
  pos = 0;
  REFUSED(MPI_Unpack_external, "external32", h, sizeof h, &pos, dev, 4, MPI_INT);
}

TEST(RefusedOnDevice, EveryFileReadAndWrite) {
  DeviceMemory d;
  int* dev = d.get();
  MPI_File fh = open_scratch();
  ASSERT_NE(fh, MPI_FILE_NULL);
  MPI_Status st;
  MPI_Request q;
  REFUSED(MPI_File_write, fh, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_write_all, fh, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_write_at, fh, 0, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_write_at_all, fh, 0, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_write_shared, fh, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_write_ordered, fh, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_iwrite, fh, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_iwrite_all, fh, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_iwrite_at, fh, 0, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_iwrite_at_all, fh, 0, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_iwrite_shared, fh, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_write_all_begin, fh, dev, 4, MPI_INT);
  REFUSED(MPI_File_write_all_end, fh, dev, &st);
  REFUSED(MPI_File_write_at_all_begin, fh, 0, dev, 4, MPI_INT);
  REFUSED(MPI_File_write_at_all_end, fh, dev, &st);
  REFUSED(MPI_File_write_ordered_begin, fh, dev, 4, MPI_INT);
  REFUSED(MPI_File_write_ordered_end, fh, dev, &st);
  REFUSED(MPI_File_read, fh, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_read_all, fh, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_read_at, fh, 0, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_read_at_all, fh, 0, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_read_shared, fh, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_read_ordered, fh, dev, 4, MPI_INT, &st);
  REFUSED(MPI_File_iread, fh, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_iread_all, fh, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_iread_at, fh, 0, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_iread_at_all, fh, 0, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_iread_shared, fh, dev, 4, MPI_INT, &q);
  REFUSED(MPI_File_read_all_begin, fh, dev, 4, MPI_INT);
  REFUSED(MPI_File_read_all_end, fh, dev, &st);
  REFUSED(MPI_File_read_at_all_begin, fh, 0, dev, 4, MPI_INT);
  REFUSED(MPI_File_read_at_all_end, fh, dev, &st);
  REFUSED(MPI_File_read_ordered_begin, fh, dev, 4, MPI_INT);
  REFUSED(MPI_File_read_ordered_end, fh, dev, &st);
  MPI_File_close(&fh);
}

#endif  // FERRY_REFUSED_DEVICE

// Last: the suites above called every entry of the table (gtest runs a file's tests in order);
// rank 0 calls them all (the other ranks leave out the shared file pointer's own forms).
TEST(Refused, EveryEntryOfTheTableWasCalled) {
  ASSERT_FALSE(kTable.empty());
  if (rank() != 0) return;
  for (const std::string& name : kTable) EXPECT_EQ(called().count(name), 1u) << name << " is never called";
}

}  // namespace
