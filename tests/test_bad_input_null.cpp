// tests/test_bad_input_null.cpp — test_bad_input, part 2: null pointers to the C++ API's throws.
#include "test_bad_input.hpp"

namespace {

using namespace ferry_bad_input;

// Null pointers Open MPI rejects with MPI_ERR_ARG in its parameter check: the pack output buffer,
// the unpack input buffer, the position, the size. Ferry must return the same class.
TEST(BadInput, NullPointersOpenMpiRejects) {
  Buffers b;
  Vec v;
  std::vector<unsigned char> packed(256, 0x22);
  for (MPI_Datatype t : {MPI_INT, v.t()}) {
    for (int count : {1, 0}) {
      const std::string c = " count " + std::to_string(count);
      int mpos = 0, fpos = 0;
      int mrc = MPI_Pack(b.in.data(), count, t, nullptr, 100, &mpos, MPI_COMM_WORLD);
      EXPECT_LIKE_MPI(ferry_pack(b.in.data(), count, t, nullptr, 100, &fpos), mrc, "ferry_pack(outbuf NULL)" + c);
      EXPECT_EQ(fpos, 0);
      mrc = MPI_Pack(b.in.data(), count, t, nullptr, 0, &mpos, MPI_COMM_WORLD);
      EXPECT_LIKE_MPI(ferry_pack(b.in.data(), count, t, nullptr, 0, &fpos), mrc,
                      "ferry_pack(outbuf NULL, outsize 0)" + c);
      mrc = MPI_Pack(nullptr, count, t, nullptr, 0, &mpos, MPI_COMM_WORLD);
      EXPECT_LIKE_MPI(ferry_pack(nullptr, count, t, nullptr, 0, &fpos), mrc,
                      "ferry_pack(inbuf and outbuf NULL, outsize 0)" + c);
      EXPECT_EQ(fpos, 0);

      const std::vector<int> in_before = b.in;
      mrc = MPI_Unpack(nullptr, 100, &mpos, b.in.data(), count, t, MPI_COMM_WORLD);
      EXPECT_LIKE_MPI(ferry_unpack(nullptr, 100, &fpos, b.in.data(), count, t), mrc,
                      "ferry_unpack(inbuf NULL)" + c);
      mrc = MPI_Unpack(nullptr, 0, &mpos, nullptr, count, t, MPI_COMM_WORLD);
      EXPECT_LIKE_MPI(ferry_unpack(nullptr, 0, &fpos, nullptr, count, t), mrc,
                      "ferry_unpack(inbuf and outbuf NULL, insize 0)" + c);
      EXPECT_EQ(fpos, 0);
      EXPECT_TRUE(in_before == b.in);

      mrc = MPI_Pack(b.in.data(), count, t, b.out.data(), 100, nullptr, MPI_COMM_WORLD);
      EXPECT_LIKE_MPI(ferry_pack(b.in.data(), count, t, b.out.data(), 100, nullptr), mrc,
                      "ferry_pack(position NULL)" + c);
      mrc = MPI_Unpack(packed.data(), 100, nullptr, b.out.data(), count, t, MPI_COMM_WORLD);
      EXPECT_LIKE_MPI(ferry_unpack(packed.data(), 100, nullptr, b.out.data(), count, t), mrc,
                      "ferry_unpack(position NULL)" + c);
      EXPECT_TRUE(b.out_untouched());
    }
    const int mrc = MPI_Pack_size(1, t, MPI_COMM_WORLD, nullptr);
    EXPECT_LIKE_MPI(ferry_pack_size(1, t, nullptr), mrc, "ferry_pack_size(size NULL)");
  }
  char* null_desc = nullptr;
  const int rc = ferry_type_describe(MPI_INT, null_desc, 16);
  EXPECT_NE(rc, MPI_SUCCESS) << "ferry_type_describe(buf NULL, len 16) succeeded";
}

// A null pack input or unpack output is MPI_BOTTOM (mpi.h: (void*)0 in Open MPI and MPICH), so it
// is legal: the type's displacements are absolute addresses. Ferry must pack and unpack it as the
// type map says: the bytes are checked against data[1..2], data[6], data[11..13] (not against the
// MPI, since MPICH 4.0 refuses MPI_BOTTOM as MPI_Pack's input, against the standard).
TEST(BadInput, MpiBottomWithAbsoluteAddresses) {
  ASSERT_EQ(MPI_BOTTOM, nullptr) << "this test assumes MPI_BOTTOM is the null pointer";
  std::vector<int> data(16);
  for (int i = 0; i < 16; ++i) data[static_cast<size_t>(i)] = 100 + i;
  MPI_Aint addr[3];
  MPI_Get_address(&data[1], &addr[0]);
  MPI_Get_address(&data[6], &addr[1]);
  MPI_Get_address(&data[11], &addr[2]);
  const int lens[3] = {2, 1, 3};
  Owned h;
  ASSERT_EQ(MPI_Type_create_hindexed(3, lens, addr, MPI_INT, &h.t), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&h.t), MPI_SUCCESS);
  ASSERT_EQ(ferry_type_commit(h.t), MPI_SUCCESS) << ferry_error_string();

  const std::vector<int> want = {101, 102, 106, 111, 112, 113};
  std::vector<int> fo(16, -7);
  int fpos = 0;
  const int rc = ferry_pack(MPI_BOTTOM, 1, h.t, fo.data(), 24, &fpos);
  EXPECT_EQ(rc, MPI_SUCCESS) << "ferry_pack(MPI_BOTTOM, absolute addresses): "
                             << class_name(error_class(rc)) << " " << ferry_error_string();
  EXPECT_EQ(fpos, 24);
  EXPECT_EQ(std::vector<int>(fo.begin(), fo.begin() + 6), want);
  EXPECT_EQ(std::vector<int>(fo.begin() + 6, fo.end()), std::vector<int>(10, -7)) << "wrote past 24 bytes";

  const std::vector<int> packed = {-1, -2, -3, -4, -5, -6};
  fpos = 0;
  const int urc = ferry_unpack(packed.data(), 24, &fpos, MPI_BOTTOM, 1, h.t);
  EXPECT_EQ(urc, MPI_SUCCESS) << "ferry_unpack(MPI_BOTTOM, absolute addresses): "
                              << class_name(error_class(urc)) << " " << ferry_error_string();
  EXPECT_EQ(fpos, 24);
  std::vector<int> expect(16);
  for (int i = 0; i < 16; ++i) expect[static_cast<size_t>(i)] = 100 + i;
  expect[1] = -1, expect[2] = -2, expect[6] = -3, expect[11] = -4, expect[12] = -5, expect[13] = -6;
  EXPECT_EQ(data, expect);
  EXPECT_EQ(ferry_type_free(h.t), MPI_SUCCESS);
}

// A null buffer with a type that addresses relative to it would dereference the null page: Open MPI
// crashes, Ferry documents MPI_ERR_BUFFER ("null buffer with data to move").
TEST(BadInput, NullBufferWithRelativeType) {
  Vec v;
  std::vector<unsigned char> out(256, kPoison);
  for (MPI_Datatype t : {MPI_INT, v.t()}) {
    int fpos = 0;
    EXPECT_FERRY_CLASS(ferry_pack(nullptr, 2, t, out.data(), 200, &fpos), MPI_ERR_BUFFER,
                       "ferry_pack(inbuf NULL, count 2)");
    EXPECT_EQ(fpos, 0);
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](unsigned char c) { return c == kPoison; }));
    EXPECT_FERRY_CLASS(ferry_unpack(out.data(), 200, &fpos, nullptr, 2, t), MPI_ERR_BUFFER,
                       "ferry_unpack(outbuf NULL, count 2)");
    EXPECT_EQ(fpos, 0);
  }
}

// Count 0 moves nothing, so a null input (pack) or output (unpack) is fine, as in Open MPI.
TEST(BadInput, CountZeroWithNullDataBuffers) {
  Vec v;
  std::vector<unsigned char> out(64, kPoison);
  for (MPI_Datatype t : {MPI_INT, v.t()}) {
    int mpos = 5, fpos = 5;
    int mrc = MPI_Pack(nullptr, 0, t, out.data(), 10, &mpos, MPI_COMM_WORLD);
    EXPECT_EQ(mrc, MPI_SUCCESS);
    EXPECT_LIKE_MPI(ferry_pack(nullptr, 0, t, out.data(), 10, &fpos), mrc, "ferry_pack(inbuf NULL, count 0)");
    EXPECT_EQ(fpos, mpos);
    mrc = MPI_Unpack(out.data(), 10, &mpos, nullptr, 0, t, MPI_COMM_WORLD);
    EXPECT_EQ(mrc, MPI_SUCCESS);
    EXPECT_LIKE_MPI(ferry_unpack(out.data(), 10, &fpos, nullptr, 0, t), mrc, "ferry_unpack(outbuf NULL, count 0)");
    EXPECT_EQ(fpos, mpos);
    int fsize = -7;
    EXPECT_EQ(ferry_pack_size(0, t, &fsize), MPI_SUCCESS) << ferry_error_string();
    EXPECT_EQ(fsize, 0);
  }
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](unsigned char c) { return c == kPoison; }));
}

// Predefined types: committing them is a no-op in MPI; freeing them is MPI_ERR_TYPE, and they keep
// working afterwards.
TEST(BadInput, PredefinedTypes) {
  MPI_Datatype t = MPI_INT;
  int mrc = MPI_Type_commit(&t);
  EXPECT_LIKE_MPI(ferry_type_commit(MPI_INT), mrc, "ferry_type_commit(MPI_INT)");
  t = MPI_DOUBLE_INT;
  mrc = MPI_Type_free(&t);
  EXPECT_EQ(error_class(mrc), MPI_ERR_TYPE);
  EXPECT_LIKE_MPI(ferry_type_free(MPI_DOUBLE_INT), mrc, "ferry_type_free(MPI_DOUBLE_INT)");
  // Still usable.
  struct {
    double d;
    int i;
  } in[2] = {{1.5, 7}, {2.5, 9}};
  std::vector<unsigned char> mo(64, kPoison), fo(64, kPoison);
  int mpos = 0, fpos = 0;
  ASSERT_EQ(MPI_Pack(in, 2, MPI_DOUBLE_INT, mo.data(), 64, &mpos, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(ferry_pack(in, 2, MPI_DOUBLE_INT, fo.data(), 64, &fpos), MPI_SUCCESS) << ferry_error_string();
  EXPECT_EQ(fpos, mpos);
  EXPECT_EQ(mo, fo);
}

// ferry_type_commit may come before MPI_Type_commit ("or be called right after").
TEST(BadInput, FerryCommitBeforeMpiCommit) {
  Owned v;
  ASSERT_EQ(MPI_Type_vector(4, 1, 3, MPI_SHORT, &v.t), MPI_SUCCESS);
  ASSERT_EQ(ferry_type_commit(v.t), MPI_SUCCESS) << ferry_error_string();
  ASSERT_EQ(MPI_Type_commit(&v.t), MPI_SUCCESS);
  short in[16];
  for (int i = 0; i < 16; ++i) in[i] = static_cast<short>(i * 1001);
  std::vector<unsigned char> mo(32, kPoison), fo(32, kPoison);
  int mpos = 0, fpos = 0;
  ASSERT_EQ(MPI_Pack(in, 1, v.t, mo.data(), 32, &mpos, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(ferry_pack(in, 1, v.t, fo.data(), 32, &fpos), MPI_SUCCESS) << ferry_error_string();
  EXPECT_EQ(fpos, mpos);
  EXPECT_EQ(mo, fo);
  EXPECT_EQ(ferry_type_free(v.t), MPI_SUCCESS);
}

// Several things wrong at once: Open MPI checks in a fixed order (pack: outbuf, count, outsize,
// datatype, then truncation; unpack: inbuf, count, datatype, then truncation; pack_size: datatype
// only), so "the class MPI would return for the same input" depends on that order. Every
// combination Open MPI rejects must get the same class from Ferry.
void several_errors(bool with_null_buffer) {
  Buffers b;
  Vec v;
  Owned uncommitted;
  ASSERT_EQ(MPI_Type_contiguous(3, MPI_INT, &uncommitted.t), MPI_SUCCESS);
  const MPI_Datatype types[3] = {v.t(), MPI_DATATYPE_NULL, uncommitted.t};
  const char* type_names[3] = {"vector", "MPI_DATATYPE_NULL", "uncommitted"};
  std::vector<unsigned char> packed(256, 0x33);
  for (int ti = 0; ti < 3; ++ti) {
    {
      const int null_buf = with_null_buffer ? 1 : 0;
      for (int count : {2, 0, -1}) {
        for (int size : {200, 10, -1}) {  // 10 truncates 2 vectors (48 bytes)
          const std::string what = std::string("type ") + type_names[ti] + (null_buf ? ", NULL buffer" : "") +
                                   ", count " + std::to_string(count) + ", size " + std::to_string(size);
          b.repoison();
          int mpos = 0, fpos = 0;
          int mrc = MPI_Pack(b.in.data(), count, types[ti], null_buf ? nullptr : b.out.data(), size, &mpos,
                             MPI_COMM_WORLD);
          if (mrc != MPI_SUCCESS) {
            EXPECT_LIKE_MPI(ferry_pack(b.in.data(), count, types[ti], null_buf ? nullptr : b.out.data(), size,
                                       &fpos),
                            mrc, "ferry_pack: " + what);
            EXPECT_EQ(fpos, 0) << what;
          }
          if (size >= 0) {  // (Open MPI does not check a negative insize)
            std::vector<int> out(64, 7);
            mpos = fpos = 0;
            mrc = MPI_Unpack(null_buf ? nullptr : packed.data(), size, &mpos, out.data(), count, types[ti],
                             MPI_COMM_WORLD);
            if (mrc != MPI_SUCCESS) {
              EXPECT_LIKE_MPI(ferry_unpack(null_buf ? nullptr : packed.data(), size, &fpos, out.data(), count,
                                           types[ti]),
                              mrc, "ferry_unpack: " + what);
              EXPECT_EQ(fpos, 0) << what;
            }
          }
        }
      }
    }
    if (ti != 2 && !with_null_buffer) {  // (Open MPI's MPI_Pack_size crashes on an uncommitted type)
      for (int count : {1, -1}) {
        int msize = 0, fsize = 0;
        const int mrc = MPI_Pack_size(count, types[ti], MPI_COMM_WORLD, &msize);
        if (mrc != MPI_SUCCESS)
          EXPECT_LIKE_MPI(ferry_pack_size(count, types[ti], &fsize), mrc,
                          std::string("ferry_pack_size: type ") + type_names[ti] + ", count " +
                              std::to_string(count));
      }
    }
  }
  EXPECT_TRUE(b.out_untouched());
}

TEST(BadInput, SeveralErrorsAtOnceFollowOpenMpisOrder) { several_errors(false); }

// The same with a NULL pack output / unpack input buffer, which Open MPI checks first (MPI_ERR_ARG).
TEST(BadInput, SeveralErrorsWithANullBufferFollowOpenMpisOrder) { several_errors(true); }

// A type whose size or bounds do not fit in 64 bits: Open MPI builds it (with wrapped metadata);
// Ferry refuses it at commit (type.hpp: MPI_ERR_TYPE on i64 overflow) and it stays unusable.
TEST(BadInput, TypeOverflowing64Bits) {
  Owned gib, huge_size, huge_extent;
  ASSERT_EQ(MPI_Type_contiguous(1 << 30, MPI_BYTE, &gib.t), MPI_SUCCESS);
  Owned tb;
  ASSERT_EQ(MPI_Type_contiguous(1 << 30, gib.t, &tb.t), MPI_SUCCESS);             // 2^60 bytes
  ASSERT_EQ(MPI_Type_contiguous(1 << 20, tb.t, &huge_size.t), MPI_SUCCESS);       // 2^80 bytes
  ASSERT_EQ(MPI_Type_create_hvector(1 << 20, 1, MPI_Aint{1} << 50, MPI_INT, &huge_extent.t),
            MPI_SUCCESS);                                                         // extent ~2^70
  Buffers b;
  for (Owned* o : {&huge_size, &huge_extent}) {
    const std::string what = o == &huge_size ? "2^80-byte type" : "type with a 2^70-byte extent";
    ASSERT_EQ(MPI_Type_commit(&o->t), MPI_SUCCESS);
    EXPECT_FERRY_CLASS(ferry_type_commit(o->t), MPI_ERR_TYPE, "ferry_type_commit(" + what + ")");
    int fsize = 5, fpos = 0;
    EXPECT_FERRY_CLASS(ferry_pack_size(1, o->t, &fsize), MPI_ERR_TYPE, "ferry_pack_size(" + what + ")");
    EXPECT_EQ(fsize, 5);
    EXPECT_FERRY_CLASS(ferry_pack(b.in.data(), 1, o->t, b.out.data(), 100, &fpos), MPI_ERR_TYPE,
                       "ferry_pack(" + what + ")");
    EXPECT_EQ(fpos, 0);
    EXPECT_TRUE(b.out_untouched());
    expect_throws([&] { ferry::commit(o->t); }, MPI_ERR_TYPE, "ferry::commit(" + what + ")");
    expect_throws([&] { ferry::translate(o->t); }, MPI_ERR_TYPE, "ferry::translate(" + what + ")");
  }
}

// MPI_Type_commit may be called twice (the interposer then calls ferry_type_commit twice), and one
// MPI_Type_free ends the type; a handle MPI hands out again gets the new type's translation, also
// when ferry_type_commit is called again on a handle Ferry still remembers.
TEST(BadInput, DoubleCommitAndRecommit) {
  Buffers b;
  for (int forget_free : {0, 1}) {
    for (int round = 0; round < 4; ++round) {
      MPI_Datatype t1;
      ASSERT_EQ(MPI_Type_vector(3, 2, 5, MPI_INT, &t1), MPI_SUCCESS);
      ASSERT_EQ(MPI_Type_commit(&t1), MPI_SUCCESS);
      EXPECT_EQ(ferry_type_commit(t1), MPI_SUCCESS) << ferry_error_string();
      EXPECT_EQ(ferry_type_commit(t1), MPI_SUCCESS) << "second commit: " << ferry_error_string();
      if (!forget_free) {
        EXPECT_EQ(ferry_type_free(t1), MPI_SUCCESS) << ferry_error_string();
        int size = 3;
        EXPECT_FERRY_CLASS(ferry_pack_size(1, t1, &size), MPI_ERR_TYPE,
                           "ferry_pack_size after commit, commit, free");
      }
      MPI_Type_free(&t1);
      MPI_Datatype t2;
      ASSERT_EQ(MPI_Type_contiguous(7, MPI_SHORT, &t2), MPI_SUCCESS);
      ASSERT_EQ(MPI_Type_commit(&t2), MPI_SUCCESS);
      EXPECT_EQ(ferry_type_commit(t2), MPI_SUCCESS) << ferry_error_string();
      std::vector<unsigned char> mo(64, kPoison);
      b.repoison();
      int mpos = 0, fpos = 0;
      ASSERT_EQ(MPI_Pack(b.in.data(), 2, t2, mo.data(), 64, &mpos, MPI_COMM_WORLD), MPI_SUCCESS);
      EXPECT_EQ(ferry_pack(b.in.data(), 2, t2, b.out.data(), 64, &fpos), MPI_SUCCESS) << ferry_error_string();
      EXPECT_EQ(fpos, mpos) << (forget_free ? "recommitted handle" : "recycled handle");
      EXPECT_EQ(std::memcmp(mo.data(), b.out.data(), mo.size()), 0)
          << (forget_free ? "recommitted handle" : "recycled handle") << " packs the old type";
      EXPECT_EQ(ferry_type_free(t2), MPI_SUCCESS);
      MPI_Type_free(&t2);
    }
  }
}

// ferry_type_describe: "NUL-terminated and truncated to len bytes"; never a byte past len.
TEST(BadInput, DescribeNeverWritesPastLen) {
  Vec v;
  for (int len : {-1, 0, 1, 2, 7}) {
    std::vector<char> buf(64, '\x7E');
    const int rc = ferry_type_describe(v.t(), buf.data(), len);
    const size_t n = static_cast<size_t>(std::max(len, 0));
    for (size_t i = n; i < buf.size(); ++i) {
      if (buf[i] != '\x7E') {
        ADD_FAILURE() << "ferry_type_describe(len " << len << ") wrote byte " << i;
        break;
      }
    }
    if (len > 0) {
      EXPECT_EQ(rc, MPI_SUCCESS) << ferry_error_string();
      EXPECT_NE(std::memchr(buf.data(), '\0', n), nullptr) << "len " << len << ": not NUL-terminated";
    } else if (len < 0) {
      EXPECT_FERRY_CLASS(rc, MPI_ERR_ARG, "ferry_type_describe(len -1)");
    }
  }
  std::vector<char> buf(4096, '\x7E');
  ASSERT_EQ(ferry_type_describe(v.t(), buf.data(), static_cast<int>(buf.size())), MPI_SUCCESS);
  EXPECT_GT(std::strlen(buf.data()), 0u);
}

TEST(BadInput, ErrorStringIsPerThreadAndSpecific) {
  Buffers b;
  int pos = 0;
  ASSERT_NE(ferry_pack(b.in.data(), -5, MPI_INT, b.out.data(), 100, &pos), MPI_SUCCESS);
  const std::string here = ferry_error_string();
  EXPECT_TRUE(message_mentions({"count"}));

  std::string other_initial = "unset", other_after;
  std::thread th([&] {
    const char* s = ferry_error_string();
    other_initial = s ? s : "(null)";
    int p = 0;
    std::vector<unsigned char> small(4);
    ferry_pack(b.in.data(), 4, MPI_INT, small.data(), 3, &p);
    const char* s2 = ferry_error_string();
    other_after = s2 ? s2 : "(null)";
  });
  th.join();
  EXPECT_EQ(other_initial, "") << "a fresh thread sees another thread's error";
  EXPECT_NE(other_after, "");
  EXPECT_NE(other_after, here);
  EXPECT_EQ(std::string(ferry_error_string()), here) << "another thread's error replaced this thread's";
}

TEST(BadInput, CxxApiThrows) {
  expect_throws([] { ferry::lookup(MPI_DATATYPE_NULL); }, MPI_ERR_TYPE, "ferry::lookup(MPI_DATATYPE_NULL)");
  expect_throws([] { ferry::commit(MPI_DATATYPE_NULL); }, MPI_ERR_TYPE, "ferry::commit(MPI_DATATYPE_NULL)");
  expect_throws([] { ferry::release(MPI_DATATYPE_NULL); }, MPI_ERR_TYPE, "ferry::release(MPI_DATATYPE_NULL)");
  expect_throws([] { ferry::translate(MPI_DATATYPE_NULL); }, MPI_ERR_TYPE,
                "ferry::translate(MPI_DATATYPE_NULL)");
  // i64 overflow while building nodes is MPI_ERR_TYPE (type.hpp).
  expect_throws([] { ferry::make_stream(0, INT64_MAX / 2, 4, ferry::make_dense(0, 8)); }, MPI_ERR_TYPE,
                "make_stream with an overflowing span");
  expect_throws([] { ferry::make_dense(INT64_MAX - 2, 8); }, MPI_ERR_TYPE, "make_dense past INT64_MAX");

  // The C++ API and the C API agree on the class for the same bad input.
  Buffers b;
  Vec v;
  const auto type = ferry::lookup(v.t());
  struct Case {
    const char* what;
    std::function<int()> c_api;
    std::function<void()> cxx_api;
  };
  int ipos;
  i64 lpos;
  const Case cases[] = {
      {"outbuf NULL",
       [&] { ipos = 0; return ferry_pack(b.in.data(), 1, v.t(), nullptr, 100, &ipos); },
       [&] { lpos = 0; ferry::pack(b.in.data(), 1, *type, nullptr, 100, &lpos); }},
      {"unpack inbuf NULL",
       [&] { ipos = 0; return ferry_unpack(nullptr, 100, &ipos, b.in.data(), 1, v.t()); },
       [&] { lpos = 0; ferry::unpack(nullptr, 100, &lpos, b.in.data(), 1, *type); }},
      {"pack inbuf NULL (relative type)",
       [&] { ipos = 0; return ferry_pack(nullptr, 1, v.t(), b.out.data(), 100, &ipos); },
       [&] { lpos = 0; ferry::pack(nullptr, 1, *type, b.out.data(), 100, &lpos); }},
      {"truncate",
       [&] { ipos = 0; return ferry_pack(b.in.data(), 2, v.t(), b.out.data(), 47, &ipos); },
       [&] { lpos = 0; ferry::pack(b.in.data(), 2, *type, b.out.data(), 47, &lpos); }},
  };
  for (const Case& c : cases) {
    const int cls = error_class(c.c_api());
    EXPECT_NE(cls, MPI_SUCCESS) << c.what;
    expect_throws(c.cxx_api, cls, std::string("C++ API vs C API: ") + c.what);
  }
  EXPECT_TRUE(b.out_untouched());
}

}  // namespace
