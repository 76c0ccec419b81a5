// The JSON bodies of successful /v1/score and /v1/decide answers, built from a finished Job. Floats
// print as the shortest decimal that reads back as the same f32 (the printing of `tandem score`), so a
// client recovers the very bits the worker produced.
#pragma once

#include <string>
#include <vector>

#include "coordinator/decision_frontend.h"
#include "coordinator/job.h"

namespace tandem::coordinator {

// Per /v1/decide question, what the answer echoes besides the scores: its id and options, and the token
// counts of its laid-out pieces (BuildLayout's LaidOut), as encoded and as kept.
struct QuestionMeta {
  std::string id;
  std::vector<std::string> options;
  uint32_t state_tokens = 0;
  uint32_t state_tokens_used = 0;
  uint32_t question_tokens = 0;
  uint32_t question_tokens_used = 0;
  std::vector<uint32_t> option_tokens;
  std::vector<uint32_t> option_tokens_used;
};

// {"model", "sequences": [{"logits", "act", "probs", "pick"}], "usage": {"input_tokens"}}
std::string score_answer(const DecisionFrontend& model, const Job& job);
// {"model", "answers": [{"id", "qtype", "probabilities", "pick", "option", "act", "logits", "usage"}],
//  "usage": {"input_tokens"}}; each answer's usage holds input_tokens, the state's, question's and options'
// token counts (state_tokens, state_tokens_used, question_tokens, ..., option_tokens: [...]) and
// "truncated": the request fields the layout cut ("state", "questions[0].options[1]"), empty when none.
std::string decide_answer(const DecisionFrontend& model, const Job& job, const std::vector<QuestionMeta>& questions);

}  // namespace tandem::coordinator
