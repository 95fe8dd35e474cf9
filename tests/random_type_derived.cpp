// tests/random_type_derived.cpp — TypeGenerator::derived, the random derived types.
#include "random_type_detail.hpp"

namespace ferry_test {

using namespace random_detail;

// One derived type whose children are at most depth_left - 1 deep. Returns false when the choice
// does not fit the budget (nothing is leaked).
bool TypeGenerator::derived(int which, int depth_left, Budget budget, Built& out) {
  const Budget half{std::max<i64>(1, budget.size / 2), std::max<i64>(1, budget.span / 2)};
  // Bytes touched by a block of n children placed at displacement 0: [true_lb, true_lb + span).
  auto block_span = [](const Built& c, i64 n) -> i64 {
    return n > 0 ? (n - 1) * std::abs(c.extent) + c.true_extent : 0;
  };
  auto cap_for = [&](const Built& c, i64 per) -> i64 {
    // How many copies of `per` bytes of span and c.size bytes of data fit the budget.
    i64 cap = 64;
    if (c.size > 0) cap = std::min(cap, budget.size / c.size);
    if (per > 0) cap = std::min(cap, budget.span / per);
    return std::max<i64>(cap, 1);
  };

  switch (which) {
    case 0: {  // contiguous
      Built c = build(depth_left - 1, half);
      const int n = small_count(cap_for(c, std::max(c.extent, c.true_extent)));
      MPI_Datatype t;
      check(MPI_Type_contiguous(n, c.type, &t), "MPI_Type_contiguous");
      std::vector<i64> map;
      for (int i = 0; i < n; ++i) append_shifted(map, c.map, i * c.extent);
      out = finish(t, "contiguous(" + std::to_string(n) + ", " + c.desc + ")", c.depth + 1,
                   sat_add(c.node_bound, 2), std::move(map));
      release(c);
      return true;
    }
    case 1:
    case 2: {  // vector (1) and hvector (2)
      Built c = build(depth_left - 1, half);
      const int bl = chance(0.05) ? 0 : uniform(1, 4);
      const bool hv = which == 2;
      i64 stride;  // in elements for vector, bytes for hvector
      const int mode = uniform(0, 99);
      if (!hv) {
        if (mode < 10) stride = uniform(-bl, bl);  // may overlap
        else stride = (bl + uniform(0, 3)) * (mode < 35 ? -1 : 1);
      } else {
        const i64 blk = bl * c.extent;
        if (mode < 10) stride = uniform64(-blk - 3, blk + 3);  // may overlap
        else stride = (std::max(blk, block_span(c, bl)) + uniform(0, 16)) * (mode < 35 ? -1 : 1);
      }
      const i64 per = std::max<i64>(1, std::abs(hv ? stride : stride * c.extent) + block_span(c, bl));
      const int n = small_count(cap_for(c, per));
      MPI_Datatype t;
      std::string desc;
      if (hv) {
        check(MPI_Type_create_hvector(n, bl, static_cast<MPI_Aint>(stride), c.type, &t),
              "MPI_Type_create_hvector");
        desc = "hvector(count=" + std::to_string(n) + ", blocklen=" + std::to_string(bl) +
               ", stride_bytes=" + std::to_string(stride) + ", " + c.desc + ")";
      } else {
        check(MPI_Type_vector(n, bl, static_cast<int>(stride), c.type, &t), "MPI_Type_vector");
        desc = "vector(count=" + std::to_string(n) + ", blocklen=" + std::to_string(bl) +
               ", stride=" + std::to_string(stride) + ", " + c.desc + ")";
      }
      std::vector<i64> map;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < bl; ++j)
          append_shifted(map, c.map, (hv ? i * stride : i * stride * c.extent) + j * c.extent);
      out = finish(t, desc, c.depth + 1, sat_add(c.node_bound, 3), std::move(map));
      release(c);
      return true;
    }
    case 3:
    case 4:
    case 5:
    case 6: {  // indexed (3), hindexed (4), indexed_block (5), hindexed_block (6)
      Built c = build(depth_left - 1, half);
      const bool bytes = which == 4 || which == 6;
      const bool one_len = which == 5 || which == 6;
      // Block counts around the 32-entry splice limit of Ferry's Blocks and well past it.
      const int kr = uniform(0, 99);
      const int k = kr < 3 ? 0 : kr < 80 ? uniform(1, 8) : kr < 93 ? uniform(9, 40) : uniform(41, 200);
      const int common_len = chance(0.03) ? 0 : uniform(1, 4);
      // Regular layouts (equal blocks at a constant step, now and then one step off) exercise the
      // rewriting of Blocks into Streams.
      const bool regular = chance(0.2);
      const int regular_len = uniform(1, 4);
      const int regular_gap = uniform(0, bytes ? 12 : 3);
      const int odd_one = chance(0.4) ? uniform(0, std::max(k - 1, 0)) : -1;
      std::vector<int> lens(static_cast<size_t>(k));
      for (auto& l : lens) l = one_len ? common_len : regular ? regular_len : (chance(0.1) ? 0 : uniform(1, 4));
      std::vector<i64> disps(static_cast<size_t>(k));
      const bool overlapping = !regular && chance(0.08);
      i64 cursor = 0;  // elements (indexed) or bytes (hindexed)
      for (int i = 0; i < k; ++i) {
        const int l = lens[static_cast<size_t>(i)];
        if (overlapping) {
          disps[static_cast<size_t>(i)] = bytes ? uniform64(-4 * c.extent - 8, 4 * c.extent + 8)
                                                : uniform(-8, 8);
          continue;
        }
        const int gap = regular ? (i == odd_one ? regular_gap + uniform(1, 5) : regular_gap)
                                : uniform(0, bytes ? 12 : 3);
        if (bytes) {
          disps[static_cast<size_t>(i)] = cursor - c.true_lb;
          cursor += std::max(block_span(c, l), l * c.extent) + gap;
        } else {
          disps[static_cast<size_t>(i)] = cursor;
          cursor += l + gap;
        }
      }
      if (!overlapping && k > 0) {
        const i64 shift = chance(0.4) ? uniform64(0, cursor) : 0;  // some displacements negative
        for (auto& d : disps) d -= shift;
        if (regular && chance(0.5)) {  // a constant negative step
          std::reverse(lens.begin(), lens.end());
          std::reverse(disps.begin(), disps.end());
        } else if (!regular && chance(0.5)) {  // type-map order differs from memory order
          std::vector<size_t> perm(static_cast<size_t>(k));
          std::iota(perm.begin(), perm.end(), size_t{0});
          std::shuffle(perm.begin(), perm.end(), rng_);
          std::vector<int> l2(lens.size());
          std::vector<i64> d2(disps.size());
          for (size_t i = 0; i < perm.size(); ++i) {
            l2[i] = lens[perm[i]];
            d2[i] = disps[perm[i]];
          }
          lens = l2;
          disps = d2;
        }
      }
      // Fit the budget (the final check in build() is authoritative; this avoids most retries).
      i64 data = 0, lo = 0, hi = 0;
      for (int i = 0; i < k; ++i) {
        const i64 d = bytes ? disps[static_cast<size_t>(i)] : disps[static_cast<size_t>(i)] * c.extent;
        data += lens[static_cast<size_t>(i)] * c.size;
        lo = std::min(lo, d + c.true_lb);
        hi = std::max(hi, d + c.true_lb + block_span(c, lens[static_cast<size_t>(i)]));
      }
      if (data > budget.size || hi - lo > budget.span) {
        release(c);
        return false;
      }
      MPI_Datatype t;
      std::string name;
      std::vector<int> idisp(disps.begin(), disps.end());
      std::vector<MPI_Aint> adisp(disps.begin(), disps.end());
      switch (which) {
        case 3:
          check(MPI_Type_indexed(k, lens.data(), idisp.data(), c.type, &t), "MPI_Type_indexed");
          name = "indexed";
          break;
        case 4:
          check(MPI_Type_create_hindexed(k, lens.data(), adisp.data(), c.type, &t),
                "MPI_Type_create_hindexed");
          name = "hindexed";
          break;
        case 5:
          check(MPI_Type_create_indexed_block(k, common_len, idisp.data(), c.type, &t),
                "MPI_Type_create_indexed_block");
          name = "indexed_block";
          break;
        default:
          check(MPI_Type_create_hindexed_block(k, common_len, adisp.data(), c.type, &t),
                "MPI_Type_create_hindexed_block");
          name = "hindexed_block";
          break;
      }
      std::string desc = name + "(count=" + std::to_string(k);
      if (one_len) desc += ", blocklen=" + std::to_string(common_len);
      else desc += ", blocklens=" + list(lens);
      desc += std::string(bytes ? ", byte_displs=" : ", displs=") + list(disps) + ", " + c.desc + ")";
      std::vector<i64> map;
      for (int i = 0; i < k; ++i) {
        const i64 d = disps[static_cast<size_t>(i)];
        const int l = one_len ? common_len : lens[static_cast<size_t>(i)];
        for (int j = 0; j < l; ++j) append_shifted(map, c.map, (bytes ? d : d * c.extent) + j * c.extent);
      }
      out = finish(t, desc, c.depth + 1, sat_add(1, sat_mul(k, sat_add(c.node_bound, 2))), std::move(map));
      release(c);
      return true;
    }
    case 7: {  // struct
      // Now and then one member type repeated many times (at a constant step, or not).
      const bool repeat = chance(0.2);
      const int k = chance(0.03) ? 0 : repeat ? uniform(2, 40) : uniform(1, 4);
      const Budget part{std::max<i64>(1, budget.size / (2 * std::max(k, 1))),
                        std::max<i64>(1, budget.span / (2 * std::max(k, 1)))};
      std::vector<Built> kids;
      std::vector<int> lens;
      std::vector<MPI_Aint> disps;
      const bool overlapping = chance(0.05);
      i64 cursor = 0, data = 0, bound = 1;
      int depth = 0;
      const int repeat_len = uniform(1, 3), repeat_gap = uniform(0, 6);
      for (int i = 0; i < k; ++i) {
        if (repeat && i > 0) {
          kids.push_back(kids[0]);
          kids.back().named = true;  // a second use of kids[0]'s handle: release it once
        } else {
          kids.push_back(chance(0.4) ? named_type() : build(depth_left - 1, repeat ? half : part));
        }
        const Built& c = kids.back();
        const int l = repeat ? repeat_len : chance(0.08) ? 0 : uniform(1, 3);
        lens.push_back(l);
        if (overlapping) {
          disps.push_back(uniform(-16, 16));
        } else {
          // Aligned like a C struct member now and then, packed tight or with odd gaps otherwise.
          i64 d = cursor - c.true_lb + (repeat ? repeat_gap : uniform(0, 6));
          if (!repeat && chance(0.3) && c.extent > 0) {
            const i64 a = std::min<i64>(c.extent, 8);
            d = ((d % a) + a) % a == 0 ? d : d + (a - ((d % a) + a) % a);
          }
          disps.push_back(d);
          cursor = d + c.true_lb + std::max(block_span(c, l), l * c.extent);
        }
        data += l * c.size;
        bound = sat_add(bound, sat_add(c.node_bound, 2));
        depth = std::max(depth, c.depth);
      }
      if (!overlapping && k > 0) {
        const i64 shift = chance(0.3) ? uniform64(0, cursor) : 0;
        for (auto& d : disps) d -= shift;
      }
      if (k > 1 && chance(repeat ? 0.2 : 0.4)) {  // members listed out of memory order
        std::vector<size_t> perm(static_cast<size_t>(k));
        std::iota(perm.begin(), perm.end(), size_t{0});
        std::shuffle(perm.begin(), perm.end(), rng_);
        std::vector<Built> k2;
        std::vector<int> l2;
        std::vector<MPI_Aint> d2;
        for (size_t p : perm) {
          k2.push_back(kids[p]);
          l2.push_back(lens[p]);
          d2.push_back(disps[p]);
        }
        kids = k2;
        lens = l2;
        disps = d2;
      }
      bool fits = data <= budget.size && cursor <= budget.span;
      if (fits) {
        std::vector<MPI_Datatype> types;
        std::string desc = "struct(count=" + std::to_string(k) + ", blocklens=" + list(lens) +
                           ", byte_displs=" + list(disps) + ", types=[";
        for (size_t i = 0; i < kids.size(); ++i) {
          types.push_back(kids[i].type);
          desc += (i ? ", " : "") + kids[i].desc;
        }
        desc += "])";
        MPI_Datatype t;
        check(MPI_Type_create_struct(k, lens.data(), disps.data(), types.data(), &t),
              "MPI_Type_create_struct");
        std::vector<i64> map;
        for (size_t i = 0; i < kids.size(); ++i)
          for (int j = 0; j < lens[i]; ++j) append_shifted(map, kids[i].map, disps[i] + j * kids[i].extent);
        out = finish(t, desc, depth + 1, bound, std::move(map));
      }
      for (auto& c : kids) release(c);
      return fits;
    }
    case 8: {  // subarray
      Built c = build(depth_left - 1, half);
      const int nd = uniform(1, 3);
      std::vector<int> sizes(static_cast<size_t>(nd)), subs(sizes.size()), starts(sizes.size());
      for (auto& s : sizes) s = uniform(1, 8);
      auto total = [&] {
        i64 p = 1;
        for (int s : sizes) p *= s;
        return p;
      };
      const i64 per = std::max<i64>({c.extent, c.true_extent, 1});
      while (total() > 1 && (total() * per > half.span || total() * c.size > budget.size)) {
        auto it = std::max_element(sizes.begin(), sizes.end());
        --*it;
      }
      for (size_t i = 0; i < sizes.size(); ++i) {
        subs[i] = uniform(1, sizes[i]);
        starts[i] = uniform(0, sizes[i] - subs[i]);
      }
      const bool fortran = chance(0.5);
      MPI_Datatype t;
      check(MPI_Type_create_subarray(nd, sizes.data(), subs.data(), starts.data(),
                                     fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C, c.type, &t),
            "MPI_Type_create_subarray");
      std::vector<std::vector<i64>> idx(sizes.size());
      for (size_t i = 0; i < sizes.size(); ++i)
        for (int g = starts[i]; g < starts[i] + subs[i]; ++g) idx[i].push_back(g);
      out = finish(t,
                   "subarray(sizes=" + list(sizes) + ", subsizes=" + list(subs) + ", starts=" +
                       list(starts) + ", order=" + (fortran ? "FORTRAN" : "C") + ", " + c.desc + ")",
                   c.depth + 1, sat_add(c.node_bound, 3 * nd + 3),
                   array_map(idx, sizes, fortran, c.map, c.extent));
      release(c);
      return true;
    }
    case 9: {  // darray
      Built c = build(depth_left - 1, half);
      if (c.extent <= 0 || c.size <= 0) {  // Open MPI rejects an empty oldtype (MPI_ERR_TYPE)
        release(c);
        return false;
      }
      const int nd = uniform(1, 3);
      std::vector<int> gsizes(static_cast<size_t>(nd)), distribs(gsizes.size()), dargs(gsizes.size()),
          psizes(gsizes.size());
      int nprocs = 1;
      for (size_t i = 0; i < gsizes.size(); ++i) {
        const int r = uniform(0, 9);
        distribs[i] = r < 4 ? MPI_DISTRIBUTE_BLOCK : (r < 8 ? MPI_DISTRIBUTE_CYCLIC : MPI_DISTRIBUTE_NONE);
        psizes[i] = distribs[i] == MPI_DISTRIBUTE_NONE ? 1 : uniform(1, 3);
        nprocs *= psizes[i];
        gsizes[i] = uniform(1, 10);
      }
      auto total = [&] {
        i64 p = 1;
        for (int g : gsizes) p *= g;
        return p;
      };
      const i64 per = std::max<i64>({c.extent, c.true_extent, 1});
      while (total() > 1 && (total() * per > half.span || total() * c.size > budget.size * 2)) {
        auto it = std::max_element(gsizes.begin(), gsizes.end());
        --*it;
      }
      for (size_t i = 0; i < gsizes.size(); ++i) {
        if (distribs[i] == MPI_DISTRIBUTE_BLOCK) {
          const int need = (gsizes[i] + psizes[i] - 1) / psizes[i];  // darg*psize >= gsize
          dargs[i] = chance(0.5) ? MPI_DISTRIBUTE_DFLT_DARG : need + uniform(0, 2);
        } else if (distribs[i] == MPI_DISTRIBUTE_CYCLIC) {
          dargs[i] = chance(0.3) ? MPI_DISTRIBUTE_DFLT_DARG : uniform(1, 4);
        } else {
          dargs[i] = MPI_DISTRIBUTE_DFLT_DARG;
        }
      }
      const int rank = uniform(0, nprocs - 1);
      const bool fortran = chance(0.5);
      MPI_Datatype t;
      std::string ds = "[", as = "[";
      for (size_t i = 0; i < gsizes.size(); ++i) {
        ds += std::string(i ? "," : "") + dist_name(distribs[i]);
        as += std::string(i ? "," : "") +
              (dargs[i] == MPI_DISTRIBUTE_DFLT_DARG ? std::string("DFLT") : std::to_string(dargs[i]));
      }
      ds += "]";
      as += "]";
      const std::string desc = "darray(size=" + std::to_string(nprocs) + ", rank=" +
                               std::to_string(rank) + ", gsizes=" + list(gsizes) + ", distribs=" + ds +
                               ", dargs=" + as + ", psizes=" + list(psizes) +
                               ", order=" + (fortran ? "FORTRAN" : "C") + ", " + c.desc + ")";
      check(MPI_Type_create_darray(nprocs, rank, nd, gsizes.data(), distribs.data(), dargs.data(),
                                   psizes.data(), fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C, c.type,
                                   &t),
            desc);
      i64 bound = sat_add(c.node_bound, 4);
      for (int i = 0; i < nd; ++i) bound = sat_add(sat_mul(bound, 3), 8);
      // The process grid is row-major whatever the array order (MPI 4.1, darray).
      std::vector<int> coord(gsizes.size());
      for (int i = nd - 1, r = rank; i >= 0; --i) {
        coord[static_cast<size_t>(i)] = r % psizes[static_cast<size_t>(i)];
        r /= psizes[static_cast<size_t>(i)];
      }
      std::vector<std::vector<i64>> idx(gsizes.size());
      for (size_t i = 0; i < gsizes.size(); ++i) {
        const int g = gsizes[i], p = psizes[i], me = coord[i];
        for (int j = 0; j < g; ++j) {
          bool mine = true;
          if (distribs[i] == MPI_DISTRIBUTE_BLOCK) {
            const int b = dargs[i] == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : dargs[i];
            mine = j / b == me;
          } else if (distribs[i] == MPI_DISTRIBUTE_CYCLIC) {
            const int k = dargs[i] == MPI_DISTRIBUTE_DFLT_DARG ? 1 : dargs[i];
            mine = (j / k) % p == me;
          }
          if (mine) idx[i].push_back(j);
        }
      }
      out = finish(t, desc, c.depth + 1, bound, array_map(idx, gsizes, fortran, c.map, c.extent));
      release(c);
      return true;
    }
    case 10:
    case 11: {  // resized
      Built c = build(depth_left - 1, half);
      i64 lb;
      switch (uniform(0, 3)) {
        case 0: lb = c.lb + uniform(-16, 16); break;
        case 1: lb = -uniform(1, 64); break;
        case 2: lb = 0; break;
        default: lb = c.lb; break;
      }
      i64 extent;
      switch (uniform(0, 6)) {
        case 6:  // negative (MPI allows it: consecutive elements go down in memory)
          extent = chance(0.5) ? -uniform64(1, std::max<i64>(1, c.extent) + 8) : -c.extent;
          break;
        case 0: extent = c.extent + uniform(1, 32); break;                       // larger
        case 1: extent = std::max<i64>(0, c.extent - uniform64(1, std::max<i64>(1, c.extent))); break;  // smaller
        case 2: extent = uniform64(1, 2 * c.extent + 16); break;
        case 3: extent = c.true_extent; break;
        case 4: extent = c.extent * 2 + uniform(0, 3); break;
        default: extent = chance(0.1) ? 0 : c.extent; break;
      }
      MPI_Datatype t;
      check(MPI_Type_create_resized(c.type, static_cast<MPI_Aint>(lb), static_cast<MPI_Aint>(extent), &t),
            "MPI_Type_create_resized");
      out = finish(t,
                   "resized(lb=" + std::to_string(lb) + ", extent=" + std::to_string(extent) + ", " +
                       c.desc + ")",
                   c.depth + 1, sat_add(c.node_bound, 2), c.map);
      release(c);
      return true;
    }
    case 12: {  // a vector resized so that consecutive elements continue its stride (two levels)
      if (depth_left < 2) return false;
      Built c = build(depth_left - 2, half);
      if (c.extent <= 0) {
        release(c);
        return false;
      }
      const int bl = uniform(1, 3);
      const int stride = bl + uniform(0, 3);
      const int n = small_count(cap_for(c, std::max<i64>(1, stride * c.extent)));
      MPI_Datatype v, t;
      check(MPI_Type_vector(n, bl, stride, c.type, &v), "MPI_Type_vector");
      MPI_Aint vlb = 0, vext = 0;
      check(MPI_Type_get_extent(v, &vlb, &vext), "MPI_Type_get_extent");
      const i64 extent = static_cast<i64>(n) * stride * c.extent;
      check(MPI_Type_create_resized(v, vlb, static_cast<MPI_Aint>(extent), &t), "MPI_Type_create_resized");
      MPI_Type_free(&v);
      std::vector<i64> map;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < bl; ++j) append_shifted(map, c.map, (static_cast<i64>(i) * stride + j) * c.extent);
      out = finish(t,
                   "resized(lb=" + std::to_string(vlb) + ", extent=" + std::to_string(extent) +
                       ", vector(count=" + std::to_string(n) + ", blocklen=" + std::to_string(bl) +
                       ", stride=" + std::to_string(stride) + ", " + c.desc + "))",
                   c.depth + 2, sat_add(c.node_bound, 5), std::move(map));
      release(c);
      return true;
    }
    default: {  // dup
      Built c = build(depth_left - 1, budget);
      MPI_Datatype t;
      check(MPI_Type_dup(c.type, &t), "MPI_Type_dup");
      out = finish(t, "dup(" + c.desc + ")", c.depth + 1, c.node_bound, c.map);
      release(c);
      return true;
    }
  }
}

}  // namespace ferry_test
