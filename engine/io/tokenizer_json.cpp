// Reads HF tokenizer.json into the tokenizer's parts, naming the JSON path of anything refused
// (tokenizer_json_impl.h).
#include "engine/io/tokenizer_json_impl.h"

#include <optional>
#include <utility>
#include <vector>

#include "engine/core/log.h"
#include "engine/io/json_fields_impl.h"
#include "engine/io/json_parse_impl.h"

namespace tandem::io::tok {
namespace {

using nlohmann::json;

// tokenizer.json nests a few levels (pre_tokenizer Sequence of Splits); anything deeper is hostile.
constexpr size_t kMaxDepth = 32;

Error unsupported_type(const JsonLoc& loc, std::string_view type, std::string_view supported) {
  return loc.error(ErrorKind::kUnsupported,
                   fmt::format("\"{}\" is not supported (tandem supports {})", type, supported));
}

Result<std::string> required_type(const JsonFields& f) {
  const json* v = f.find("type");
  if (v == nullptr) return f.missing("type");
  return json_to_string(*v, f.loc("type"));
}

Result<const json*> required_array(const JsonFields& f, std::string_view key) {
  const json* v = f.find(key);
  if (v == nullptr) return f.missing(key);
  if (!v->is_array()) {
    return f.loc(key).error(ErrorKind::kFormat, fmt::format("expected an array, found {}", describe_json(*v)));
  }
  return v;
}

// True when the normalizer (or any member of a Sequence) is NFC.
Result<bool> parse_normalizer(const json& value, const JsonLoc& loc) {
  TANDEM_ASSIGN(const JsonFields f, JsonFields::of(value, loc));
  TANDEM_ASSIGN(const std::string type, required_type(f));
  if (type == "NFC") return true;
  if (type != "Sequence") return unsupported_type(f.loc("type"), type, "NFC and Sequence");
  TANDEM_ASSIGN(const json* list, required_array(f, "normalizers"));
  bool nfc = false;
  for (size_t i = 0; i < list->size(); ++i) {
    TANDEM_ASSIGN(const bool member, parse_normalizer((*list)[i], f.loc("normalizers").index(i)));
    nfc = nfc || member;
  }
  return nfc;
}

Result<SplitBehavior> parse_behavior(const JsonFields& f) {
  const json* v = f.find("behavior");
  if (v == nullptr) return f.missing("behavior");
  TANDEM_ASSIGN(const std::string name, json_to_string(*v, f.loc("behavior")));
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return f.loc("behavior").error(
      ErrorKind::kFormat,
      fmt::format("\"{}\" is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous", name));
}

Result<Regex> parse_split_pattern(const JsonFields& f) {
  const json* v = f.find("pattern");
  if (v == nullptr) return f.missing("pattern");
  TANDEM_ASSIGN(const JsonFields pattern, JsonFields::of(*v, f.loc("pattern")));
  TANDEM_ASSIGN(const std::optional<std::string> regex, pattern.opt_string("Regex"));
  TANDEM_ASSIGN(const std::optional<std::string> literal, pattern.opt_string("String"));
  if (regex.has_value() == literal.has_value()) {
    return pattern.loc().error(ErrorKind::kFormat, "expected exactly one of \"Regex\" and \"String\"");
  }
  Result<Regex> compiled = regex ? Regex::compile(*regex) : Regex::literal(*literal);
  if (!compiled.ok()) {
    return pattern.loc(regex ? "Regex" : "String").error(compiled.error().kind(), compiled.error().message());
  }
  return std::move(compiled).value();
}

Status parse_pre_tokenizer(const json& value, const JsonLoc& loc, PreTokenizer& out) {
  TANDEM_ASSIGN(const JsonFields f, JsonFields::of(value, loc));
  TANDEM_ASSIGN(const std::string type, required_type(f));
  if (type == "ByteLevel") {
    // trim_offsets only moves offsets, which tandem does not report.
    TANDEM_ASSIGN(const bool add_prefix_space, f.bool_or("add_prefix_space", true));
    TANDEM_ASSIGN(const bool use_regex, f.bool_or("use_regex", true));
    return out.add_byte_level(add_prefix_space, use_regex);
  }
  if (type == "Split") {
    TANDEM_ASSIGN(Regex regex, parse_split_pattern(f));
    TANDEM_ASSIGN(const SplitBehavior behavior, parse_behavior(f));
    TANDEM_ASSIGN(const bool invert, f.bool_or("invert", false));
    out.add_split(std::move(regex), behavior, invert);
    return ok_status();
  }
  if (type != "Sequence") return unsupported_type(f.loc("type"), type, "ByteLevel, Split and Sequence");
  TANDEM_ASSIGN(const json* list, required_array(f, "pretokenizers"));
  for (size_t i = 0; i < list->size(); ++i) {
    TANDEM_TRY(parse_pre_tokenizer((*list)[i], f.loc("pretokenizers").index(i), out));
  }
  return ok_status();
}

// One merge, as HF's legacy "a b" (exactly one space) or as a [a, b] pair; nullopt when neither.
std::optional<std::pair<std::string, std::string>> parse_merge(const json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos) {
      return std::pair(s.substr(0, space), s.substr(space + 1));
    }
  } else if (v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string()) {
    return std::pair(v[0].get<std::string>(), v[1].get<std::string>());
  }
  return std::nullopt;
}

Status refuse_if(bool refused, const JsonLoc& loc, std::string_view what) {
  if (refused) return loc.error(ErrorKind::kUnsupported, what);
  return ok_status();
}

Result<std::unique_ptr<Bpe>> parse_model(const JsonFields& f) {
  TANDEM_ASSIGN(const std::optional<std::string> type, f.opt_string("type"));
  if (type && *type != "BPE") return unsupported_type(f.loc("type"), *type, "BPE");
  TANDEM_ASSIGN(const std::optional<double> dropout, f.opt_number("dropout", 0.0, 1.0));
  TANDEM_TRY(refuse_if(dropout.value_or(0.0) != 0.0, f.loc("dropout"), "BPE dropout is not supported"));
  for (const std::string_view key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    TANDEM_ASSIGN(const std::optional<std::string> affix, f.opt_string(key));
    TANDEM_TRY(refuse_if(affix && !affix->empty(), f.loc(key), "a non-empty subword affix is not supported"));
  }
  TANDEM_ASSIGN(const bool byte_fallback, f.bool_or("byte_fallback", false));
  TANDEM_TRY(refuse_if(byte_fallback, f.loc("byte_fallback"), "byte_fallback is not supported"));

  BpeOptions options;
  TANDEM_ASSIGN(options.unk_token, f.opt_string("unk_token"));
  TANDEM_ASSIGN(options.fuse_unk, f.bool_or("fuse_unk", false));
  TANDEM_ASSIGN(options.ignore_merges, f.bool_or("ignore_merges", false));

  TANDEM_ASSIGN(const std::optional<JsonFields> vocab_fields, f.opt_object("vocab"));
  if (!vocab_fields) return f.missing("vocab");
  StringMap<uint32_t> vocab;
  vocab.reserve(vocab_fields->value().size());
  // A vocabulary has ~150k entries: the JSON path of one is only spelled out when it is wrong.
  for (const auto& [token, id] : vocab_fields->value().items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > kJsonU32Max) {
      return json_to_u32(id, vocab_fields->loc(token)).error();
    }
    vocab.emplace(token, static_cast<uint32_t>(id.get<uint64_t>()));
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (f.has("merges")) {
    TANDEM_ASSIGN(const json* list, required_array(f, "merges"));
    merges.reserve(list->size());
    for (size_t i = 0; i < list->size(); ++i) {
      auto merge = parse_merge((*list)[i]);
      if (!merge) {
        return f.loc("merges").index(i).error(
            ErrorKind::kFormat,
            fmt::format("expected \"left right\" or [left, right], found {}", describe_json((*list)[i])));
      }
      merges.push_back(std::move(*merge));
    }
  }
  Result<std::unique_ptr<Bpe>> bpe = Bpe::make(std::move(vocab), merges, std::move(options));
  if (!bpe.ok()) return f.loc().error(bpe.error().kind(), bpe.error().message());
  return std::move(bpe).value();
}

Result<AddedToken> parse_added_token(const JsonFields& f) {
  AddedToken t;
  TANDEM_ASSIGN(const std::optional<std::string> content, f.opt_string("content"));
  if (!content) return f.missing("content");
  t.content = *content;
  TANDEM_ASSIGN(t.special, f.bool_or("special", false));
  TANDEM_ASSIGN(t.single_word, f.bool_or("single_word", false));
  TANDEM_ASSIGN(t.lstrip, f.bool_or("lstrip", false));
  TANDEM_ASSIGN(t.rstrip, f.bool_or("rstrip", false));
  TANDEM_ASSIGN(t.normalized, f.bool_or("normalized", !t.special));
  return t;
}

Status parse_added_tokens(const JsonFields& root, TokenizerParts& parts) {
  if (!root.has("added_tokens")) return ok_status();
  TANDEM_ASSIGN(const json* list, required_array(root, "added_tokens"));
  for (size_t i = 0; i < list->size(); ++i) {
    TANDEM_ASSIGN(const JsonFields f, JsonFields::of((*list)[i], root.loc("added_tokens").index(i)));
    TANDEM_ASSIGN(const AddedToken token, parse_added_token(f));
    TANDEM_ASSIGN(const std::optional<uint32_t> expected, f.opt_u32("id"));
    const std::optional<uint32_t> given = parts.added.add(token, *parts.model);
    // HF keeps the id it assigns and only warns; so does tandem, to give the same ids as HF.
    if (expected && given != expected) {
      log::warn("{}: added token \"{}\" was expected to have id {} but gets id {}", f.loc().origin(),
                token.content, *expected, given ? std::to_string(*given) : std::string("none"));
    }
  }
  return parts.added.finish(parts.normalizer);
}

Status parse_decoder(const JsonFields& root, TokenizerParts& parts) {
  TANDEM_ASSIGN(const std::optional<JsonFields> f, root.opt_object("decoder"));
  if (!f) return ok_status();  // HF joins tokens with spaces
  TANDEM_ASSIGN(const std::string type, required_type(*f));
  if (type != "ByteLevel") return unsupported_type(f->loc("type"), type, "ByteLevel");
  parts.decoder = DecoderKind::kByteLevel;
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<TokenizerParts>> parse_tokenizer_json(std::string_view text, const std::string& origin) {
  TANDEM_ASSIGN(const json doc, parse_json_strict(text, origin, kMaxDepth));
  TANDEM_ASSIGN(const JsonFields root, JsonFields::of(doc, JsonLoc(origin)));
  auto parts = std::make_unique<TokenizerParts>();

  TANDEM_ASSIGN(const std::optional<JsonFields> model, root.opt_object("model"));
  if (!model) return root.missing("model");
  TANDEM_ASSIGN(parts->model, parse_model(*model));

  if (const json* normalizer = root.find("normalizer")) {
    TANDEM_ASSIGN(const bool nfc, parse_normalizer(*normalizer, root.loc("normalizer")));
    if (nfc) {
      Result<Normalizer> n = Normalizer::nfc();
      if (!n.ok()) return root.loc("normalizer").error(n.error().kind(), n.error().message());
      parts->normalizer = *n;
    }
  }
  if (const json* pre = root.find("pre_tokenizer")) {
    TANDEM_TRY(parse_pre_tokenizer(*pre, root.loc("pre_tokenizer"), parts->pre_tokenizer));
  }
  TANDEM_TRY(parse_added_tokens(root, *parts));
  TANDEM_TRY(parse_decoder(root, *parts));
  return parts;
}

}  // namespace tandem::io::tok
