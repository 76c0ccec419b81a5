// The operator's routes (README "Draining a drafter rank"): POST /admin/drain {"rank": N, "force": false}
// and POST /admin/undrain {"rank": N}, acting on the round scheduler's drafter ranks (drafter_admin.h).
// Who may call them is server.admin: clients on a loopback address (the default), all, or off (404).
// Bodies are checked at the edge; every refusal names its field. Api forwards the paths here.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "coordinator/drafter_admin.h"
#include "coordinator/http_server.h"

namespace tandem::coordinator {

bool is_admin_route(std::string_view path);  // "/admin/drain", "/admin/undrain"

// The answer to an admin route. `drafters` null: the generation side is not open yet (503), or the
// deployment has no drafter ranks (404).
HttpResponse admin_answer(const HttpRequest& request, const config::Deployment& deployment, DrafterAdmin* drafters);

// {"rank", "target", "state", and for a drain "moving" and "to"}: a drain's answer, and /health's word on
// a drafter out of service.
nlohmann::json drain_json(const DrainView& view, bool with_moves);

}  // namespace tandem::coordinator
