// Greedy / sample-and-match and rejection-sampling accept rules.
#include "engine/spec/accept_impl.h"

#include "engine/ir/reject.h"

namespace tandem::spec {

Verdict accept_match(std::span<const uint32_t> tokens, std::span<const uint32_t> drafts) {
  Verdict v;
  for (uint32_t i = 0; i < tokens.size(); ++i) {
    v.committed.push_back(tokens[i]);
    if (i >= drafts.size() || drafts[i] != tokens[i]) break;
    ++v.accepted;
  }
  return v;
}

Verdict accept_reject(const ir::Tensor2& logits, std::span<const uint32_t> drafts,
                      std::span<const Proposal> proposals, const SamplingParams& sampling, uint32_t start) {
  ir::RejectVerdict r = ir::reject_block(logits.data, logits.width, logits.width, drafts, proposals, sampling, start);
  return Verdict{r.accepted, std::move(r.committed)};
}

Result<Verdict> accept_device(std::span<const uint32_t> ids, std::span<const uint32_t> drafts) {
  Verdict v;
  for (uint32_t id : ids) {
    if (id == ir::kNoToken) break;
    v.committed.push_back(id);
  }
  // The device kept a prefix of the drafts and committed one token after it (reject.h).
  const size_t n = v.committed.size();
  bool prefix = n >= 1 && n <= drafts.size() + 1;
  for (size_t i = 0; prefix && i + 1 < n; ++i) prefix = v.committed[i] == drafts[i];
  if (!prefix) {
    return Error::make(ErrorKind::kInternal, "rejection sampling on the device committed {} tokens for {} drafts, "
                       "not a prefix of them and one more", n, drafts.size());
  }
  v.accepted = static_cast<uint32_t>(n - 1);
  return v;
}

}  // namespace tandem::spec
