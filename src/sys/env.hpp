// sys/env.hpp — every FERRY_* environment variable Ferry reads, declared once (name, type, default,
// one-line meaning) in the table of env.cpp, read through one parser. Nothing outside src/sys calls
// getenv; the README's knob table is generated from the same table (`ferry-demo --knobs-markdown`)
// and the test test_readme_knobs fails when the two differ.
//
// Bad values. A value that does not parse as the knob's type, or lies outside its range, is
// reported once per process on stderr ("ferry: FERRY_X=abc is not ...; using the default ...")
// and the knob's default applies: the lenient readers below never throw. Knobs are read inside
// MPI_Init and other MPI calls, where an exception would crash the application, and a typo in a
// variable a whole job exports should not abort a long run; FERRY_MPI_VERBOSE=1 prints every
// knob's effective value at MPI_Init, so the fallback is visible. parse() is the strict form
// (ferry::Error, MPI_ERR_ARG, naming the knob) for tools that would rather refuse.
//
// Values are read from the environment on every call (a getenv and a parse, well under a
// microsecond); readers on a hot path keep the value in a function-local static.
#pragma once

#include <ferry/type.hpp>

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace ferry::detail::env {

enum class Knob : int {
  mpi_verbose,
  model,
  method,
  pack,
  ipc,
  ipc_min,
  pipeline_min,
  pipeline_chunk,
  ipc_cache,
  pointer_cache,
  debug_sync,
  gpu_threads,
  gpu_blocks_per_sm,
  batch_chunk,
  batch_order,
  pieces,
  topology,
  bandwidth,
  halo_method,
  halo_timeout,
  halo_verbose,
  protocol_test,
  passthrough,
  async_recv,
  batch_receive,
  reorder,
  native_collectives,
  mirror_max,
  aggregate,
  pull,
  count
};

enum class Kind {
  flag,     // 1/0, true/false, yes/no, on/off
  integer,  // decimal, within [lo, hi]
  bytes,    // decimal with an optional binary suffix K, M, G, T (KiB...), within [lo, hi]
  choice,   // one of `choices` ("a|b|c")
  path,     // a file name
  layout    // NxG: N nodes of G GPUs each, both at least 1
};

struct Info {
  Knob id;
  const char* name;
  Kind kind;
  const char* fallback;  // the default as the variable would spell it; "" : unset
  i64 lo, hi;            // integer and bytes knobs
  const char* choices;   // choice knobs
  const char* meaning;   // one line, for the README and --knobs
};

constexpr int kKnobs = static_cast<int>(Knob::count);
const std::array<Info, kKnobs>& knobs();
const Info& info(Knob k);
// The knob of that variable name, or null.
const Info* find(const std::string& name);
// How the README names a knob's type ("flag", "bytes", "staged | pipelined | ipc", ...).
std::string type_name(const Info& k);

// A parsed value: `number` for flag (0/1), integer and bytes knobs; `text` for the others.
struct Value {
  i64 number = 0;
  std::string text;
};
// Strict: `text` as knob k's value; ferry::Error (MPI_ERR_ARG) naming the knob and what it takes.
Value parse(Knob k, const std::string& text);

// The variable's text; "" when it is unset or empty (both mean: the default).
std::string raw(Knob k);
// Lenient readers: the variable's value, else (unset, or bad: reported once) the default.
bool flag(Knob k);
i64 integer(Knob k);                         // integer and bytes knobs with a default
std::optional<i64> integer_if_set(Knob k);   // the same; nullopt where unset and no default
std::string text(Knob k);                    // choice, path, layout: "" where unset and no default

// Each knob's effective value and where it came from, in table order.
struct Setting {
  const Info* knob;
  std::string value;    // effective, as text ("" : unset)
  bool from_env;        // the variable set it
  std::string problem;  // why the variable's value was refused ("" : it was not)
};
std::vector<Setting> settings();
// One line per knob ("FERRY_X=value (default)"), for FERRY_MPI_VERBOSE and ferry-demo --knobs.
std::string settings_text(const char* prefix);
// The README's table: a Markdown table of every knob, its type, default and meaning.
std::string markdown_table();

// Cached readers of the knobs on hot paths.
bool debug_sync();       // FERRY_DEBUG_SYNC
int gpu_threads();       // FERRY_GPU_THREADS
int gpu_blocks_per_sm(); // FERRY_GPU_BLOCKS_PER_SM

// Not knobs, but the environment too: ${XDG_CACHE_HOME:-$HOME/.cache} ("" when neither is set),
// and this machine's host name ("" when it cannot be read).
std::string cache_dir();
std::string hostname();

// The halo library's knobs: FERRY_HALO_TIMEOUT in seconds (0: wait forever), FERRY_HALO_VERBOSE,
// FERRY_HALO_METHOD ("" when unset). Read once.
double halo_timeout();
bool halo_verbose();
const std::string& halo_method();

// FERRY_BATCH_CHUNK (0 = chosen from the batch's size): bytes per CUDA block of a Batch, for tuning.
std::int64_t batch_chunk();
// FERRY_BATCH_ORDER (1): 1 runs a Batch's chunks in the order of the addresses they read or write
// (neighbouring memory at the same time); 0 in the order of the moves.
int batch_order();
// FERRY_PIECES (1): general forms of large strided pieces move piece by piece in one batch launch.
bool pieces();

}  // namespace ferry::detail::env
