// tests/test_bad_input.cpp — every bad input gets the error class MPI gives it, and nothing breaks.
//
// Where Open MPI answers a bad input with a definite error class (MPI_COMM_WORLD has
// MPI_ERRORS_RETURN), the test asks Open MPI first and requires Ferry's class to be the same
// (ferry.h: "Every function returns MPI_SUCCESS or the MPI error class MPI would return for the same
// input"). Where Open MPI has no definite answer (it crashes, or silently returns garbage: negative
// position, negative insize, MPI_Pack_size overflow or negative count), the test requires the class
// Ferry documents (pack.hpp): MPI_ERR_COUNT, MPI_ERR_ARG, MPI_ERR_BUFFER, MPI_ERR_TRUNCATE.
// On every error: nothing written, position unchanged, ferry_error_string() says what was wrong, and
// the C++ API throws ferry::Error with the same class.
// Other MPIs: MPICH does not check a pack's output size (the standard calls such a call erroneous
// and leaves the outcome open: it returns MPI_SUCCESS, or crashes further out), so it is not asked
// about too small buffers, and Ferry must give the class it documents, MPI_ERR_TRUNCATE
// (mpi_truncation). A C API size that does not fit in an int is
// MPI_ERR_VALUE_TOO_LARGE where mpi.h has it (MPI-4: MPICH 4), else MPI_ERR_COUNT (kTooLarge).
#include <ferry/error.hpp>
#include <ferry/ferry.h>
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>
#include <ferry/type.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include "sys/error.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using i64 = std::int64_t;

int error_class(int rc) {
  if (rc == MPI_SUCCESS) return MPI_SUCCESS;
  int cls = rc;
  MPI_Error_class(rc, &cls);
  return cls;
}

std::string class_name(int cls) {
  if (cls == MPI_SUCCESS) return "MPI_SUCCESS";
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(cls, s, &len) != MPI_SUCCESS) return "class " + std::to_string(cls);
  return "class " + std::to_string(cls) + " (" + std::string(s, static_cast<size_t>(len)) + ")";
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The message of the last error mentions at least one of `words` (case-insensitive).
::testing::AssertionResult message_mentions(const std::vector<std::string>& words) {
  const char* m = ferry_error_string();
  if (!m || !*m) return ::testing::AssertionFailure() << "ferry_error_string() is empty after an error";
  const std::string msg = lower(m);
  for (const auto& w : words)
    if (msg.find(w) != std::string::npos) return ::testing::AssertionSuccess();
  auto f = ::testing::AssertionFailure();
  f << "ferry_error_string() \"" << m << "\" mentions none of:";
  for (const auto& w : words) f << " \"" << w << "\"";
  return f;
}

// Words that say what was wrong, per class.
std::vector<std::string> words_for(int cls) {
  switch (cls) {
    case MPI_ERR_TYPE: return {"type"};
    case MPI_ERR_COUNT: return {"count", "overflow", "fit", "int", "size"};
    case MPI_ERR_TRUNCATE:
      return {"trunc", "small", "short", "space", "room", "exceed", "insufficient", "need", "fit"};
    case MPI_ERR_ARG: return {"position", "size", "negative", "null", "argument", "buffer", "len", "invalid"};
    case MPI_ERR_BUFFER: return {"buffer", "null"};
    default: return {""};
  }
}

// Ferry's return code `rc` has class `want`; when it is an error, the message says so specifically.
#define EXPECT_FERRY_CLASS(rc, want, what)                                                         \
  do {                                                                                             \
    const int rc_ = (rc);                                                                          \
    const int want_ = (want);                                                                      \
    EXPECT_EQ(error_class(rc_), want_)                                                             \
        << what << ": Ferry returned " << class_name(error_class(rc_)) << " (\""                  \
        << (rc_ != MPI_SUCCESS ? ferry_error_string() : "") << "\"), expected "                    \
        << class_name(want_);                                                                      \
    if (rc_ != MPI_SUCCESS && want_ != MPI_SUCCESS) {                                              \
      EXPECT_TRUE(message_mentions(words_for(want_))) << what;                                     \
    }                                                                                              \
  } while (0)

// Ferry's class equals the one Open MPI returned for the same input (and optionally the one we know
// Open MPI returns, to catch a changed oracle).
#define EXPECT_LIKE_MPI(ferry_rc, mpi_rc, what)                                        \
  do {                                                                                 \
    const int mcls_ = error_class(mpi_rc);                                             \
    EXPECT_FERRY_CLASS(ferry_rc, mcls_, std::string(what) + " [Open MPI: " +          \
                                            class_name(mcls_) + "]");                  \
  } while (0)

// The MPI's answer to a pack or unpack whose buffer is too small: what `call` returns where the MPI
// checks the size (Open MPI), else MPI_ERR_TRUNCATE without calling it.
int mpi_truncation(const std::function<int()>& call) {
  static const bool checks = [] {
    int in = 7, pos = 0;
    unsigned char out[64];
    return MPI_Pack(&in, 1, MPI_INT, out, 0, &pos, MPI_COMM_WORLD) != MPI_SUCCESS;
  }();
  return checks ? call() : MPI_ERR_TRUNCATE;
}

// A size the C API cannot return in an int (sys/error.hpp).
constexpr int kTooLarge = ferry::detail::kErrTooLarge;

// The C++ API throws ferry::Error with class `want`.
void expect_throws(const std::function<void()>& f, int want, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no ferry::Error thrown, expected " << class_name(want);
  } catch (const ferry::Error& e) {
    EXPECT_EQ(e.mpi_error_class(), want)
        << what << ": ferry::Error class " << class_name(e.mpi_error_class()) << " (\"" << e.what()
        << "\"), expected " << class_name(want);
    EXPECT_NE(std::string(e.what()), "") << what << ": empty ferry::Error message";
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw a non-ferry exception: " << e.what();
  }
}

struct Owned {
  MPI_Datatype t = MPI_DATATYPE_NULL;
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
  }
};

// A committed (MPI and Ferry) vector type: 3 blocks of 2 ints with stride 5 ints (24 bytes of data).
struct Vec {
  Owned o;
  Vec() {
    MPI_Type_vector(3, 2, 5, MPI_INT, &o.t);
    MPI_Type_commit(&o.t);
    EXPECT_EQ(ferry_type_commit(o.t), MPI_SUCCESS) << ferry_error_string();
  }
  ~Vec() { ferry_type_free(o.t); }
  MPI_Datatype t() const { return o.t; }
};

constexpr unsigned char kPoison = 0xCD;

struct Buffers {
  std::vector<int> in = std::vector<int>(1024);
  std::vector<unsigned char> out = std::vector<unsigned char>(4096, kPoison);
  Buffers() {
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i * 2654435761u);
  }
  bool out_untouched() const {
    return std::all_of(out.begin(), out.end(), [](unsigned char c) { return c == kPoison; });
  }
  void repoison() { std::fill(out.begin(), out.end(), kPoison); }
};

// ---------------------------------------------------------------------------------------------

TEST(BadInput, DatatypeNull) {
  Buffers b;
  int mpos = 0, fpos = 0;
  int mrc = MPI_Pack(b.in.data(), 1, MPI_DATATYPE_NULL, b.out.data(), 100, &mpos, MPI_COMM_WORLD);
  EXPECT_EQ(error_class(mrc), MPI_ERR_TYPE);
  EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 1, MPI_DATATYPE_NULL, b.out.data(), 100, &fpos), mrc,
                  "ferry_pack(MPI_DATATYPE_NULL)");
  EXPECT_EQ(fpos, 0);
  EXPECT_TRUE(b.out_untouched());

  mrc = MPI_Unpack(b.out.data(), 100, &mpos, b.in.data(), 1, MPI_DATATYPE_NULL, MPI_COMM_WORLD);
  EXPECT_EQ(error_class(mrc), MPI_ERR_TYPE);
  EXPECT_LIKE_MPI(ferry_unpack(b.out.data(), 100, &fpos, b.in.data(), 1, MPI_DATATYPE_NULL), mrc,
                  "ferry_unpack(MPI_DATATYPE_NULL)");
  EXPECT_EQ(fpos, 0);

  int msize = 0, fsize = 12345;
  mrc = MPI_Pack_size(1, MPI_DATATYPE_NULL, MPI_COMM_WORLD, &msize);
  EXPECT_EQ(error_class(mrc), MPI_ERR_TYPE);
  EXPECT_LIKE_MPI(ferry_pack_size(1, MPI_DATATYPE_NULL, &fsize), mrc, "ferry_pack_size(MPI_DATATYPE_NULL)");
  EXPECT_EQ(fsize, 12345) << "size written on error";

  MPI_Datatype null_type = MPI_DATATYPE_NULL;
  mrc = MPI_Type_commit(&null_type);
  EXPECT_EQ(error_class(mrc), MPI_ERR_TYPE);
  EXPECT_LIKE_MPI(ferry_type_commit(MPI_DATATYPE_NULL), mrc, "ferry_type_commit(MPI_DATATYPE_NULL)");

  null_type = MPI_DATATYPE_NULL;
  mrc = MPI_Type_free(&null_type);
  EXPECT_EQ(error_class(mrc), MPI_ERR_TYPE);
  EXPECT_LIKE_MPI(ferry_type_free(MPI_DATATYPE_NULL), mrc, "ferry_type_free(MPI_DATATYPE_NULL)");

  char desc[64];
  EXPECT_FERRY_CLASS(ferry_type_describe(MPI_DATATYPE_NULL, desc, sizeof desc), MPI_ERR_TYPE,
                     "ferry_type_describe(MPI_DATATYPE_NULL)");

  // Count 0 does not make a null type acceptable.
  mrc = MPI_Pack(b.in.data(), 0, MPI_DATATYPE_NULL, b.out.data(), 100, &mpos, MPI_COMM_WORLD);
  EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 0, MPI_DATATYPE_NULL, b.out.data(), 100, &fpos), mrc,
                  "ferry_pack(count 0, MPI_DATATYPE_NULL)");
}

TEST(BadInput, DerivedTypeNotCommittedThroughFerry) {
  Buffers b;
  Owned v;
  ASSERT_EQ(MPI_Type_vector(3, 2, 5, MPI_INT, &v.t), MPI_SUCCESS);

  // Not committed anywhere: Open MPI says MPI_ERR_TYPE.
  int mpos = 0, fpos = 0;
  int mrc = MPI_Pack(b.in.data(), 1, v.t, b.out.data(), 100, &mpos, MPI_COMM_WORLD);
  EXPECT_EQ(error_class(mrc), MPI_ERR_TYPE);
  EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 1, v.t, b.out.data(), 100, &fpos), mrc,
                  "ferry_pack(type committed nowhere)");
  mrc = MPI_Unpack(b.out.data(), 100, &mpos, b.in.data(), 1, v.t, MPI_COMM_WORLD);
  EXPECT_EQ(error_class(mrc), MPI_ERR_TYPE);
  EXPECT_LIKE_MPI(ferry_unpack(b.out.data(), 100, &fpos, b.in.data(), 1, v.t), mrc,
                  "ferry_unpack(type committed nowhere)");
  int fsize = 777;
  // (Open MPI's MPI_Pack_size crashes on an uncommitted type; Ferry documents MPI_ERR_TYPE.)
  EXPECT_FERRY_CLASS(ferry_pack_size(1, v.t, &fsize), MPI_ERR_TYPE, "ferry_pack_size(type committed nowhere)");
  EXPECT_EQ(fsize, 777);

  // Committed with MPI only: Ferry has not seen it, MPI_ERR_TYPE (ferry.h).
  ASSERT_EQ(MPI_Type_commit(&v.t), MPI_SUCCESS);
  EXPECT_FERRY_CLASS(ferry_pack(b.in.data(), 1, v.t, b.out.data(), 100, &fpos), MPI_ERR_TYPE,
                     "ferry_pack(type not committed through Ferry)");
  EXPECT_EQ(fpos, 0);
  EXPECT_TRUE(b.out_untouched());
  EXPECT_FERRY_CLASS(ferry_unpack(b.out.data(), 100, &fpos, b.in.data(), 1, v.t), MPI_ERR_TYPE,
                     "ferry_unpack(type not committed through Ferry)");
  EXPECT_EQ(fpos, 0);
  EXPECT_FERRY_CLASS(ferry_pack_size(1, v.t, &fsize), MPI_ERR_TYPE,
                     "ferry_pack_size(type not committed through Ferry)");
  EXPECT_EQ(fsize, 777);
  EXPECT_FERRY_CLASS(ferry_pack(b.in.data(), 0, v.t, b.out.data(), 100, &fpos), MPI_ERR_TYPE,
                     "ferry_pack(count 0, type not committed through Ferry)");
  char desc[64];
  EXPECT_FERRY_CLASS(ferry_type_describe(v.t, desc, sizeof desc), MPI_ERR_TYPE,
                     "ferry_type_describe(type not committed through Ferry)");
  EXPECT_FERRY_CLASS(ferry_type_free(v.t), MPI_ERR_TYPE, "ferry_type_free(type never committed through Ferry)");

  expect_throws([&] { ferry::lookup(v.t); }, MPI_ERR_TYPE, "ferry::lookup(not committed through Ferry)");
  expect_throws([&] { ferry::release(v.t); }, MPI_ERR_TYPE, "ferry::release(never committed)");
}

TEST(BadInput, TypeAfterFerryTypeFree) {
  Buffers b;
  Owned v;
  ASSERT_EQ(MPI_Type_vector(3, 2, 5, MPI_INT, &v.t), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&v.t), MPI_SUCCESS);
  ASSERT_EQ(ferry_type_commit(v.t), MPI_SUCCESS) << ferry_error_string();
  int fpos = 0, fsize = 0;
  ASSERT_EQ(ferry_pack_size(2, v.t, &fsize), MPI_SUCCESS);
  EXPECT_EQ(fsize, 48);
  ASSERT_EQ(ferry_type_free(v.t), MPI_SUCCESS) << ferry_error_string();

  fsize = 999;
  EXPECT_FERRY_CLASS(ferry_pack(b.in.data(), 1, v.t, b.out.data(), 100, &fpos), MPI_ERR_TYPE,
                     "ferry_pack after ferry_type_free");
  EXPECT_EQ(fpos, 0);
  EXPECT_TRUE(b.out_untouched());
  EXPECT_FERRY_CLASS(ferry_unpack(b.out.data(), 100, &fpos, b.in.data(), 1, v.t), MPI_ERR_TYPE,
                     "ferry_unpack after ferry_type_free");
  EXPECT_FERRY_CLASS(ferry_pack_size(1, v.t, &fsize), MPI_ERR_TYPE, "ferry_pack_size after ferry_type_free");
  EXPECT_EQ(fsize, 999);
  EXPECT_FERRY_CLASS(ferry_type_free(v.t), MPI_ERR_TYPE, "second ferry_type_free");
  expect_throws([&] { ferry::lookup(v.t); }, MPI_ERR_TYPE, "ferry::lookup after ferry_type_free");

  // Committing again brings it back.
  ASSERT_EQ(ferry_type_commit(v.t), MPI_SUCCESS) << ferry_error_string();
  int mpos = 0;
  std::vector<unsigned char> mo(64, kPoison);
  ASSERT_EQ(MPI_Pack(b.in.data(), 1, v.t, mo.data(), 24, &mpos, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(ferry_pack(b.in.data(), 1, v.t, b.out.data(), 24, &fpos), MPI_SUCCESS) << ferry_error_string();
  EXPECT_EQ(fpos, mpos);
  EXPECT_EQ(std::memcmp(mo.data(), b.out.data(), mo.size()), 0);
  EXPECT_EQ(ferry_type_free(v.t), MPI_SUCCESS);
}

// A handle MPI recycles after MPI_Type_free must not pick up the old translation.
TEST(BadInput, RecycledHandleGetsTheNewType) {
  Buffers b;
  for (int round = 0; round < 8; ++round) {
    MPI_Datatype t;
    if (round % 2 == 0) {
      ASSERT_EQ(MPI_Type_vector(3, 2, 5, MPI_INT, &t), MPI_SUCCESS);
    } else {
      ASSERT_EQ(MPI_Type_contiguous(7, MPI_SHORT, &t), MPI_SUCCESS);
    }
    ASSERT_EQ(MPI_Type_commit(&t), MPI_SUCCESS);
    ASSERT_EQ(ferry_type_commit(t), MPI_SUCCESS) << ferry_error_string();
    std::vector<unsigned char> mo(128, kPoison);
    b.repoison();
    int mpos = 0, fpos = 0;
    ASSERT_EQ(MPI_Pack(b.in.data(), 2, t, mo.data(), 128, &mpos, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(ferry_pack(b.in.data(), 2, t, b.out.data(), 128, &fpos), MPI_SUCCESS) << ferry_error_string();
    EXPECT_EQ(fpos, mpos) << "round " << round;
    EXPECT_EQ(std::memcmp(mo.data(), b.out.data(), mo.size()), 0) << "round " << round;
    EXPECT_EQ(ferry_type_free(t), MPI_SUCCESS);
    MPI_Type_free(&t);
  }
}

TEST(BadInput, NegativeCount) {
  Buffers b;
  Vec v;
  for (MPI_Datatype t : {MPI_INT, v.t()}) {
    int mpos = 0, fpos = 0;
    int mrc = MPI_Pack(b.in.data(), -1, t, b.out.data(), 100, &mpos, MPI_COMM_WORLD);
    EXPECT_EQ(error_class(mrc), MPI_ERR_COUNT);
    EXPECT_LIKE_MPI(ferry_pack(b.in.data(), -1, t, b.out.data(), 100, &fpos), mrc, "ferry_pack(count -1)");
    EXPECT_LIKE_MPI(ferry_pack(b.in.data(), INT_MIN, t, b.out.data(), 100, &fpos), mrc,
                    "ferry_pack(count INT_MIN)");
    EXPECT_EQ(fpos, 0);
    EXPECT_TRUE(b.out_untouched());

    mrc = MPI_Unpack(b.out.data(), 100, &mpos, b.in.data(), -1, t, MPI_COMM_WORLD);
    EXPECT_EQ(error_class(mrc), MPI_ERR_COUNT);
    const std::vector<int> in_before = b.in;
    EXPECT_LIKE_MPI(ferry_unpack(b.out.data(), 100, &fpos, b.in.data(), -1, t), mrc,
                    "ferry_unpack(count -1)");
    EXPECT_EQ(fpos, 0);
    EXPECT_TRUE(in_before == b.in);

    // Open MPI's MPI_Pack_size does not check the count (it returns a negative size); Ferry
    // documents MPI_ERR_COUNT.
    int fsize = 4242;
    EXPECT_FERRY_CLASS(ferry_pack_size(-1, t, &fsize), MPI_ERR_COUNT, "ferry_pack_size(count -1)");
    EXPECT_EQ(fsize, 4242);
  }
}

TEST(BadInput, PackSizeOverflow) {
  // Open MPI wraps these silently (MPI_Pack_size(INT_MAX, MPI_DOUBLE) gives -8); Ferry documents
  // "sizes that overflow -> MPI_ERR_COUNT" (kTooLarge: MPI_ERR_VALUE_TOO_LARGE with an MPI-4 mpi.h).
  int fsize = 31;
  EXPECT_FERRY_CLASS(ferry_pack_size(INT_MAX, MPI_DOUBLE, &fsize), kTooLarge,
                     "ferry_pack_size(INT_MAX, MPI_DOUBLE)");
  EXPECT_EQ(fsize, 31);
  EXPECT_FERRY_CLASS(ferry_pack_size(1 << 29, MPI_DOUBLE, &fsize), kTooLarge,
                     "ferry_pack_size(2^29, MPI_DOUBLE) = 2^32");
  EXPECT_FERRY_CLASS(ferry_pack_size(INT_MAX / 2 + 1, MPI_SHORT, &fsize), kTooLarge,
                     "ferry_pack_size((INT_MAX/2+1), MPI_SHORT) = INT_MAX + 1");
  EXPECT_EQ(fsize, 31);
  // The largest size that fits is fine.
  EXPECT_EQ(ferry_pack_size(INT_MAX, MPI_BYTE, &fsize), MPI_SUCCESS) << ferry_error_string();
  EXPECT_EQ(fsize, INT_MAX);

  Owned max_t, gib, huge;
  ASSERT_EQ(MPI_Type_contiguous(INT_MAX, MPI_BYTE, &max_t.t), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_contiguous(1 << 30, MPI_BYTE, &gib.t), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_vector(1 << 30, 1, 1, gib.t, &huge.t), MPI_SUCCESS);  // 2^60 bytes
  for (Owned* o : {&max_t, &gib, &huge}) {
    ASSERT_EQ(MPI_Type_commit(&o->t), MPI_SUCCESS);
    ASSERT_EQ(ferry_type_commit(o->t), MPI_SUCCESS) << ferry_error_string();
  }
  int msize = 0;
  ASSERT_EQ(MPI_Pack_size(1, max_t.t, MPI_COMM_WORLD, &msize), MPI_SUCCESS);
  EXPECT_EQ(ferry_pack_size(1, max_t.t, &fsize), MPI_SUCCESS) << ferry_error_string();
  EXPECT_EQ(fsize, msize);
  EXPECT_EQ(fsize, INT_MAX);
  fsize = 31;
  EXPECT_FERRY_CLASS(ferry_pack_size(2, max_t.t, &fsize), kTooLarge, "ferry_pack_size(2, INT_MAX bytes)");
  EXPECT_FERRY_CLASS(ferry_pack_size(2, gib.t, &fsize), kTooLarge, "ferry_pack_size(2, 1 GiB)");
  // A type whose size alone overflows int, and a count*size that overflows 64 bits.
  EXPECT_FERRY_CLASS(ferry_pack_size(1, huge.t, &fsize), kTooLarge, "ferry_pack_size(1, 2^60 bytes)");
  EXPECT_FERRY_CLASS(ferry_pack_size(16, huge.t, &fsize), MPI_ERR_COUNT, "ferry_pack_size(16, 2^60 bytes)");
  EXPECT_EQ(fsize, 31);

  // The C++ API works in 64 bits: 2 GiB is fine, 2^64 is not.
  try {
    EXPECT_EQ(ferry::pack_size(2, *ferry::lookup(gib.t)), i64{1} << 31);
    EXPECT_EQ(ferry::pack_size(7, *ferry::lookup(huge.t)), i64{7} << 60);
  } catch (const ferry::Error& e) {
    ADD_FAILURE() << "ferry::pack_size threw " << e.what();
  }
  expect_throws([&] { ferry::pack_size(16, *ferry::lookup(huge.t)); }, MPI_ERR_COUNT,
                "ferry::pack_size(16, 2^60 bytes)");
  expect_throws([&] { ferry::pack_size(i64{1} << 62, *ferry::lookup(gib.t)); }, MPI_ERR_COUNT,
                "ferry::pack_size(2^62, 1 GiB)");

  // Packing what cannot fit in an int-sized buffer: Open MPI says MPI_ERR_TRUNCATE (it checks the
  // 64-bit size against outsize before touching any data); MPICH packs what fits.
  Buffers b;
  int mpos = 0, fpos = 0;
  int mrc = mpi_truncation([&] { return MPI_Pack(b.in.data(), 2, gib.t, b.out.data(), 100, &mpos, MPI_COMM_WORLD); });
  EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 2, gib.t, b.out.data(), 100, &fpos), mrc,
                    "ferry_pack(2 x 1 GiB into 100 bytes)");
  EXPECT_EQ(fpos, 0);
  EXPECT_TRUE(b.out_untouched());
  mrc = mpi_truncation([&] { return MPI_Unpack(b.out.data(), 100, &mpos, b.in.data(), 2, gib.t, MPI_COMM_WORLD); });
  EXPECT_LIKE_MPI(ferry_unpack(b.out.data(), 100, &fpos, b.in.data(), 2, gib.t), mrc,
                    "ferry_unpack(2 x 1 GiB from 100 bytes)");
  EXPECT_EQ(fpos, 0);
  mrc = mpi_truncation([&] { return MPI_Pack(b.in.data(), 1, huge.t, b.out.data(), 100, &mpos, MPI_COMM_WORLD); });
  EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 1, huge.t, b.out.data(), 100, &fpos), mrc,
                    "ferry_pack(2^60 bytes into 100 bytes)");
  // 16 x 2^60 wraps Open MPI's own size_t product (so it is not asked); Ferry must refuse without
  // touching memory.
  const int frc = ferry_pack(b.in.data(), 16, huge.t, b.out.data(), 100, &fpos);
  EXPECT_NE(frc, MPI_SUCCESS) << "ferry_pack(16 x 2^60 bytes) succeeded";
  EXPECT_TRUE(error_class(frc) == MPI_ERR_COUNT || error_class(frc) == MPI_ERR_TRUNCATE)
      << "ferry_pack(16 x 2^60 bytes): " << class_name(error_class(frc));
  EXPECT_EQ(fpos, 0);
  EXPECT_TRUE(b.out_untouched());

  for (Owned* o : {&max_t, &gib, &huge}) EXPECT_EQ(ferry_type_free(o->t), MPI_SUCCESS);
}

TEST(BadInput, OutputTooSmall) {
  Buffers b;
  Vec v;
  struct Case {
    MPI_Datatype t;
    int count, start, outsize;
  };
  // Packed sizes: MPI_INT 4 per element, the vector 24 per element.
  const Case cases[] = {
      {MPI_INT, 4, 0, 15},    {MPI_INT, 4, 3, 18},   {MPI_INT, 1, 0, 0},     {v.t(), 1, 0, 23},
      {v.t(), 3, 5, 76},      {v.t(), 2, 40, 87},    {MPI_INT, 1, 97, 100},  {MPI_INT, 0, 101, 100},
      {v.t(), 1, 100, 100},   {v.t(), 0, 4000, 100},
  };
  for (const Case& c : cases) {
    const std::string what = "pack count " + std::to_string(c.count) + " at " + std::to_string(c.start) +
                             " into outsize " + std::to_string(c.outsize) +
                             (c.t == MPI_INT ? " (MPI_INT)" : " (vector)");
    std::vector<unsigned char> mo(4096, kPoison);
    b.repoison();
    int mpos = c.start, fpos = c.start;
    const int mrc = mpi_truncation(
        [&] { return MPI_Pack(b.in.data(), c.count, c.t, mo.data(), c.outsize, &mpos, MPI_COMM_WORLD); });
    EXPECT_LIKE_MPI(ferry_pack(b.in.data(), c.count, c.t, b.out.data(), c.outsize, &fpos), mrc, what);
    EXPECT_EQ(fpos, c.start) << what << ": position changed on error";
    EXPECT_TRUE(b.out_untouched()) << what << ": bytes written on error";

    expect_throws(
        [&] {
          i64 pos = c.start;
          ferry::pack(b.in.data(), c.count, *ferry::lookup(c.t), b.out.data(), c.outsize, &pos);
        },
        MPI_ERR_TRUNCATE, "ferry::pack: " + what);
    EXPECT_TRUE(b.out_untouched()) << what << " (C++): bytes written on error";
  }

  // Position at the very end with nothing to pack is fine.
  int mpos = 100, fpos = 100;
  int mrc = MPI_Pack(b.in.data(), 0, MPI_INT, b.out.data(), 100, &mpos, MPI_COMM_WORLD);
  EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 0, MPI_INT, b.out.data(), 100, &fpos), mrc,
                  "pack count 0 at position == outsize");
  EXPECT_EQ(fpos, 100);

  // position + size overflows int: must be MPI_ERR_TRUNCATE, not a wild write.
  mpos = fpos = INT_MAX - 2;
  mrc = mpi_truncation([&] { return MPI_Pack(b.in.data(), 1, MPI_INT, b.out.data(), INT_MAX, &mpos, MPI_COMM_WORLD); });
  EXPECT_EQ(error_class(mrc), MPI_ERR_TRUNCATE);
  EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 1, MPI_INT, b.out.data(), INT_MAX, &fpos), mrc,
                  "pack 4 bytes at position INT_MAX-2");
  EXPECT_EQ(fpos, INT_MAX - 2);
  mpos = fpos = INT_MAX - 2;
  mrc = mpi_truncation([&] { return MPI_Pack(b.in.data(), 1, v.t(), b.out.data(), INT_MAX, &mpos, MPI_COMM_WORLD); });
  EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 1, v.t(), b.out.data(), INT_MAX, &fpos), mrc,
                  "pack a vector at position INT_MAX-2");
  EXPECT_EQ(fpos, INT_MAX - 2);
  EXPECT_TRUE(b.out_untouched());
}

TEST(BadInput, InputTooShort) {
  Buffers b;
  Vec v;
  struct Case {
    MPI_Datatype t;
    int count, start, insize;
  };
  const Case cases[] = {
      {MPI_INT, 4, 0, 15},  {MPI_INT, 4, 3, 18},   {MPI_INT, 1, 0, 0},    {v.t(), 1, 0, 23},
      {v.t(), 3, 5, 76},    {v.t(), 2, 40, 87},    {MPI_INT, 0, 101, 100}, {v.t(), 1, 100, 100},
  };
  std::vector<unsigned char> packed(4096);
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = static_cast<unsigned char>(i * 7 + 1);
  for (const Case& c : cases) {
    const std::string what = "unpack count " + std::to_string(c.count) + " at " +
                             std::to_string(c.start) + " from insize " + std::to_string(c.insize) +
                             (c.t == MPI_INT ? " (MPI_INT)" : " (vector)");
    std::vector<unsigned char> mo(4096, kPoison);
    b.repoison();
    int mpos = c.start, fpos = c.start;
    const int mrc = mpi_truncation(
        [&] { return MPI_Unpack(packed.data(), c.insize, &mpos, mo.data(), c.count, c.t, MPI_COMM_WORLD); });
    if (c.insize == 0) {
      // Open MPI 4.1 returns MPI_SUCCESS for insize 0 without unpacking anything or moving the
      // position (a quirk, not an answer); Ferry documents MPI_ERR_TRUNCATE.
      EXPECT_FERRY_CLASS(ferry_unpack(packed.data(), c.insize, &fpos, b.out.data(), c.count, c.t),
                         MPI_ERR_TRUNCATE, what);
    } else {
      EXPECT_EQ(error_class(mrc), MPI_ERR_TRUNCATE) << what;
      EXPECT_LIKE_MPI(ferry_unpack(packed.data(), c.insize, &fpos, b.out.data(), c.count, c.t), mrc,
                      what);
    }
    EXPECT_EQ(fpos, c.start) << what << ": position changed on error";
    EXPECT_TRUE(b.out_untouched()) << what << ": bytes written on error";
    expect_throws(
        [&] {
          i64 pos = c.start;
          ferry::unpack(packed.data(), c.insize, &pos, b.out.data(), c.count, *ferry::lookup(c.t));
        },
        MPI_ERR_TRUNCATE, "ferry::unpack: " + what);
    EXPECT_TRUE(b.out_untouched()) << what << " (C++): bytes written on error";
  }
  int mpos = INT_MAX - 2, fpos = INT_MAX - 2;
  const int mrc = mpi_truncation(
      [&] { return MPI_Unpack(packed.data(), INT_MAX, &mpos, b.out.data(), 1, MPI_INT, MPI_COMM_WORLD); });
  EXPECT_EQ(error_class(mrc), MPI_ERR_TRUNCATE);
  EXPECT_LIKE_MPI(ferry_unpack(packed.data(), INT_MAX, &fpos, b.out.data(), 1, MPI_INT), mrc,
                  "unpack 4 bytes at position INT_MAX-2");
  EXPECT_EQ(fpos, INT_MAX - 2);
  EXPECT_TRUE(b.out_untouched());
}

TEST(BadInput, NegativePositionOrSize) {
  Buffers b;
  Vec v;
  for (MPI_Datatype t : {MPI_INT, v.t()}) {
    // Negative outsize: Open MPI checks it (MPI_ERR_ARG).
    int mpos = 0, fpos = 0;
    int mrc = MPI_Pack(b.in.data(), 1, t, b.out.data(), -1, &mpos, MPI_COMM_WORLD);
    EXPECT_EQ(error_class(mrc), MPI_ERR_ARG);
    EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 1, t, b.out.data(), -1, &fpos), mrc, "ferry_pack(outsize -1)");
    EXPECT_LIKE_MPI(ferry_pack(b.in.data(), 0, t, b.out.data(), -1, &fpos), mrc,
                    "ferry_pack(count 0, outsize -1)");
    EXPECT_EQ(fpos, 0);
    EXPECT_TRUE(b.out_untouched());

    // Negative position, negative insize: Open MPI does not check (it packs to outbuf - 1, or
    // reads past insize); Ferry documents MPI_ERR_ARG.
    fpos = -1;
    EXPECT_FERRY_CLASS(ferry_pack(b.in.data(), 1, t, b.out.data() + 64, 100, &fpos), MPI_ERR_ARG,
                       "ferry_pack(position -1)");
    EXPECT_EQ(fpos, -1);
    fpos = INT_MIN;
    EXPECT_FERRY_CLASS(ferry_pack(b.in.data(), 1, t, b.out.data() + 64, 100, &fpos), MPI_ERR_ARG,
                       "ferry_pack(position INT_MIN)");
    EXPECT_EQ(fpos, INT_MIN);
    fpos = -1;
    EXPECT_FERRY_CLASS(ferry_pack(b.in.data(), 0, t, b.out.data() + 64, 100, &fpos), MPI_ERR_ARG,
                       "ferry_pack(count 0, position -1)");
    EXPECT_TRUE(b.out_untouched());

    std::vector<unsigned char> packed(256, 0x11);
    fpos = -1;
    EXPECT_FERRY_CLASS(ferry_unpack(packed.data() + 64, 100, &fpos, b.out.data(), 1, t), MPI_ERR_ARG,
                       "ferry_unpack(position -1)");
    EXPECT_EQ(fpos, -1);
    fpos = 0;
    EXPECT_FERRY_CLASS(ferry_unpack(packed.data(), -1, &fpos, b.out.data(), 1, t), MPI_ERR_ARG,
                       "ferry_unpack(insize -1)");
    EXPECT_EQ(fpos, 0);
    EXPECT_TRUE(b.out_untouched());

    expect_throws(
        [&] {
          i64 pos = -1;
          ferry::pack(b.in.data(), 1, *ferry::lookup(t), b.out.data() + 64, 100, &pos);
        },
        MPI_ERR_ARG, "ferry::pack(position -1)");
    expect_throws(
        [&] {
          i64 pos = 0;
          ferry::pack(b.in.data(), 1, *ferry::lookup(t), b.out.data(), -5, &pos);
        },
        MPI_ERR_ARG, "ferry::pack(outsize -5)");
    expect_throws(
        [&] {
          i64 pos = 0;
          ferry::unpack(packed.data(), -5, &pos, b.out.data(), 1, *ferry::lookup(t));
        },
        MPI_ERR_ARG, "ferry::unpack(insize -5)");
    expect_throws(
        [&] {
          i64 pos = 0;
          ferry::pack(b.in.data(), -3, *ferry::lookup(t), b.out.data(), 100, &pos);
        },
        MPI_ERR_COUNT, "ferry::pack(count -3)");
    expect_throws(
        [&] {
          i64 pos = 0;
          ferry::unpack(packed.data(), 100, &pos, b.out.data(), -3, *ferry::lookup(t));
        },
        MPI_ERR_COUNT, "ferry::unpack(count -3)");
    expect_throws([&] { ferry::pack_size(-1, *ferry::lookup(t)); }, MPI_ERR_COUNT, "ferry::pack_size(-1)");
    EXPECT_TRUE(b.out_untouched());
  }
}

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
