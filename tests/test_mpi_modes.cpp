// Every send mode through the interposer: ready (MPI_Rsend, MPI_Irsend, MPI_Rsend_init), buffered
// (MPI_Bsend, MPI_Ibsend), synchronous (MPI_Issend, MPI_Ssend_init), large non-blocking sends
// (MPI_Isend, MPI_Issend of 2 MiB), and MPI_Comm_disconnect, completed by every wait and test.
// Pairs of ranks (0-1, 2-3) exchange a small message (800 B: never IPC or pipelined) and a large
// one (2 MiB), contiguous and every second double, and each receiver compares its whole buffer,
// gaps included.
//
// Built twice: with host buffers (test_mpi_modes) and, with FERRY_MODES_DEVICE, with device
// buffers (test_mpi_gpu_modes, exit 77 without a GPU). The harness says which path large
// messages must take, in FERRY_TEST_LARGE_PATH, and each test checks the interposer's counters:
//   plain      host buffers: straight to the MPI, neither IPC nor pipelined
//   pipelined  host buffers under FERRY_PROTOCOL_TEST=1, or device buffers with IPC off
//              (FERRY_IPC_MIN=<huge>): every large standard, ready or synchronous send pipelined
//   ipc        device buffers: every large send of those modes over CUDA IPC, persistent ones too
// Buffered sends are never IPC or pipelined (they must complete locally).
#include <gtest/gtest.h>
#include <mpi.h>

#include "mpi_pairs.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef FERRY_MODES_DEVICE
#include <cuda_runtime.h>
#endif

extern "C" long ferry_mpi_ipc_sent(void);
extern "C" long ferry_mpi_pipelined_sent(void);

namespace {

constexpr std::size_t kSmall = 100;      // doubles: 800 B
constexpr std::size_t kLarge = 1 << 18;  // doubles: 2 MiB
constexpr double kPoison = -1.0;

// n doubles in device memory (FERRY_MODES_DEVICE) or host memory.
class Buffer {
 public:
  explicit Buffer(std::size_t n) : n_(n) {
#ifdef FERRY_MODES_DEVICE
    EXPECT_EQ(cudaMalloc(&p_, n * sizeof(double)), cudaSuccess);
#else
    host_.resize(n);
    p_ = host_.data();
#endif
  }
  ~Buffer() {
#ifdef FERRY_MODES_DEVICE
    cudaFree(p_);
#endif
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  double* p() { return static_cast<double*>(p_); }
  void put(const std::vector<double>& v) {
#ifdef FERRY_MODES_DEVICE
    ASSERT_EQ(cudaMemcpy(p_, v.data(), n_ * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
#else
    std::memcpy(p_, v.data(), n_ * sizeof(double));
#endif
  }
  std::vector<double> get() const {
    std::vector<double> v(n_);
#ifdef FERRY_MODES_DEVICE
    EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
#else
    std::memcpy(v.data(), p_, n_ * sizeof(double));
#endif
    return v;
  }

 private:
  std::size_t n_;
  void* p_ = nullptr;
  std::vector<double> host_;
};

std::vector<double> pattern(int who, int salt, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = who * 1e8 + salt * 1e6 + static_cast<double>(i);
  return v;
}

// One message: `elems` doubles, contiguous or every second one of 2 * elems.
struct Shape {
  std::size_t elems;
  bool strided;
  std::string name() const {
    return std::string(elems == kLarge ? "2 MiB" : "800 B") + (strided ? " strided" : " contiguous");
  }
  std::size_t span() const { return strided ? 2 * elems : elems; }
  bool large() const { return elems == kLarge; }
};
const Shape kShapes[] = {{kSmall, false}, {kSmall, true}, {kLarge, false}, {kLarge, true}};

// The datatype and count that send or receive a shape: strided, elements of up to 1024 doubles
// (every second one of 2048), so a large message has many elements and can go in chunks of them.
struct Typed {
  MPI_Datatype type = MPI_DOUBLE;
  int count = 0;
  explicit Typed(const Shape& s) : count(static_cast<int>(s.elems)) {
    if (!s.strided) return;
    const std::size_t per = std::min<std::size_t>(s.elems, 1024);
    MPI_Datatype v;
    MPI_Type_vector(static_cast<int>(per), 1, 2, MPI_DOUBLE, &v);
    MPI_Type_create_resized(v, 0, static_cast<MPI_Aint>(2 * per * sizeof(double)), &type);
    MPI_Type_free(&v);
    MPI_Type_commit(&type);
    count = static_cast<int>(s.elems / per);
  }
  ~Typed() {
    if (type != MPI_DOUBLE) MPI_Type_free(&type);
  }
  Typed(const Typed&) = delete;
  Typed& operator=(const Typed&) = delete;
};

// What the receiver's whole buffer must hold: the sender's elements where the type puts them, the
// poison in the gaps.
std::vector<double> expected(const Shape& s, const std::vector<double>& sent) {
  std::vector<double> want(s.span(), kPoison);
  for (std::size_t i = 0; i < s.elems; ++i) {
    const std::size_t at = s.strided ? 2 * i : i;
    want[at] = sent[at];
  }
  return want;
}

// The path large messages take here, from the harness (FERRY_TEST_LARGE_PATH).
enum class Path { plain, pipelined, ipc };
bool large_path(Path* path) {
  const char* e = std::getenv("FERRY_TEST_LARGE_PATH");
  const std::string v = e ? e : "";
  if (v == "plain") *path = Path::plain;
  else if (v == "pipelined") *path = Path::pipelined;
  else if (v == "ipc") *path = Path::ipc;
  else return false;
  return true;
}

// Host buffers on Open MPI (whose own restarted large persistent buffered sends are wrong).
bool host_open_mpi() {
#ifdef FERRY_MODES_DEVICE
  return false;
#else
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  return std::string(v, static_cast<std::size_t>(len)).find("Open MPI") != std::string::npos;
#endif
}

// The interposer's counters around a send.
struct Counters {
  long ipc = ferry_mpi_ipc_sent(), pipelined = ferry_mpi_pipelined_sent();
  // `sends` sends of shape s went the way they must: `path` for large ones of a mode that may use
  // it (not buffered; persistent ones: IPC only), else neither IPC nor pipelined.
  void expect(const Shape& s, Path path, bool may, long sends, const std::string& what) const {
    long want_ipc = 0, want_pipelined = 0;
    if (s.large() && may && path == Path::ipc) want_ipc = sends;
    if (s.large() && may && path == Path::pipelined) want_pipelined = sends;
    EXPECT_EQ(ferry_mpi_ipc_sent() - ipc, want_ipc) << what << ": messages over IPC";
    EXPECT_EQ(ferry_mpi_pipelined_sent() - pipelined, want_pipelined) << what << ": messages pipelined";
  }
};

class Modes : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef FERRY_MODES_DEVICE
    int devices = 0, rank = 0;
    ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ASSERT_EQ(cudaSetDevice(rank % devices), cudaSuccess);
#endif
    int n = 0;
    MPI_Comm_size(pair_comm(), &n);
    ASSERT_EQ(n, 2) << "run with an even number of ranks";
    ASSERT_TRUE(large_path(&path_)) << "FERRY_TEST_LARGE_PATH (plain, pipelined or ipc) did not reach "
                                       "this rank: the harness sets it";
    me_ = pair_rank();
    other_ = 1 - me_;
  }
  Path path_ = Path::plain;
  int me_ = 0, other_ = 1;
};

// Rank 1 posts its receive and says so (a barrier); rank 0 then sends in ready mode, blocking and
// non-blocking.
TEST_F(Modes, ReadySends) {
  for (int nonblocking = 0; nonblocking < 2; ++nonblocking) {
    for (const Shape& s : kShapes) {
      const std::string what = std::string(nonblocking ? "MPI_Irsend " : "MPI_Rsend ") + s.name();
      const Typed t(s);
      const int tag = 10 + nonblocking;
      const std::vector<double> sent = pattern(0, tag, s.span());
      Buffer buf(s.span());
      if (me_ == 0) {
        buf.put(sent);
        const Counters before;
        MPI_Barrier(pair_comm());
        if (nonblocking) {
          MPI_Request r;
          ASSERT_EQ(MPI_Irsend(buf.p(), t.count, t.type, other_, tag, pair_comm(), &r), MPI_SUCCESS) << what;
          ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS) << what;
        } else {
          ASSERT_EQ(MPI_Rsend(buf.p(), t.count, t.type, other_, tag, pair_comm()), MPI_SUCCESS) << what;
        }
        before.expect(s, path_, true, 1, what);
      } else {
        buf.put(std::vector<double>(s.span(), kPoison));
        MPI_Request r;
        ASSERT_EQ(MPI_Irecv(buf.p(), t.count, t.type, other_, tag, pair_comm(), &r), MPI_SUCCESS) << what;
        MPI_Barrier(pair_comm());
        MPI_Status st;
        ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS) << what;
        int count = 0;
        MPI_Get_count(&st, MPI_DOUBLE, &count);
        EXPECT_EQ(count, static_cast<int>(s.elems)) << what;
        EXPECT_EQ(buf.get(), expected(s, sent)) << what;
      }
      MPI_Barrier(pair_comm());
    }
  }
}

// Buffered sends, blocking, non-blocking and persistent (MPI_Bsend_init, started twice), from an
// attached buffer: they complete before the receive is posted, and go as the MPI's own buffered
// sends.
TEST_F(Modes, BufferedSends) {
  int packed = 0;
  MPI_Pack_size(static_cast<int>(2 * kLarge), MPI_DOUBLE, pair_comm(), &packed);
  std::vector<char> attach(static_cast<std::size_t>(packed) + 4 * MPI_BSEND_OVERHEAD);
  ASSERT_EQ(MPI_Buffer_attach(attach.data(), static_cast<int>(attach.size())), MPI_SUCCESS);
  const char* forms[] = {"MPI_Bsend ", "MPI_Ibsend ", "MPI_Bsend_init ", "MPI_Bsend_init, started again "};
  for (int form = 0; form < 4; ++form) {
    for (const Shape& s : kShapes) {
      const std::string what = forms[form] + s.name();
      if (form == 3 && s.large() && host_open_mpi()) {
        // Open MPI 4.1 sends a restarted 2 MiB persistent buffered send with other data (zeros
        // here; PMPI alone does it, which host buffers go straight to): not asked of it.
        if (me_ == 0) std::printf("not run: %s: Open MPI's own restart is wrong\n", what.c_str());
        continue;
      }
      const Typed t(s);
      const int tag = 20 + form;
      const std::vector<double> sent = pattern(0, tag, s.span());
      Buffer buf(s.span());
      if (me_ == 0) {
        buf.put(sent);
        const Counters before;
        MPI_Request r;
        if (form == 0) {
          ASSERT_EQ(MPI_Bsend(buf.p(), t.count, t.type, other_, tag, pair_comm()), MPI_SUCCESS) << what;
        } else if (form == 1) {
          ASSERT_EQ(MPI_Ibsend(buf.p(), t.count, t.type, other_, tag, pair_comm(), &r), MPI_SUCCESS) << what;
          ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS) << what;
        } else {
          ASSERT_EQ(MPI_Bsend_init(buf.p(), t.count, t.type, other_, tag, pair_comm(), &r), MPI_SUCCESS) << what;
          for (int start = 0; start < form - 1; ++start) {
            if (start > 0) buf.put(sent);  // started again: packs the buffer's data anew
            ASSERT_EQ(MPI_Start(&r), MPI_SUCCESS) << what;
            ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS) << what;
            buf.put(std::vector<double>(s.span(), 0.0));
            if (start + 1 < form - 1) {  // the first message out before the second start
              MPI_Barrier(pair_comm());
              MPI_Barrier(pair_comm());
            }
          }
          ASSERT_EQ(MPI_Request_free(&r), MPI_SUCCESS) << what;
        }
        before.expect(s, path_, false, form == 3 ? 2 : 1, what);
        buf.put(std::vector<double>(s.span(), 0.0));  // the message no longer needs the buffer
        MPI_Barrier(pair_comm());
      } else {
        for (int message = 0; message < (form == 3 ? 2 : 1); ++message) {
          buf.put(std::vector<double>(s.span(), kPoison));
          MPI_Barrier(pair_comm());  // the send has completed: the data waits in the attached buffer
          ASSERT_EQ(MPI_Recv(buf.p(), t.count, t.type, other_, tag, pair_comm(), MPI_STATUS_IGNORE),
                    MPI_SUCCESS) << what;
          EXPECT_EQ(buf.get(), expected(s, sent)) << what << ", message " << message;
          if (message == 0 && form == 3) MPI_Barrier(pair_comm());
        }
      }
    }
  }
  void* detached = nullptr;
  int size = 0;
  ASSERT_EQ(MPI_Buffer_detach(&detached, &size), MPI_SUCCESS);
  EXPECT_EQ(detached, attach.data());
  MPI_Barrier(pair_comm());
}

// Both ranks send to each other at once with MPI_Isend and MPI_Issend (a 2 MiB message, at least
// 1 MiB: with IPC off a device send is pipelined, and MPI_Isend returns once every chunk is
// posted) and receive with MPI_Irecv, completed by MPI_Testsome in a loop, then by MPI_Waitsome.
TEST_F(Modes, NonBlockingSendsBothWays) {
  for (int round = 0; round < 2; ++round) {
    for (const Shape& s : kShapes) {
      const std::string what = std::string(round ? "MPI_Waitsome " : "MPI_Testsome ") + s.name();
      const Typed t(s);
      const std::vector<double> mine0 = pattern(me_, 30, s.span()), mine1 = pattern(me_, 31, s.span());
      Buffer out0(s.span()), out1(s.span()), in0(s.span()), in1(s.span());
      out0.put(mine0);
      out1.put(mine1);
      in0.put(std::vector<double>(s.span(), kPoison));
      in1.put(std::vector<double>(s.span(), kPoison));
      MPI_Request r[4];
      ASSERT_EQ(MPI_Irecv(in0.p(), t.count, t.type, other_, 30, pair_comm(), &r[0]), MPI_SUCCESS) << what;
      ASSERT_EQ(MPI_Irecv(in1.p(), t.count, t.type, other_, 31, pair_comm(), &r[1]), MPI_SUCCESS) << what;
      const Counters before;
      ASSERT_EQ(MPI_Isend(out0.p(), t.count, t.type, other_, 30, pair_comm(), &r[2]), MPI_SUCCESS) << what;
      ASSERT_EQ(MPI_Issend(out1.p(), t.count, t.type, other_, 31, pair_comm(), &r[3]), MPI_SUCCESS) << what;
      before.expect(s, path_, true, 2, what + " (MPI_Isend, MPI_Issend)");
      int done = 0, indices[4] = {0, 0, 0, 0}, outcount = 0;
      MPI_Status st[4];
      while (done < 4) {
        if (round == 0)
          ASSERT_EQ(MPI_Testsome(4, r, &outcount, indices, st), MPI_SUCCESS) << what;
        else
          ASSERT_EQ(MPI_Waitsome(4, r, &outcount, indices, st), MPI_SUCCESS) << what;
        ASSERT_NE(outcount, MPI_UNDEFINED) << what << ": requests left active";
        done += outcount;
      }
      for (MPI_Request q : r) EXPECT_EQ(q, MPI_REQUEST_NULL) << what;
      EXPECT_EQ(in0.get(), expected(s, pattern(other_, 30, s.span()))) << what;
      EXPECT_EQ(in1.get(), expected(s, pattern(other_, 31, s.span()))) << what;
      MPI_Barrier(pair_comm());
    }
  }
}

// Persistent synchronous and ready sends reused over iterations, new data each time, completed in
// turn by MPI_Wait, MPI_Testany, MPI_Request_get_status then MPI_Wait, and MPI_Testall. For the
// ready send the receive is posted (and a barrier passed) before each start.
TEST_F(Modes, PersistentSyncAndReadySends) {
  for (int ready = 0; ready < 2; ++ready) {
    for (const Shape& s : kShapes) {
      const std::string what = std::string(ready ? "MPI_Rsend_init " : "MPI_Ssend_init ") + s.name();
      const Typed t(s);
      const int tag = 40 + ready;
      Buffer buf(s.span());
      MPI_Request r;
      if (me_ == 0 && ready) {
        ASSERT_EQ(MPI_Rsend_init(buf.p(), t.count, t.type, other_, tag, pair_comm(), &r), MPI_SUCCESS) << what;
      } else if (me_ == 0) {
        ASSERT_EQ(MPI_Ssend_init(buf.p(), t.count, t.type, other_, tag, pair_comm(), &r), MPI_SUCCESS) << what;
      } else {
        ASSERT_EQ(MPI_Recv_init(buf.p(), t.count, t.type, other_, tag, pair_comm(), &r), MPI_SUCCESS) << what;
      }
      const MPI_Request handle = r;
      for (int iter = 0; iter < 4; ++iter) {
        const std::string it = what + ", iteration " + std::to_string(iter);
        const std::vector<double> sent = pattern(0, 10 * tag + iter, s.span());
        buf.put(me_ == 0 ? sent : std::vector<double>(s.span(), kPoison));
        const Counters before;
        if (me_ == 1) ASSERT_EQ(MPI_Start(&r), MPI_SUCCESS) << it;
        MPI_Barrier(pair_comm());  // the receive is posted
        if (me_ == 0) ASSERT_EQ(MPI_Start(&r), MPI_SUCCESS) << it;
        int flag = 0, index = -1;
        MPI_Status st;
        switch (iter) {
          case 0:
            ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS) << it;
            break;
          case 1:
            while (!flag) ASSERT_EQ(MPI_Testany(1, &r, &index, &flag, &st), MPI_SUCCESS) << it;
            EXPECT_EQ(index, 0) << it;
            break;
          case 2:
            while (!flag) ASSERT_EQ(MPI_Request_get_status(r, &flag, &st), MPI_SUCCESS) << it;
            ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS) << it;
            break;
          default:
            while (!flag) ASSERT_EQ(MPI_Testall(1, &r, &flag, &st), MPI_SUCCESS) << it;
        }
        EXPECT_EQ(r, handle) << it << ": a persistent request keeps its handle";
        if (me_ == 0) {
          // Persistent sends take IPC where the model picks it, else they are staged.
          before.expect(s, path_ == Path::ipc ? Path::ipc : Path::plain, true, 1, it);
        } else {
          int count = 0;
          MPI_Get_count(&st, MPI_DOUBLE, &count);
          EXPECT_EQ(count, static_cast<int>(s.elems)) << it;
          EXPECT_EQ(buf.get(), expected(s, sent)) << it;
        }
        MPI_Barrier(pair_comm());
      }
      ASSERT_EQ(MPI_Request_free(&r), MPI_SUCCESS) << what;
    }
  }
  EXPECT_EQ(pending_after_progress(), 0) << "every request finished";
}

// Messages on a duplicate of the pair's communicator, which MPI_Comm_disconnect then frees (what
// Ferry keeps for it must go); then on a new communicator with the ranks swapped, which may get
// the same handle: a stale rank table would send to the wrong process.
TEST_F(Modes, CommDisconnect) {
  for (int round = 0; round < 2; ++round) {
    MPI_Comm c;
    ASSERT_EQ(MPI_Comm_split(pair_comm(), 0, round == 0 ? me_ : -me_, &c), MPI_SUCCESS);
    int crank = -1;
    MPI_Comm_rank(c, &crank);
    ASSERT_EQ(crank, round == 0 ? me_ : other_);
    const int cother = 1 - crank;
    for (const Shape& s : kShapes) {
      const std::string what = "round " + std::to_string(round) + ", " + s.name();
      const Typed t(s);
      Buffer out(s.span()), in(s.span());
      out.put(pattern(me_, 50 + round, s.span()));
      in.put(std::vector<double>(s.span(), kPoison));
      MPI_Status st;
      ASSERT_EQ(MPI_Sendrecv(out.p(), t.count, t.type, cother, 5, in.p(), t.count, t.type, cother, 5, c, &st),
                MPI_SUCCESS) << what;
      EXPECT_EQ(st.MPI_SOURCE, cother) << what;
      EXPECT_EQ(in.get(), expected(s, pattern(other_, 50 + round, s.span()))) << what;
    }
    ASSERT_EQ(MPI_Comm_disconnect(&c), MPI_SUCCESS);
    EXPECT_EQ(c, MPI_COMM_NULL);
  }
  EXPECT_EQ(pending_after_progress(), 0) << "every request finished";
}

}  // namespace
