// tests/test_bad_input.hpp — helpers shared by test_bad_input.cpp and test_bad_input_null.cpp.
#pragma once

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

namespace ferry_bad_input {

using i64 = std::int64_t;

inline int error_class(int rc) {
  if (rc == MPI_SUCCESS) return MPI_SUCCESS;
  int cls = rc;
  MPI_Error_class(rc, &cls);
  return cls;
}

inline std::string class_name(int cls) {
  if (cls == MPI_SUCCESS) return "MPI_SUCCESS";
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(cls, s, &len) != MPI_SUCCESS) return "class " + std::to_string(cls);
  return "class " + std::to_string(cls) + " (" + std::string(s, static_cast<size_t>(len)) + ")";
}

inline std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The message of the last error mentions at least one of `words` (case-insensitive).
inline ::testing::AssertionResult message_mentions(const std::vector<std::string>& words) {
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
inline std::vector<std::string> words_for(int cls) {
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
inline int mpi_truncation(const std::function<int()>& call) {
  static const bool checks = [] {
    int in = 7, pos = 0;
    unsigned char out[64];
    return MPI_Pack(&in, 1, MPI_INT, out, 0, &pos, MPI_COMM_WORLD) != MPI_SUCCESS;
  }();
  return checks ? call() : MPI_ERR_TRUNCATE;
}

// A size the C API cannot return in an int (sys/error.hpp).
inline constexpr int kTooLarge = ferry::detail::kErrTooLarge;

// The C++ API throws ferry::Error with class `want`.
inline void expect_throws(const std::function<void()>& f, int want, const std::string& what) {
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

inline constexpr unsigned char kPoison = 0xCD;

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

}  // namespace ferry_bad_input
