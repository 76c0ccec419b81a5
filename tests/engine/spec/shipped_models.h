// The shipped LM and its drafters (models/, trained by tools/train_default_models.sh) as a drafter's eval.json
// describes them: its held-out prompts and max_tokens, the target and the drafter (as stored, or quantized at
// load) on the CPU backend, and greedy generation over the prompts, plain or speculative, EOS not stopping it.
// Shared by the shipped-model tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/io/hf_config.h"
#include "engine/spec/spec.h"

namespace tandem::spec::shipped {

struct Shipped {
  nlohmann::json ev;  // eval.json
  std::string drafter_dir, target_dir;
  std::vector<std::vector<uint32_t>> prompts;
  uint32_t max_tokens = 0;
  std::unique_ptr<ir::Backend> backend;
  std::unique_ptr<models::qwen3::Target> target;

  // models/<name> and its target, with eval.json's first `prompts_max` prompts; fails the test and returns
  // nullptr when something is missing.
  static std::unique_ptr<Shipped> open(const std::string& name, size_t prompts_max = SIZE_MAX) {
    auto s = std::make_unique<Shipped>();
    s->drafter_dir = TANDEM_SOURCE_DIR "/models/" + name;
    auto ev = io::read_json_file(s->drafter_dir + "/eval.json");
    if (!ev.ok()) {
      ADD_FAILURE() << "the shipped drafter is missing (run tools/train_default_models.sh on the GPU machine and "
                       "unpack its models): " << ev.error().message();
      return nullptr;
    }
    s->ev = *ev;
    s->target_dir = TANDEM_SOURCE_DIR "/" + s->ev.at("target").get<std::string>();
    auto dcfg = io::load_dflash_config(s->drafter_dir + "/config.json");
    if (!dcfg.ok()) {
      ADD_FAILURE() << dcfg.error().message();
      return nullptr;
    }
    s->prompts = s->ev.at("prompts").get<std::vector<std::vector<uint32_t>>>();
    s->prompts.resize(std::min(s->prompts.size(), prompts_max));
    s->max_tokens = s->ev.at("max_tokens").get<uint32_t>();
    s->backend = cpu::make_cpu_backend(0);
    auto target = models::qwen3::Target::open(*s->backend, s->target_dir,
                                              {dcfg->target_layer_ids, s->slots(), s->capacity(), nullptr});
    if (!target.ok()) {
      ADD_FAILURE() << target.error().message();
      return nullptr;
    }
    s->target = std::move(target).value();
    return s;
  }

  uint32_t slots() const { return static_cast<uint32_t>(prompts.size()); }
  // Every prompt, its tokens and the largest block (16) with its bonus row.
  uint32_t capacity() const {
    size_t longest = 0;
    for (const auto& p : prompts) longest = std::max(longest, p.size());
    return static_cast<uint32_t>(longest + max_tokens + 16 + 1);
  }

  // The drafter as its checkpoint stores it (nullopt) or quantized at load; fails the test and returns
  // nullptr when it does not open.
  std::unique_ptr<models::dflash::Drafter> drafter(std::optional<models::dflash::Quantization> q) const {
    auto d = models::dflash::Drafter::open(*backend, drafter_dir, target_dir,
                                           {slots(), capacity(), 0, std::nullopt, nullptr, q});
    if (!d.ok()) {
      ADD_FAILURE() << d.error().message();
      return nullptr;
    }
    return std::move(d).value();
  }

  // Greedy generation of every prompt with `d` at `block` (plain decoding without a drafter).
  std::vector<Request> run(models::dflash::Drafter* d, uint32_t block) const {
    std::vector<Request> reqs;
    for (uint32_t i = 0; i < slots(); ++i) {
      auto r = make_request({prompts[i], max_tokens, {}, {}}, i, target->vocab());
      EXPECT_TRUE(r.ok()) << r.error().message();
      if (r.ok()) reqs.push_back(std::move(r).value());
    }
    GenerateOptions opt;
    opt.block = block;
    const Status st = generate(*target, d, reqs, opt);
    EXPECT_TRUE(st.ok()) << st.error().message();
    return reqs;
  }
};

// Committed tokens per round over all rounds of all requests (eval.json's mean acceptance); 0 without rounds.
inline double mean_acceptance(const std::vector<Request>& reqs) {
  uint64_t committed = 0, rounds = 0;
  for (const Request& r : reqs) {
    for (uint32_t len : r.accept_lengths) committed += len;
    rounds += r.accept_lengths.size();
  }
  return rounds == 0 ? 0.0 : static_cast<double>(committed) / static_cast<double>(rounds);
}

// Whether `got` generated exactly `want`'s tokens, request by request; fails naming the first that differs.
inline bool same_tokens(const std::vector<Request>& got, const std::vector<Request>& want, const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const auto g = got[i].generated(), w = want[i].generated();
    if (!std::equal(g.begin(), g.end(), w.begin(), w.end())) {
      ADD_FAILURE() << what << ", prompt " << i << ": the output differs from plain greedy decoding";
      return false;
    }
  }
  return got.size() == want.size();
}

}  // namespace tandem::spec::shipped
