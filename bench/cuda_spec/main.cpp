// cuda_spec_bench: the speculative decode benchmark on CUDA (spec_bench.h), JSON on stdout.
//   cuda_spec_bench [--tiny] [--json FILE] [--batches 1,8,32] [--acceptance 1,3,6.5,B] [--rounds N]
//                   [--warmup N] [--context N] [--precision bf16|f16|f32] [--drafter-quantization int8|int4]... [--profile]
//                   [--draft-vocab W] [--separate-qkv]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "bench/cli_values.h"
#include "bench/cuda_spec/spec_bench.h"

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "cuda_spec_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T value_or_die(tandem::Result<T> r) {
  return tandem::bench::value_or_exit("cuda_spec_bench", std::move(r));
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
      a.batches = value_or_die(tandem::bench::count_list(s, argv[++i]));
    } else if (s == "--acceptance" && has) {
      a.acceptances = value_or_die(tandem::bench::number_list(s, argv[++i], {false, 16.0, true}));
    } else if (s == "--rounds" && has) {
      a.rounds = value_or_die(tandem::bench::count(s, argv[++i], 100000));
    } else if (s == "--warmup" && has) {
      a.warmup = value_or_die(tandem::bench::count(s, argv[++i], 100000));
    } else if (s == "--context" && has) {
      a.context = value_or_die(tandem::bench::count(s, argv[++i], 100000));
    } else if (s == "--precision" && has) {
      auto p = tandem::ir::parse_precision(argv[++i]);
      if (!p.ok()) die(p.error().message());
      a.precision = *p;
    } else if (s == "--profile") {
      a.profile = true;
    } else if (s == "--separate-qkv") {
      a.fuse_qkv = false;
    } else if (s == "--draft-vocab" && has) {
      a.draft_vocab = value_or_die(tandem::bench::count(s, argv[++i]));
    } else if (s == "--drafter-quantization" && has) {
      auto q = tandem::models::dflash::parse_quantization(argv[++i]);
      if (!q.ok()) die(q.error().message());
      a.quantizations.push_back(*q);
    } else {
      die("unknown argument " + s + " (--tiny, --json FILE, --batches L, --acceptance L, --rounds N, --warmup N, "
          "--context N, --precision P, --drafter-quantization none|int8|int4, --profile, --draft-vocab W, "
          "--separate-qkv)");
    }
  }
  auto j = tandem::bench::run_spec_bench(a);
  if (!j.ok()) die(j.error().message());
  const std::string text = j->dump(2);
  std::printf("%s\n", text.c_str());
  if (!json_path.empty()) std::ofstream(json_path) << text << "\n";
  return 0;
}
