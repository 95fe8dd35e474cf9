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
#include "test_bad_input.hpp"

namespace {

using namespace ferry_bad_input;

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

}  // namespace
