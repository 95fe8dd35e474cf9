// Pack and unpack on hand-picked types against the system MPI's MPI_Pack/MPI_Unpack: the cases the
// engine treats specially (dense, strided with count folded into a dimension, general form),
// positions that continue, and MPI_Pack_size.
#include <ferry/ferry.h>
#include <ferry/pack.hpp>
#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

struct Case {
  const char* name;
  MPI_Datatype type;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  MPI_Datatype t, u;
  out.push_back({"MPI_DOUBLE", MPI_DOUBLE});
  out.push_back({"MPI_SHORT_INT", MPI_SHORT_INT});
  MPI_Type_vector(17, 3, 5, MPI_INT, &t);
  out.push_back({"vector 17x3 ints stride 5", t});
  MPI_Type_vector(4, 6, 6, MPI_FLOAT, &t);  // dense
  out.push_back({"dense vector", t});
  MPI_Type_vector(8, 2, 3, MPI_DOUBLE, &u);  // count continues the outer stride when resized
  MPI_Type_create_resized(u, 0, 8 * 3 * 8, &t);
  MPI_Type_free(&u);
  out.push_back({"vector resized to its stride", t});
  MPI_Type_create_resized(MPI_INT, -4, 12, &t);
  out.push_back({"int resized lb -4 extent 12", t});
  int lens[3] = {1, 3, 2};
  MPI_Aint disps[3] = {-40, 0, 100};
  MPI_Datatype types[3] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT};
  MPI_Type_create_struct(3, lens, disps, types, &t);
  out.push_back({"struct with negative displacement", t});
  int sizes[3] = {20, 30, 40}, sub[3] = {4, 5, 6}, st[3] = {1, 2, 3};
  MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_FORTRAN, MPI_DOUBLE, &t);
  out.push_back({"Fortran subarray", t});
  MPI_Type_create_hvector(5, 2, -24, MPI_INT, &t);
  out.push_back({"negative-stride hvector", t});
  return out;
}

TEST(Pack, MatchesMpiPackWithContinuingPositions) {
  std::mt19937 rng(7);
  for (Case c : cases()) {
    SCOPED_TRACE(c.name);
    MPI_Datatype t = c.type;
    int combiner, ni, na, nd;
    MPI_Type_get_envelope(t, &ni, &na, &nd, &combiner);
    bool derived = combiner != MPI_COMBINER_NAMED;
    if (derived) MPI_Type_commit(&t);
    ASSERT_EQ(ferry_type_commit(t), MPI_SUCCESS) << ferry_error_string();
    MPI_Aint lb, extent, tlb, textent;
    MPI_Type_get_extent(t, &lb, &extent);
    MPI_Type_get_true_extent(t, &tlb, &textent);
    for (int count : {1, 2, 5}) {
      // Memory for `count` elements with room below the origin for negative displacements.
      std::size_t span = static_cast<std::size_t>(textent + (count - 1) * std::abs(extent)) + 64;
      // origin - tlb .. lies in the middle; elements reach span bytes either way.
      std::vector<unsigned char> mem(2 * span + 256);
      for (auto& b : mem) b = static_cast<unsigned char>(rng());
      unsigned char* origin = mem.data() + span + 128 - tlb;
      int size = 0, mpi_size = 0;
      ASSERT_EQ(ferry_pack_size(count, t, &size), MPI_SUCCESS);
      MPI_Pack_size(count, t, MPI_COMM_WORLD, &mpi_size);
      EXPECT_EQ(size, mpi_size);
      const int start = 3;  // pack twice after 3 bytes already in the buffer
      std::vector<unsigned char> mine(static_cast<std::size_t>(start + 2 * size), 0x5A);
      std::vector<unsigned char> theirs(mine);
      int pm = start, pt = start;
      ASSERT_EQ(ferry_pack(origin, count, t, mine.data(), static_cast<int>(mine.size()), &pm),
                MPI_SUCCESS);
      ASSERT_EQ(ferry_pack(origin, count, t, mine.data(), static_cast<int>(mine.size()), &pm),
                MPI_SUCCESS);
      MPI_Pack(origin, count, t, theirs.data(), static_cast<int>(theirs.size()), &pt,
               MPI_COMM_WORLD);
      MPI_Pack(origin, count, t, theirs.data(), static_cast<int>(theirs.size()), &pt,
               MPI_COMM_WORLD);
      EXPECT_EQ(pm, pt);
      EXPECT_EQ(mine, theirs) << "count " << count;

      // Unpack into poisoned copies: the same bytes change.
      std::vector<unsigned char> out_mine(mem.size(), 0xA5), out_theirs(mem.size(), 0xA5);
      unsigned char* om = out_mine.data() + (origin - mem.data());
      unsigned char* ot = out_theirs.data() + (origin - mem.data());
      pm = start;
      pt = start;
      ASSERT_EQ(ferry_unpack(mine.data(), static_cast<int>(mine.size()), &pm, om, count, t),
                MPI_SUCCESS);
      MPI_Unpack(theirs.data(), static_cast<int>(theirs.size()), &pt, ot, count, t,
                 MPI_COMM_WORLD);
      EXPECT_EQ(pm, pt);
      EXPECT_EQ(out_mine, out_theirs) << "count " << count;
    }
    ASSERT_EQ(ferry_type_free(t), MPI_SUCCESS);
    if (derived) MPI_Type_free(&t);
  }
}

// Types built on MPI_Type_create_f90_real are predefined: usable without a commit, and their
// handles, returned by MPI_Type_get_contents, must not be freed by the translation.
TEST(Pack, Fortran90TypesArePredefined) {
  MPI_Datatype r, c;
  ASSERT_EQ(MPI_Type_create_f90_real(6, MPI_UNDEFINED, &r), MPI_SUCCESS);
  int size = 0;
  EXPECT_EQ(ferry_pack_size(3, r, &size), MPI_SUCCESS) << ferry_error_string();
  int mpi_size = 0;
  MPI_Pack_size(3, r, MPI_COMM_WORLD, &mpi_size);
  EXPECT_EQ(size, mpi_size);
  MPI_Type_vector(4, 1, 2, r, &c);
  MPI_Type_commit(&c);
  ASSERT_EQ(ferry_type_commit(c), MPI_SUCCESS) << ferry_error_string();
  std::vector<float> in(8);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  std::vector<char> mine(64), theirs(64);
  int pm = 0, pt = 0;
  ASSERT_EQ(ferry_pack(in.data(), 1, c, mine.data(), 64, &pm), MPI_SUCCESS);
  MPI_Pack(in.data(), 1, c, theirs.data(), 64, &pt, MPI_COMM_WORLD);
  EXPECT_EQ(pm, pt);
  EXPECT_EQ(mine, theirs);
  EXPECT_EQ(ferry_type_free(c), MPI_SUCCESS);
  MPI_Type_free(&c);
}

TEST(Pack, CppApiRoundTripsAndReportsSizes) {
  MPI_Datatype t;
  MPI_Type_vector(100, 3, 7, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  ferry::Type ty = ferry::translate(t);
  MPI_Type_free(&t);
  std::vector<double> src(700 * 2), dst(700 * 2, -1.0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i);
  ASSERT_EQ(ferry::pack_size(2, ty), 2 * 300 * 8);
  std::vector<char> packed(static_cast<std::size_t>(ferry::pack_size(2, ty)));
  ferry::i64 pos = 0;
  ferry::pack(src.data(), 2, ty, packed.data(), static_cast<ferry::i64>(packed.size()), &pos);
  EXPECT_EQ(pos, static_cast<ferry::i64>(packed.size()));
  pos = 0;
  ferry::unpack(packed.data(), static_cast<ferry::i64>(packed.size()), &pos, dst.data(), 2, ty);
  // Element 1 starts one extent (99*7+3 doubles) after element 0.
  for (std::size_t e = 0; e < 2; ++e)
    for (std::size_t b = 0; b < 100; ++b)
      for (std::size_t k = 0; k < 7; ++k) {
        std::size_t i = e * (99 * 7 + 3) + b * 7 + k;
        if (k < 3) EXPECT_EQ(dst[i], src[i]);
      }
  EXPECT_EQ(dst[3], -1.0);  // a gap stays untouched
}

}  // namespace
