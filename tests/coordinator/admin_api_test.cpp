// The admin routes (coordinator/admin_api.h) against a fake DrafterAdmin: server.admin decides who may
// call them (loopback clients only by default: 403 for others; all; off: 404), POST only (405 with
// Allow), JSON only (415), 404 without drafter ranks (whatever the method or client), 503 before the
// scheduler opens; malformed bodies are 400 naming the field; the admin's own refusals (409) pass through,
// and its answers come back as {"rank", "target", "state", "moving", "to"}.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "coordinator/admin_api.h"

namespace tandem::coordinator {
namespace {

using nlohmann::json;

// Answers as a job with target rank 1 and drafter ranks 2 and 3 would; rank 3 is draining already.
class FakeDrafters final : public DrafterAdmin {
 public:
  std::variant<DrainView, ApiError> drain(int rank, bool force) override {
    last = {rank, force};
    if (rank == 3) return ApiError{409, "rank 3 (drafter, cpu) is draining already", "conflict", "rank"};
    return DrainView{rank, 1, DrainState::kDraining, 2, {3}};
  }
  std::variant<DrainView, ApiError> undrain(int rank) override {
    last = {rank, false};
    return DrainView{rank, 1, DrainState::kServing, 0, {}};
  }
  std::vector<DrainView> out_of_service() const override { return {}; }
  std::pair<int, bool> last{-1, false};
};

config::Deployment deployment(config::AdminAccess access, bool drafters = true) {
  config::Deployment d;
  d.server.admin = access;
  d.ranks.push_back(config::Rank{config::Role::kCoordinator, {}});
  d.ranks.push_back(config::Rank{config::Role::kTarget, {}});
  if (drafters) d.ranks.push_back(config::Rank{config::Role::kDrafter, {}});
  return d;
}

HttpRequest post(const std::string& path, const std::string& body, bool loopback = true) {
  HttpRequest r;
  r.method = "POST";
  r.target = path;
  r.content_type = "application/json";
  r.body = body;
  r.loopback = loopback;
  return r;
}

json error_of(const HttpResponse& r) {
  const json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"] : json();
}

TEST(AdminApi, DrainAndUndrainAnswerWithTheDrafterState) {
  FakeDrafters fake;
  const auto d = deployment(config::AdminAccess::kLoopback);
  HttpResponse r = admin_answer(post("/admin/drain", R"({"rank": 2})"), d, &fake);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"rank":2,"target":1,"state":"draining","moving":2,"to":[3]})"));
  EXPECT_EQ(fake.last, (std::pair<int, bool>{2, false}));
  r = admin_answer(post("/admin/drain", R"({"rank": 2, "force": true})"), d, &fake);
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(fake.last, (std::pair<int, bool>{2, true}));
  r = admin_answer(post("/admin/undrain?now=1", R"({"rank": 2})"), d, &fake);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"rank":2,"target":1,"state":"serving"})"));
  // The admin's refusals keep their status and field.
  r = admin_answer(post("/admin/drain", R"({"rank": 3})"), d, &fake);
  EXPECT_EQ(r.status, 409u);
  EXPECT_EQ(error_of(r)["param"], "rank");
  EXPECT_EQ(error_of(r)["message"], "rank 3 (drafter, cpu) is draining already");
  EXPECT_TRUE(is_admin_route("/admin/drain"));
  EXPECT_TRUE(is_admin_route("/admin/undrain"));
  EXPECT_FALSE(is_admin_route("/admin"));
}

TEST(AdminApi, ServerAdminSaysWhoMayCall) {
  FakeDrafters fake;
  HttpResponse r = admin_answer(post("/admin/drain", R"({"rank": 2})", false),
                                deployment(config::AdminAccess::kLoopback), &fake);
  EXPECT_EQ(r.status, 403u);
  EXPECT_NE(error_of(r)["message"].get<std::string>().find("loopback address only (server.admin: loopback"),
            std::string::npos)
      << r.body;
  r = admin_answer(post("/admin/drain", R"({"rank": 2})", false), deployment(config::AdminAccess::kAll), &fake);
  EXPECT_EQ(r.status, 200u) << r.body;
  r = admin_answer(post("/admin/drain", R"({"rank": 2})"), deployment(config::AdminAccess::kOff), &fake);
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(error_of(r)["message"], "no route /admin/drain: the admin routes are off (server.admin: off)");
  EXPECT_EQ(fake.last.first, 2);  // only the 'all' call reached it
}

TEST(AdminApi, MethodMediaTypeAndReadiness) {
  FakeDrafters fake;
  const auto d = deployment(config::AdminAccess::kLoopback);
  HttpRequest get = post("/admin/drain", "");
  get.method = "GET";
  HttpResponse r = admin_answer(get, d, &fake);
  EXPECT_EQ(r.status, 405u);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>{"Allow", "POST"}));
  HttpRequest text = post("/admin/drain", R"({"rank": 2})");
  text.content_type = "text/plain";
  EXPECT_EQ(admin_answer(text, d, &fake).status, 415u);
  text.content_type = "";  // curl -d without -H
  EXPECT_EQ(admin_answer(text, d, &fake).status, 200u);
  r = admin_answer(post("/admin/drain", R"({"rank": 2})"), d, nullptr);
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(error_of(r)["message"], "the server is starting: /admin/drain opens once every rank is ready");
  r = admin_answer(post("/admin/drain", R"({"rank": 2})"), deployment(config::AdminAccess::kLoopback, false), &fake);
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(error_of(r)["message"], "/admin/drain is not served here: the deployment has no drafter ranks to drain");
}

// Without drafter ranks the routes do not exist: 404 for every method, media type and client, as an
// unknown path (GET used to get 405 and a remote client 403, while POST got 404).
TEST(AdminApi, WithoutDraftersEveryRequestIs404) {
  FakeDrafters fake;
  for (const auto access : {config::AdminAccess::kLoopback, config::AdminAccess::kAll}) {
    const auto d = deployment(access, false);
    for (const std::string path : {"/admin/drain", "/admin/undrain"}) {
      for (const std::string method : {"GET", "POST", "PUT", "DELETE", "HEAD"}) {
        for (const bool loopback : {true, false}) {
          HttpRequest r = post(path, "not json", loopback);
          r.method = method;
          r.content_type = "text/plain";
          const HttpResponse answer = admin_answer(r, d, &fake);
          EXPECT_EQ(answer.status, 404u) << method << " " << path << " loopback " << loopback;
          EXPECT_TRUE(answer.headers.empty()) << method << " " << path;
          EXPECT_EQ(error_of(answer)["message"], path + " is not served here: the deployment has no drafter ranks "
                                                        "to drain");
        }
      }
    }
  }
  EXPECT_EQ(fake.last.first, -1);
}

TEST(AdminApi, MalformedBodiesNameTheField) {
  FakeDrafters fake;
  const auto d = deployment(config::AdminAccess::kLoopback);
  const std::vector<std::tuple<std::string, std::string, std::string, std::string>> cases = {
      {"/admin/drain", "", "", "the body is not valid JSON"},
      {"/admin/drain", "[2]", "", "the body must be a JSON object, not an array"},
      {"/admin/drain", "{}", "rank", "rank is required: the drafter rank's MPI rank"},
      {"/admin/drain", R"({"rank": null})", "rank", "rank is required"},
      {"/admin/drain", R"({"rank": "2"})", "rank", "rank must be an integer, not a string"},
      {"/admin/drain", R"({"rank": 2.5})", "rank", "rank must be an integer, not a number with a fraction"},
      {"/admin/drain", R"({"rank": -1})", "rank", "rank = -1 is not an MPI rank of this job"},
      {"/admin/drain", R"({"rank": 99999999999})", "rank", "rank = 99999999999 is not an MPI rank of this job"},
      {"/admin/drain", R"({"rank": 2, "force": 1})", "force", "force must be a boolean, not an integer"},
      {"/admin/drain", R"({"rank": 2, "wait": true})", "wait", "unknown field 'wait'; allowed: rank, force"},
      {"/admin/undrain", R"({"rank": 2, "force": true})", "force", "unknown field 'force'; allowed: rank"},
  };
  for (const auto& [path, body, param, message] : cases) {
    const HttpResponse r = admin_answer(post(path, body), d, &fake);
    EXPECT_EQ(r.status, 400u) << path << " " << body;
    const json e = error_of(r);
    ASSERT_TRUE(e.is_object()) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find(message), std::string::npos) << body << ": " << r.body;
    if (param.empty()) {
      EXPECT_TRUE(e["param"].is_null()) << r.body;
    } else {
      EXPECT_EQ(e["param"], param) << r.body;
    }
  }
  EXPECT_EQ(fake.last.first, -1) << "a malformed body reached the scheduler";
}

}  // namespace
}  // namespace tandem::coordinator
