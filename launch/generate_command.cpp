// `tandem generate`: DFlash speculative decoding (or plain target decoding without --drafter) of token-id
// prompts on the CPU or CUDA backend, printing the tokens and per-round statistics as JSON (dflash.md
// §1.6-1.8).
// Several prompts (one per line of --prompt-file) run as requests sharing every round.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/backends/backend_factory.h"
#include "engine/io/hf_config.h"
#include "engine/spec/spec.h"
#include "launch/commands.h"

namespace tandem::launch {
namespace {

struct GenerateArgs {
  std::string target;
  std::string drafter;
  std::string drafter_quantization;  // "": as the drafter's checkpoint stores it
  std::string prompt_ids;
  std::string prompt_file;
  uint32_t max_tokens = 0;
  float temperature = 0.0f;
  float top_p = 1.0f;
  uint64_t seed = 0;
  uint32_t block = 0;
  bool trace = false;
  std::string verify = "match";
  std::string stop_ids;
  bool ignore_eos = false;
  uint32_t draft_vocab = 0;
  size_t threads = 0;
  std::string backend = "cpu";
  std::string precision;  // default: f32 on the cpu, bf16 on cuda
  int device = 0;
};

// Ids separated by one comma and/or whitespace ("1,2, 3" or "1 2 3"); an empty entry ("1,,2", a
// leading or trailing comma) is an error, as is anything that is not a token id. `where` names the flag
// or file line in errors.
Result<std::vector<uint32_t>> parse_ids(const std::string& text, const std::string& where) {
  std::vector<uint32_t> ids;
  std::string word;
  bool entry_has_id = false;  // since the last comma
  auto flush = [&]() -> Status {
    if (word.empty()) return {};
    uint64_t v = 0;
    size_t used = 0;
    try {
      v = std::stoull(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || word[0] == '-' || v > UINT32_MAX) {
      return Error::make(ErrorKind::kInvalidArgument, "{}: entry {} '{}' is not a token id", where, ids.size(), word);
    }
    ids.push_back(static_cast<uint32_t>(v));
    entry_has_id = true;
    word.clear();
    return {};
  };
  auto empty_entry = [&](const char* place) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: entry {} is empty ({}); separate ids with one comma", where,
                       ids.size(), place);
  };
  bool commas = false;
  for (const char c : text) {
    if (c == ',') {
      TANDEM_TRY(flush());
      if (!entry_has_id) return empty_entry(ids.empty() ? "a comma before the first id" : "two commas in a row");
      entry_has_id = false;
      commas = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      TANDEM_TRY(flush());
    } else {
      word += c;
    }
  }
  TANDEM_TRY(flush());
  if (commas && !entry_has_id) return empty_entry("a comma after the last id");
  return ids;
}

// Prompt and generation within the target's positions (max_position_embeddings of its config.json).
Status check_positions(const std::vector<std::vector<uint32_t>>& prompts, uint32_t max_tokens,
                       const io::Qwen3Config& target, const std::string& config_path) {
  const uint64_t limit = target.max_position_embeddings;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const uint64_t n = prompts[i].size();
    if (n >= limit) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "prompt {} has {} tokens; the target takes at most {} positions (max_position_embeddings in "
                         "{}), so a prompt may have at most {}",
                         i, n, limit, config_path, limit - 1);
    }
    if (n + max_tokens > limit) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "prompt {} ({} tokens) + --max-tokens {} = {} positions; the target takes at most {} "
                         "(max_position_embeddings in {}): ask for at most {} tokens",
                         i, n, max_tokens, n + max_tokens, limit, config_path, limit - n);
    }
  }
  return ok_status();
}

Result<std::vector<std::vector<uint32_t>>> read_prompts(const GenerateArgs& a) {
  std::vector<std::vector<uint32_t>> prompts;
  if (!a.prompt_ids.empty()) {
    TANDEM_ASSIGN(auto ids, parse_ids(a.prompt_ids, "--prompt-ids"));
    prompts.push_back(std::move(ids));
    return prompts;
  }
  std::ifstream f(a.prompt_file);
  if (!f) return Error::make(ErrorKind::kNotFound, "--prompt-file: cannot open {}", a.prompt_file);
  std::string line;
  for (size_t n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r,") == std::string::npos) continue;
    TANDEM_ASSIGN(auto ids, parse_ids(line, fmt::format("{}:{}", a.prompt_file, n)));
    prompts.push_back(std::move(ids));
  }
  if (prompts.empty()) {
    return Error::make(ErrorKind::kInvalidArgument, "--prompt-file: {} holds no prompt", a.prompt_file);
  }
  return prompts;
}

nlohmann::ordered_json request_json(const spec::Request& r, bool trace) {
  nlohmann::ordered_json j;
  j["prompt_tokens"] = r.prompt_len;
  j["tokens"] = std::vector<uint32_t>(r.generated().begin(), r.generated().end());
  j["finish"] = spec::to_string(r.finish);
  j["rounds"] = r.rounds;
  j["drafted"] = r.drafted;
  j["accepted"] = r.accepted;
  j["accept_lengths"] = r.accept_lengths;
  if (trace) {
    nlohmann::ordered_json rounds = nlohmann::ordered_json::array();
    for (const spec::RoundTrace& t : r.trace) {
      rounds.push_back({{"start", t.start}, {"drafted", t.drafted}, {"accepted", t.accepted}});
    }
    j["trace"] = std::move(rounds);
  }
  return j;
}

Result<nlohmann::ordered_json> run_generate(const GenerateArgs& a) {
  if (a.prompt_ids.empty() == a.prompt_file.empty()) {
    return Error(ErrorKind::kInvalidArgument, "give exactly one of --prompt-ids and --prompt-file");
  }
  spec::VerifyMode mode = spec::VerifyMode::kMatch;
  if (a.verify == "reject") {
    mode = spec::VerifyMode::kReject;
  } else if (a.verify != "match") {
    return Error::make(ErrorKind::kInvalidArgument, "--verify '{}' is not one of match, reject", a.verify);
  }
  TANDEM_ASSIGN(const auto prompts, read_prompts(a));
  TANDEM_ASSIGN(const auto stops, parse_ids(a.stop_ids, "--stop-ids"));
  const std::string target_config = a.target + "/config.json";
  TANDEM_ASSIGN(const io::Qwen3Config tcfg, io::load_qwen3_config(target_config));
  TANDEM_TRY(check_positions(prompts, a.max_tokens, tcfg, target_config));

  std::vector<uint32_t> taps;
  uint32_t block = 1;
  if (!a.drafter.empty()) {
    TANDEM_ASSIGN(const io::DFlashConfig dcfg, io::load_dflash_config(a.drafter + "/config.json"));
    taps = dcfg.target_layer_ids;
    block = a.block ? a.block : dcfg.block_size;
    if (a.block) {
      TANDEM_TRY(models::dflash::check_block_size(
          a.block, models::dflash::max_block_size(ir::BucketTable::defaults()), "--block"));
    }
  }
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const uint64_t capacity = longest + uint64_t{a.max_tokens} + block + 1;
  if (capacity > UINT32_MAX / 2) return Error(ErrorKind::kInvalidArgument, "--max-tokens is too large");
  const uint32_t slots = static_cast<uint32_t>(prompts.size());

  backends::BackendOptions bo;
  bo.name = a.backend;
  bo.threads = a.threads;
  bo.device = a.device;
  TANDEM_ASSIGN(bo.precision, ir::parse_precision(a.precision.empty() ? (a.backend == "cuda" ? "bf16" : "f32")
                                                                      : a.precision));
  TANDEM_ASSIGN(auto backend, backends::make_backend(bo));
  // Rejection sampling runs on the target's device (RejectSample) when the drafter shares it, as every
  // backend but the CPU reference lets it (spec::tap_route); on the CPU it reads the logits on the host.
  const bool host_logits = mode == spec::VerifyMode::kReject && a.temperature > 0.0f &&
                           backend->caps().name == "cpu";
  models::qwen3::TargetOptions topt{taps, slots, static_cast<uint32_t>(capacity), nullptr, host_logits};
  TANDEM_ASSIGN(auto target, models::qwen3::Target::open(*backend, a.target, topt));
  std::unique_ptr<models::dflash::Drafter> drafter;
  if (!a.drafter.empty()) {
    models::dflash::DrafterOptions dopt{slots, static_cast<uint32_t>(capacity), block, std::nullopt, nullptr};
    if (a.draft_vocab) dopt.draft_vocab = a.draft_vocab;
    if (!a.drafter_quantization.empty()) {
      TANDEM_ASSIGN(dopt.quantization, models::dflash::parse_quantization(a.drafter_quantization));
    }
    TANDEM_ASSIGN(drafter, models::dflash::Drafter::open(*backend, a.drafter, a.target, dopt));
  }

  std::vector<spec::Request> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    spec::RequestParams p{prompts[i], a.max_tokens, stops, {a.temperature, a.top_p, a.seed}};
    if (!a.ignore_eos) {
      const auto& eos = target->config().eos_token_ids;
      p.stop_ids.insert(p.stop_ids.end(), eos.begin(), eos.end());
    }
    auto r = spec::make_request(std::move(p), static_cast<uint32_t>(i), target->vocab());
    if (!r.ok()) return std::move(r).error().context(fmt::format("prompt {}", i));
    requests.push_back(std::move(r).value());
  }
  spec::GenerateOptions opt{block, mode, a.trace};
  const std::optional<uint64_t> d2h_before = backends::device_to_host_bytes(*backend);
  const auto t0 = std::chrono::steady_clock::now();
  TANDEM_TRY(spec::generate(*target, drafter.get(), requests, opt));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::optional<uint64_t> d2h_after = backends::device_to_host_bytes(*backend);

  nlohmann::ordered_json out;
  out["mode"] = drafter ? "speculative" : "plain";
  out["backend"] = backend->caps().name;
  out["precision"] = ir::to_string(bo.precision);
  if (drafter) {
    out["drafter_version"] = drafter->version();
    const auto& quant = drafter->setup().quant;
    out["drafter_quantization"] = !quant ? "none" : quant->bits == 8 ? "int8" : "int4";
    out["block"] = block;
    out["verify"] = a.verify;
  }
  uint64_t rounds = 0, drafted = 0, accepted = 0, generated = 0;
  nlohmann::ordered_json reqs = nlohmann::ordered_json::array();
  for (const spec::Request& r : requests) {
    rounds += r.rounds;
    drafted += r.drafted;
    accepted += r.accepted;
    generated += r.generated().size();
    reqs.push_back(request_json(r, a.trace));
  }
  out["rounds"] = rounds;
  out["drafted"] = drafted;
  out["accepted"] = accepted;
  out["tokens_generated"] = generated;
  out["seconds"] = seconds;
  // With --trace on a backend with a device: what the generation copied from it to the host (prefill and
  // every round, plus the GEMM probes of plans lowered on the way).
  if (a.trace && d2h_before && d2h_after) out["d2h_bytes"] = *d2h_after - *d2h_before;
  out["requests"] = std::move(reqs);
  return out;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate from token-id prompts with a Qwen3 target and an optional DFlash drafter");
  cmd->add_option("--target", args->target, "HF Qwen3 checkpoint directory")->required();
  auto* drafter_opt =
      cmd->add_option("--drafter", args->drafter, "DFlash v1/v2 drafter directory (none: plain target decoding)");
  cmd->add_option("--drafter-quantization", args->drafter_quantization,
                  "none, int8 or int4: quantize a float drafter at load (default: as its checkpoint is)")
      ->check(CLI::IsMember({"none", "int8", "int4"}))
      ->needs(drafter_opt);
  auto* ids = cmd->add_option("--prompt-ids", args->prompt_ids, "prompt token ids, comma separated");
  auto* file = cmd->add_option("--prompt-file", args->prompt_file, "file with one prompt of token ids per line");
  ids->excludes(file);
  cmd->add_option("--max-tokens", args->max_tokens, "tokens to generate per prompt")
      ->required()
      ->check(CLI::Range(1u, 1u << 24));
  cmd->add_option("--temperature", args->temperature, "0: greedy")->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass, in (0, 1]")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--seed", args->seed, "sampling seed");
  cmd->add_option("--block", args->block, "block size B (drafts B-1 per round; default: the drafter's)")
      ->check(CLI::Range(2u, 1024u));
  cmd->add_flag("--trace", args->trace, "report each round's start, drafts and accepted count");
  cmd->add_option("--verify", args->verify, "temperature > 0: match (sample-and-match) or reject (rejection sampling)")
      ->check(CLI::IsMember({"match", "reject"}));
  cmd->add_option("--stop-ids", args->stop_ids, "extra token ids that end a request, comma separated");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop at the target's eos_token_id");
  cmd->add_option("--draft-vocab", args->draft_vocab, "draft over the LM head's first W rows only");
  cmd->add_option("--threads", args->threads, "CPU threads (0: one per hardware thread)");
  cmd->add_option("--backend", args->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--precision", args->precision, "f32, f16 or bf16 (default: f32 on the cpu, bf16 on cuda)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--device", args->device, "CUDA device index");
  cmd->callback([args, &exit_code] {
    auto out = run_generate(*args);
    if (!out.ok()) {
      std::fprintf(stderr, "tandem generate: %s\n", out.error().message().c_str());
      exit_code = out.error().kind() == ErrorKind::kInvalidArgument ? 2 : 1;
      return;
    }
    std::printf("%s\n", out->dump(2).c_str());
    exit_code = 0;
  });
}

}  // namespace tandem::launch
