// cuda_spec_bench: the speculative decode benchmark on CUDA (spec_bench.h), JSON on stdout.
//   cuda_spec_bench [--tiny] [--json FILE] [--batches 1,8,32] [--acceptance 1,3,6.5,B] [--rounds N]
//                   [--warmup N] [--context N] [--precision bf16|f16|f32] [--drafter-quantization int8|int4]... [--profile]
//                   [--draft-vocab W]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/cuda_spec/spec_bench.h"

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "cuda_spec_bench: %s\n", what.c_str());
  std::exit(1);
}

// "1,8,32" as numbers; "B" (acceptance only) as 0, each drafter's block size.
template <typename T>
std::vector<T> list(const std::string& flag, const std::string& text, bool allow_b) {
  std::vector<T> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (allow_b && item == "B") {
      out.push_back(T{0});
      continue;
    }
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v > 0)) die(flag + ": '" + item + "' is not a positive number");
    out.push_back(static_cast<T>(v));
  }
  if (out.empty()) die(flag + " needs at least one value");
  return out;
}

uint32_t count(const std::string& flag, const char* text) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (*end != '\0' || v == 0 || v > 100000) die(flag + ": '" + text + "' is not a count in 1..100000");
  return static_cast<uint32_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  tandem::bench::SpecBenchArgs a;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool has = i + 1 < argc;
    if (s == "--tiny") {
      a.tiny = true;
    } else if (s == "--json" && has) {
      json_path = argv[++i];
      a.json_path = json_path;
    } else if (s == "--batches" && has) {
      a.batches = list<uint32_t>(s, argv[++i], false);
    } else if (s == "--acceptance" && has) {
      a.acceptances = list<double>(s, argv[++i], true);
    } else if (s == "--rounds" && has) {
      a.rounds = count(s, argv[++i]);
    } else if (s == "--warmup" && has) {
      a.warmup = count(s, argv[++i]);
    } else if (s == "--context" && has) {
      a.context = count(s, argv[++i]);
    } else if (s == "--precision" && has) {
      auto p = tandem::ir::parse_precision(argv[++i]);
      if (!p.ok()) die(p.error().message());
      a.precision = *p;
    } else if (s == "--profile") {
      a.profile = true;
    } else if (s == "--draft-vocab" && has) {
      a.draft_vocab = count(s, argv[++i]);
    } else if (s == "--drafter-quantization" && has) {
      auto q = tandem::models::dflash::parse_quantization(argv[++i]);
      if (!q.ok()) die(q.error().message());
      a.quantizations.push_back(*q);
    } else {
      die("unknown argument " + s + " (--tiny, --json FILE, --batches L, --acceptance L, --rounds N, --warmup N, "
          "--context N, --precision P, --drafter-quantization none|int8|int4, --profile, --draft-vocab W)");
    }
  }
  auto j = tandem::bench::run_spec_bench(a);
  if (!j.ok()) die(j.error().message());
  const std::string text = j->dump(2);
  std::printf("%s\n", text.c_str());
  if (!json_path.empty()) std::ofstream(json_path) << text << "\n";
  return 0;
}
