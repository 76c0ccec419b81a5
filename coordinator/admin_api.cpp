// The admin routes (admin_api.h): access, method and body checks, then the DrafterAdmin's answer.
#include "coordinator/admin_api.h"

#include <fmt/format.h>

#include "coordinator/json_body_impl.h"

namespace tandem::coordinator {
namespace {

using nlohmann::json;

constexpr std::string_view kDrain = "/admin/drain";
constexpr std::string_view kUndrain = "/admin/undrain";

struct DrainBody {
  int rank = -1;
  bool force = false;
};

// {"rank": <drafter rank>} and, for a drain, an optional "force" (a boolean).
ApiResult<DrainBody> parse_drain_body(std::string_view body, bool drain) {
  auto parsed = parse_json_object(body);
  if (!parsed.ok()) return parsed.error();
  const json& j = parsed.value();
  const auto unknown = drain ? check_keys(j, "", {"rank", "force"}) : check_keys(j, "", {"rank"});
  if (unknown) return *unknown;
  DrainBody out;
  auto rank = j.find("rank");
  if (rank == j.end() || rank->is_null()) return bad_request("rank is required: the drafter rank's MPI rank", "rank");
  if (!rank->is_number_integer()) return wrong_type("rank", *rank, "an integer");
  if (rank->is_number_unsigned() ? rank->get<uint64_t>() > 1u << 20 : rank->get<int64_t>() < 0) {
    return bad_request(fmt::format("rank = {} is not an MPI rank of this job", json_shown(*rank)), "rank");
  }
  out.rank = rank->get<int>();
  if (auto force = j.find("force"); force != j.end() && !force->is_null()) {
    if (!force->is_boolean()) return wrong_type("force", *force, "a boolean");
    out.force = force->get<bool>();
  }
  return out;
}

HttpResponse json_reply(unsigned status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

}  // namespace

bool is_admin_route(std::string_view path) { return path == kDrain || path == kUndrain; }

json drain_json(const DrainView& v, bool with_moves) {
  json j = {{"rank", v.rank}, {"target", v.target}, {"state", to_string(v.state)}};
  if (with_moves) {
    j["moving"] = v.moving;
    j["to"] = v.to;
  }
  return j;
}

HttpResponse admin_answer(const HttpRequest& request, const config::Deployment& deployment, DrafterAdmin* drafters) {
  const std::string path = request.target.substr(0, request.target.find('?'));
  const config::AdminAccess access = deployment.server.admin;
  // What is not served here is 404 whatever the method or client, as for an unknown path or the
  // generation routes of a job without them: existence first, then access, method and media type.
  if (access == config::AdminAccess::kOff) {
    return error_response(ApiError{404, fmt::format("no route {}: the admin routes are off (server.admin: off)", path),
                                   "not_found", std::nullopt});
  }
  if (deployment.count(config::Role::kDrafter) == 0) {
    return error_response(ApiError{
        404, fmt::format("{} is not served here: the deployment has no drafter ranks to drain", path), "not_found",
        std::nullopt});
  }
  if (access == config::AdminAccess::kLoopback && !request.loopback) {
    return error_response(ApiError{403,
                                   fmt::format("{} answers clients on a loopback address only (server.admin: "
                                               "loopback; 'all' opens it to every client)",
                                               path),
                                   "forbidden", std::nullopt});
  }
  if (request.method != "POST") {
    HttpResponse r = error_response(
        ApiError{405, fmt::format("{} takes POST, not {}", path, request.method), "method_not_allowed", std::nullopt});
    r.headers.emplace_back("Allow", "POST");
    return r;
  }
  if (!is_json_content_type(request.content_type)) {
    return error_response(ApiError{415, fmt::format("Content-Type '{}' is not application/json", request.content_type),
                                   "unsupported_media_type", "Content-Type"});
  }
  if (drafters == nullptr) {
    return error_response(unavailable(fmt::format("the server is starting: {} opens once every rank is ready", path)));
  }
  const bool drain = path == kDrain;
  auto body = parse_drain_body(request.body, drain);
  if (!body.ok()) return error_response(body.error());
  auto answer = drain ? drafters->drain(body.value().rank, body.value().force) : drafters->undrain(body.value().rank);
  if (const auto* error = std::get_if<ApiError>(&answer)) return error_response(*error);
  return json_reply(200, drain_json(std::get<DrainView>(answer), drain));
}

}  // namespace tandem::coordinator
