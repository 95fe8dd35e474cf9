// Translation and canonicalization: the dissertation's worked example, equivalent descriptions of
// one object, each rewrite rule, and the compactness of the general form.
#include <ferry/error.hpp>
#include <ferry/type.hpp>
#include <gtest/gtest.h>

#include <vector>

namespace {

using ferry::i64;
using ferry::StridedBlock;

// Commits `t` (and frees the handle): the Ferry type it translates to.
ferry::Type take(MPI_Datatype t) {
  MPI_Type_commit(&t);
  ferry::Type r = ferry::translate(t);
  MPI_Type_free(&t);
  return r;
}

StridedBlock sb(i64 start, std::vector<i64> counts, std::vector<i64> strides) {
  StridedBlock b;
  b.start = start;
  b.counts = std::move(counts);
  b.strides = std::move(strides);
  return b;
}

void expect_strided(const ferry::Type& t, const StridedBlock& want) {
  ASSERT_TRUE(t.strided().has_value()) << ferry::to_string(t.root());
  EXPECT_EQ(*t.strided(), want) << "got " << ferry::to_string(*t.strided()) << "\nwant "
                                << ferry::to_string(want);
}

TEST(Canonical, DissertationWorkedExample) {
  // Fig. 5.8-5.10: the -X interior of a 256^3 grid, radius 3, 8-byte values, 2560-byte pitch.
  int sizes[3] = {262, 262, 2560}, subsizes[3] = {256, 256, 24}, starts[3] = {3, 3, 24};
  MPI_Datatype t;
  MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_BYTE, &t);
  MPI_Type_commit(&t);

  // Fig. 5.9, the IR straight from translation.
  ferry::NodePtr raw = ferry::translate_raw(t);
  ASSERT_EQ(raw->kind, ferry::NodeKind::stream);
  EXPECT_EQ(raw->off, 2012160);
  EXPECT_EQ(raw->count, 256);
  EXPECT_EQ(raw->stride, 670720);
  const ferry::NodePtr& y = raw->child;
  EXPECT_EQ(y->off, 7680);
  EXPECT_EQ(y->count, 256);
  EXPECT_EQ(y->stride, 2560);
  const ferry::NodePtr& x = y->child;
  EXPECT_EQ(x->off, 24);
  EXPECT_EQ(x->count, 24);
  EXPECT_EQ(x->stride, 1);
  ASSERT_EQ(x->child->kind, ferry::NodeKind::dense);
  EXPECT_EQ(x->child->size, 1);

  // Fig. 5.10 and the StridedBlock of §5.2.4.
  ferry::Type ty = ferry::translate(t);
  expect_strided(ty, sb(2019864, {24, 256, 256}, {1, 2560, 670720}));
  EXPECT_EQ(ty.size(), 24 * 256 * 256);
  EXPECT_EQ(ty.blocks(), 256 * 256);
  MPI_Type_free(&t);
}

// §5.1.3 / fig. 5.4: a 3D object of E0 x E1 x E2 floats in an A0 x A1 x A2-byte allocation (the
// figure's A0 = 256 B cannot hold E0 = 100 floats; rows are 1024 B here).
constexpr int A0 = 1024, A1 = 512, A2 = 1024, E0 = 100, E1 = 13, E2 = 47;

std::vector<std::pair<const char*, MPI_Datatype>> descriptions_of_one_cuboid() {
  std::vector<std::pair<const char*, MPI_Datatype>> out;
  MPI_Datatype row, plane, cuboid, tmp;
  {
    int sizes[3] = {A2, A1, A0 / 4}, sub[3] = {E2, E1, E0}, st[3] = {0, 0, 0};
    MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_C, MPI_FLOAT, &cuboid);
    out.push_back({"subarray of floats", cuboid});
  }
  {
    int sizes[3] = {A0, A1, A2}, sub[3] = {E0 * 4, E1, E2}, st[3] = {0, 0, 0};
    MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_FORTRAN, MPI_BYTE, &cuboid);
    out.push_back({"Fortran-order subarray of bytes", cuboid});
  }
  {
    MPI_Type_vector(E1, E0, A0 / 4, MPI_FLOAT, &plane);
    MPI_Type_create_hvector(E2, 1, A0 * A1, plane, &cuboid);
    MPI_Type_free(&plane);
    out.push_back({"hvector of vector", cuboid});
  }
  {
    MPI_Type_contiguous(E0, MPI_FLOAT, &row);
    MPI_Type_create_hvector(E1, 1, A0, row, &plane);
    MPI_Type_create_hvector(E2, 1, A0 * A1, plane, &cuboid);
    MPI_Type_free(&row);
    MPI_Type_free(&plane);
    out.push_back({"hvector of hvector of contiguous", cuboid});
  }
  {
    MPI_Type_vector(E0, 4, 4, MPI_BYTE, &row);
    MPI_Type_create_hvector(E1, 1, A0, row, &plane);
    MPI_Type_create_hvector(E2, 1, A0 * A1, plane, &cuboid);
    MPI_Type_free(&row);
    MPI_Type_free(&plane);
    out.push_back({"hvector of hvector of vector", cuboid});
  }
  {
    int sz = A0, sub = E0 * 4, st = 0;
    MPI_Type_create_subarray(1, &sz, &sub, &st, MPI_ORDER_C, MPI_BYTE, &row);
    int sizes[2] = {A2, A1}, subs[2] = {E2, E1}, sts[2] = {0, 0};
    MPI_Type_create_subarray(2, sizes, subs, sts, MPI_ORDER_C, row, &cuboid);
    MPI_Type_free(&row);
    out.push_back({"subarray of a subarray row", cuboid});
  }
  {
    int sz = A0 / 4, sub = E0, st = 0;
    MPI_Type_create_subarray(1, &sz, &sub, &st, MPI_ORDER_C, MPI_FLOAT, &row);
    MPI_Type_vector(E1, 1, 1, row, &plane);
    MPI_Type_create_hvector(E2, 1, A0 * A1, plane, &cuboid);
    MPI_Type_free(&row);
    MPI_Type_free(&plane);
    out.push_back({"hvector of vector of subarray rows", cuboid});
  }
  {
    MPI_Type_contiguous(E0 * 4, MPI_BYTE, &tmp);
    MPI_Type_create_resized(tmp, 0, A0, &row);
    MPI_Type_contiguous(E1, row, &plane);
    MPI_Type_free(&tmp);
    MPI_Type_free(&row);
    MPI_Type_create_resized(plane, 0, A0 * A1, &tmp);
    MPI_Type_contiguous(E2, tmp, &cuboid);
    MPI_Type_free(&plane);
    MPI_Type_free(&tmp);
    out.push_back({"contiguous of resized contiguous", cuboid});
  }
  {
    int lens[1] = {1};
    MPI_Aint disps[1] = {0};
    MPI_Type_vector(E1, E0, A0 / 4, MPI_FLOAT, &plane);
    MPI_Datatype types[1] = {plane};
    MPI_Type_create_struct(1, lens, disps, types, &tmp);
    MPI_Type_free(&plane);
    MPI_Type_create_hvector(E2, 1, A0 * A1, tmp, &cuboid);
    MPI_Type_free(&tmp);
    out.push_back({"hvector of struct of vector", cuboid});
  }
  {  // Every plane listed explicitly: a regular hindexed is a stream.
    std::vector<int> lens(E2, 1);
    std::vector<MPI_Aint> disps(E2);
    for (int i = 0; i < E2; ++i) disps[static_cast<std::size_t>(i)] = MPI_Aint{i} * A0 * A1;
    MPI_Type_vector(E1, E0, A0 / 4, MPI_FLOAT, &plane);
    MPI_Type_create_hindexed(E2, lens.data(), disps.data(), plane, &cuboid);
    MPI_Type_free(&plane);
    out.push_back({"hindexed of vector", cuboid});
  }
  return out;
}

TEST(Canonical, EquivalentDescriptionsOfOneCuboid) {
  const StridedBlock want = sb(0, {E0 * 4, E1, E2}, {1, A0, A0 * A1});
  auto descs = descriptions_of_one_cuboid();
  ferry::Type first = take(descs[0].second);
  expect_strided(first, want);
  for (std::size_t i = 1; i < descs.size(); ++i) {
    SCOPED_TRACE(descs[i].first);
    ferry::Type t = take(descs[i].second);
    expect_strided(t, want);
    EXPECT_TRUE(ferry::equal(t.root(), first.root())) << ferry::to_string(t.root());
  }
}

TEST(Canonical, OffsetsHoistToOneStart) {
  // A subarray with starts and an hvector placed by a one-block hindexed end up the same.
  int sizes[3] = {A2, A1, A0 / 4}, sub[3] = {E2, E1, E0}, st[3] = {5, 3, 2};
  MPI_Datatype a, plane, cub, b;
  MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_C, MPI_FLOAT, &a);
  MPI_Type_vector(E1, E0, A0 / 4, MPI_FLOAT, &plane);
  MPI_Type_create_hvector(E2, 1, A0 * A1, plane, &cub);
  MPI_Aint disp = 5 * A0 * A1 + 3 * A0 + 2 * 4;
  MPI_Type_create_hindexed_block(1, 1, &disp, cub, &b);
  MPI_Type_free(&plane);
  MPI_Type_free(&cub);
  ferry::Type ta = take(a), tb = take(b);
  expect_strided(ta, sb(disp, {E0 * 4, E1, E2}, {1, A0, A0 * A1}));
  EXPECT_TRUE(ferry::equal(ta.root(), tb.root()));
}

TEST(Canonical, DenseFoldingMakesOneBlock) {
  MPI_Datatype inner, t;
  MPI_Type_contiguous(8, MPI_INT, &inner);
  MPI_Type_contiguous(4, inner, &t);
  MPI_Type_free(&inner);
  ferry::Type ty = take(t);
  expect_strided(ty, sb(0, {128}, {1}));
  EXPECT_TRUE(ty.dense());
}

TEST(Canonical, StructOfAbuttingFieldsIsDense) {
  int lens[3] = {1, 2, 1};
  MPI_Aint disps[3] = {0, 4, 12};
  MPI_Datatype types[3] = {MPI_INT, MPI_FLOAT, MPI_INT}, t;
  MPI_Type_create_struct(3, lens, disps, types, &t);
  ferry::Type ty = take(t);
  expect_strided(ty, sb(0, {16}, {1}));
}

TEST(Canonical, RegularIndexedIsAVector) {
  int lens[4] = {2, 2, 2, 2}, disps[4] = {0, 25, 50, 75};
  MPI_Datatype a, b;
  MPI_Type_indexed(4, lens, disps, MPI_INT, &a);
  MPI_Type_vector(4, 2, 25, MPI_INT, &b);
  ferry::Type ta = take(a), tb = take(b);
  expect_strided(ta, sb(0, {8, 4}, {1, 100}));
  EXPECT_TRUE(ferry::equal(ta.root(), tb.root()));
}

// Found by the random-type test (seed 1327106069): a type and the same type wrapped in an indexed
// type with one more, zero-length, block canonicalized apart. Two equal streams that continue each
// other became a stream of two streams in one description and one longer stream in the other, and
// their neighbours were grouped around that difference before a later pass flattened it.
TEST(Canonical, ContinuingStreamsMergeAloneOrWrapped) {
  MPI_Datatype inner, resized, elem, t, wrapped;
  MPI_Type_vector(4, 1, 2, MPI_PACKED, &inner);
  MPI_Type_create_resized(inner, 0, 8, &resized);
  MPI_Type_vector(10, 3, 2, resized, &elem);
  int lens[7] = {2, 1, 2, 2, 4, 1, 3}, disps[7] = {-16, -13, -9, -7, -4, 3, 4};
  MPI_Type_indexed(7, lens, disps, elem, &t);
  int wlens[2] = {1, 0}, wdisps[2] = {0, 5};
  MPI_Type_indexed(2, wlens, wdisps, t, &wrapped);
  MPI_Type_free(&inner);
  MPI_Type_free(&resized);
  MPI_Type_free(&elem);
  MPI_Type_commit(&t);
  const ferry::Type plain = ferry::translate(t);
  const ferry::Type wrap = take(wrapped);
  MPI_Type_free(&t);
  EXPECT_TRUE(ferry::equal(plain.root(), wrap.root()))
      << "alone:\n" << ferry::to_string(plain.root()) << "wrapped:\n" << ferry::to_string(wrap.root());
}

TEST(Canonical, NegativeStrideKeepsTypeMapOrder) {
  MPI_Datatype t;
  MPI_Type_create_hvector(3, 1, -16, MPI_INT, &t);
  ferry::Type ty = take(t);
  expect_strided(ty, sb(0, {4, 3}, {1, -16}));
  EXPECT_EQ(ty.true_lb(), -32);
}

TEST(Canonical, StreamsAreNotReordered) {
  // Columns of rows and rows of columns select the same bytes in a different order; MPI_Pack
  // writes them in type-map order, so Ferry must keep the two apart.
  MPI_Datatype col, a, row, b;
  MPI_Type_vector(3, 1, 4, MPI_INT, &col);  // 3 ints 16 B apart
  MPI_Type_create_hvector(2, 1, 4, col, &a);
  MPI_Type_contiguous(2, MPI_INT, &row);
  MPI_Type_create_hvector(3, 1, 16, row, &b);
  MPI_Type_free(&col);
  MPI_Type_free(&row);
  ferry::Type ta = take(a), tb = take(b);
  expect_strided(ta, sb(0, {4, 3, 2}, {1, 16, 4}));
  expect_strided(tb, sb(0, {8, 3}, {1, 16}));
  EXPECT_FALSE(ferry::equal(ta.root(), tb.root()));
}

TEST(Canonical, EmptyBlocksVanish) {
  int lens[4] = {0, 3, 0, 3}, disps[4] = {7, 0, 9, 3};
  MPI_Datatype t;
  MPI_Type_indexed(4, lens, disps, MPI_DOUBLE, &t);
  ferry::Type ty = take(t);
  expect_strided(ty, sb(0, {48}, {1}));
}

TEST(Canonical, DarrayBlockIsASubarray) {
  // 2 x 3 process grid, rank 4 (coords 1,1), block-distributed 100 x 90 doubles.
  int gsizes[2] = {100, 90}, distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK};
  int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, psizes[2] = {2, 3};
  MPI_Datatype d, s;
  MPI_Type_create_darray(6, 4, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_DOUBLE, &d);
  int sub[2] = {50, 30}, st[2] = {50, 30};
  MPI_Type_create_subarray(2, gsizes, sub, st, MPI_ORDER_C, MPI_DOUBLE, &s);
  ferry::Type td = take(d), ts = take(s);
  EXPECT_TRUE(ferry::equal(td.root(), ts.root())) << ferry::to_string(td.root());
  EXPECT_EQ(td.extent(), 100 * 90 * 8);
}

TEST(Canonical, DarrayCyclicKeepsItsShortLastBlock) {
  // 10 elements, cyclic(3) over 2 processes: rank 1 owns 3,4,5 and 9.
  int g = 10, distrib = MPI_DISTRIBUTE_CYCLIC, darg = 3, p = 2;
  MPI_Datatype d;
  MPI_Type_create_darray(2, 1, 1, &g, &distrib, &darg, &p, MPI_ORDER_C, MPI_INT, &d);
  ferry::Type td = take(d);
  EXPECT_EQ(td.size(), 4 * 4);
  EXPECT_EQ(td.blocks(), 2);
  EXPECT_EQ(td.true_lb(), 12);
  EXPECT_EQ(td.true_extent(), 28);
}

TEST(Canonical, GeneralFormStaysFactored) {
  // 1000 copies of an irregular 100-block indexed type: 10^5 blocks, a handful of IR nodes.
  std::vector<int> lens(100), disps(100);
  for (int i = 0; i < 100; ++i) {
    lens[static_cast<std::size_t>(i)] = 1 + i % 3;
    disps[static_cast<std::size_t>(i)] = i * 7 + (i * i) % 5;
  }
  MPI_Datatype idx, t;
  MPI_Type_indexed(100, lens.data(), disps.data(), MPI_INT, &idx);
  MPI_Type_vector(1000, 1, 3, idx, &t);
  MPI_Type_free(&idx);
  ferry::Type ty = take(t);
  EXPECT_FALSE(ty.strided().has_value());
  EXPECT_GE(ty.blocks(), 1000 * 50);
  EXPECT_LE(ty.root()->nodes, 120) << "the general form was unrolled";
}

TEST(Canonical, PairTypesHaveTheirHoles) {
  ferry::Type t = ferry::translate(MPI_SHORT_INT);
  EXPECT_EQ(t.size(), 6);
  EXPECT_EQ(t.blocks(), 2);
  EXPECT_FALSE(t.strided().has_value());
  ferry::Type d = ferry::translate(MPI_DOUBLE);
  expect_strided(d, sb(0, {8}, {1}));
}

TEST(Canonical, NullTypeIsAnError) {
  try {
    ferry::translate(MPI_DATATYPE_NULL);
    FAIL() << "no error";
  } catch (const ferry::Error& e) {
    EXPECT_EQ(e.mpi_error_class(), MPI_ERR_TYPE);
  }
}

}  // namespace
