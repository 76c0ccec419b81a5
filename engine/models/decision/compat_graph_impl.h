// The compat graph of scorer.md §2 built from the checkpoint's configs: ModernBERT encoder, type
// embedding, the TransformerEncoderLayer head, the scorer (outputs "logits", Markers × 1) and the act
// head ("act", Seqs × 2). Its weights are exactly the checkpoint tensors the model reads.
#pragma once

#include <cstdint>

#include "engine/core/result.h"
#include "engine/io/hf_config.h"
#include "engine/io/laya_config.h"
#include "engine/ir/graph.h"

namespace tandem::models::decision {

inline constexpr uint32_t kHeadDim = 64;      // the head's attention heads are d / 64 wide
inline constexpr uint32_t kActHidden = 256;   // act_head.0 is Linear(d + 4, 256)
inline constexpr float kHeadNormEps = 1e-5f;  // PyTorch's LayerNorm default, head and scorer

// Fails (naming the config key) for an encoder the graph cannot express.
Result<ir::Graph> build_compat_graph(const io::ModernBertConfig& encoder, const io::LayaAgentConfig& laya);

}  // namespace tandem::models::decision
