// place/metis_none.cpp — partition_graph's METIS hook in builds without METIS (FERRY_METIS=OFF, or
// AUTO where libmetis was not found): the built-in recursive bisection does the work.
#include "place/detail.hpp"

namespace ferry::place {

bool metis_available() {
  return false;
}

namespace detail {

bool metis_partition(const WGraph&, const std::vector<int>&, std::uint64_t, std::vector<int>&) {
  return false;
}

}  // namespace detail
}  // namespace ferry::place
