// tests/test_mpi_refused_host.hpp — what test_mpi_refused (the int forms) and test_mpi_refused_c
// (MPI-4's large-count forms) share: the helpers, and the host suites, where each refused call is
// written FERRY_C(name) (the int form, or its _c form) and the suite is FERRY_REFUSED_SUITE.
// Included inside an anonymous namespace after kTable, FERRY_C, FERRY_REFUSED_SUITE and Position
// (the external32 position's type). intercepted.cmake counts FERRY_C(name) as a call of both.
#pragma once

#define FERRY_REFUSED_TEST(name) FERRY_REFUSED_TEST_(FERRY_REFUSED_SUITE, name)
#define FERRY_REFUSED_TEST_(suite, name) TEST(suite, name)

std::set<std::string>& called() {
  static std::set<std::string> s;
  return s;
}
// Every call of the table goes through CALL, which records it.
#define CALL(name, ...) FERRY_CALL_(name, __VA_ARGS__)  // (name expanded first: FERRY_C)
#define FERRY_CALL_(name, ...) (called().insert(#name), name(__VA_ARGS__))

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// A scratch file every rank opens: rank 0 names it.
std::string shared_path() {
  char path[256] = {};
  if (rank() == 0) std::snprintf(path, sizeof path, "/tmp/ferry-refused-%d.bin", static_cast<int>(getpid()));
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

// A window over `mem`: MPI_Win_create where the MPI can; else (the GPU machine's Open MPI 4.1.6
// has no one-sided component for created windows and returns MPI_ERR_WIN, as PMPI_Win_create
// does) a window of MPI_Win_allocate's memory, initialized from `mem`. Returns the window's memory.
int* make_window(std::vector<int>& mem, MPI_Win* win) {
  const auto bytes = static_cast<MPI_Aint>(mem.size() * sizeof(int));
  if (CALL(FERRY_C(MPI_Win_create), mem.data(), bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, win) ==
      MPI_SUCCESS)
    return mem.data();
  int* base = nullptr;
  if (MPI_Win_allocate(bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, win) != MPI_SUCCESS)
    return nullptr;
  std::copy(mem.begin(), mem.end(), base);
  MPI_Barrier(MPI_COMM_WORLD);
  return base;
}

// MPI_Win_create_dynamic where the MPI can; false where the MPI itself cannot (as above).
bool make_dynamic_window(MPI_Win* win) {
  return MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, win) == MPI_SUCCESS;
}

MPI_File open_scratch() {
  MPI_File fh = MPI_FILE_NULL;
  EXPECT_EQ(MPI_File_open(MPI_COMM_WORLD, shared_path().c_str(),
                          MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh),
            MPI_SUCCESS);
  return fh;
}

#ifndef FERRY_REFUSED_DEVICE

constexpr int K = 16;  // ints per rank in the file

std::vector<int> pattern(int variant) {
  std::vector<int> v(K);
  for (int i = 0; i < K; ++i) v[static_cast<std::size_t>(i)] = variant * 100000 + rank() * 1000 + i;
  return v;
}

FERRY_REFUSED_TEST(OneSidedInFences) {
  const int me = rank(), n = size(), right = (me + 1) % n, left = (me + n - 1) % n;
  std::vector<int> local(8, -1);
  MPI_Win win;
  int* mem = make_window(local, &win);
  ASSERT_NE(mem, nullptr) << "neither MPI_Win_create nor MPI_Win_allocate made a window";
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  MPI_Win_fence(0, win);
  const int put = 100 + me, add = me + 1, ten = 10, five = 5, cmp = -1;
  EXPECT_EQ(CALL(FERRY_C(MPI_Put), &put, 1, MPI_INT, right, 0, 1, MPI_INT, win), MPI_SUCCESS);
  EXPECT_EQ(CALL(FERRY_C(MPI_Accumulate), &add, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_SUM, win), MPI_SUCCESS);
  int fetched = 0, old = 0, swapped = 0;
  EXPECT_EQ(CALL(FERRY_C(MPI_Get_accumulate), &ten, 1, MPI_INT, &fetched, 1, MPI_INT, right, 2, 1, MPI_INT, MPI_SUM, win),
            MPI_SUCCESS);
  EXPECT_EQ(CALL(MPI_Fetch_and_op, &five, &old, MPI_INT, right, 3, MPI_SUM, win), MPI_SUCCESS);
  EXPECT_EQ(CALL(MPI_Compare_and_swap, &me, &cmp, &swapped, MPI_INT, right, 4, win), MPI_SUCCESS);
  MPI_Win_fence(0, win);
  int got = 0;
  EXPECT_EQ(CALL(FERRY_C(MPI_Get), &got, 1, MPI_INT, right, 0, 1, MPI_INT, win), MPI_SUCCESS);
  MPI_Win_fence(0, win);
  EXPECT_EQ(mem[0], 100 + left);
  if (me == 0) EXPECT_EQ(mem[1], -1 + n * (n + 1) / 2);
  EXPECT_EQ(fetched, -1);
  EXPECT_EQ(mem[2], 9);
  EXPECT_EQ(old, -1);
  EXPECT_EQ(mem[3], 4);
  EXPECT_EQ(swapped, -1);
  EXPECT_EQ(mem[4], left);
  EXPECT_EQ(got, 100 + me);
  MPI_Win_free(&win);
}

FERRY_REFUSED_TEST(RequestBasedOneSided) {
  const int me = rank(), n = size(), right = (me + 1) % n, left = (me + n - 1) % n;
  std::vector<int> local(4, -1);
  MPI_Win win;
  int* mem = make_window(local, &win);
  ASSERT_NE(mem, nullptr) << "neither MPI_Win_create nor MPI_Win_allocate made a window";
  MPI_Win_lock_all(0, win);
  const int put = 200 + me, seven = 7, one = 1;
  int got = 0, fetched = 0;
  MPI_Request r;
  EXPECT_EQ(CALL(FERRY_C(MPI_Rput), &put, 1, MPI_INT, right, 0, 1, MPI_INT, win, &r), MPI_SUCCESS);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  EXPECT_EQ(CALL(FERRY_C(MPI_Raccumulate), &seven, 1, MPI_INT, right, 1, 1, MPI_INT, MPI_SUM, win, &r), MPI_SUCCESS);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  EXPECT_EQ(CALL(FERRY_C(MPI_Rget_accumulate), &one, 1, MPI_INT, &fetched, 1, MPI_INT, right, 2, 1, MPI_INT, MPI_SUM, win, &r),
            MPI_SUCCESS);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Win_flush_all(win);
  EXPECT_EQ(CALL(FERRY_C(MPI_Rget), &got, 1, MPI_INT, right, 0, 1, MPI_INT, win, &r), MPI_SUCCESS);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Win_unlock_all(win);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(got, 200 + me);
  EXPECT_EQ(fetched, -1);
  EXPECT_EQ(mem[0], 200 + left);
  EXPECT_EQ(mem[1], 6);
  EXPECT_EQ(mem[2], 0);
  MPI_Win_free(&win);
}

FERRY_REFUSED_TEST(LocalReductionBufferAndExternal32) {
  const int in[3] = {1, 2, 3};
  int inout[3] = {10, 20, 30};
  ASSERT_EQ(CALL(FERRY_C(MPI_Reduce_local), in, inout, 3, MPI_INT, MPI_SUM), MPI_SUCCESS);
  EXPECT_EQ(std::vector<int>(inout, inout + 3), (std::vector<int>{11, 22, 33}));

  const int me = rank(), n = size();
  std::vector<char> bsend(MPI_BSEND_OVERHEAD + 64);
  ASSERT_EQ(CALL(FERRY_C(MPI_Buffer_attach), bsend.data(), static_cast<int>(bsend.size())), MPI_SUCCESS);
  int sent = 40 + me, got = -1;
  MPI_Request r;
  MPI_Irecv(&got, 1, MPI_INT, (me + n - 1) % n, 5, MPI_COMM_WORLD, &r);
  EXPECT_EQ(MPI_Bsend(&sent, 1, MPI_INT, (me + 1) % n, 5, MPI_COMM_WORLD), MPI_SUCCESS);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  EXPECT_EQ(got, 40 + (me + n - 1) % n);
  void* old = nullptr;
  int old_size = 0;
  MPI_Buffer_detach(&old, &old_size);
  EXPECT_EQ(old, bsend.data());

  const std::int32_t values[2] = {0x01020304, -2};
  unsigned char packed[8] = {};
  Position pos = 0;
  ASSERT_EQ(CALL(FERRY_C(MPI_Pack_external), "external32", values, 2, MPI_INT32_T, packed, 8, &pos), MPI_SUCCESS);
  EXPECT_EQ(pos, 8);
  const unsigned char big_endian[8] = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe};
  EXPECT_EQ(std::memcmp(packed, big_endian, 8), 0);
  std::int32_t back[2] = {};
  pos = 0;
  ASSERT_EQ(CALL(FERRY_C(MPI_Unpack_external), "external32", packed, 8, &pos, back, 2, MPI_INT32_T), MPI_SUCCESS);
  EXPECT_EQ(back[0], values[0]);
  EXPECT_EQ(back[1], values[1]);
}

// Each rank writes its own K ints with one write form and reads them back with the matching read
// form; `variant` makes every round's data different, so a read that did nothing fails.
FERRY_REFUSED_TEST(EveryFileReadAndWrite) {
  MPI_File fh = open_scratch();
  ASSERT_NE(fh, MPI_FILE_NULL);
  const MPI_Offset at = static_cast<MPI_Offset>(rank()) * K * static_cast<MPI_Offset>(sizeof(int));
  int variant = 0;
  auto round = [&](auto write, auto read, const char* what) {
    const std::vector<int> w = pattern(++variant);
    std::vector<int> r(K, -1);
    ASSERT_EQ(write(w.data()), MPI_SUCCESS) << what;
    ASSERT_EQ(read(r.data()), MPI_SUCCESS) << what;
    EXPECT_EQ(r, w) << what;
  };
  auto seek = [&] { MPI_File_seek(fh, at, MPI_SEEK_SET); };
  auto wait = [](MPI_Request r) { return MPI_Wait(&r, MPI_STATUS_IGNORE); };
  MPI_Status st;
  MPI_Request q;
  round([&](const int* b) { return CALL(FERRY_C(MPI_File_write_at), fh, at, b, K, MPI_INT, &st); },
        [&](int* b) { return CALL(FERRY_C(MPI_File_read_at), fh, at, b, K, MPI_INT, &st); }, "at");
  round([&](const int* b) { return CALL(FERRY_C(MPI_File_write_at_all), fh, at, b, K, MPI_INT, &st); },
        [&](int* b) { return CALL(FERRY_C(MPI_File_read_at_all), fh, at, b, K, MPI_INT, &st); }, "at_all");
  round([&](const int* b) { return CALL(FERRY_C(MPI_File_iwrite_at), fh, at, b, K, MPI_INT, &q) || wait(q); },
        [&](int* b) { return CALL(FERRY_C(MPI_File_iread_at), fh, at, b, K, MPI_INT, &q) || wait(q); }, "iat");
  round([&](const int* b) { return CALL(FERRY_C(MPI_File_iwrite_at_all), fh, at, b, K, MPI_INT, &q) || wait(q); },
        [&](int* b) { return CALL(FERRY_C(MPI_File_iread_at_all), fh, at, b, K, MPI_INT, &q) || wait(q); }, "iat_all");
  round([&](const int* b) {
          return CALL(FERRY_C(MPI_File_write_at_all_begin), fh, at, b, K, MPI_INT) ||
                 CALL(MPI_File_write_at_all_end, fh, b, &st);
        },
        [&](int* b) {
          return CALL(FERRY_C(MPI_File_read_at_all_begin), fh, at, b, K, MPI_INT) ||
                 CALL(MPI_File_read_at_all_end, fh, b, &st);
        },
        "at_all split");
  round([&](const int* b) { return seek(), CALL(FERRY_C(MPI_File_write), fh, b, K, MPI_INT, &st); },
        [&](int* b) { return seek(), CALL(FERRY_C(MPI_File_read), fh, b, K, MPI_INT, &st); }, "individual");
  round([&](const int* b) { return seek(), CALL(FERRY_C(MPI_File_write_all), fh, b, K, MPI_INT, &st); },
        [&](int* b) { return seek(), CALL(FERRY_C(MPI_File_read_all), fh, b, K, MPI_INT, &st); }, "all");
  round([&](const int* b) { return seek(), CALL(FERRY_C(MPI_File_iwrite), fh, b, K, MPI_INT, &q) || wait(q); },
        [&](int* b) { return seek(), CALL(FERRY_C(MPI_File_iread), fh, b, K, MPI_INT, &q) || wait(q); }, "i");
  round([&](const int* b) { return seek(), CALL(FERRY_C(MPI_File_iwrite_all), fh, b, K, MPI_INT, &q) || wait(q); },
        [&](int* b) { return seek(), CALL(FERRY_C(MPI_File_iread_all), fh, b, K, MPI_INT, &q) || wait(q); }, "iall");
  round([&](const int* b) {
          seek();
          return CALL(FERRY_C(MPI_File_write_all_begin), fh, b, K, MPI_INT) || CALL(MPI_File_write_all_end, fh, b, &st);
        },
        [&](int* b) {
          seek();
          return CALL(FERRY_C(MPI_File_read_all_begin), fh, b, K, MPI_INT) || CALL(MPI_File_read_all_end, fh, b, &st);
        },
        "all split");
  // The shared file pointer: ordered forms put rank r's block r-th; seek_shared is collective.
  auto rewind = [&] { MPI_File_seek_shared(fh, 0, MPI_SEEK_SET); };
  round([&](const int* b) { return rewind(), CALL(FERRY_C(MPI_File_write_ordered), fh, b, K, MPI_INT, &st); },
        [&](int* b) { return rewind(), CALL(FERRY_C(MPI_File_read_ordered), fh, b, K, MPI_INT, &st); }, "ordered");
  round([&](const int* b) {
          rewind();
          return CALL(FERRY_C(MPI_File_write_ordered_begin), fh, b, K, MPI_INT) ||
                 CALL(MPI_File_write_ordered_end, fh, b, &st);
        },
        [&](int* b) {
          rewind();
          return CALL(FERRY_C(MPI_File_read_ordered_begin), fh, b, K, MPI_INT) ||
                 CALL(MPI_File_read_ordered_end, fh, b, &st);
        },
        "ordered split");
  // Non-collective shared-pointer forms: rank 0 alone, so the positions are known.
  for (int blocking = 0; blocking < 2; ++blocking) {
    rewind();
    const std::vector<int> w = pattern(++variant);
    std::vector<int> r(K, -1);
    if (rank() == 0) {
      EXPECT_EQ(blocking ? CALL(FERRY_C(MPI_File_write_shared), fh, w.data(), K, MPI_INT, &st)
                         : CALL(FERRY_C(MPI_File_iwrite_shared), fh, w.data(), K, MPI_INT, &q) || wait(q),
                MPI_SUCCESS);
      MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
    } else {
      MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
    }
    if (rank() == 0) {
      EXPECT_EQ(blocking ? CALL(FERRY_C(MPI_File_read_shared), fh, r.data(), K, MPI_INT, &st)
                         : CALL(FERRY_C(MPI_File_iread_shared), fh, r.data(), K, MPI_INT, &q) || wait(q),
                MPI_SUCCESS);
      EXPECT_EQ(r, w) << "shared";
    }
  }
  MPI_File_close(&fh);
}

#endif  // FERRY_REFUSED_DEVICE
