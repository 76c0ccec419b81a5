// Bucket table parsing and lookup.
#include "engine/ir/bucket.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "engine/core/embedded.h"

namespace tandem::ir {

std::string to_string(const Bucket& b) { return fmt::format("{}/{}/{}", b.tokens, b.seqs, b.picks); }

namespace {
Result<uint32_t> parse_count(std::string_view word, std::string_view origin, size_t line, const char* what) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
  if (ec != std::errc() || p != word.data() + word.size()) {
    return Error::make(ErrorKind::kFormat, "{}:{}: {} '{}' is not a non-negative integer", origin, line, what,
                       word);
  }
  return v;
}
}  // namespace

Result<BucketTable> BucketTable::parse(std::string_view text, std::string_view origin) {
  BucketTable table;
  std::istringstream in{std::string(text)};
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w.empty()) continue;
    if (w.size() != 4) {
      return Error::make(ErrorKind::kFormat, "{}:{}: expected 'stage tokens seqs picks', got {} fields", origin,
                         number, w.size());
    }
    TANDEM_ASSIGN(uint32_t t, parse_count(w[1], origin, number, "tokens"));
    TANDEM_ASSIGN(uint32_t s, parse_count(w[2], origin, number, "seqs"));
    TANDEM_ASSIGN(uint32_t m, parse_count(w[3], origin, number, "picks"));
    if (t == 0 || s == 0) {
      return Error::make(ErrorKind::kFormat, "{}:{}: a bucket needs at least one token and one sequence", origin,
                         number);
    }
    auto it = std::find_if(table.stages_.begin(), table.stages_.end(), [&](auto& e) { return e.first == w[0]; });
    if (it == table.stages_.end()) {
      table.stages_.push_back({w[0], {}});
      it = table.stages_.end() - 1;
    }
    const Bucket b{t, s, m};
    if (std::find(it->second.begin(), it->second.end(), b) != it->second.end()) {
      return Error::make(ErrorKind::kFormat, "{}:{}: bucket {} of stage {} is listed twice", origin, number,
                         to_string(b), w[0]);
    }
    it->second.push_back(b);
  }
  if (table.stages_.empty()) return Error::make(ErrorKind::kFormat, "{}: no buckets", origin);
  for (auto& [name, buckets] : table.stages_) std::sort(buckets.begin(), buckets.end());
  return table;
}

Result<BucketTable> BucketTable::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Error::make(ErrorKind::kNotFound, "cannot open bucket table {}", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), path);
}

const BucketTable& BucketTable::defaults() {
  static const BucketTable table = [] {
    auto text = embedded::find(embedded::data_files(), "buckets.txt");
    auto parsed = parse(text.value_or(""), "embedded buckets.txt");
    // The embedded table is part of the binary and covered by tests; a failure here is a build bug.
    if (!parsed.ok()) std::abort();
    return std::move(parsed).value();
  }();
  return table;
}

const std::vector<Bucket>& BucketTable::stage(std::string_view name) const {
  static const std::vector<Bucket> empty;
  for (const auto& [n, b] : stages_) {
    if (n == name) return b;
  }
  return empty;
}

Result<Bucket> BucketTable::smallest(std::string_view stage_name, uint32_t tokens, uint32_t seqs,
                                     uint32_t picks) const {
  const auto& buckets = stage(stage_name);
  if (buckets.empty()) return Error::make(ErrorKind::kNotFound, "no bucket stage '{}'", stage_name);
  for (const Bucket& b : buckets) {
    if (b.holds(tokens, seqs, picks)) return b;
  }
  const Bucket& top = buckets.back();
  return Error::make(ErrorKind::kCapacity,
                     "a batch of {} tokens, {} sequences and {} picked rows fits no bucket of stage '{}' (largest {})",
                     tokens, seqs, picks, stage_name, to_string(top));
}

std::optional<Bucket> BucketTable::ceiling(std::string_view stage_name) const {
  const auto& buckets = stage(stage_name);
  if (buckets.empty()) return std::nullopt;
  Bucket out = buckets.front();
  for (const Bucket& b : buckets) {
    out.tokens = std::max(out.tokens, b.tokens);
    out.seqs = std::max(out.seqs, b.seqs);
    out.picks = std::max(out.picks, b.picks);
  }
  return out;
}

std::vector<std::string> BucketTable::stages() const {
  std::vector<std::string> out;
  for (const auto& [n, b] : stages_) out.push_back(n);
  return out;
}

}  // namespace tandem::ir
