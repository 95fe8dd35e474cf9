// The standard's typemap through the interposer, where the MPI packs some types against it
// (src/mpi/typemap.hpp): Open MPI 4.1 packs MPI_Type_create_hvector(2, 1, -1 B, MPI_CHAR) as
// offsets 0, 1 instead of 0, -1.
//
// Each case is a type with its typemap computed here from the standard's definitions (and the
// extents MPI reports, as a count > 1 uses them). Rank 0 sends, rank 1 receives, and every byte is
// compared with that oracle: sends of the type against received raw bytes, raw bytes against
// receives into the type (bytes outside the typemap must stay untouched), blocking,
// non-blocking, MPI_Sendrecv and matched receives, and MPI_Pack / MPI_Unpack. Built twice:
// host buffers on both sides (test_mpi_typemap, CI), and with FERRY_TYPEMAP_DEVICE the typed
// side in device memory against a host peer (test_mpi_gpu_typemap): a host sender and a device
// receiver must agree.
#include <ferry/ferry_mpi.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#ifdef FERRY_TYPEMAP_DEVICE
#include <cuda_runtime.h>
#endif

namespace {

constexpr int kSpan = 256, kOrigin = 128;  // every buffer: the typemap's offsets around kOrigin

struct Case {
  std::string name;
  MPI_Datatype type;
  std::vector<long> map;  // one element, from the origin
  bool overlapping;       // the typemap names a byte twice: sends only (receiving is erroneous)
};

MPI_Aint extent(MPI_Datatype t) {
  MPI_Aint lb = 0, ext = 0;
  MPI_Type_get_extent(t, &lb, &ext);
  return ext;
}

// `count` elements: element k is the map shifted by k extents.
std::vector<long> typemap(const Case& c, int count) {
  std::vector<long> m;
  for (int k = 0; k < count; ++k)
    for (long off : c.map) m.push_back(off + k * extent(c.type));
  return m;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](std::string name, MPI_Datatype t, std::vector<long> map, bool overlap = false) {
    MPI_Type_commit(&t);
    v.push_back({std::move(name), t, std::move(map), overlap});
  };
  MPI_Datatype t, u;
  MPI_Type_create_hvector(2, 1, -1, MPI_CHAR, &t);
  add("hvector(2, 1, -1 B, char)", t, {0, -1});
  MPI_Type_vector(3, 1, -1, MPI_CHAR, &t);
  add("vector(3, 1, -1, char)", t, {0, -1, -2});
  MPI_Type_create_hvector(2, 1, -1, MPI_SHORT, &t);
  add("hvector(2, 1, -1 B, short)", t, {0, 1, -1, 0}, true);
  MPI_Type_contiguous(2, MPI_CHAR, &u);
  MPI_Type_create_hvector(2, 1, -1, u, &t);
  add("hvector(2, 1, -1 B, contiguous(2, char))", t, {0, 1, -1, 0}, true);
  MPI_Type_free(&u);
  MPI_Type_create_hvector(2, 1, -1, MPI_CHAR, &u);
  MPI_Type_create_resized(u, -1, 2, &t);
  add("resized(hvector(2, 1, -1 B, char), -1, 2)", t, {0, -1});
  MPI_Type_contiguous(2, u, &t);
  add("contiguous(2, hvector(2, 1, -1 B, char))", t, {0, -1, extent(u), extent(u) - 1});
  {
    int bl[2] = {1, 1};
    MPI_Aint d[2] = {10, 0};
    MPI_Datatype ty[2] = {u, MPI_INT};
    MPI_Type_create_struct(2, bl, d, ty, &t);
    add("struct{hvector(2, 1, -1 B, char) at 10, int at 0}", t, {10, 9, 0, 1, 2, 3});
  }
  MPI_Type_free(&u);
  // Negative strides and displacements the MPIs get right: they must stay right.
  MPI_Type_vector(3, 1, -2, MPI_CHAR, &t);
  add("vector(3, 1, -2, char)", t, {0, -2, -4});
  MPI_Type_create_hvector(2, 2, -3, MPI_CHAR, &t);
  add("hvector(2, 2, -3 B, char)", t, {0, 1, -3, -2});
  {
    int bl[2] = {1, 1};
    MPI_Aint d[2] = {3, -2};
    MPI_Type_create_hindexed(2, bl, d, MPI_CHAR, &t);
    add("hindexed({3, -2}, char)", t, {3, -2});
  }
  MPI_Type_create_resized(MPI_CHAR, 0, -1, &t);
  add("resized(char, 0, -1)", t, {0});
  return v;
}

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::vector<unsigned char> pattern(int salt) {
  std::vector<unsigned char> b(kSpan);
  for (int i = 0; i < kSpan; ++i) b[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i * 7 + salt * 13 + 1);
  return b;
}

// The typed buffer: host memory, or device memory under FERRY_TYPEMAP_DEVICE.
class Typed {
 public:
  explicit Typed(const std::vector<unsigned char>& init) {
#ifdef FERRY_TYPEMAP_DEVICE
    EXPECT_EQ(cudaMalloc(&p_, kSpan), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, init.data(), kSpan, cudaMemcpyHostToDevice), cudaSuccess);
#else
    host_ = init;
    p_ = host_.data();
#endif
  }
  ~Typed() {
#ifdef FERRY_TYPEMAP_DEVICE
    cudaFree(p_);
#endif
  }
  Typed(const Typed&) = delete;
  Typed& operator=(const Typed&) = delete;
  char* origin() { return static_cast<char*>(p_) + kOrigin; }
  std::vector<unsigned char> read() const {
#ifdef FERRY_TYPEMAP_DEVICE
    std::vector<unsigned char> h(kSpan);
    EXPECT_EQ(cudaMemcpy(h.data(), p_, kSpan, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
#else
    return host_;
#endif
  }

 private:
  void* p_ = nullptr;
  std::vector<unsigned char> host_;
};

std::vector<unsigned char> gather(const std::vector<unsigned char>& buf, const std::vector<long>& map) {
  std::vector<unsigned char> out;
  for (long off : map) out.push_back(buf[static_cast<std::size_t>(kOrigin + off)]);
  return out;
}

std::vector<unsigned char> scatter(std::vector<unsigned char> buf, const std::vector<long>& map,
                                   const std::vector<unsigned char>& bytes) {
  for (std::size_t j = 0; j < map.size(); ++j) buf[static_cast<std::size_t>(kOrigin + map[j])] = bytes[j];
  return buf;
}

enum class Via { blocking, nonblocking, sendrecv, matched };

// Rank 0 sends `count` of the case's type from a typed buffer; rank 1 receives the raw bytes.
void typed_to_bytes(const Case& c, int count, Via via) {
  const auto map = typemap(c, count);
  const int n = static_cast<int>(map.size());
  const auto src = pattern(count);
  if (rank() == 0) {
    Typed buf(src);
    MPI_Request r;
    if (via == Via::nonblocking) {
      ASSERT_EQ(MPI_Isend(buf.origin(), count, c.type, 1, 1, MPI_COMM_WORLD, &r), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    } else if (via == Via::sendrecv) {
      char none = 0;
      ASSERT_EQ(MPI_Sendrecv(buf.origin(), count, c.type, 1, 1, &none, 0, MPI_CHAR, 1, 2, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE),
                MPI_SUCCESS);
    } else {
      ASSERT_EQ(MPI_Send(buf.origin(), count, c.type, 1, 1, MPI_COMM_WORLD), MPI_SUCCESS);
    }
  } else if (rank() == 1) {
    std::vector<unsigned char> got(static_cast<std::size_t>(n) + 1, 0);
    MPI_Status st;
    ASSERT_EQ(MPI_Recv(got.data(), n + 1, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    if (via == Via::sendrecv) MPI_Send(nullptr, 0, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
    int bytes = 0;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    EXPECT_EQ(bytes, n) << c.name;
    got.resize(static_cast<std::size_t>(n));
    EXPECT_EQ(got, gather(src, map)) << c.name << ", count " << count << ": the bytes sent are not the standard's";
  }
}

// Rank 0 sends raw bytes; rank 1 receives them into `count` of the case's type.
void bytes_to_typed(const Case& c, int count, Via via) {
  const auto map = typemap(c, count);
  const int n = static_cast<int>(map.size());
  const auto bytes = gather(pattern(50 + count), map);
  if (rank() == 0) {
    ASSERT_EQ(MPI_Send(bytes.data(), n, MPI_BYTE, 1, 3, MPI_COMM_WORLD), MPI_SUCCESS);
  } else if (rank() == 1) {
    const auto before = pattern(90);
    Typed buf(before);
    MPI_Status st;
    if (via == Via::nonblocking) {
      MPI_Request r;
      ASSERT_EQ(MPI_Irecv(buf.origin(), count, c.type, 0, 3, MPI_COMM_WORLD, &r), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS);
    } else if (via == Via::matched) {
      MPI_Message m;
      ASSERT_EQ(MPI_Mprobe(0, 3, MPI_COMM_WORLD, &m, &st), MPI_SUCCESS);
      ASSERT_EQ(MPI_Mrecv(buf.origin(), count, c.type, &m, &st), MPI_SUCCESS);
    } else if (via == Via::sendrecv) {
      char none = 0;
      ASSERT_EQ(MPI_Sendrecv(&none, 0, MPI_CHAR, 0, 4, buf.origin(), count, c.type, 0, 3, MPI_COMM_WORLD, &st),
                MPI_SUCCESS);
    } else {
      ASSERT_EQ(MPI_Recv(buf.origin(), count, c.type, 0, 3, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    }
    int elements = -1;
    MPI_Get_count(&st, c.type, &elements);
    EXPECT_EQ(elements, count) << c.name;
    EXPECT_EQ(buf.read(), scatter(before, map, bytes))
        << c.name << ", count " << count << ": the bytes did not land on the standard's typemap";
  }
  if (via == Via::sendrecv && rank() == 0) MPI_Recv(nullptr, 0, MPI_CHAR, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

TEST(Typemap, ProbeReportsWhatTheMpiPacksWrong) {
  // The probe's first type, packed by the MPI itself.
  MPI_Datatype t;
  PMPI_Type_create_hvector(2, 1, -1, MPI_CHAR, &t);
  PMPI_Type_commit(&t);
  const unsigned char mem[4] = {1, 2, 3, 4};
  unsigned char out[2] = {};
  int pos = 0;
  PMPI_Pack(mem + 2, 1, t, out, 2, &pos, MPI_COMM_WORLD);
  PMPI_Type_free(&t);
  const bool mpi_wrong = out[1] != 2;
  const std::string says = ferry_mpi_wrong_typemaps();
  std::printf("the MPI packs against the standard: %s\n", says.empty() ? "nothing Ferry probes" : says.c_str());
  EXPECT_EQ(says.find("stride of -1 byte") != std::string::npos, mpi_wrong) << says;
}

TEST(Typemap, SendsOfTheTypeCarryTheStandardsBytes) {
  for (const Case& c : cases()) {
    for (int count : {1, 2})
      for (Via via : {Via::blocking, Via::nonblocking, Via::sendrecv}) typed_to_bytes(c, count, via);
    MPI_Datatype t = c.type;
    MPI_Type_free(&t);
  }
}

TEST(Typemap, ReceivesIntoTheTypeFollowTheStandard) {
  for (const Case& c : cases()) {
    if (!c.overlapping)
      for (int count : {1, 2})
        for (Via via : {Via::blocking, Via::nonblocking, Via::sendrecv, Via::matched}) bytes_to_typed(c, count, via);
    MPI_Datatype t = c.type;
    MPI_Type_free(&t);
  }
}

#ifdef FERRY_TYPEMAP_DEVICE
// The case: rank 0 sends the type from host memory, rank 1 receives it into device memory.
TEST(Typemap, HostSenderAndDeviceReceiverAgree) {
  for (const Case& c : cases()) {
    const auto map = typemap(c, 2);
    const auto src = pattern(21);
    if (rank() == 0) {
      ASSERT_EQ(MPI_Send(src.data() + kOrigin, 2, c.type, 1, 5, MPI_COMM_WORLD), MPI_SUCCESS);
    } else if (rank() == 1 && !c.overlapping) {
      const auto before = pattern(22);
      Typed buf(before);
      ASSERT_EQ(MPI_Recv(buf.origin(), 2, c.type, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
      EXPECT_EQ(buf.read(), scatter(before, map, gather(src, map))) << c.name;
    } else if (rank() == 1) {
      std::vector<unsigned char> sink(map.size());
      MPI_Recv(sink.data(), static_cast<int>(sink.size()), MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Datatype t = c.type;
    MPI_Type_free(&t);
  }
}
#else
TEST(Typemap, PackAndUnpackFollowTheStandard) {
  for (const Case& c : cases()) {
    const auto map = typemap(c, 2);
    const auto src = pattern(7);
    std::vector<unsigned char> packed(map.size() + 8, 0);
    int pos = 0;
    ASSERT_EQ(MPI_Pack(src.data() + kOrigin, 2, c.type, packed.data(), static_cast<int>(packed.size()), &pos,
                       MPI_COMM_WORLD),
              MPI_SUCCESS);
    ASSERT_EQ(pos, static_cast<int>(map.size()));
    packed.resize(map.size());
    EXPECT_EQ(packed, gather(src, map)) << c.name;
    if (!c.overlapping) {
      auto dst = pattern(8);
      const auto before = dst;
      pos = 0;
      ASSERT_EQ(MPI_Unpack(packed.data(), static_cast<int>(packed.size()), &pos, dst.data() + kOrigin, 2, c.type,
                           MPI_COMM_WORLD),
                MPI_SUCCESS);
      EXPECT_EQ(dst, scatter(before, map, packed)) << c.name;
    }
    MPI_Datatype t = c.type;
    MPI_Type_free(&t);
  }
}
#endif

}  // namespace
