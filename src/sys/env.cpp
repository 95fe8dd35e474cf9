// The knob registry: the table, the one parser, the readers (env.hpp says what they promise).
#include "sys/env.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "sys/error.hpp"

namespace ferry::detail::env {

namespace {

constexpr i64 kMax = std::numeric_limits<i64>::max();

// One row per knob, in the enum's order (checked below). The README's table is this table.
constexpr std::array<Info, kKnobs> kTable = {{
    {Knob::mpi_verbose, "FERRY_MPI_VERBOSE", Kind::flag, "0", 0, 0, "",
     "The interposer says what it does on stderr: these settings at MPI_Init (rank 0), the model "
     "it uses, types it cannot translate, errors."},
    {Knob::model, "FERRY_MODEL", Kind::path, "", 0, 0, "",
     "The performance model file. Unset: `${XDG_CACHE_HOME:-~/.cache}/ferry/model-<host>.json` "
     "where it exists, else the built-in model."},
    {Knob::method, "FERRY_METHOD", Kind::choice, "", 0, 0, "staged|pipelined|ipc",
     "Forces the method of device messages where it applies (else staged). Unset: the model "
     "decides."},
    {Knob::pack, "FERRY_PACK", Kind::choice, "", 0, 0, "device|one_shot",
     "Forces how staging packs and unpacks non-contiguous device data: through device memory and "
     "one copy, or one-shot over the bus. Unset: the model decides."},
    {Knob::ipc, "FERRY_IPC", Kind::flag, "1", 0, 0, "",
     "0 turns CUDA IPC and the stub protocol off: device messages are staged or pipelined "
     "through host memory."},
    {Knob::ipc_min, "FERRY_IPC_MIN", Kind::bytes, "", 0, kMax, "",
     "Device messages of at least this many packed bytes to a process on the node go over IPC, "
     "smaller ones not (never below 4K). Unset: the model decides."},
    {Knob::pipeline_min, "FERRY_PIPELINE_MIN", Kind::bytes, "", 0, kMax, "",
     "Device messages of at least this many packed bytes are pipelined where IPC is not taken "
     "(never below 1M). Unset: the model decides."},
    {Knob::pipeline_chunk, "FERRY_PIPELINE_CHUNK", Kind::bytes, "", 4096, i64{1} << 40, "",
     "Bytes per chunk of a pipelined message (rounded down to whole elements). Unset: where the "
     "model's pack, MPI and unpack stages balance (MPI-ACC's rule)."},
    {Knob::ipc_cache, "FERRY_IPC_CACHE", Kind::integer, "128", 0, 1 << 20, "",
     "Peers' allocations kept mapped over IPC, the least recently used closed first; 0 closes "
     "each after its message (for programs that open the same IPC handles themselves)."},
    {Knob::pointer_cache, "FERRY_POINTER_CACHE", Kind::flag, "1", 0, 0, "",
     "0 asks the CUDA driver where every buffer lives instead of caching host pages (for "
     "programs that unmap host memory the driver later reuses for GPU memory)."},
    {Knob::debug_sync, "FERRY_DEBUG_SYNC", Kind::flag, "0", 0, 0, "",
     "Synchronizes and checks for errors after every GPU launch of Ferry's (debugging)."},
    {Knob::gpu_threads, "FERRY_GPU_THREADS", Kind::integer, "0", 0, 1024, "",
     "Threads per block of the pack kernels; 0: the tuning table (for tuning runs)."},
    {Knob::gpu_blocks_per_sm, "FERRY_GPU_BLOCKS_PER_SM", Kind::integer, "0", 0, 64, "",
     "Most blocks per multiprocessor a pack grid asks for; 0: the tuning table."},
    {Knob::batch_chunk, "FERRY_BATCH_CHUNK", Kind::bytes, "0", 0, i64{1} << 30, "",
     "Bytes per CUDA block of a Batch (tuning); 0: chosen from the batch's size."},
    {Knob::batch_order, "FERRY_BATCH_ORDER", Kind::flag, "1", 0, 0, "",
     "1 runs a Batch's chunks in the order of the addresses they read or write (neighbouring "
     "memory at the same time); 0 in the order of the moves."},
    {Knob::pieces, "FERRY_PIECES", Kind::flag, "1", 0, 0, "",
     "1 packs, unpacks and copies a struct or indexed layout of large strided pieces (a message's "
     "halo boxes in several arrays) piece by piece in one batch launch; 0 always with the "
     "single-call kernel, which searches the pieces for every word."},
    {Knob::topology, "FERRY_TOPOLOGY", Kind::layout, "", 0, 0, "",
     "A simulated layout for tests: N nodes of G GPUs, ranks assigned to nodes and GPUs in "
     "blocks (e.g. `4x2`). Unset: the machine's own."},
    {Knob::bandwidth, "FERRY_BANDWIDTH", Kind::path, "", 0, 0, "",
     "A node's GPU-to-GPU bandwidth matrix for placement: one row of GB/s per GPU, whitespace "
     "separated, `#` comments. Unset: uniform links."},
    {Knob::halo_method, "FERRY_HALO_METHOD", Kind::choice, "", 0, 0,
     "local|peer|ipc|staged|pipelined|mpi",
     "Forces the halo library's method wherever it applies, in every plan whose options name none "
     "(benchmarks). Unset: the model decides."},
    {Knob::halo_timeout, "FERRY_HALO_TIMEOUT", Kind::integer, "0", 0, i64{1} << 31, "",
     "Seconds a halo exchange waits for a neighbour before it fails with a message (a rank that "
     "never calls the exchange hangs it otherwise); 0: wait forever."},
    {Knob::halo_verbose, "FERRY_HALO_VERBOSE", Kind::flag, "0", 0, 0, "",
     "Rank 0 prints each halo plan: its partition, methods, bytes and messages per method."},
    {Knob::protocol_test, "FERRY_PROTOCOL_TEST", Kind::flag, "0", 0, 0, "",
     "Tests: large host-buffer sends take the pipelined stub protocol, so CI runs it without a "
     "GPU."},
    {Knob::passthrough, "FERRY_PASSTHROUGH", Kind::choice, "auto", 0, 0, "auto|on|off",
     "GPU buffers go to the MPI as they are when it is CUDA-aware: `auto` when the MPI says so "
     "(MPIX_Query_cuda_support, MPIX_GPU_query_support), `on` always, `off` never."},
    {Knob::async_recv, "FERRY_ASYNC_RECV", Kind::flag, "0", 0, 0, "",
     "1: a staged receive into device memory returns once its copy is queued on the legacy default "
     "stream, not finished (ordered before later work there, as cudaMemcpy from pageable memory)."},
    {Knob::batch_receive, "FERRY_BATCH_RECEIVE", Kind::flag, "1", 0, 0, "",
     "1: the stub receives that complete together (one wait or test call, one progress pass) queue "
     "their IPC and local copies, wait for the GPU once, then answer their senders; 0: one wait each."},
    {Knob::reorder, "FERRY_REORDER", Kind::flag, "1", 0, 0, "",
     "MPI_Dist_graph_create(_adjacent), MPI_Graph_create and MPI_Cart_create with reorder = 1 "
     "renumber ranks so heavy edges stay inside a node and on fast GPU links (on one node with "
     "one GPU the MPI decides); 0 hands them to the MPI unchanged."},
    {Knob::native_collectives, "FERRY_NATIVE_COLLECTIVES", Kind::flag, "1", 0, 0, "",
     "MPI_Alltoall(v/w) and the neighbourhood alltoall(v/w) and allgather(v) on GPU buffers move "
     "each block as a message of Ferry's (IPC, staged, pipelined); 0 runs the MPI's own on host "
     "copies of the buffers."},
    {Knob::mirror_max, "FERRY_MIRROR_MAX", Kind::bytes, "8K", 0, kMax, "",
     "MPI_Alltoall on GPU buffers with blocks of at most this many bytes runs as the MPI's own on "
     "host copies (one copy each way beats a message per peer), except on more than 2 processes of "
     "one node (read in place, FERRY_PULL); 0: Ferry's messages at every size."},
    {Knob::aggregate, "FERRY_AGGREGATE", Kind::choice, "auto", 0, 0, "auto|on|off",
     "Persistent neighbourhood collectives send the blocks between two nodes as one message through "
     "a leader on each side; `auto` where blocks are many (two per pair of nodes on average) and "
     "small (64 KiB at most)."},
    {Knob::pull, "FERRY_PULL", Kind::flag, "1", 0, 0, "",
     "Blocking MPI_Alltoall(v/w) and neighbourhood alltoall(v/w) and allgather(v) among processes "
     "of one node, every block contiguous device memory: each process reads its blocks in place from "
     "the senders' buffers (CUDA IPC) with one kernel launch, then one agreement; set alike at "
     "every process (agreed at MPI_Init); 0: a message per block."},
}};

constexpr bool in_order() {
  for (int i = 0; i < kKnobs; ++i)
    if (static_cast<int>(kTable[static_cast<std::size_t>(i)].id) != i) return false;
  return true;
}
static_assert(in_order(), "kTable must list the knobs in the order of enum Knob");

[[noreturn]] void refuse(const Info& k, const std::string& text, const std::string& wanted) {
  fail(MPI_ERR_ARG, std::string(k.name) + "=" + text + " is not " + wanted);
}

bool lower_equals(const std::string& s, const char* word) {
  std::size_t i = 0;
  for (; word[i]; ++i)
    if (i >= s.size() || std::tolower(static_cast<unsigned char>(s[i])) != word[i]) return false;
  return i == s.size();
}

// Digits with an optional sign; false on anything else or overflow.
bool to_i64(const std::string& s, i64* out) {
  if (s.empty()) return false;
  std::size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
  if (i == s.size()) return false;
  for (std::size_t j = i; j < s.size(); ++j)
    if (!std::isdigit(static_cast<unsigned char>(s[j]))) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0') return false;
  *out = v;
  return true;
}

std::string in_range(const Info& k) {
  std::string r = "at least " + std::to_string(k.lo);
  if (k.hi != kMax) r += " and at most " + std::to_string(k.hi);
  return r;
}

i64 parse_bytes(const Info& k, const std::string& text) {
  const char* wanted = "a size in bytes (e.g. 4096, 64K, 1M)";
  auto alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  std::string s = text;
  // An optional unit: 4096B, 64K, 64KB, 64KiB, 1m, 2G, 1T (binary multiples).
  if (s.size() >= 3 && lower_equals(s.substr(s.size() - 2), "ib") && alpha(s[s.size() - 3])) {
    s.resize(s.size() - 2);
  } else if (s.size() >= 2 && (s.back() == 'b' || s.back() == 'B')) {
    s.pop_back();
  }
  int shift = 0;
  if (!s.empty() && alpha(s.back())) {
    switch (std::tolower(static_cast<unsigned char>(s.back()))) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: refuse(k, text, wanted);
    }
    s.pop_back();
  }
  i64 v = 0;
  if (!to_i64(s, &v) || v < 0 || s[0] == '+' || v > (kMax >> shift)) refuse(k, text, wanted);
  return v << shift;
}

std::atomic<bool> g_reported[kKnobs];

// The value of knob k from the environment, else its default; a refused value is reported once.
std::optional<Value> read(Knob k, std::string* problem = nullptr) {
  const Info& i = info(k);
  const std::string v = raw(k);
  if (!v.empty()) {
    try {
      return parse(k, v);
    } catch (const Error& e) {
      if (problem) *problem = e.what();
      if (!g_reported[static_cast<int>(k)].exchange(true))
        std::fprintf(stderr, "ferry: %s; using the default (%s)\n", e.what(),
                     *i.fallback ? i.fallback : "unset");
    }
  }
  if (!*i.fallback) return std::nullopt;
  return parse(k, i.fallback);
}

}  // namespace

const std::array<Info, kKnobs>& knobs() { return kTable; }

const Info& info(Knob k) { return kTable[static_cast<std::size_t>(k)]; }

const Info* find(const std::string& name) {
  for (const Info& k : kTable)
    if (name == k.name) return &k;
  return nullptr;
}

std::string type_name(const Info& k) {
  switch (k.kind) {
    case Kind::flag: return "flag";
    case Kind::integer: return "integer " + std::to_string(k.lo) + "–" + std::to_string(k.hi);
    case Kind::bytes: return k.lo > 0 ? "bytes ≥ " + std::to_string(k.lo) : "bytes";
    case Kind::path: return "path";
    case Kind::layout: return "NxG";
    case Kind::choice: {
      std::string s = "one of ";
      for (const char* c = k.choices; *c; ++c) s += *c == '|' ? std::string(", ") : std::string(1, *c);
      return s;
    }
  }
  return "";
}

Value parse(Knob id, const std::string& text) {
  const Info& k = info(id);
  Value v;
  v.text = text;
  switch (k.kind) {
    case Kind::flag:
      if (lower_equals(text, "1") || lower_equals(text, "true") || lower_equals(text, "yes") ||
          lower_equals(text, "on")) {
        v.number = 1;
      } else if (lower_equals(text, "0") || lower_equals(text, "false") || lower_equals(text, "no") ||
                 lower_equals(text, "off")) {
        v.number = 0;
      } else {
        refuse(k, text, "a flag (1 or 0, true or false, yes or no, on or off)");
      }
      return v;
    case Kind::integer:
      if (!to_i64(text, &v.number)) refuse(k, text, "an integer");
      if (v.number < k.lo || v.number > k.hi) refuse(k, text, "an integer " + in_range(k));
      return v;
    case Kind::bytes:
      v.number = parse_bytes(k, text);
      if (v.number < k.lo || v.number > k.hi) refuse(k, text, "a size in bytes " + in_range(k));
      return v;
    case Kind::choice: {
      const std::string all = k.choices;
      std::size_t at = 0;
      while (at <= all.size()) {
        const std::size_t bar = std::min(all.find('|', at), all.size());
        if (all.compare(at, bar - at, text) == 0 && text.size() == bar - at) return v;
        at = bar + 1;
      }
      refuse(k, text, type_name(k));
    }
    case Kind::path:
      return v;
    case Kind::layout: {
      const std::size_t x = text.find_first_of("xX");
      i64 n = 0, g = 0;
      if (x == std::string::npos || !to_i64(text.substr(0, x), &n) || !to_i64(text.substr(x + 1), &g) ||
          n < 1 || g < 1 || n > (1 << 20) || g > (1 << 20) || text[0] == '+' || text[x + 1] == '+')
        refuse(k, text, "a layout NxG (N nodes of G GPUs, both at least 1, e.g. 4x2)");
      return v;
    }
  }
  return v;
}

std::string raw(Knob k) {
  const char* v = std::getenv(info(k).name);
  return v ? std::string(v) : std::string();
}

bool flag(Knob k) {
  const auto v = read(k);
  return v && v->number != 0;
}

i64 integer(Knob k) {
  const auto v = read(k);
  return v ? v->number : 0;
}

std::optional<i64> integer_if_set(Knob k) {
  const auto v = read(k);
  if (!v) return std::nullopt;
  return v->number;
}

std::string text(Knob k) {
  const auto v = read(k);
  return v ? v->text : std::string();
}

std::vector<Setting> settings() {
  std::vector<Setting> out;
  for (const Info& k : kTable) {
    Setting s{&k, "", false, ""};
    const std::string given = raw(k.id);
    const auto v = read(k.id, &s.problem);
    s.from_env = !given.empty() && s.problem.empty();
    if (v) s.value = v->text;
    out.push_back(std::move(s));
  }
  return out;
}

std::string settings_text(const char* prefix) {
  std::string out;
  for (const Setting& s : settings()) {
    out += prefix;
    out += s.knob->name;
    out += s.value.empty() ? std::string(" unset") : "=" + s.value;
    if (!s.problem.empty()) {
      out += " (default; refused: " + s.problem + ")";
    } else if (!s.from_env) {
      out += " (default)";
    }
    out += "\n";
  }
  return out;
}

std::string markdown_table() {
  std::string out = "| Knob | Type | Default | Meaning |\n|---|---|---|---|\n";
  for (const Info& k : kTable) {
    out += "| `";
    out += k.name;
    out += "` | " + type_name(k) + " | ";
    out += *k.fallback ? "`" + std::string(k.fallback) + "`" : std::string("unset");
    out += " | ";
    out += k.meaning;
    out += " |\n";
  }
  return out;
}

bool debug_sync() {
  static const bool v = flag(Knob::debug_sync);
  return v;
}
int gpu_threads() {
  static const int v = static_cast<int>(integer(Knob::gpu_threads));
  return v;
}
int gpu_blocks_per_sm() {
  static const int v = static_cast<int>(integer(Knob::gpu_blocks_per_sm));
  return v;
}

std::string cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return x;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache";
  return "";
}

std::string hostname() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

double halo_timeout() {
  static const double v = static_cast<double>(integer(Knob::halo_timeout));
  return v;
}
bool halo_verbose() {
  static const bool v = flag(Knob::halo_verbose);
  return v;
}
const std::string& halo_method() {
  static const std::string v = text(Knob::halo_method);
  return v;
}

std::int64_t batch_chunk() {
  static const std::int64_t v = integer(Knob::batch_chunk);
  return v;
}
int batch_order() {
  static const int v = flag(Knob::batch_order) ? 1 : 0;
  return v;
}
bool pieces() {
  static const bool v = flag(Knob::pieces);
  return v;
}

}  // namespace ferry::detail::env
