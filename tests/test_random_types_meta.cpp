// tests/test_random_types_meta.cpp — test_random_types: metadata, IR and canonical-form checks.
#include "test_random_types.hpp"

namespace ferry_random_types {

// Ferry's metadata and IR against MPI's metadata and the type map.
void check_metadata(MPI_Datatype type, const MpiMeta& m, const RandomType& r) {
  std::shared_ptr<const ferry::Type> t;
  try {
    t = ferry::lookup(type);
  } catch (const ferry::Error& e) {
    ADD_FAILURE() << "ferry::lookup threw class " << e.mpi_error_class() << ": " << e.what();
    return;
  }
  ASSERT_TRUE(t) << "ferry::lookup returned null";
  const std::vector<i64>& map = r.map;
  i64 tlb = 0, text = 0;
  if (!map.empty()) {
    const auto [mn, mx] = std::minmax_element(map.begin(), map.end());
    tlb = *mn;
    text = *mx + 1 - *mn;
  }
  EXPECT_EQ(t->size(), m.size) << "size (MPI_Type_size_x)";
  EXPECT_EQ(t->lb(), m.lb) << "lb (MPI_Type_get_extent_x)";
  EXPECT_EQ(t->extent(), m.extent) << "extent (MPI_Type_get_extent_x)";
  // True bounds are those of the type map; Open MPI reports the same except where it mis-builds
  // the type (see the top of this file).
  EXPECT_EQ(t->true_lb(), tlb) << "true lb (type map; MPI_Type_get_true_extent_x says " << m.true_lb << ")";
  EXPECT_EQ(t->true_extent(), text)
      << "true extent (type map; MPI_Type_get_true_extent_x says " << m.true_extent << ")";

  // blocks(): contiguous runs Ferry copies; never fewer than the maximal runs of the type map, never
  // more than one per byte, 0 for an empty type.
  const i64 runs = ferry_test::map_runs(map);
  if (m.size == 0) {
    EXPECT_EQ(t->blocks(), 0) << "blocks() of an empty type";
  } else {
    EXPECT_GE(t->blocks(), runs) << "blocks() is below the number of contiguous runs in the type map";
    EXPECT_LE(t->blocks(), m.size) << "blocks() exceeds the number of bytes";
  }

  // dense(): count elements are one run of count*size bytes from true_lb, i.e. one element is the
  // bytes [true_lb, true_lb + size) in order and the extent equals the size.
  bool sequential = m.size > 0;
  for (size_t j = 0; j < map.size() && sequential; ++j) sequential = map[j] == tlb + static_cast<i64>(j);
  const bool want_dense = sequential && m.extent == m.size;
  // (An empty type is vacuously dense: any count of it is zero bytes.)
  if (m.size > 0) {
    EXPECT_EQ(t->dense(), want_dense) << "dense(): the type map is " << (sequential ? "" : "not ")
                                      << "one in-order run; extent " << m.extent << ", size " << m.size;
  }
  if (sequential) {
    // "Two descriptions of the same type map end in the same tree": one run is one Dense.
    EXPECT_EQ(t->root()->kind, ferry::NodeKind::dense)
        << "a single contiguous run did not canonicalize to a Dense node:\n"
        << ferry::to_string(t->root());
  }

  // strided(): when present it must describe the type map exactly.
  if (const auto& sb = t->strided()) {
    const bool shape_ok =
        sb->ndims() >= 1 && sb->strides.size() == sb->counts.size() && sb->strides[0] == 1;
    EXPECT_TRUE(shape_ok) << "malformed StridedBlock " << ferry::to_string(*sb);
    if (shape_ok) {
      i64 bytes = 1;
      for (i64 c : sb->counts) bytes *= c;
      EXPECT_EQ(bytes, m.size) << "StridedBlock " << ferry::to_string(*sb) << " covers " << bytes << " bytes";
      if (bytes == m.size) {
        EXPECT_TRUE(strided_map(*sb) == map)
            << "StridedBlock " << ferry::to_string(*sb) << " does not describe the type map";
      }
    }
  }

  // Compactness: the IR grows with the description, not with the counts in it.
  EXPECT_LE(t->root()->nodes, 4 * r.node_bound)
      << "IR has " << t->root()->nodes << " nodes for a description bounded by " << r.node_bound
      << " (blocks " << t->blocks() << "):\n"
      << ferry::to_string(t->root());

  // ferry_type_describe: NUL-terminated, never past len.
  char buf[96];
  std::memset(buf, 0x7E, sizeof buf);
  const int len = 1 + static_cast<int>(r.description.size() % 40);
  const int rc = ferry_type_describe(type, buf, len);
  EXPECT_EQ(rc, MPI_SUCCESS) << "ferry_type_describe: " << ferry_rc(rc);
  EXPECT_NE(std::memchr(buf, '\0', static_cast<size_t>(len)), nullptr)
      << "ferry_type_describe(len=" << len << ") did not NUL-terminate within len";
  for (size_t i = static_cast<size_t>(len); i < sizeof buf; ++i) {
    if (static_cast<unsigned char>(buf[i]) != 0x7E) {
      ADD_FAILURE() << "ferry_type_describe(len=" << len << ") wrote byte " << i;
      break;
    }
  }
}

// Canonical forms: a fixed point, the same whichever way the type map is described.
//   "canonicalize() rewrites the tree to a fixed point ... Two descriptions of the same type map end
//   in the same tree" (type.hpp); the rules include stream elision (count 1), dropping empty
//   entries, a Blocks of one entry is that entry, equal entries at a constant step become a Stream,
//   a Blocks that repeats a group of entries at a constant step becomes a Stream of the group.
void check_canonical_forms(MPI_Datatype type, const MpiMeta& m, const ferry::Type& t, std::mt19937_64& rng) {
  const ferry::NodePtr& root = t.root();
  try {
    const ferry::NodePtr again = ferry::canonicalize(root);
    EXPECT_TRUE(ferry::equal(again, root)) << "canonicalize() of a canonical tree changed it:\n"
                                           << ferry::to_string(root) << "became\n"
                                           << ferry::to_string(again);
    const ferry::Type from_raw(ferry::translate_raw(type), m.lb, m.extent);
    EXPECT_TRUE(ferry::equal(from_raw.root(), root))
        << "Type(translate_raw(type)) differs from the committed translation";
  } catch (const ferry::Error& e) {
    ADD_FAILURE() << "canonicalize/translate_raw threw: " << e.what();
    return;
  }

  // Pairs of MPI descriptions with one type map: {what, first, second}. The first is `type` itself
  // (nullptr) or a wrapper of it.
  const MPI_Aint e = static_cast<MPI_Aint>(m.extent);
  struct Built {
    std::string what;
    MPI_Datatype a = MPI_DATATYPE_NULL, b = MPI_DATATYPE_NULL;
  };
  const int which = std::uniform_int_distribution<int>(0, 11)(rng);
  Built p;
  const int one = 1, two[2] = {1, 1}, zero_last[2] = {1, 0};
  const MPI_Aint d0 = 0, d01[2] = {0, e}, dz[2] = {0, 40};
  const int i0 = 0, i01[2] = {0, 1}, iz[2] = {0, 5};
  switch (which) {
    case 0: p.what = "dup(T)"; MPI_Type_dup(type, &p.b); break;
    case 1: p.what = "contiguous(1, T)"; MPI_Type_contiguous(1, type, &p.b); break;
    case 2: p.what = "resized(T, its own lb and extent)"; MPI_Type_create_resized(type, static_cast<MPI_Aint>(m.lb), e, &p.b); break;
    case 3: p.what = "hvector(1, 1, 12345 bytes, T)"; MPI_Type_create_hvector(1, 1, 12345, type, &p.b); break;
    case 4: {
      p.what = "struct{1 x T at 0}";
      MPI_Type_create_struct(1, &one, &d0, &type, &p.b);
      break;
    }
    case 5: p.what = "hindexed_block(1, 1, [0], T)"; MPI_Type_create_hindexed_block(1, 1, &d0, type, &p.b); break;
    case 6: p.what = "indexed(2, [1,0], [0,5], T) (zero-length block)"; MPI_Type_indexed(2, zero_last, iz, type, &p.b); break;
    case 7: {
      p.what = "struct{1 x T at 0, 0 x MPI_DOUBLE at 40}";
      const MPI_Datatype ts[2] = {type, MPI_DOUBLE};
      MPI_Type_create_struct(2, zero_last, dz, ts, &p.b);
      break;
    }
    case 8: {
      const int sz = 1, sub = 1, st = 0;
      p.what = "subarray([1], [1], [0], T)";
      MPI_Type_create_subarray(1, &sz, &sub, &st, MPI_ORDER_C, type, &p.b);
      break;
    }
    case 9:
      p.what = "contiguous(2, T) vs hvector(2, 1, extent, T)";
      MPI_Type_contiguous(2, type, &p.a);
      MPI_Type_create_hvector(2, 1, e, type, &p.b);
      break;
    case 10: {
      p.what = "contiguous(2, T) vs struct{T at 0, T at extent}";
      MPI_Type_contiguous(2, type, &p.a);
      const MPI_Datatype ts[2] = {type, type};
      MPI_Type_create_struct(2, two, d01, ts, &p.b);
      break;
    }
    default: {
      const int len2 = 2;
      p.what = "indexed_block(2, 1, [0,1], T) vs indexed(1, [2], [0], T)";
      MPI_Type_create_indexed_block(2, 1, i01, type, &p.a);
      MPI_Type_indexed(1, &len2, &i0, type, &p.b);
      break;
    }
  }
  MPI_Datatype a = p.a == MPI_DATATYPE_NULL ? type : p.a;
  if (p.a != MPI_DATATYPE_NULL) MPI_Type_commit(&p.a);
  MPI_Type_commit(&p.b);
  try {
    const ferry::NodePtr ra = p.a == MPI_DATATYPE_NULL ? root : ferry::translate(a).root();
    const ferry::NodePtr rb = ferry::translate(p.b).root();
    EXPECT_TRUE(ferry::equal(ra, rb)) << "equivalent descriptions canonicalize differently: " << p.what
                                      << "\nfirst:\n" << ferry::to_string(ra) << "second:\n"
                                      << ferry::to_string(rb);
  } catch (const ferry::Error& err) {
    ADD_FAILURE() << "translate threw for " << p.what << ": " << err.what();
  }
  if (p.a != MPI_DATATYPE_NULL) MPI_Type_free(&p.a);
  MPI_Type_free(&p.b);
}

}  // namespace ferry_random_types
