// halo/wait.hpp — the one polling loop of the halo library. Every poll yields the core (CI runs 8
// ranks on 2 cores, where a rank that spins without yielding starves the neighbour it waits for);
// once a wait has lasted many polls (a neighbour busy elsewhere) each poll also sleeps 20 us. Not
// sooner: a large MPI message moves in fragments that each need a poll of both ends, and sleeping
// between them made a 0.5 MB exchange 20x slower on the 2-core CI machine. FERRY_HALO_TIMEOUT turns
// a wait that never ends into an error.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::halo::detail {

class Waiter {
 public:
  explicit Waiter(const char* what) : what_(what), t0_(std::chrono::steady_clock::now()) {}
  void pause() {
    if (++polls_ < 20000) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if ((polls_ & 1023) == 0) {
      const double limit = ferry::detail::env::halo_timeout();
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      if (limit > 0 && waited > limit)
        ferry::detail::fail(MPI_ERR_OTHER, "halo: waited " + std::to_string(static_cast<int>(waited)) +
                                               " s for " + what_ +
                                               " (FERRY_HALO_TIMEOUT); does every rank call the exchange?");
    }
  }

 private:
  const char* what_;
  std::chrono::steady_clock::time_point t0_;
  long polls_ = 0;
};

}  // namespace ferry::halo::detail
