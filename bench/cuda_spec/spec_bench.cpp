// The speculative benchmark's runs (spec_bench.h): plain greedy decoding per batch (which also makes the
// continuations the replay draws from), then per drafter, batch and acceptance one replayed decode of
// warm-up plus timed rounds, each round's settle, draft and verify between CUDA events.
#include "bench/cuda_spec/spec_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "bench/cuda_decoder/random_target.h"
#include "bench/cuda_spec/phase_profile.h"
#include "bench/cuda_spec/random_drafter.h"
#include "bench/spec_replay/replay.h"
#include "engine/core/dtype.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/spec/spec.h"

namespace tandem::bench {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;
using models::dflash::Drafter;
using models::qwen3::Target;

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string key(double a) { return fmt::format("{:g}", a); }

// Random greedy prompts over the ordinary ids (below Qwen3's first special token 151643 and the last id,
// so never a drafter's mask).
std::vector<spec::RequestParams> random_prompts(uint32_t batch, uint32_t context, uint32_t vocab, uint64_t seed) {
  const uint32_t ids = std::min(vocab - 1, 151643u);
  std::vector<spec::RequestParams> out(batch);
  for (spec::RequestParams& p : out) {
    p.prompt.resize(context);
    for (uint32_t& id : p.prompt) id = static_cast<uint32_t>(random_mix(++seed) % ids);
  }
  return out;
}

size_t weight_bytes(const io::HostTensors& w) {
  size_t n = 0;
  for (const std::string& name : w.names()) {
    auto t = w.tensor(name);
    if (!t.ok()) continue;
    size_t e = 1;
    for (uint64_t d : t->shape) e *= d;
    n += e * dtype_size(t->dtype);
  }
  return n;
}

// One drafter as measured: its shape and format, the drafter (or why there is none).
struct Variant {
  std::string name;  // "v1", "v2-int8"
  DrafterShape shape;
  std::string quantization;  // "none", "int8", "int4"
  size_t bf16_bytes = 0;
  double create_s = 0.0;  // wall: weights checked, quantized (a format) and uploaded
  std::unique_ptr<Drafter> drafter;
  std::string refused;  // the backend's or loader's error; the variant is then skipped
};

// Per-round device times of one replayed decode, after the warm-up rounds.
struct Rounds {
  std::vector<double> settle, draft, verify, round;
  uint64_t committed = 0;    // tokens committed over the timed rounds, every request
  uint64_t lengths = 0;      // acceptance lengths summed over the timed rounds and requests
  uint64_t samples = 0;      // (round, request) pairs timed
  uint32_t diverged = 0;
  // Wall clock, host included: the prefill and warm-up rounds (where each plan a round uses is lowered and its
  // GEMMs chosen on first use), and the whole replay. Where a benchmark's minutes go, apart from its rounds.
  double warmup_wall_s = 0.0, wall_s = 0.0;
  json profile;              // --profile: the extra round's phases (phase_profile.h)
};

Result<Rounds> replay_decode(Target& target, Drafter& drafter, cuda::StreamMarks& marks,
                             const std::vector<spec::RequestParams>& params,
                             const std::vector<std::vector<uint32_t>>& continuations, const ReplaySchedule& schedule,
                             uint32_t warmup, uint32_t rounds, bool profile) {
  const auto w0 = Clock::now();
  std::vector<spec::Request> requests;
  for (size_t i = 0; i < params.size(); ++i) {
    spec::RequestParams p = params[i];
    p.max_tokens = static_cast<uint32_t>(continuations[i].size());  // never reached in the rounds run
    TANDEM_ASSIGN(spec::Request r, spec::make_request(std::move(p), static_cast<uint32_t>(i), target.vocab()));
    requests.push_back(std::move(r));
  }
  std::vector<spec::Request*> ptrs;
  for (spec::Request& r : requests) ptrs.push_back(&r);
  const spec::TapRoute route = spec::tap_route(target, &drafter);
  TANDEM_TRY(spec::prefill(target, ptrs, route));
  const uint32_t block = schedule.block();
  std::vector<spec::Draft> drafts;
  Rounds out;
  for (uint32_t k = 0; k < warmup + rounds; ++k) {
    TANDEM_TRY(marks.mark());
    TANDEM_TRY(spec::settle(drafter, ptrs));
    TANDEM_TRY(marks.mark());
    TANDEM_TRY(spec::draft(drafter, ptrs, block, spec::VerifyMode::kMatch, drafts));
    TANDEM_ASSIGN(uint32_t diverged, replay_drafts(schedule, ptrs, continuations, target.vocab(), drafts));
    TANDEM_TRY(marks.mark());
    TANDEM_TRY(spec::verify(target, ptrs, drafts, spec::VerifyMode::kMatch, false, route));
    TANDEM_TRY(marks.mark());
    TANDEM_ASSIGN(std::vector<double> t, marks.read_ms());
    for (const spec::Request& r : requests) {
      if (!r.active()) return Error::make(ErrorKind::kInternal, "slot {} finished in replay round {}", r.slot, k);
    }
    if (k + 1 == warmup) out.warmup_wall_s = seconds_since(w0);
    if (k < warmup) continue;
    out.settle.push_back(t[0]);
    out.draft.push_back(t[1] - t[0]);
    out.verify.push_back(t[2] - t[1]);
    out.round.push_back(t[2]);
    out.diverged += diverged;
    for (const spec::Request& r : requests) {
      out.committed += r.accept_lengths.back();
      out.lengths += r.accept_lengths.back();
      ++out.samples;
    }
  }
  if (profile) {
    // One more round, untimed, each phase with step profiling on (the continuations hold one more block).
    ir::Backend& backend = drafter.backend();
    TANDEM_ASSIGN(out.profile["settle"], profile_phase(backend, "settle", [&] { return spec::settle(drafter, ptrs); }));
    TANDEM_ASSIGN(out.profile["draft"], profile_phase(backend, "draft", [&] {
      return spec::draft(drafter, ptrs, block, spec::VerifyMode::kMatch, drafts);
    }));
    std::vector<uint32_t> scheduled;
    for (const spec::Request* r : ptrs) scheduled.push_back(schedule.length(r->rounds));
    TANDEM_ASSIGN(uint32_t diverged, replay_drafts(schedule, ptrs, continuations, target.vocab(), drafts));
    TANDEM_ASSIGN(out.profile["verify"], profile_phase(backend, "verify", [&] {
      return spec::verify(target, ptrs, drafts, spec::VerifyMode::kMatch, false, route);
    }));
    // The replays rewrote what their runs wrote: the verify still accepts exactly the scheduled lengths.
    bool as_scheduled = diverged == 0;
    for (size_t i = 0; i < ptrs.size(); ++i) as_scheduled &= ptrs[i]->accept_lengths.back() == scheduled[i];
    out.profile["accepted_as_scheduled"] = as_scheduled;
  }
  out.wall_s = seconds_since(w0);
  return out;
}

json rounds_json(const Rounds& r, uint32_t batch, double plain_tokens_per_s) {
  const double total_ms = std::accumulate(r.round.begin(), r.round.end(), 0.0);
  const double tps = total_ms > 0 ? 1e3 * static_cast<double>(r.committed) / total_ms : 0.0;
  const double settle = median(r.settle), draft = median(r.draft), verify = median(r.verify);
  return {{"batch", batch},
          {"rounds_timed", r.round.size()},
          {"acceptance_measured", static_cast<double>(r.lengths) / static_cast<double>(std::max<uint64_t>(1, r.samples))},
          {"settle_ms", settle},
          {"draft_ms", draft},
          {"verify_ms", verify},
          {"round_ms", median(r.round)},
          {"tokens_per_s", tps},
          {"speedup_vs_plain", plain_tokens_per_s > 0 ? tps / plain_tokens_per_s : 0.0},
          {"drafter_overhead_of_verify", verify > 0 ? (draft + settle) / verify : 0.0},
          {"replay_diverged", r.diverged}};
}

Result<Variant> make_variant(ir::Backend& backend, const DrafterShape& shape, const io::HostTensors& target_weights,
                             const io::Qwen3Config& target_cfg, std::optional<models::dflash::Quantization> q,
                             uint32_t slots, uint32_t capacity, std::optional<uint32_t> draft_vocab, bool fuse_qkv,
                             uint64_t seed) {
  Variant v;
  v.shape = shape;
  v.quantization = q ? models::dflash::to_string(*q) : "none";
  v.name = shape.name + (q ? "-" + v.quantization : "");
  TANDEM_ASSIGN(RandomDrafter d, random_drafter(shape, target_cfg, seed));
  v.bf16_bytes = weight_bytes(*d.weights);
  models::dflash::DrafterOptions o{slots, capacity, 0, draft_vocab, nullptr, q, fuse_qkv};
  const auto c0 = Clock::now();
  auto drafter = Drafter::create(backend, d.weights, d.cfg, target_weights, target_cfg, o, "random drafter " + v.name);
  v.create_s = seconds_since(c0);
  if (drafter.ok()) {
    v.drafter = std::move(drafter).value();
  } else {
    v.refused = drafter.error().message();
  }
  return v;
}

}  // namespace

Result<nlohmann::ordered_json> run_spec_bench(const SpecBenchArgs& a) {
  const DecoderShape shape = a.tiny ? DecoderShape::tiny() : DecoderShape{};
  std::vector<DrafterShape> shapes = a.tiny ? std::vector<DrafterShape>{DrafterShape::tiny(1), DrafterShape::tiny(2)}
                                            : std::vector<DrafterShape>{DrafterShape::v1_8b(), DrafterShape::v2_8b()};
  const std::vector<uint32_t> batches = !a.batches.empty() ? a.batches : a.tiny ? std::vector<uint32_t>{1, 2}
                                                                                : std::vector<uint32_t>{1, 8, 32};
  const std::vector<double> acceptances = !a.acceptances.empty() ? a.acceptances : std::vector<double>{1, 3, 6.5, 0};
  const uint32_t warmup = a.warmup ? a.warmup : a.tiny ? 1 : 2, rounds = a.rounds ? a.rounds : a.tiny ? 2 : 8;
  const uint32_t context = a.context ? a.context : a.tiny ? 16 : 512;
  uint32_t max_block = 0;
  for (const DrafterShape& s : shapes) max_block = std::max(max_block, s.block);
  // Each continuation covers every round at full acceptance plus one more block (two with --profile's round).
  const uint32_t continuation = (warmup + rounds + (a.profile ? 2 : 1)) * max_block + 1;
  const uint32_t slots = *std::max_element(batches.begin(), batches.end());
  const uint32_t capacity = context + continuation + max_block;
  std::fprintf(stderr, "cuda_spec_bench: REPLAY drafts: every round the real drafter settles and drafts, then its "
               "ids are replaced by the target's own greedy continuation cut to the chosen acceptance length; "
               "the target verifies as always (lossless)\n");

  const io::Qwen3Config cfg = qwen3_config(shape);
  const auto g0 = Clock::now();
  auto weights = random_target(shape, 1);
  const double gen_s = seconds_since(g0);
  cuda::CudaOptions o;
  o.precision = a.precision;
  TANDEM_ASSIGN(auto backend, cuda::make_cuda_backend(o));
  TANDEM_ASSIGN(auto marks, cuda::make_stream_marks(*backend));
  // The drafters share their taps (the 8B layout, or the tiny one), so one target serves both.
  models::qwen3::TargetOptions to{shapes.front().taps, slots, capacity, nullptr, false};
  const auto u0 = Clock::now();
  TANDEM_ASSIGN(auto target, Target::create(*backend, *weights, cfg, to, "random Qwen3"));
  const double upload_s = seconds_since(u0);
  std::vector<Variant> variants;
  uint64_t seed = 100;
  for (const DrafterShape& s : shapes) {
    std::vector<std::optional<models::dflash::Quantization>> formats{std::nullopt};
    for (models::dflash::Quantization q : a.quantizations) {
      if (q != models::dflash::Quantization::kNone) formats.emplace_back(q);
    }
    for (const auto& q : formats) {
      TANDEM_ASSIGN(Variant v, make_variant(*backend, s, *weights, cfg, q, slots, capacity, a.draft_vocab, a.fuse_qkv,
                                                   ++seed));
      if (!v.refused.empty()) {
        std::fprintf(stderr, "cuda_spec_bench: drafter %s refused at load, going on without it: %s\n", v.name.c_str(),
                     v.refused.c_str());
      }
      variants.push_back(std::move(v));
    }
  }
  weights.reset();

  json j;
  j["drafts"] = "replay: the target's greedy continuation cut to the chosen acceptance length; the drafter's "
                "settle and block forward run as always and their ids are discarded";
  j["timing"] = "device time between CUDA events on the backend's stream around each host-synchronous step "
                "(launches, device work and the copy of the ids back); medians over the timed rounds";
  j["shape"] = {{"layers", shape.layers}, {"hidden", shape.hidden}, {"heads", shape.heads},
                {"kv_heads", shape.kv_heads}, {"head_dim", shape.head_dim}, {"ffn", shape.ffn}, {"vocab", shape.vocab}};
  j["precision"] = ir::to_string(a.precision);
  j["device"] = backend->caps().device;
  j["context"] = context;
  j["draft_vocab"] = a.draft_vocab ? json(*a.draft_vocab) : json("the target's");
  j["drafter_qkv"] = a.fuse_qkv ? "one GEMM" : "three GEMMs";
  j["warmup_rounds"] = warmup;
  j["timed_rounds"] = rounds;
  j["weights_seconds"] = {{"generate", gen_s}, {"upload", upload_s}};
  for (const Variant& v : variants) {
    json& d = j["drafters"][v.name];
    d["version"] = v.shape.version;
    d["layers"] = v.shape.layers;
    d["taps"] = v.shape.taps;
    d["block"] = v.shape.block;
    if (v.shape.version == 2) d["selector"] = {{"top_k", v.shape.top_k}, {"rank", v.shape.rank}};
    d["quantization"] = v.quantization;
    d["bf16_weight_bytes"] = v.bf16_bytes;
    d["create_s"] = v.create_s;
    if (!v.refused.empty()) d["refused"] = v.refused;
  }

  for (uint32_t batch : batches) {
    const std::vector<spec::RequestParams> params = random_prompts(batch, context, shape.vocab, 1000 + batch);
    // Plain greedy decoding: its step times are the baseline, its tokens the continuations to replay.
    std::vector<double> steps;
    TANDEM_TRY(marks->mark());
    // With --profile, plain step 12 (after the prefill and 11 steps) runs with step profiling on; its replay
    // doubles that one step's time, which the median leaves out.
    uint32_t done = 0;
    json plain_profile;
    const auto p0 = Clock::now();
    const auto step_done = [&]() -> Status {
      TANDEM_TRY(marks->mark());
      if (!a.profile) return {};
      ++done;
      if (done == 12) TANDEM_TRY(cuda::set_step_profiling(*backend, true));
      if (done == 13) {
        TANDEM_TRY(cuda::set_step_profiling(*backend, false));
        TANDEM_ASSIGN(plain_profile, summarize_profile(*backend, fmt::format("plain decode step, batch {}", batch)));
      }
      return {};
    };
    TANDEM_ASSIGN(auto cont, greedy_continuations(*target, params, continuation, step_done));
    const double plain_wall_s = seconds_since(p0);
    TANDEM_ASSIGN(std::vector<double> t, marks->read_ms());
    // t[0] is the prefill; skip 3 more steps as warm-up (the first use of a bucket lowers its plan).
    for (size_t i = 4; i < t.size(); ++i) steps.push_back(t[i] - t[i - 1]);
    const double plain_ms = median(steps), plain_tps = plain_ms > 0 ? 1e3 * batch / plain_ms : 0.0;
    j["plain_decode"][std::to_string(batch)] = {{"step_ms", plain_ms}, {"tokens_per_s", plain_tps},
                                                {"steps_timed", steps.size()}, {"wall_s", plain_wall_s}};
    if (a.profile) j["plain_decode"][std::to_string(batch)]["profile"] = plain_profile;
    std::fprintf(stderr, "cuda_spec_bench: plain decode batch %u: %.3f ms a step, %.1f tokens/s (%zu steps, %.1f s of "
                 "wall with the prefill and first uses)\n", batch, plain_ms, plain_tps, t.size() - 1, plain_wall_s);
    for (Variant& v : variants) {
      if (!v.refused.empty()) continue;
      json& runs = j["drafters"][v.name]["batches"][std::to_string(batch)];
      for (double want : acceptances) {
        const double mean = want == 0 ? static_cast<double>(v.shape.block) : want;
        auto schedule = ReplaySchedule::make(mean, v.shape.block);
        if (!schedule.ok()) {
          runs[key(mean)] = {{"skipped", schedule.error().message()}};
          continue;
        }
        auto r = replay_decode(*target, *v.drafter, *marks, params, cont, *schedule, warmup, rounds, a.profile);
        if (!r.ok()) {
          // A format the CUDA backend does not run (a quantized drafter before its kernels) stops here.
          v.refused = r.error().message();
          j["drafters"][v.name]["refused"] = v.refused;
          std::fprintf(stderr, "cuda_spec_bench: drafter %s failed at batch %u, going on without it: %s\n",
                       v.name.c_str(), batch, v.refused.c_str());
          break;
        }
        json row = rounds_json(*r, batch, plain_tps);
        if (a.profile) row["profile"] = r->profile;
        row["warmup_wall_s"] = r->warmup_wall_s;
        row["wall_s"] = r->wall_s;
        std::fprintf(stderr, "cuda_spec_bench: %s batch %u acceptance %s (measured %.3f): round %.3f ms = settle %.3f "
                     "+ draft %.3f + verify %.3f; %.1f tokens/s (%.2fx plain); drafter %.0f%% of a verify; wall %.1f s (%.1f s "
                     "to the end of the warm-up rounds)\n",
                     v.name.c_str(), batch, key(mean).c_str(), row["acceptance_measured"].get<double>(),
                     row["round_ms"].get<double>(), row["settle_ms"].get<double>(), row["draft_ms"].get<double>(),
                     row["verify_ms"].get<double>(), row["tokens_per_s"].get<double>(),
                     row["speedup_vs_plain"].get<double>(), 100 * row["drafter_overhead_of_verify"].get<double>(),
                     r->wall_s, r->warmup_wall_s);
        runs[key(mean)] = std::move(row);
      }
    }
    if (!a.json_path.empty()) std::ofstream(a.json_path) << j.dump(2) << "\n";
  }
  return j;
}

}  // namespace tandem::bench
