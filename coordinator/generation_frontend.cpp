// GenerationFrontend (generation_frontend.h).
#include "coordinator/generation_frontend.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tandem::coordinator {
namespace {

using nlohmann::ordered_json;

Result<std::string> read_optional(const std::string& path) {
  if (!std::filesystem::exists(path)) return std::string();
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::make(ErrorKind::kIo, "{}: cannot open", path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A special token entry of tokenizer_config.json: a string, or {"content": ...} (AddedToken form).
std::optional<std::string> token_text(const ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

Result<std::unique_ptr<GenerationFrontend>> GenerationFrontend::load(const std::string& name, const std::string& dir,
                                                                     const std::string& tokenizer) {
  TANDEM_ASSIGN(auto tok, io::Tokenizer::load(tokenizer));
  TANDEM_ASSIGN(std::string config, read_optional(dir + "/tokenizer_config.json"));
  TANDEM_ASSIGN(std::string generation, read_optional(dir + "/generation_config.json"));
  return make(name, std::move(tok), config, generation, dir);
}

Result<std::unique_ptr<GenerationFrontend>> GenerationFrontend::make(const std::string& name,
                                                                     std::unique_ptr<io::Tokenizer> tokenizer,
                                                                     const std::string& tokenizer_config,
                                                                     const std::string& generation_config,
                                                                     const std::string& origin) {
  std::unique_ptr<GenerationFrontend> f(new GenerationFrontend());
  f->name_ = name;
  f->tokenizer_ = std::move(tokenizer);
  auto add_eos = [&](uint64_t id, const char* where) -> Status {
    if (id >= f->tokenizer_->vocab_size()) {
      return Error::make(ErrorKind::kFormat, "{}/{}: eos id {} is outside the vocabulary ({} ids)", origin, where, id,
                         f->tokenizer_->vocab_size());
    }
    const auto u = static_cast<uint32_t>(id);
    if (std::find(f->eos_ids_.begin(), f->eos_ids_.end(), u) == f->eos_ids_.end()) f->eos_ids_.push_back(u);
    return ok_status();
  };
  if (!generation_config.empty()) {
    const ordered_json g = ordered_json::parse(generation_config, nullptr, false);
    if (g.is_discarded() || !g.is_object()) {
      return Error::make(ErrorKind::kFormat, "{}/generation_config.json is not a JSON object", origin);
    }
    if (auto it = g.find("eos_token_id"); it != g.end() && !it->is_null()) {
      const ordered_json ids = it->is_array() ? *it : ordered_json::array({*it});
      for (const auto& id : ids) {
        if (!id.is_number_unsigned()) {
          return Error::make(ErrorKind::kFormat, "{}/generation_config.json: eos_token_id must be an id or a list of ids",
                             origin);
        }
        TANDEM_TRY(add_eos(id.get<uint64_t>(), "generation_config.json"));
      }
    }
  }
  if (!tokenizer_config.empty()) {
    const ordered_json c = ordered_json::parse(tokenizer_config, nullptr, false);
    if (c.is_discarded() || !c.is_object()) {
      return Error::make(ErrorKind::kFormat, "{}/tokenizer_config.json is not a JSON object", origin);
    }
    // What transformers' special_tokens_map holds, which apply_chat_template passes to the template.
    for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
      if (auto it = c.find(key); it != c.end()) {
        if (auto text = token_text(*it)) f->specials_[key] = *text;
      }
    }
    if (auto it = c.find("additional_special_tokens"); it != c.end() && it->is_array() && !it->empty()) {
      ordered_json list = ordered_json::array();
      for (const auto& t : *it) {
        if (auto text = token_text(t)) list.push_back(*text);
      }
      f->specials_["additional_special_tokens"] = std::move(list);
    }
    if (f->specials_.contains("eos_token")) {
      const std::string eos = f->specials_["eos_token"].get<std::string>();
      auto id = f->tokenizer_->token_id(eos);
      if (!id) {
        return Error::make(ErrorKind::kFormat, "{}/tokenizer_config.json: eos_token '{}' is not in the tokenizer",
                           origin, eos);
      }
      TANDEM_TRY(add_eos(*id, "tokenizer_config.json"));
    }
    if (auto it = c.find("chat_template"); it != c.end() && !it->is_null()) {
      if (!it->is_string()) {
        return Error::make(ErrorKind::kUnsupported,
                           "{}/tokenizer_config.json: chat_template is {}; only a single template (a string) is "
                           "supported",
                           origin, it->is_array() ? "a list of named templates" : "not a string");
      }
      auto t = ChatTemplate::parse(it->get<std::string>());
      if (!t.ok()) {
        return Error::make(ErrorKind::kUnsupported, "{}/tokenizer_config.json: the chat template cannot be rendered: {}",
                           origin, t.error().message());
      }
      f->chat_template_ = std::move(t.value());
      // A start-up probe: a one-message conversation must render, or nothing ever will.
      auto probe = f->render_chat({ChatMessage{"user", "hello", std::nullopt}}, ordered_json::object());
      if (!probe.ok()) {
        return Error::make(ErrorKind::kUnsupported,
                           "{}/tokenizer_config.json: the chat template cannot render a one-message conversation: {}",
                           origin, probe.error().message());
      }
    }
  }
  return f;
}

Result<std::string> GenerationFrontend::render_chat(const std::vector<ChatMessage>& messages,
                                                    const ordered_json& kwargs) const {
  if (!chat_template_) return Error(ErrorKind::kUnsupported, "the model has no chat template");
  ordered_json list = ordered_json::array();
  for (const ChatMessage& m : messages) {
    ordered_json j = {{"role", m.role}, {"content", m.content}};
    if (m.name) j["name"] = *m.name;
    list.push_back(std::move(j));
  }
  ordered_json ctx = {{"messages", std::move(list)}, {"tools", nullptr}, {"documents", nullptr},
                      {"add_generation_prompt", true}};
  for (auto it = specials_.begin(); it != specials_.end(); ++it) ctx[it.key()] = it.value();
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) ctx[it.key()] = it.value();
  return chat_template_->render(ctx);
}

}  // namespace tandem::coordinator
