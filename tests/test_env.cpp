// The knob registry (src/sys/env.hpp): one parser for every FERRY_* variable, strict and lenient
// readers, the effective settings and the README table.
#include <ferry/error.hpp>
#include <ferry/model.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <set>
#include <string>

#include "sys/env.hpp"

namespace {

namespace env = ferry::detail::env;
using env::Knob;

// Sets a variable for one scope and restores what was there.
class Scoped {
 public:
  Scoped(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~Scoped() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// The message of the error parse() throws, or "" when it accepts the text.
std::string refusal(Knob k, const std::string& text) {
  try {
    env::parse(k, text);
  } catch (const ferry::Error& e) {
    EXPECT_EQ(e.mpi_error_class(), MPI_ERR_ARG);
    return e.what();
  }
  return "";
}

TEST(Env, TableIsWellFormed) {
  std::set<std::string> names;
  for (const env::Info& k : env::knobs()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name << " declared twice";
    EXPECT_EQ(std::string(k.name).rfind("FERRY_", 0), 0u) << k.name;
    EXPECT_GT(std::string(k.meaning).size(), 10u) << k.name;
    EXPECT_EQ(env::find(k.name), &k);
    if (*k.fallback) EXPECT_EQ(refusal(k.id, k.fallback), "") << k.name << "'s default must parse";
  }
  EXPECT_EQ(env::find("FERRY_NO_SUCH_KNOB"), nullptr);
}

TEST(Env, ParsesEachKind) {
  EXPECT_EQ(env::parse(Knob::debug_sync, "1").number, 1);
  EXPECT_EQ(env::parse(Knob::debug_sync, "On").number, 1);
  EXPECT_EQ(env::parse(Knob::debug_sync, "false").number, 0);
  EXPECT_EQ(env::parse(Knob::gpu_threads, "256").number, 256);
  EXPECT_EQ(env::parse(Knob::pipeline_chunk, "4096").number, 4096);
  EXPECT_EQ(env::parse(Knob::pipeline_chunk, "64K").number, 64 << 10);
  EXPECT_EQ(env::parse(Knob::pipeline_chunk, "2MiB").number, 2 << 20);
  EXPECT_EQ(env::parse(Knob::pipeline_chunk, "1g").number, 1 << 30);
  EXPECT_EQ(env::parse(Knob::pipeline_chunk, "8192B").number, 8192);
  EXPECT_EQ(env::parse(Knob::ipc_min, "1000000000000000").number, 1000000000000000);
  EXPECT_EQ(env::parse(Knob::method, "pipelined").text, "pipelined");
  EXPECT_EQ(env::parse(Knob::model, "/tmp/m.json").text, "/tmp/m.json");
}

TEST(Env, RefusesBadValuesNamingTheKnob) {
  const std::pair<Knob, const char*> bad[] = {
      {Knob::debug_sync, "2"},        {Knob::debug_sync, "maybe"},  {Knob::gpu_threads, "abc"},
      {Knob::gpu_threads, "12x"},     {Knob::gpu_threads, "-1"},    {Knob::gpu_threads, "4096"},
      {Knob::pipeline_chunk, "100"},  {Knob::pipeline_chunk, "1Q"}, {Knob::pipeline_chunk, "K"},
      {Knob::pipeline_chunk, "-4K"},  {Knob::ipc_min, "99999999999999999999"},
      {Knob::ipc_min, "9000000000T"}, {Knob::method, "fast"},       {Knob::method, "stage"},
      {Knob::pack, "device|one_shot"}};
  for (auto [k, text] : bad) {
    const std::string why = refusal(k, text);
    EXPECT_NE(why.find(env::info(k).name), std::string::npos) << text << ": " << why;
    EXPECT_NE(why.find(text), std::string::npos) << why;
  }
}

TEST(Env, ChoicesAreTheModelsNames) {
  for (const char* m : {"staged", "pipelined", "ipc"}) {
    EXPECT_EQ(refusal(Knob::method, m), "");
    EXPECT_TRUE(ferry::model::method_named(m).has_value()) << m;
  }
  for (const char* p : {"device", "one_shot"}) {
    EXPECT_EQ(refusal(Knob::pack, p), "");
    EXPECT_TRUE(ferry::model::pack_named(p).has_value()) << p;
  }
}

TEST(Env, LenientReadersFallBackToTheDefaultAndSaySo) {
  {
    Scoped unset("FERRY_GPU_BLOCKS_PER_SM", nullptr);
    EXPECT_EQ(env::integer(Knob::gpu_blocks_per_sm), 0);
  }
  {
    Scoped s("FERRY_GPU_BLOCKS_PER_SM", "8");
    EXPECT_EQ(env::integer(Knob::gpu_blocks_per_sm), 8);
  }
  {
    Scoped s("FERRY_GPU_BLOCKS_PER_SM", "lots");
    testing::internal::CaptureStderr();
    EXPECT_EQ(env::integer(Knob::gpu_blocks_per_sm), 0);
    EXPECT_EQ(env::integer(Knob::gpu_blocks_per_sm), 0);
    const std::string said = testing::internal::GetCapturedStderr();
    EXPECT_NE(said.find("FERRY_GPU_BLOCKS_PER_SM=lots"), std::string::npos) << said;
    EXPECT_EQ(said.find("FERRY_GPU_BLOCKS_PER_SM", said.find('\n')), std::string::npos)
        << "reported once: " << said;
  }
  {
    Scoped s("FERRY_IPC_MIN", nullptr);
    EXPECT_FALSE(env::integer_if_set(Knob::ipc_min).has_value());
  }
  {
    Scoped s("FERRY_IPC_MIN", "64K");
    EXPECT_EQ(env::integer_if_set(Knob::ipc_min), 64 << 10);
  }
  {
    Scoped s("FERRY_IPC", "");  // empty means unset
    EXPECT_TRUE(env::flag(Knob::ipc));
  }
  {
    Scoped s("FERRY_IPC", "0");
    EXPECT_FALSE(env::flag(Knob::ipc));
  }
  {
    Scoped s("FERRY_METHOD", "fastest");
    testing::internal::CaptureStderr();
    EXPECT_EQ(env::text(Knob::method), "");
    testing::internal::GetCapturedStderr();
  }
}

TEST(Env, SettingsShowEffectiveValues) {
  Scoped a("FERRY_PIPELINE_CHUNK", "2M");
  Scoped b("FERRY_GPU_THREADS", "nope");
  Scoped c("FERRY_PACK", nullptr);
  testing::internal::CaptureStderr();
  const std::string text = env::settings_text("> ");
  testing::internal::GetCapturedStderr();
  EXPECT_NE(text.find("> FERRY_PIPELINE_CHUNK=2M\n"), std::string::npos) << text;
  EXPECT_NE(text.find("> FERRY_GPU_THREADS=0 (default; refused: FERRY_GPU_THREADS=nope"),
            std::string::npos) << text;
  EXPECT_NE(text.find("> FERRY_PACK unset (default)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("> FERRY_IPC=1 (default)\n"), std::string::npos) << text;
  int lines = 0;
  for (char ch : text) lines += ch == '\n';
  EXPECT_EQ(lines, env::kKnobs);
}

TEST(Env, MarkdownTableListsEveryKnob) {
  const std::string t = env::markdown_table();
  EXPECT_EQ(t.rfind("| Knob | Type | Default | Meaning |\n|---|---|---|---|\n", 0), 0u);
  for (const env::Info& k : env::knobs())
    EXPECT_NE(t.find("| `" + std::string(k.name) + "` | " + env::type_name(k) + " | "),
              std::string::npos) << k.name;
  int rows = 0;
  for (char ch : t) rows += ch == '\n';
  EXPECT_EQ(rows, env::kKnobs + 2);
}

TEST(Env, CacheDirAndHost) {
  {
    Scoped x("XDG_CACHE_HOME", "/x/cache");
    EXPECT_EQ(env::cache_dir(), "/x/cache");
  }
  {
    Scoped x("XDG_CACHE_HOME", nullptr);
    Scoped h("HOME", "/home/me");
    EXPECT_EQ(env::cache_dir(), "/home/me/.cache");
  }
  {
    Scoped x("XDG_CACHE_HOME", nullptr);
    Scoped h("HOME", nullptr);
    EXPECT_EQ(env::cache_dir(), "");
  }
  EXPECT_FALSE(env::hostname().empty());
}

}  // namespace
