// The compat model of scorer.md §1-2 written out plainly in f64, independently of the graph builder and
// the backend: what the scorer tests check the CPU backend against.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/io/hf_config.h"
#include "engine/io/laya_config.h"

namespace tandem::models::decision::testing {

class Reference {
 public:
  Reference(const WeightSource& source, const io::ModernBertConfig& enc, const io::LayaAgentConfig& laya);
  ~Reference();

  struct Out {
    std::vector<double> logits;
    std::array<double, 2> act{};
  };
  // One question: its token ids, marker positions and type.
  Out forward(const std::vector<uint32_t>& ids, const std::vector<uint32_t>& markers, uint8_t qtype) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::models::decision::testing
