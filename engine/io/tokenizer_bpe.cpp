// BPE merges with HF's priority-queue loop and a shared word cache (tokenizer_bpe_impl.h).
#include "engine/io/tokenizer_bpe_impl.h"

#include <limits>
#include <mutex>
#include <queue>

#include "engine/io/tokenizer_utf8_impl.h"

namespace tandem::io::tok {
namespace {

// Words longer than this are rare (long digit or whitespace runs) and not worth keeping.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kShardCapacity = size_t{1} << 13;  // 128k words over the 16 shards

uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }

struct Symbol {
  uint32_t id;
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool alive;
};

struct Candidate {
  uint32_t rank;
  uint32_t pos;  // the left symbol of the pair
  uint32_t new_id;
};

// std::priority_queue pops the greatest: "later" ranks lower, then positions further right.
struct Later {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

Result<std::unique_ptr<Bpe>> Bpe::make(StringMap<uint32_t> vocab,
                                       const std::vector<std::pair<std::string, std::string>>& merges,
                                       BpeOptions options) {
  std::unique_ptr<Bpe> bpe(new Bpe());
  for (const auto& [token, id] : vocab) {
    const auto [it, inserted] = bpe->vocab_r_.emplace(id, token);
    if (!inserted) {
      // HF would decode such an id to either token depending on hash order; refuse instead.
      return Error::make(ErrorKind::kFormat, "vocab: id {} is given to both \"{}\" and \"{}\"", id, it->second,
                         token);
    }
    if (id >= bpe->id_end_) bpe->id_end_ = id + 1;
  }
  if (merges.size() >= std::numeric_limits<uint32_t>::max()) {
    return Error::make(ErrorKind::kFormat, "merges: {} entries are too many", merges.size());
  }
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [left, right] = merges[i];
    const auto l = vocab.find(left);
    const auto r = vocab.find(right);
    const std::string joined = left + right;
    const auto j = vocab.find(joined);
    if (l == vocab.end() || r == vocab.end() || j == vocab.end()) {
      const std::string& missing = l == vocab.end() ? left : r == vocab.end() ? right : joined;
      return Error::make(ErrorKind::kFormat, "merges[{}]: \"{}\" + \"{}\": \"{}\" is not in the vocabulary", i,
                         left, right, missing);
    }
    // A repeated pair takes its last rank, as HF's HashMap collect does.
    bpe->merges_.insert_or_assign(pair_key(l->second, r->second), Merge{static_cast<uint32_t>(i), j->second});
  }
  if (options.unk_token) {
    const auto u = vocab.find(*options.unk_token);
    if (u != vocab.end()) bpe->unk_id_ = u->second;
  }
  bpe->options_ = std::move(options);
  bpe->vocab_ = std::move(vocab);
  return bpe;
}

std::optional<uint32_t> Bpe::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(uint32_t id) const {
  const auto it = vocab_r_.find(id);
  return it == vocab_r_.end() ? nullptr : &it->second;
}

const Bpe::Merge* Bpe::find_merge(uint32_t left, uint32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

Status Bpe::tokenize(std::string_view word, std::vector<uint32_t>& out) const {
  if (word.empty()) return ok_status();
  if (options_.ignore_merges) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return ok_status();
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  CacheShard& shard = cache_[StringHash{}(word) % kCacheShards];
  if (cacheable) {
    const std::shared_lock lock(shard.mutex);
    if (const auto it = shard.words.find(word); it != shard.words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return ok_status();
    }
  }
  std::vector<uint32_t> ids;
  TANDEM_TRY(merge_word(word, ids));
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    const std::unique_lock lock(shard.mutex);
    if (shard.words.size() >= kShardCapacity) shard.words.clear();
    shard.words.emplace(std::string(word), std::move(ids));
  }
  return ok_status();
}

Status Bpe::merge_word(std::string_view word, std::vector<uint32_t>& ids) const {
  // One symbol per character; unknown characters become unk_token (fused when asked) or, with no
  // unk_token, are dropped, as HF's merge_word does.
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&](uint32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back(Symbol{id, n - 1, -1, true});
  };
  bool unk_pending = false;
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = utf8_char_len(static_cast<unsigned char>(word[pos]));
    const auto it = vocab_.find(word.substr(pos, len));
    pos += len;
    if (it != vocab_.end()) {
      if (unk_pending) add(*unk_id_);
      unk_pending = false;
      add(it->second);
      continue;
    }
    if (!options_.unk_token) continue;
    if (!unk_id_) {
      return Error::make(ErrorKind::kFormat, "unk_token \"{}\" is not in the vocabulary", *options_.unk_token);
    }
    if (unk_pending && !options_.fuse_unk) add(*unk_id_);
    unk_pending = true;
  }
  if (unk_pending) add(*unk_id_);

  std::priority_queue<Candidate, std::vector<Candidate>, Later> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* m = find_merge(symbols[i].id, symbols[i + 1].id)) {
      queue.push(Candidate{m->rank, static_cast<uint32_t>(i), m->new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    const Symbol right = symbols[static_cast<size_t>(cur.next)];
    // A stale entry: one side has merged since it was queued.
    const Merge* m = find_merge(cur.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;
    symbols[static_cast<size_t>(cur.next)].alive = false;
    cur.id = top.new_id;
    cur.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0) {
      if (const Merge* p = find_merge(symbols[static_cast<size_t>(cur.prev)].id, cur.id)) {
        queue.push(Candidate{p->rank, static_cast<uint32_t>(cur.prev), p->new_id});
      }
    }
    if (cur.next >= 0) {
      if (const Merge* n = find_merge(cur.id, symbols[static_cast<size_t>(cur.next)].id)) {
        queue.push(Candidate{n->rank, top.pos, n->new_id});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.alive) ids.push_back(s.id);
  }
  return ok_status();
}

}  // namespace tandem::io::tok
