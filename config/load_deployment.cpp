// Loads a deployment YAML (config.h): walks the schema section by section with YamlMap, then checks
// what spans sections (roles against models, backends against precisions, the batcher against the
// bucket table). yaml-cpp exceptions stop here and come back as errors with the line and column.
#include <boost/asio/ip/address.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "config/config.h"
#include "config/generation_impl.h"
#include "config/yaml_map_impl.h"

namespace tandem::config {
namespace {

namespace fs = std::filesystem;

constexpr std::array<std::string_view, 5> kRoleNames = {"coordinator", "scorer", "target", "drafter",
                                                        "generator"};
constexpr std::array<std::string_view, 3> kModelRoles = {"scorer", "target", "drafter"};
// A drafter's weights (docs/quantization.md; engine/models/dflash parse_quantization reads the same names).
constexpr std::array<std::string_view, 3> kQuantizations = {"none", "int8", "int4"};
constexpr std::array<std::string_view, 2> kBackends = {"cpu", "cuda"};
constexpr std::array<std::string_view, 3> kPrecisions = {"f32", "f16", "bf16"};

Role role_of(std::string_view name) {
  if (name == "coordinator") return Role::kCoordinator;
  if (name == "target") return Role::kTarget;
  if (name == "drafter") return Role::kDrafter;
  if (name == "generator") return Role::kGenerator;
  return Role::kScorer;  // the names were checked against kRoleNames
}

template <typename T>
Status read_u32(YamlMap& m, std::string_view key, T& field, uint64_t min, uint64_t max) {
  TANDEM_ASSIGN(uint64_t v, m.uint(key, field, min, max));
  field = static_cast<T>(v);
  return ok_status();
}

// A path from the YAML, absolute: relative ones are taken from the YAML file's folder, so a
// deployment means the same thing from any working directory.
std::string resolve(const std::string& base_dir, const std::string& path) {
  fs::path p(path);
  if (p.is_relative()) p = fs::path(base_dir) / p;
  return p.lexically_normal().string();
}

Result<Listener> read_server(YamlMap& top) {
  TANDEM_ASSIGN(YamlMap m, top.map("server"));
  Listener out;
  TANDEM_ASSIGN(out.host, m.string("host", out.host));
  boost::system::error_code ec;
  const std::string host = out.host == "localhost" ? std::string("127.0.0.1") : out.host;
  boost::asio::ip::make_address(host, ec);
  if (ec) {
    return yaml_error(m.child("host"), m.get("host"),
                      fmt::format("'{}' is not an address; allowed: an IPv4 or IPv6 literal or localhost",
                                  out.host));
  }
  out.host = host;
  TANDEM_TRY(read_u32(m, "port", out.port, 0, 65535));
  TANDEM_TRY(read_u32(m, "io_threads", out.io_threads, 1, 64));
  static constexpr std::array<std::string_view, 3> kAdmin = {"loopback", "all", "off"};
  TANDEM_ASSIGN(const std::string admin, m.choice("admin", to_string(out.admin), kAdmin));
  out.admin = admin == "all" ? AdminAccess::kAll : (admin == "off" ? AdminAccess::kOff : AdminAccess::kLoopback);
  TANDEM_TRY(m.finish());
  return out;
}

Result<Limits> read_limits(YamlMap& top) {
  TANDEM_ASSIGN(YamlMap m, top.map("limits"));
  Limits out;
  TANDEM_TRY(read_u32(m, "max_body_bytes", out.max_body_bytes, 1024, uint64_t{1} << 30));
  TANDEM_TRY(read_u32(m, "max_header_bytes", out.max_header_bytes, 1024, 1 << 20));
  TANDEM_TRY(read_u32(m, "max_questions", out.max_questions, 1, 4096));
  TANDEM_TRY(read_u32(m, "max_options", out.max_options, 1, 1024));
  TANDEM_TRY(read_u32(m, "max_sequences", out.max_sequences, 1, 65536));
  TANDEM_TRY(read_u32(m, "max_request_tokens", out.max_request_tokens, 1, 1u << 24));
  TANDEM_TRY(read_u32(m, "max_queue_sequences", out.max_queue_sequences, 1, 1u << 24));
  TANDEM_TRY(read_u32(m, "max_connections", out.max_connections, 1, 1u << 20));
  TANDEM_TRY(read_u32(m, "request_timeout_ms", out.request_timeout_ms, 1, 3600000));
  TANDEM_TRY(read_u32(m, "read_timeout_ms", out.read_timeout_ms, 1, 3600000));
  TANDEM_TRY(read_u32(m, "idle_timeout_ms", out.idle_timeout_ms, 1, 3600000));
  TANDEM_TRY(read_u32(m, "shutdown_drain_ms", out.shutdown_drain_ms, 0, 3600000));
  // A request the queue can never hold would be refused (429) forever, whatever the load.
  const uint32_t largest = std::max(out.max_questions, out.max_sequences);
  if (out.max_queue_sequences < largest) {
    return yaml_error(m.child("max_queue_sequences"), m.get("max_queue_sequences"),
                      fmt::format("{} is smaller than one request may be (limits.max_questions or "
                                  "limits.max_sequences, {}); allowed: at least {}",
                                  out.max_queue_sequences, largest, largest));
  }
  TANDEM_TRY(m.finish());
  return out;
}

Result<Batcher> read_batcher(YamlMap& top) {
  TANDEM_ASSIGN(YamlMap m, top.map("batcher"));
  Batcher out;
  TANDEM_TRY(read_u32(m, "max_batch_tokens", out.max_batch_tokens, 1, 1u << 24));
  TANDEM_TRY(read_u32(m, "max_wait_us", out.max_wait_us, 0, 10000000));
  TANDEM_TRY(read_u32(m, "max_inflight_per_rank", out.max_inflight_per_rank, 1, 64));
  TANDEM_TRY(m.finish());
  return out;
}

Result<Health> read_health(YamlMap& top) {
  TANDEM_ASSIGN(YamlMap m, top.map("health"));
  Health out;
  TANDEM_TRY(read_u32(m, "heartbeat_ms", out.heartbeat_ms, 10, 60000));
  TANDEM_TRY(read_u32(m, "dead_after_ms", out.dead_after_ms, 20, 600000));
  TANDEM_TRY(read_u32(m, "exit_grace_ms", out.exit_grace_ms, 0, 3600000));
  TANDEM_TRY(read_u32(m, "startup_timeout_s", out.startup_timeout_s, 1, 86400));
  if (out.dead_after_ms < 2 * out.heartbeat_ms) {
    return yaml_error(m.child("dead_after_ms"), m.get("dead_after_ms"),
                      fmt::format("{} is too short; allowed: at least 2 x health.heartbeat_ms = {}",
                                  out.dead_after_ms, 2 * out.heartbeat_ms));
  }
  TANDEM_TRY(m.finish());
  return out;
}

// Backend keys; the top-level `backend` mapping and each rank share them (a rank overrides).
Status read_backend_fields(YamlMap& m, std::string_view name_key, Backend& out, bool& device_set) {
  TANDEM_ASSIGN(out.name, m.choice(name_key, out.name, kBackends));
  TANDEM_ASSIGN(std::string precision, m.choice("precision", ir::to_string(out.precision), kPrecisions));
  TANDEM_ASSIGN(out.precision, ir::parse_precision(precision));
  uint64_t device = static_cast<uint64_t>(out.device);
  device_set = device_set || m.has("device");
  TANDEM_ASSIGN(device, m.uint("device", device, 0, 63));
  out.device = static_cast<int>(device);
  TANDEM_TRY(read_u32(m, "threads", out.threads, 0, 1024));
  return ok_status();
}

Result<std::map<Role, Model>> read_models(YamlMap& top, const std::string& base_dir) {
  TANDEM_ASSIGN(YamlMap m, top.map("models"));
  std::map<Role, Model> out;
  for (std::string_view role_name : kModelRoles) {
    if (!m.has(role_name)) continue;
    TANDEM_ASSIGN(YamlMap mm, m.map(role_name));
    Model model;
    TANDEM_ASSIGN(std::string dir, mm.required_string("dir"));
    model.dir = resolve(base_dir, dir);
    std::error_code ec;
    if (!fs::is_directory(model.dir, ec)) {
      return yaml_error(mm.child("dir"), mm.get("dir"),
                        fmt::format("'{}' ({}) is not a directory; allowed: a model directory", dir, model.dir));
    }
    TANDEM_ASSIGN(model.name, mm.string("name", fs::path(model.dir).filename().string()));
    // The scorer's tokenizer sits where Laya puts it, the target's where HF does; a drafter uses its target's.
    if (role_name != "drafter") {
      const bool tokenizer_given = mm.has("tokenizer");
      TANDEM_ASSIGN(std::string tokenizer,
                    mm.string("tokenizer", role_name == "scorer" ? "tokenizer/tokenizer.json" : "tokenizer.json"));
      model.tokenizer = tokenizer_given ? resolve(base_dir, tokenizer) : resolve(model.dir, tokenizer);
    }
    if (role_name == "drafter" && mm.has("quantization")) {
      TANDEM_ASSIGN(model.quantization, mm.choice("quantization", "", kQuantizations));
    }
    const bool tokenizer_given = mm.has("tokenizer");
    if (role_name == "scorer" && !fs::is_regular_file(model.tokenizer, ec)) {
      return yaml_error(tokenizer_given ? mm.child("tokenizer") : mm.place(),
                        tokenizer_given ? mm.get("tokenizer") : mm.node(),
                        fmt::format("no tokenizer file at {}; allowed: a tokenizer.json (set models.{}.tokenizer)",
                                    model.tokenizer, role_name));
    }
    TANDEM_TRY(mm.finish());
    out[role_of(role_name)] = std::move(model);
  }
  TANDEM_TRY(m.finish());
  return out;
}

Result<std::vector<Rank>> read_ranks(YamlMap& top, const Backend& base, bool base_device_set) {
  YAML::Node list = top.get("ranks");
  const YamlPlace place = top.child("ranks");
  if (!list.IsDefined()) return yaml_error(top.place(), top.node(), "'ranks' is required: one entry per MPI rank");
  if (!list.IsSequence() || list.size() < 2) {
    return yaml_error(place, list,
                      "expected a list of at least 2 ranks (the coordinator, then one or more workers)");
  }
  std::vector<Rank> out;
  uint32_t cuda_index = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    TANDEM_ASSIGN(YamlMap m, YamlMap::of(list[i], {place.origin, fmt::format("ranks[{}]", i)}));
    if (!list[i].IsMap()) return yaml_error(m.place(), list[i], "expected a mapping with at least 'role'");
    Rank rank;
    TANDEM_ASSIGN(std::string role, m.choice("role", "", kRoleNames));
    if (role.empty()) return yaml_error(m.place(), list[i], "'role' is required");
    rank.role = role_of(role);
    const bool coordinator_slot = i == 0;  // rank 0 is the coordinator by the deployment's contract
    if (coordinator_slot != (rank.role == Role::kCoordinator)) {
      return yaml_error(m.child("role"), m.get("role"),
                        coordinator_slot ? fmt::format("'{}' is not allowed for the first rank; allowed: coordinator", role)
                                         : std::string("only the first rank may be the coordinator; allowed: "
                                                       "scorer, target, drafter, generator"));
    }
    if (rank.role == Role::kCoordinator) {
      TANDEM_TRY(m.finish());  // the coordinator runs no model: backend keys are typos here
      out.push_back(rank);
      continue;
    }
    rank.backend = base;
    bool device_set = base_device_set;
    TANDEM_TRY(read_backend_fields(m, "backend", rank.backend, device_set));
    if (rank.role == Role::kDrafter) {
      TANDEM_ASSIGN(rank.target, read_drafter_target(m, list[i], out));
    }
    if (rank.backend.name == "cuda" && !device_set) rank.backend.device = static_cast<int>(cuda_index);
    if (rank.backend.name == "cuda") ++cuda_index;
    if (rank.backend.name == "cpu" && rank.backend.precision != ir::Precision::kF32) {
      return yaml_error(m.child("precision"), m.has("precision") ? m.get("precision") : list[i],
                        fmt::format("{} is not supported by the cpu backend; allowed: f32",
                                    ir::to_string(rank.backend.precision)));
    }
    if (rank.role == Role::kScorer && rank.backend.precision == ir::Precision::kBF16) {
      return yaml_error(m.child("precision"), m.has("precision") ? m.get("precision") : list[i],
                        "bf16 is for target, drafter and generator ranks; allowed for a scorer: f32, f16");
    }
    TANDEM_TRY(m.finish());
    out.push_back(rank);
  }
  return out;
}

Status check_models(const Deployment& d, YamlMap& top) {
  auto needs = [&](Role model_role) {
    for (const Rank& r : d.ranks) {
      if (r.role == model_role) return true;
      if (r.role == Role::kGenerator && (model_role == Role::kTarget || model_role == Role::kDrafter)) return true;
    }
    return false;
  };
  const YamlPlace models{top.place().origin, "models"};
  for (Role role : {Role::kScorer, Role::kTarget, Role::kDrafter}) {
    const bool has = d.model(role) != nullptr;
    if (needs(role) && !has) {
      return yaml_error(models, top.get("models"),
                        fmt::format("a rank has role {} but models.{} is missing", to_string(role), to_string(role)));
    }
    if (!needs(role) && has) {
      return yaml_error({models.origin, fmt::format("models.{}", to_string(role))}, top.get("models")[to_string(role)],
                        fmt::format("no rank has role {}; allowed: models only for roles in 'ranks'", to_string(role)));
    }
  }
  return ok_status();
}

Status check_buckets(Deployment& d, YamlMap& top, const std::string& base_dir) {
  const YamlPlace place = top.child("buckets");
  YAML::Node node = top.get("buckets");
  if (node.IsDefined()) {
    TANDEM_ASSIGN(d.buckets, yaml_scalar(place, node, "'default' or the path of a bucket table"));
  }
  if (d.buckets == "default") {
    d.bucket_table = ir::BucketTable::defaults();
  } else {
    d.buckets = resolve(base_dir, d.buckets);
    auto table = ir::BucketTable::load(d.buckets);
    if (!table.ok()) return yaml_error(place, node, table.error().message());
    d.bucket_table = std::move(table).value();
  }
  if (d.count(Role::kScorer) == 0) return ok_status();
  auto ceiling = d.bucket_table.ceiling("compat");
  if (!ceiling) {
    return yaml_error(place, node, "the bucket table has no 'compat' stage; allowed: a table with compat buckets");
  }
  if (d.batcher.max_batch_tokens > ceiling->tokens) {
    YAML::Node b = top.get("batcher");
    return yaml_error({place.origin, "batcher.max_batch_tokens"}, b.IsMap() ? b["max_batch_tokens"] : b,
                      fmt::format("{} exceeds the largest compat bucket; allowed: at most {}",
                                  d.batcher.max_batch_tokens, ceiling->tokens));
  }
  return ok_status();
}

Result<Deployment> parse_root(const YAML::Node& root, const std::string& origin, const std::string& base_dir) {
  Deployment d;
  d.origin = origin;
  if (!root.IsMap()) {
    return yaml_error({&d.origin, ""}, root, "expected a mapping with 'server', 'models', 'ranks', ...");
  }
  TANDEM_ASSIGN(YamlMap top, YamlMap::of(root, {&d.origin, ""}));
  TANDEM_ASSIGN(uint64_t version, top.uint("version", 1, 1, 1));
  (void)version;
  TANDEM_ASSIGN(d.server, read_server(top));
  TANDEM_ASSIGN(d.limits, read_limits(top));
  TANDEM_ASSIGN(d.batcher, read_batcher(top));
  TANDEM_ASSIGN(d.health, read_health(top));
  Backend base;
  bool base_device_set = false;
  {
    TANDEM_ASSIGN(YamlMap m, top.map("backend"));
    TANDEM_TRY(read_backend_fields(m, "name", base, base_device_set));
    if (base.name == "cpu" && base.precision != ir::Precision::kF32) {
      return yaml_error(m.child("precision"), m.get("precision"),
                        fmt::format("{} is not supported by the cpu backend; allowed: f32",
                                    ir::to_string(base.precision)));
    }
    TANDEM_TRY(m.finish());
  }
  TANDEM_ASSIGN(d.generation, read_generation(top));
  TANDEM_ASSIGN(d.models, read_models(top, base_dir));
  TANDEM_ASSIGN(d.ranks, read_ranks(top, base, base_device_set));
  TANDEM_TRY(check_models(d, top));
  TANDEM_TRY(check_generation(d, top));
  TANDEM_TRY(check_buckets(d, top, base_dir));
  TANDEM_TRY(top.finish());
  return d;
}

}  // namespace

Result<Deployment> parse_deployment(std::string_view yaml, const std::string& origin, const std::string& base_dir) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    auto d = parse_root(root, origin, base_dir);
    if (!d.ok()) return std::move(d).error();
    // The origin string moved with the Deployment; places pointed at the local copy only while parsing.
    return std::move(d).value();
  } catch (const YAML::Exception& e) {
    return Error::make(ErrorKind::kFormat, "{}:{}:{}: not valid YAML: {}", origin, e.mark.line + 1,
                       e.mark.column + 1, e.msg);
  } catch (const std::exception& e) {
    return Error::make(ErrorKind::kFormat, "{}: {}", origin, e.what());
  }
}

Result<Deployment> load_deployment(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::make(ErrorKind::kNotFound, "{}: cannot open the deployment file", path);
  std::stringstream text;
  text << in.rdbuf();
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return parse_deployment(text.str(), path, abs.parent_path().string());
}

}  // namespace tandem::config
