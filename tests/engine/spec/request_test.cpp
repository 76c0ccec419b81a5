// Request parameters are checked where they enter the loop, and the steps refuse requests that break
// the round invariant (not prefilled, finished, a drafter context that lags) instead of computing garbage.
#include <gtest/gtest.h>

#include "tests/engine/spec/harness.h"

namespace tandem::spec {
namespace {

std::string error_of(RequestParams p) {
  auto r = make_request(std::move(p), 0, 48);
  return r.ok() ? std::string("ok") : r.error().message();
}

TEST(Request, RejectsBadParameters) {
  EXPECT_EQ(error_of({{}, 4, {}, {}}), "prompt: at least one token is needed");
  EXPECT_EQ(error_of({{1, 48}, 4, {}, {}}), "prompt[1] = 48 is outside the vocabulary of 48 tokens");
  EXPECT_EQ(error_of({{1}, 4, {3, 50}, {}}), "stop_ids[1] = 50 is outside the vocabulary of 48 tokens");
  EXPECT_EQ(error_of({{1}, 0, {}, {}}), "max_tokens must be at least 1");
  EXPECT_EQ(error_of({{1}, 4, {}, {-0.5f, 1.0f, 0}}), "temperature -0.5 must be a finite number >= 0");
  EXPECT_EQ(error_of({{1}, 4, {}, {1.0f, 0.0f, 0}}), "top_p 0 must be in (0, 1]");
  EXPECT_EQ(error_of({{1}, 4, {}, {1.0f, 1.5f, 0}}), "top_p 1.5 must be in (0, 1]");
  EXPECT_EQ(error_of({{1, 2}, 4, {}, {0.7f, 0.9f, 3}}), "ok");
}

TEST(Request, StepsRefuseRequestsOutOfOrder) {
  const tandem::testing::TinyTarget target = tandem::testing::random_target({}, 61);
  tandem::testing::DrafterShape shape;
  shape.mask = 47;
  const tandem::testing::TinyDrafter drafter = tandem::testing::random_drafter(target.cfg, shape, 62);
  testing::Harness h = testing::make_harness(target, &drafter, 2, 32);
  auto r = make_request({{4, 5, 6}, 2, {}, {}}, 1, 48);
  ASSERT_TRUE(r.ok());
  Request* one[] = {&*r};
  std::vector<Draft> drafts(1);
  Status st = verify(*h.target, one, drafts, VerifyMode::kMatch, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "slot 1: 3 tokens with start 0 (prompt 3): the request is not prefilled");
  ASSERT_TRUE(prefill(*h.target, one).ok());
  // The drafter has not settled the prompt yet.
  st = draft(*h.drafter, one, 4, VerifyMode::kMatch, drafts);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "slot 1: the drafter context reaches 0 but the block starts at 3");
  ASSERT_TRUE(settle(*h.drafter, one).ok());
  ASSERT_TRUE(draft(*h.drafter, one, 4, VerifyMode::kMatch, drafts).ok());
  ASSERT_EQ(drafts[0].tokens.size(), 3u);
  ASSERT_TRUE(verify(*h.target, one, drafts, VerifyMode::kMatch, false).ok());
  // Two tokens were asked for: prefill gave one, the round at least one more.
  EXPECT_EQ(r->finish, Finish::kLength);
  EXPECT_EQ(r->generated().size(), 2u);
  st = verify(*h.target, one, drafts, VerifyMode::kMatch, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "slot 1: the request has finished");
  std::vector<Draft> none;
  st = verify(*h.target, one, none, VerifyMode::kMatch, false);
  EXPECT_EQ(st.error().message(), "0 drafts for 1 requests");
}

}  // namespace
}  // namespace tandem::spec
