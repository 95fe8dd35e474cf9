// bench/bench_types.cpp — the MPI datatypes the benchmarks measure, and small helpers.
#include "bench_common.hpp"

#include <cstdio>
#include <cstring>
#include <sstream>

namespace ferry_bench {

void die(const std::string& msg) {
  std::fprintf(stderr, "ferry bench: %s\n", msg.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::abort();
}

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  die(std::string(what) + " failed: " + msg);
}

namespace {

MPI_Datatype committed(MPI_Datatype t) {
  check_mpi(MPI_Type_commit(&t), "MPI_Type_commit");
  return t;
}

void free_type(MPI_Datatype t) { check_mpi(MPI_Type_free(&t), "MPI_Type_free"); }

MPI_Datatype contiguous(int count, MPI_Datatype old) {
  MPI_Datatype t;
  check_mpi(MPI_Type_contiguous(count, old, &t), "MPI_Type_contiguous");
  return t;
}

MPI_Datatype vector(int count, int blocklen, int stride, MPI_Datatype old) {
  MPI_Datatype t;
  check_mpi(MPI_Type_vector(count, blocklen, stride, old, &t), "MPI_Type_vector");
  return t;
}

MPI_Datatype hvector(int count, int blocklen, MPI_Aint stride, MPI_Datatype old) {
  MPI_Datatype t;
  check_mpi(MPI_Type_create_hvector(count, blocklen, stride, old, &t), "MPI_Type_create_hvector");
  return t;
}

MPI_Datatype subarray(std::vector<int> sizes, std::vector<int> subsizes, std::vector<int> starts,
                      MPI_Datatype old) {
  MPI_Datatype t;
  check_mpi(MPI_Type_create_subarray(static_cast<int>(sizes.size()), sizes.data(), subsizes.data(),
                                     starts.data(), MPI_ORDER_C, old, &t),
            "MPI_Type_create_subarray");
  return t;
}

MPI_Datatype resized(MPI_Datatype old, MPI_Aint lb, MPI_Aint extent) {
  MPI_Datatype t;
  check_mpi(MPI_Type_create_resized(old, lb, extent, &t), "MPI_Type_create_resized");
  return t;
}

// Builds `outer` from `inner` and frees `inner` (MPI keeps what the new type needs).
template <class F>
MPI_Datatype over(MPI_Datatype inner, F outer) {
  MPI_Datatype t = outer(inner);
  free_type(inner);
  return t;
}

// Fig. 5.4 sizes. A0 in floats (see bench_common.hpp).
constexpr int A0 = 256, A1 = 512, A2 = 1024;
constexpr int E0 = 100, E1 = 13, E2 = 47;
constexpr int F = 4;                                   // sizeof(float)
constexpr MPI_Aint kRowPitch = MPI_Aint{F} * A0;       // 1024 B
constexpr MPI_Aint kPlanePitch = kRowPitch * A1;       // 512 KiB

}  // namespace

std::vector<TypeRecipe> object3d_recipes() {
  std::vector<TypeRecipe> r;
  r.push_back({"subarray_float",
               "subarray(3, {A2,A1,A0}, {E2,E1,E0}, {0,0,0}, C, MPI_FLOAT)",
               [] { return committed(subarray({A2, A1, A0}, {E2, E1, E0}, {0, 0, 0}, MPI_FLOAT)); }});
  r.push_back({"subarray_byte",
               "subarray(3, {A2,A1,4*A0}, {E2,E1,4*E0}, {0,0,0}, C, MPI_BYTE)",
               [] {
                 return committed(
                     subarray({A2, A1, F * A0}, {E2, E1, F * E0}, {0, 0, 0}, MPI_BYTE));
               }});
  r.push_back({"hvector_of_vector",
               "hvector(E2, 1, 4*A0*A1, vector(E1, E0, A0, MPI_FLOAT))",
               [] {
                 MPI_Datatype plane = vector(E1, E0, A0, MPI_FLOAT);
                 return committed(over(plane, [](MPI_Datatype p) { return hvector(E2, 1, kPlanePitch, p); }));
               }});
  r.push_back({"hvector_of_byte_vector",
               "hvector(E2, 1, 4*A0*A1, vector(E1, 4*E0, 4*A0, MPI_BYTE))",
               [] {
                 MPI_Datatype plane = vector(E1, F * E0, F * A0, MPI_BYTE);
                 return committed(over(plane, [](MPI_Datatype p) { return hvector(E2, 1, kPlanePitch, p); }));
               }});
  r.push_back({"hvector_hvector_contig",
               "hvector(E2, 1, 4*A0*A1, hvector(E1, 1, 4*A0, contiguous(E0, MPI_FLOAT)))",
               [] {
                 MPI_Datatype row = contiguous(E0, MPI_FLOAT);
                 MPI_Datatype plane = over(row, [](MPI_Datatype t) { return hvector(E1, 1, kRowPitch, t); });
                 return committed(over(plane, [](MPI_Datatype p) { return hvector(E2, 1, kPlanePitch, p); }));
               }});
  r.push_back({"hvector_hvector_vector",
               "hvector(E2, 1, 4*A0*A1, hvector(E1, 1, 4*A0, vector(E0, 4, 4, MPI_BYTE)))",
               [] {
                 MPI_Datatype row = vector(E0, F, F, MPI_BYTE);
                 MPI_Datatype plane = over(row, [](MPI_Datatype t) { return hvector(E1, 1, kRowPitch, t); });
                 return committed(over(plane, [](MPI_Datatype p) { return hvector(E2, 1, kPlanePitch, p); }));
               }});
  r.push_back({"hvector_hvector_hvector",
               "hvector(E2, 1, 4*A0*A1, hvector(E1, 1, 4*A0, hvector(4*E0, 1, 1, MPI_BYTE)))",
               [] {
                 MPI_Datatype row = hvector(F * E0, 1, 1, MPI_BYTE);
                 MPI_Datatype plane = over(row, [](MPI_Datatype t) { return hvector(E1, 1, kRowPitch, t); });
                 return committed(over(plane, [](MPI_Datatype p) { return hvector(E2, 1, kPlanePitch, p); }));
               }});
  r.push_back({"subarray_of_subarray_row",
               "subarray(2, {A2,A1}, {E2,E1}, {0,0}, C, subarray(1, {A0}, {E0}, {0}, C, MPI_FLOAT))",
               [] {
                 MPI_Datatype row = subarray({A0}, {E0}, {0}, MPI_FLOAT);
                 return committed(over(row, [](MPI_Datatype t) { return subarray({A2, A1}, {E2, E1}, {0, 0}, t); }));
               }});
  r.push_back({"subarray_of_contig_row",
               "subarray(2, {A2,A1}, {E2,E1}, {0,0}, C, resized(contiguous(E0, MPI_FLOAT), 0, 4*A0))",
               [] {
                 MPI_Datatype row = over(contiguous(E0, MPI_FLOAT),
                                         [](MPI_Datatype t) { return resized(t, 0, kRowPitch); });
                 return committed(over(row, [](MPI_Datatype t) { return subarray({A2, A1}, {E2, E1}, {0, 0}, t); }));
               }});
  r.push_back({"vector_of_subarray_rows",
               "hvector(E2, 1, 4*A0*A1, vector(E1, 1, 1, subarray(1, {A0}, {E0}, {0}, C, MPI_FLOAT)))",
               [] {
                 MPI_Datatype row = subarray({A0}, {E0}, {0}, MPI_FLOAT);
                 MPI_Datatype plane = over(row, [](MPI_Datatype t) { return vector(E1, 1, 1, t); });
                 return committed(over(plane, [](MPI_Datatype p) { return hvector(E2, 1, kPlanePitch, p); }));
               }});
  r.push_back({"contig_of_subarray_planes",
               "contiguous(E2, subarray(2, {A1,A0}, {E1,E0}, {0,0}, C, MPI_FLOAT))",
               [] {
                 MPI_Datatype plane = subarray({A1, A0}, {E1, E0}, {0, 0}, MPI_FLOAT);
                 return committed(over(plane, [](MPI_Datatype p) { return contiguous(E2, p); }));
               }});
  r.push_back({"hindexed_block_rows",
               "hvector(E2, 1, 4*A0*A1, hindexed_block(E1, 1, {i*4*A0}, contiguous(E0, MPI_FLOAT)))",
               [] {
                 std::vector<MPI_Aint> disps(E1);
                 for (int i = 0; i < E1; ++i) disps[i] = i * kRowPitch;
                 MPI_Datatype row = contiguous(E0, MPI_FLOAT);
                 MPI_Datatype plane = over(row, [&](MPI_Datatype t) {
                   MPI_Datatype p;
                   check_mpi(MPI_Type_create_hindexed_block(E1, 1, disps.data(), t, &p),
                             "MPI_Type_create_hindexed_block");
                   return p;
                 });
                 return committed(over(plane, [](MPI_Datatype p) { return hvector(E2, 1, kPlanePitch, p); }));
               }});
  r.push_back({"struct_of_subarray",
               "struct(1, {1}, {0}, {subarray(3, {A2,A1,A0}, {E2,E1,E0}, {0,0,0}, C, MPI_FLOAT)})",
               [] {
                 MPI_Datatype cuboid = subarray({A2, A1, A0}, {E2, E1, E0}, {0, 0, 0}, MPI_FLOAT);
                 return committed(over(cuboid, [](MPI_Datatype c) {
                   int bl = 1;
                   MPI_Aint disp = 0;
                   MPI_Datatype s;
                   check_mpi(MPI_Type_create_struct(1, &bl, &disp, &c, &s), "MPI_Type_create_struct");
                   return s;
                 }));
               }});
  // Every description is 100-float (400 B) rows, 13 per plane at the row pitch, 47 planes.
  for (TypeRecipe& t : r) t.expect = ferry::StridedBlock{0, {F * E0, E1, E2}, {1, kRowPitch, kPlanePitch}};
  return r;
}

std::vector<TypeRecipe> halo_recipes(bool with_listing) {
  constexpr int N = kHaloN, R = kHaloR, A = kHaloA;
  constexpr i64 row = i64{8} * A, plane = row * A;  // 2096 B, 549152 B
  constexpr i64 interior = R * plane + R * row + R * 8;  // first interior point: 1653768 B
  std::vector<TypeRecipe> r;
  // C order: dimension 0 is Z (slowest), 2 is X (contiguous).
  r.push_back({"halo_-X", "subarray(3, {262,262,262}, {256,256,3}, {3,3,3}, C, MPI_DOUBLE)", [] {
                 return committed(subarray({A, A, A}, {N, N, R}, {R, R, R}, MPI_DOUBLE));
               }});
  r.back().expect = ferry::StridedBlock{interior, {8 * R, N, N}, {1, row, plane}};
  r.push_back({"halo_-Y", "subarray(3, {262,262,262}, {256,3,256}, {3,3,3}, C, MPI_DOUBLE)", [] {
                 return committed(subarray({A, A, A}, {N, R, N}, {R, R, R}, MPI_DOUBLE));
               }});
  r.back().expect = ferry::StridedBlock{interior, {8 * N, R, N}, {1, row, plane}};
  r.push_back({"halo_-Z", "subarray(3, {262,262,262}, {3,256,256}, {3,3,3}, C, MPI_DOUBLE)", [] {
                 return committed(subarray({A, A, A}, {R, N, N}, {R, R, R}, MPI_DOUBLE));
               }});
  r.back().expect = ferry::StridedBlock{interior, {8 * N, N, R}, {1, row, plane}};
  r.push_back({"halo_-Z_planes", "subarray(3, {262,262,262}, {3,262,262}, {3,0,0}, C, MPI_DOUBLE)",
               [] { return committed(subarray({A, A, A}, {R, A, A}, {R, 0, 0}, MPI_DOUBLE)); }});
  r.back().expect = ferry::StridedBlock{R * plane, {R * plane}, {1}};
  if (with_listing) {
    r.push_back({"halo_-X_listing5.1",
                 "subarray(3, {262,262,2560}, {256,256,24}, {3,3,24}, C, MPI_BYTE)", [] {
                   return committed(subarray({A, A, 2560}, {N, N, 24}, {R, R, 24}, MPI_BYTE));
                 }});
    // Fig. 5.10 / the StridedBlock printed in §5.2.4.
    r.back().expect = ferry::StridedBlock{2019864, {24, 256, 256}, {1, 2560, 670720}};
  }
  return r;
}

MPI_Datatype vector2d(int nblocks, int blocklen, int pitch) {
  return committed(vector(nblocks, blocklen, pitch, MPI_BYTE));
}

i64 span_of(MPI_Datatype dt) {
  MPI_Count lb = 0, extent = 0;
  check_mpi(MPI_Type_get_true_extent_x(dt, &lb, &extent), "MPI_Type_get_true_extent_x");
  if (lb < 0) die("benchmark types must not reach below the buffer origin");
  return static_cast<i64>(lb + extent);
}

i64 size_of(MPI_Datatype dt) {
  MPI_Count size = 0;
  check_mpi(MPI_Type_size_x(dt, &size), "MPI_Type_size_x");
  return static_cast<i64>(size);
}

std::string canonical_summary(const ferry::Type& t) {
  if (t.strided()) return ferry::to_string(*t.strided());
  std::ostringstream os;
  os << "general(nodes=" << t.root()->nodes << ", runs=" << t.blocks() << ", bytes=" << t.size()
     << ")";
  return os.str();
}

bool take_flag(int* argc, char** argv, const std::string& name, std::string* value) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      *value = argv[i] + prefix.size();
      for (int j = i; j + 1 < *argc; ++j) argv[j] = argv[j + 1];
      --*argc;
      argv[*argc] = nullptr;
      return true;
    }
  }
  return false;
}

}  // namespace ferry_bench
