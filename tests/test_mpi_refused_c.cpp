// The large-count (_c) forms of the calls Ferry does not serve (src/mpi/refused.def,
// FERRY_REFUSED_C), through the interposer, against an MPI-4 header (MPICH): every one resolves to
// Ferry's entry, and each, called with host buffers, does what the MPI does (test_mpi_refused's
// host suites, test_mpi_refused_host.hpp, with each refused call's _c form). Built against an MPI-3
// header (Open MPI 4.1) there are none, and the test reports skipped. The GPU machine's MPI is Open
// MPI: no GPU suite calls these (intercepted.txt marks them host-only).
#include <dlfcn.h>
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

namespace {

#if MPI_VERSION >= 4

const std::vector<std::string> kTable = {
#define FERRY_REFUSED(...)
#define FERRY_REFUSED_C(group, name, ...) #name,
#include "mpi/refused.def"
#undef FERRY_REFUSED_C
#undef FERRY_REFUSED
};

#define FERRY_C(name) name##_c
#define FERRY_REFUSED_SUITE RefusedLargeCount
using Position = MPI_Count;
#include "test_mpi_refused_host.hpp"

// Every entry of the table is Ferry's (not the MPI's, which would take a GPU pointer), and the
// suites above called each (rank 0 calls them all: the other ranks leave out the shared file
// pointer's own forms).
TEST(RefusedLargeCount, EveryEntryIsFerrysAndWasCalled) {
  ASSERT_GT(kTable.size(), 30u);
  for (const std::string& name : kTable) {
    void* entry = dlsym(RTLD_DEFAULT, name.c_str());
    Dl_info where{};
    ASSERT_NE(entry, nullptr) << name;
    ASSERT_NE(dladdr(entry, &where), 0) << name;
    EXPECT_NE(std::string(where.dli_fname ? where.dli_fname : "").find("ferry-mpi"), std::string::npos)
        << name << " resolves to " << (where.dli_fname ? where.dli_fname : "?");
    if (rank() == 0) EXPECT_EQ(called().count(name), 1u) << name << " is never called";
  }
}

#else

TEST(RefusedLargeCount, NeedsAnMpi4Header) {
  GTEST_SKIP() << "the MPI's header is MPI " << MPI_VERSION << "." << MPI_SUBVERSION
               << ": it has no large-count (_c) calls, and Ferry defines none";
}

#endif

}  // namespace
