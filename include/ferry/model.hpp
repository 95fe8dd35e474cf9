// ferry/model.hpp — the performance model the interposer picks each message's method from.
//
// A model holds, per (method, locality), the measured one-way time of a message by packed size
// (1-D, interpolated log-log between measured sizes, extrapolated at constant bandwidth beyond the
// ends), and per pack method the time to pack for staging, and to unpack from it, by (object size
// × contiguous block size) (2-D, bilinear in log-log). `ferry-measure` writes one as a versioned
// JSON file; the interposer loads it from $FERRY_MODEL, else from the per-host default path, else
// uses built-in defaults. A file that cannot be read or parsed is an error message and the
// defaults, never a crash.
#pragma once

#include <ferry/type.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ferry::model {

// How a message travels (see docs/design.md, "MPI interposer").
enum class Method : std::uint8_t { staged, pipelined, ipc };
// Where the receiver's buffer is, seen from the sender's: on the same GPU (another process on it),
// on another GPU of the node, on another node.
enum class Locality : std::uint8_t { same_gpu, other_gpu, other_node };
// How a non-contiguous message is packed for staging: into device memory then copied, or by the
// kernel straight into mapped host memory (one-shot); and the same two ways to unpack it.
enum class Pack : std::uint8_t { device, one_shot };
enum class Direction : std::uint8_t { pack, unpack };

// Version 2 has the three localities; a version 1 file's "same_node" curves are read for both
// GPUs of a node.
constexpr int kFormatVersion = 2;
// Floors every rank agrees on (receivers check for stubs only above them): no IPC below 4 KiB,
// no pipelining below 1 MiB, whatever a model says.
constexpr i64 kIpcMinBytes = 4096;
constexpr i64 kPipelinedMinBytes = i64{1} << 20;

const char* name(Method m);
const char* name(Locality l);
const char* name(Pack p);
std::optional<Method> method_named(const std::string& s);
std::optional<Locality> locality_named(const std::string& s);
std::optional<Pack> pack_named(const std::string& s);

// Time by size: strictly increasing sizes, positive times.
struct Curve {
  std::vector<i64> bytes;
  std::vector<double> us;
  // Log-log interpolation; below the first size the first time; above the last, the last time
  // scaled by size (the bandwidth of the largest measured message).
  double at(i64 size) const;
  bool empty() const { return bytes.empty(); }
};

// Time by (object size, block size): a grid, us[i][j] for bytes[i] and block[j].
struct Surface {
  std::vector<i64> bytes;
  std::vector<i64> block;
  std::vector<std::vector<double>> us;
  double at(i64 size, i64 block_size) const;  // bilinear in log-log, clamped to the grid's ends
  bool empty() const { return bytes.empty() || block.empty(); }
};

struct Decision {
  Method method;
  Pack pack;    // staging a send
  Pack unpack;  // a staged receive
};

class Model {
 public:
  // Thresholds of the built-in model: IPC from its 4 KiB floor on the same node, pipelined from
  // 4 MiB across nodes, one-shot packing except for large objects of 1-byte blocks, one-shot
  // unpacking up to about 1 MiB (pack and unpack surfaces measured on an H200; docs/performance.md).
  static Model builtin();
  // Throws ferry::Error(MPI_ERR_OTHER) with the reason when the file is missing or malformed.
  static Model load(const std::string& path);
  // The model to run on: $FERRY_MODEL, else default_path(), else builtin(); `why` says which
  // (and why a file was refused).
  static Model from_environment(std::string* why = nullptr);
  // ${XDG_CACHE_HOME:-$HOME/.cache}/ferry/model-<hostname>.json
  static std::string default_path();

  void save(const std::string& path) const;
  std::string to_json() const;
  static Model from_json(const std::string& text);  // throws like load()

  // Predicted one-way time of a method, or +inf where the model has no curve for it. A locality of
  // the node without a curve takes the other one's (a model measured on one GPU knows same_gpu).
  double predict(Method m, Locality l, i64 bytes) const;
  // Time to pack (or unpack) by a pack method, or +inf where the model has no surface; an unpack
  // without surfaces of its own takes the pack surfaces (a version 1 file has no others).
  double predict_pack(Pack p, i64 bytes, i64 block, Direction d = Direction::pack) const;
  // The fastest method (and pack) the model knows for a message; `ipc_possible`: the buffer and
  // the peer allow IPC (never to another node).
  Decision choose(i64 bytes, i64 block, Locality l, bool ipc_possible = true) const;
  // One-way time of the MPI alone moving `bytes` between host buffers (the pipelined method's
  // middle stage): the measured "mpi" curve of the locality (or the node's other one), else the
  // staged curve less packing and unpacking dense data, at least a quarter of it.
  double predict_mpi(Locality l, i64 bytes) const;
  void set_mpi_curve(Locality l, Curve c);
  const Curve* mpi_curve(Locality l) const;  // this locality's own, or null

  void set_curve(Method m, Locality l, Curve c);
  void set_surface(Pack p, Surface s, Direction d = Direction::pack);
  const Curve* curve(Method m, Locality l) const;  // this locality's own curve, or null

  std::map<std::string, std::string> info;  // host, gpu, mpi, date, command: for people

 private:
  std::map<std::pair<Method, Locality>, Curve> curves_;
  std::map<Locality, Curve> mpi_;
  std::map<std::pair<Direction, Pack>, Surface> surfaces_;
};

// Decisions cached by (block size, object size, locality, IPC possible): a lookup costs a hash and
// a shared lock (bench_model measures it).
class DecisionCache {
 public:
  explicit DecisionCache(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
  Decision get(i64 bytes, i64 block, Locality l, bool ipc_possible = true);
  std::size_t size() const;
  const Model& model() const { return *model_; }

 private:
  struct Key {
    i64 bytes;
    i64 block;
    std::uint8_t locality;
    bool ipc;
    bool operator==(const Key& o) const {
      return bytes == o.bytes && block == o.block && locality == o.locality && ipc == o.ipc;
    }
  };
  struct Hash {
    std::size_t operator()(const Key& k) const {
      std::uint64_t h = static_cast<std::uint64_t>(k.bytes) * 0x9E3779B97F4A7C15ULL;
      h ^= static_cast<std::uint64_t>(k.block) + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2);
      h ^= (static_cast<std::uint64_t>(k.locality) << 1 | (k.ipc ? 1 : 0)) * 0xBF58476D1CE4E5B9ULL;
      return static_cast<std::size_t>(h ^ (h >> 31));
    }
  };
  std::shared_ptr<const Model> model_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<Key, Decision, Hash> cache_;
};

}  // namespace ferry::model
