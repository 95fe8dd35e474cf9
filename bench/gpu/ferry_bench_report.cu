// bench/gpu/ferry_bench_report.cu — ferry-bench's machine description, JSON, table and options.
#include "ferry_bench.hpp"

using namespace ferry_bench_gpu;

namespace ferry_bench_gpu {

// ---------------------------------------------------------------------------------------------
// Machine description, JSON, table.

std::string read_first_line(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  char buf[256] = {0};
  const char* r = std::fgets(buf, sizeof buf, f);
  std::fclose(f);
  std::string s = r ? buf : "";
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// NUMA node of a CPU, from sysfs ("" when unknown).
std::string cpu_numa(int cpu) {
  if (cpu < 0) return "";
  DIR* d = opendir(("/sys/devices/system/cpu/cpu" + std::to_string(cpu)).c_str());
  if (!d) return "";
  std::string node;
  while (dirent* ent = readdir(d)) {
    const std::string nm = ent->d_name;
    if (nm.size() > 4 && nm.compare(0, 4, "node") == 0 && std::isdigit(static_cast<unsigned char>(nm[4]))) node = nm.substr(4);
  }
  closedir(d);
  return node;
}

// NUMA node of a GPU's PCI device, from sysfs ("" when unknown).
std::string gpu_numa(int dev) {
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess) return "";
  std::string id = bus;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::size_t colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id = id.substr(colon - 4);  // 8-digit domain -> 4
  return read_first_line("/sys/bus/pci/devices/" + id + "/numa_node");
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string now_utc() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

std::string hostname() {
  char h[256] = {0};
  gethostname(h, sizeof h - 1);
  return h;
}

bool write_json(const std::string& path, const std::string& device, int driver, int runtime) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "ferry-bench: cannot write %s\n", path.c_str());
    return false;
  }
  const int cpu = sched_getcpu();
  std::fprintf(f, "{\n  \"tool\": \"ferry-bench\",\n  \"date\": %s,\n  \"host\": %s,\n  \"device\": %s,\n",
               json_str(now_utc()).c_str(), json_str(hostname()).c_str(), json_str(device).c_str());
  std::fprintf(f, "  \"devices\": %d,\n  \"sms\": %d,\n  \"l2_bytes\": %d,\n  \"driver\": %d,\n  \"runtime\": %d,\n",
               ctx.devices, ctx.sms, ctx.l2, driver, runtime);
  std::fprintf(f, "  \"cpu\": %d,\n  \"cpu_numa\": %s,\n  \"gpu_numa\": %s,\n", cpu,
               json_str(cpu_numa(cpu)).c_str(), json_str(ctx.devices ? gpu_numa(0) : "").c_str());
  std::string fams;
  for (const std::string& s : opt.families) fams += (fams.empty() ? "" : ",") + json_str(s);
  std::fprintf(f, "  \"options\": {\"families\": [%s], \"quick\": %s, \"max_size\": %lld, \"flush\": %s, "
                  "\"pinned_cpu\": %d, \"min_time_s\": %g, \"min_reps\": %d, \"max_reps\": %d, \"gate\": %s},\n",
               fams.c_str(), opt.quick ? "true" : "false", static_cast<long long>(opt.max_size),
               opt.flush ? "true" : "false", opt.cpu, opt.min_time, opt.min_reps, opt.max_reps,
               opt.gate ? "true" : "false");
  std::fprintf(f, "  \"gated_samples\": %ld,\n  \"gate_timeouts\": %d,\n", ctx.gated_samples, ctx.gate_timeouts);
  std::fprintf(f, "  \"skipped\": [");
  for (std::size_t i = 0; i < skipped.size(); ++i)
    std::fprintf(f, "%s{\"family\": %s, \"reason\": %s}", i ? ", " : "", json_str(skipped[i].first).c_str(),
                 json_str(skipped[i].second).c_str());
  std::fprintf(f, "],\n  \"notes\": [");
  for (std::size_t i = 0; i < notes.size(); ++i) std::fprintf(f, "%s%s", i ? ", " : "", json_str(notes[i]).c_str());
  std::fprintf(f, "],\n  \"results\": [\n");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    std::fprintf(f, "    {\"family\": %s, \"case\": %s, \"method\": %s, \"direction\": %s, \"bytes\": %lld, "
                    "\"us_median\": %.4f, \"us_min\": %.4f, \"gbps\": %.6g, \"reps\": %d, \"timing\": %s}%s\n",
                 json_str(r.family).c_str(), json_str(r.kase).c_str(), json_str(r.method).c_str(),
                 json_str(r.direction).c_str(), static_cast<long long>(r.bytes), r.us_median, r.us_min, r.gbps,
                 r.reps, json_str(r.timing).c_str(), i + 1 < records.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
  std::printf("ferry-bench: wrote %s (%zu records)\n", path.c_str(), records.size());
  return true;
}

void print_table() {
  std::printf("%-9s %-46s %10s %12s %12s %10s %6s\n", "family", "case", "size", "us_median", "us_min", "GB/s", "reps");
  for (const Record& r : records)
    std::printf("%-9s %-46s %10s %12.3f %12.3f %10.2f %6d\n", r.family.c_str(), r.kase.c_str(),
                size_name(r.bytes).c_str(), r.us_median, r.us_min, r.gbps, r.reps);
  for (const auto& s : skipped) std::printf("skipped: %s: %s\n", s.first.c_str(), s.second.c_str());
  for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
}

// ---------------------------------------------------------------------------------------------
// Options.

void usage(FILE* f) {
  std::fprintf(f,
               "usage: ferry-bench [options]   (MPI program: mpiexec -n 1 ferry-bench ..., or run directly)\n"
               "  --family LIST    comma-separated: copy,peer,copy2d3d,pack,calls (default: all)\n"
               "  --quick          short sweep: sizes x4 apart, 0.02 s / at most 100 repetitions a point\n"
               "  --max-size SIZE  largest transfer, e.g. 64M, 1G (default 256M; sizes are powers of two)\n"
               "  --json FILE      write the records as JSON\n"
               "  --flush          write a buffer of 2x the GPU's L2 before every repetition (untimed)\n"
               "  --cpu N          pin the host thread to CPU N (sched_setaffinity); prints its NUMA node\n"
               "  --min-time S     seconds of repetitions per point (default 0.2; 0.02 with --quick)\n"
               "  --no-gate        time async work with plain events, without the spin kernel in front\n"
               "  --progress       progress bar on stderr even when it is not a terminal\n"
               "  --help           this text\n"
               "Without a GPU: prints \"no GPU: skipped\" and exits 0.\n");
}

bool parse_size(const std::string& s, i64& out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return false;
  const std::string unit = end;
  double mul = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") mul = 1024.0;
  else if (unit == "M" || unit == "m" || unit == "MiB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "g" || unit == "GiB") mul = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") return false;
  out = static_cast<i64>(v * mul);
  return out >= 1;
}

// 0: run; 1: exit 0 (help); 2: usage error.
int parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& v) {
      if (i + 1 >= argc) return false;
      v = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 1;
    } else if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--flush") {
      opt.flush = true;
    } else if (a == "--no-gate") {
      opt.gate = false;
    } else if (a == "--progress") {
      opt.progress = true;
    } else if (a == "--json") {
      if (!value(opt.json)) return 2;
    } else if (a == "--max-size") {
      if (!value(v) || !parse_size(v, opt.max_size)) return 2;
    } else if (a == "--cpu") {
      if (!value(v)) return 2;
      char* end = nullptr;
      const long c = std::strtol(v.c_str(), &end, 10);
      if (*end || c < 0 || c >= CPU_SETSIZE) return 2;
      opt.cpu = static_cast<int>(c);
    } else if (a == "--min-time") {
      if (!value(v)) return 2;
      opt.min_time = std::strtod(v.c_str(), nullptr);
      if (opt.min_time <= 0) return 2;
    } else if (a == "--family") {
      if (!value(v)) return 2;
      std::size_t at = 0;
      while (at <= v.size()) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        const std::string f = v.substr(at, comma - at);
        at = comma + 1;
        if (f.empty()) continue;
        if (f == "all") {
          opt.families.assign(std::begin(kFamilies), std::end(kFamilies));
          continue;
        }
        if (std::find(std::begin(kFamilies), std::end(kFamilies), f) == std::end(kFamilies)) {
          std::fprintf(stderr, "ferry-bench: unknown family '%s'\n", f.c_str());
          return 2;
        }
        if (std::find(opt.families.begin(), opt.families.end(), f) == opt.families.end()) opt.families.push_back(f);
      }
    } else {
      std::fprintf(stderr, "ferry-bench: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (opt.families.empty()) opt.families.assign(std::begin(kFamilies), std::end(kFamilies));
  if (opt.min_time < 0) opt.min_time = opt.quick ? 0.02 : 0.2;
  opt.max_reps = opt.quick ? 100 : 1000;
  opt.min_reps = opt.quick ? 3 : 5;
  opt.warm = opt.quick ? 1 : 2;
  return 0;
}

bool wants(const char* family) {
  return std::find(opt.families.begin(), opt.families.end(), family) != opt.families.end();
}

}  // namespace ferry_bench_gpu
