// ChatTemplate (chat_template.h): parse() lexes and parses; render() walks the tree with Jinja2's scoping
// (a for loop's body sees a fresh frame each iteration; if and set do not open one; namespace() objects
// carry values out of loops) and Python's operators on the values of chat_template_value.cpp.
#include "coordinator/chat_template.h"

#include <cmath>
#include <map>

#include "coordinator/chat_template_impl.h"

namespace tandem::coordinator {

struct ChatTemplate::Program {
  std::vector<jinja::Node> nodes;
};

namespace jinja {
namespace {

// Bounds on one rendering, so a template (or a fuzzed one) cannot run away.
constexpr uint64_t kMaxSteps = 1'000'000;
constexpr size_t kMaxOutputBytes = size_t{16} << 20;

Error fail(int line, std::string_view what) {
  return Error::make(ErrorKind::kUnsupported, "chat template line {}: {}", line, what);
}

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return None{};
    case T::boolean: return j.get<bool>();
    case T::number_integer: return j.get<int64_t>();
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return static_cast<double>(u);
      return static_cast<int64_t>(u);
    }
    case T::number_float: return j.get<double>();
    case T::string: return j.get<std::string>();
    case T::array: {
      List l;
      for (const auto& x : j) l.push_back(from_json(x));
      return make_list(std::move(l));
    }
    case T::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(it.key(), from_json(it.value()));
      return make_dict(std::move(d));
    }
    case T::binary:
    case T::discarded: return Undefined{};
  }
  return Undefined{};
}

// Python's slice.indices(): the positions a[start:stop:step] visits.
Result<std::vector<int64_t>> slice_positions(int64_t n, const Value* start, const Value* stop, const Value* step,
                                             int line) {
  int64_t st = 1;
  if (step && !step->is_none()) {
    if (!step->is_int()) return fail(line, "a slice step must be an integer");
    st = step->as_int();
    if (st == 0) return fail(line, "a slice step cannot be zero");
  }
  auto bound = [&](const Value* v, int64_t dflt) -> Result<int64_t> {
    if (!v || v->is_none()) return dflt;
    if (!v->is_int()) return fail(line, "slice indices must be integers");
    int64_t i = v->as_int();
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  TANDEM_ASSIGN(int64_t b, bound(start, st > 0 ? 0 : n - 1));
  TANDEM_ASSIGN(int64_t e, bound(stop, st > 0 ? n : -1));
  std::vector<int64_t> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(i);
  return out;
}

class Renderer {
 public:
  explicit Renderer(Value context) {
    frames_.emplace_back();
    if (context.is_dict()) {
      for (const auto& [k, v] : context.dict().items) frames_.back()[k] = v;
    }
    frames_.emplace_back();  // the template's own top level
  }
  // A namespace may come to hold itself (`{% set ns.me = ns %}`, or inside a list it holds): a cycle of
  // shared pointers. None outlives the rendering, so its end empties every one it made.
  ~Renderer() {
    for (const auto& ns : namespaces_) ns->attrs.clear();
  }
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  enum class Flow { kNormal, kBreak, kContinue };

  Result<Flow> run(const std::vector<Node>& nodes) {
    for (const Node& n : nodes) {
      if (++steps_ > kMaxSteps) return fail(n.line, fmt::format("the rendering takes over {} steps", kMaxSteps));
      switch (n.kind) {
        case NodeKind::kText:
          out_ += n.text;
          break;
        case NodeKind::kOutput: {
          TANDEM_ASSIGN(Value v, eval(*n.expr));
          auto text = to_text(v);
          if (!text.ok()) return fail(n.line, text.error().message());
          out_ += text.value();
          break;
        }
        case NodeKind::kIf: {
          for (const auto& [cond, body] : n.branches) {
            bool take = cond == nullptr;
            if (!take) {
              TANDEM_ASSIGN(Value c, eval(*cond));
              take = truthy(c);
            }
            if (take) {
              TANDEM_ASSIGN(Flow f, run(body));
              if (f != Flow::kNormal) return f;
              break;
            }
          }
          break;
        }
        case NodeKind::kFor: {
          TANDEM_TRY(loop(n));
          break;
        }
        case NodeKind::kSet: {
          TANDEM_ASSIGN(Value v, eval(*n.expr));
          if (n.attr.empty()) {
            frames_.back()[n.targets[0]] = std::move(v);
            break;
          }
          Value target = lookup(n.targets[0]);
          if (!target.is_namespace()) {
            return fail(n.line, fmt::format("cannot set {}.{}: {} is a {}, not a namespace()", n.targets[0], n.attr,
                                            n.targets[0], type_name(target)));
          }
          auto& ns = *std::get<std::shared_ptr<Namespace>>(target.v);
          if (Value* slot = ns.find(n.attr)) {
            *slot = std::move(v);
          } else {
            ns.attrs.emplace_back(n.attr, std::move(v));
          }
          break;
        }
        case NodeKind::kBreak: return Flow::kBreak;
        case NodeKind::kContinue: return Flow::kContinue;
      }
      if (out_.size() > kMaxOutputBytes) return fail(n.line, fmt::format("the rendering exceeds {} bytes", kMaxOutputBytes));
    }
    return Flow::kNormal;
  }

  std::string take() { return std::move(out_); }

 private:
  Value lookup(const std::string& name) const {
    for (size_t i = frames_.size(); i-- > 0;) {
      auto it = frames_[i].find(name);
      if (it != frames_[i].end()) return it->second;
    }
    return Undefined{name};
  }

  Result<List> iterate(const Value& v, int line) {
    if (v.is_list()) return v.list();
    if (v.is_undefined()) return List{};
    if (v.is_dict()) {
      List keys;
      for (const auto& item : v.dict().items) keys.emplace_back(item.first);
      return keys;
    }
    if (v.is_string()) {
      List chars;
      const std::string& s = v.str();
      const auto offs = code_point_offsets(s);
      for (size_t i = 0; i < offs.size(); ++i) {
        chars.emplace_back(s.substr(offs[i], (i + 1 < offs.size() ? offs[i + 1] : s.size()) - offs[i]));
      }
      return chars;
    }
    return fail(line, fmt::format("a {} is not iterable", type_name(v)));
  }

  Status bind(const std::vector<std::string>& targets, const Value& item, int line) {
    if (targets.size() == 1) {
      frames_.back()[targets[0]] = item;
      return ok_status();
    }
    if (!item.is_list() || item.list().size() != targets.size()) {
      return fail(line, fmt::format("cannot unpack a {} into {} loop variables", type_name(item), targets.size()));
    }
    for (size_t i = 0; i < targets.size(); ++i) frames_.back()[targets[i]] = item.list()[i];
    return ok_status();
  }

  Status loop(const Node& n) {
    TANDEM_ASSIGN(Value seq, eval(*n.expr));
    TANDEM_ASSIGN(List items, iterate(seq, n.line));
    if (n.filter) {
      List kept;
      for (const Value& item : items) {
        frames_.emplace_back();
        Status s = bind(n.targets, item, n.line);
        auto keep = s.ok() ? eval(*n.filter) : Result<Value>(s.error());
        frames_.pop_back();
        if (!keep.ok()) return std::move(keep).error();
        if (truthy(keep.value())) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto count = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < count; ++i) {
      if (++steps_ > kMaxSteps) return fail(n.line, fmt::format("the rendering takes over {} steps", kMaxSteps));
      frames_.emplace_back();
      Status s = bind(n.targets, items[static_cast<size_t>(i)], n.line);
      if (!s.ok()) {
        frames_.pop_back();
        return s;
      }
      Dict info;
      info.items = {{"index", i + 1},         {"index0", i},
                    {"revindex", count - i},  {"revindex0", count - i - 1},
                    {"first", i == 0},        {"last", i == count - 1},
                    {"length", count}};
      if (i > 0) info.items.emplace_back("previtem", items[static_cast<size_t>(i - 1)]);
      if (i + 1 < count) info.items.emplace_back("nextitem", items[static_cast<size_t>(i + 1)]);
      frames_.back()["loop"] = make_dict(std::move(info));
      auto flow = run(n.body);
      frames_.pop_back();
      if (!flow.ok()) return std::move(flow).error();
      if (flow.value() == Flow::kBreak) break;
    }
    if (count == 0 && !n.else_body.empty()) {
      TANDEM_ASSIGN(Flow f, run(n.else_body));
      (void)f;
    }
    return ok_status();
  }

  Result<Value> undefined_use(const Value& v, int line, std::string_view what) {
    return fail(line, fmt::format("'{}' is undefined ({})", std::get<Undefined>(v.v).name, what));
  }

  Result<Value> attr(const Value& obj, const std::string& name, int line) {
    if (obj.is_undefined()) return undefined_use(obj, line, fmt::format("reading .{}", name));
    if (obj.is_dict()) {
      const Value* v = obj.dict().find(name);
      return v ? *v : Value(Undefined{fmt::format("{}", name)});
    }
    if (obj.is_namespace()) {
      Value* v = std::get<std::shared_ptr<Namespace>>(obj.v)->find(name);
      return v ? *v : Value(Undefined{name});
    }
    return Value(Undefined{name});
  }

  Result<Value> item(const Value& obj, const Value& key, int line) {
    if (obj.is_undefined()) return undefined_use(obj, line, "indexing it");
    if (obj.is_dict()) {
      if (!key.is_string()) return Value(Undefined{"item"});
      const Value* v = obj.dict().find(key.str());
      return v ? *v : Value(Undefined{key.str()});
    }
    if (obj.is_namespace() && key.is_string()) return attr(obj, key.str(), line);
    if ((obj.is_list() || obj.is_string()) && key.is_int()) {
      const std::string* s = obj.is_string() ? &obj.str() : nullptr;
      std::vector<size_t> offs;
      if (s) offs = code_point_offsets(*s);
      const auto n = static_cast<int64_t>(s ? offs.size() : obj.list().size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value(Undefined{"item"});
      const auto u = static_cast<size_t>(i);
      if (!s) return obj.list()[u];
      return Value(s->substr(offs[u], (u + 1 < offs.size() ? offs[u + 1] : s->size()) - offs[u]));
    }
    return Value(Undefined{"item"});
  }

  Result<Value> slice(const Expr& e) {
    TANDEM_ASSIGN(Value obj, eval(*e.a));
    Value parts[3];
    const Expr* exprs[3] = {e.b.get(), e.c.get(), e.d.get()};
    for (int i = 0; i < 3; ++i) {
      if (exprs[i]) {
        TANDEM_ASSIGN(parts[i], eval(*exprs[i]));
      }
    }
    const Value* p[3];
    for (int i = 0; i < 3; ++i) p[i] = exprs[i] ? &parts[i] : nullptr;
    if (obj.is_list()) {
      TANDEM_ASSIGN(auto pos, slice_positions(static_cast<int64_t>(obj.list().size()), p[0], p[1], p[2], e.line));
      List out;
      for (int64_t i : pos) out.push_back(obj.list()[static_cast<size_t>(i)]);
      return make_list(std::move(out));
    }
    if (obj.is_string()) {
      const std::string& s = obj.str();
      const auto offs = code_point_offsets(s);
      TANDEM_ASSIGN(auto pos, slice_positions(static_cast<int64_t>(offs.size()), p[0], p[1], p[2], e.line));
      std::string out;
      for (int64_t i : pos) {
        const auto u = static_cast<size_t>(i);
        out += s.substr(offs[u], (u + 1 < offs.size() ? offs[u + 1] : s.size()) - offs[u]);
      }
      return Value(std::move(out));
    }
    if (obj.is_undefined()) return undefined_use(obj, e.line, "slicing it");
    return fail(e.line, fmt::format("a {} cannot be sliced", type_name(obj)));
  }

  Result<std::vector<Value>> eval_args(const Expr& e) {
    std::vector<Value> out;
    for (const auto& a : e.args) {
      TANDEM_ASSIGN(Value v, eval(*a));
      out.push_back(std::move(v));
    }
    return out;
  }

  Result<Value> call(const Expr& e) {
    TANDEM_ASSIGN(std::vector<Value> args, eval_args(e));
    if (e.name == "raise_exception") {
      std::string msg = args.empty() ? std::string() : to_text(args[0]).ok() ? to_text(args[0]).value() : "";
      return Error::make(ErrorKind::kInvalidArgument, "the chat template refused the conversation: {}", msg);
    }
    if (e.name == "namespace") {
      auto ns = std::make_shared<Namespace>();
      namespaces_.push_back(ns);
      if (!args.empty() && args[0].is_dict()) ns->attrs = args[0].dict().items;
      for (const auto& [k, v] : e.kwargs) {
        TANDEM_ASSIGN(Value x, eval(*v));
        if (Value* slot = ns->find(k)) *slot = std::move(x);
        else ns->attrs.emplace_back(k, std::move(x));
      }
      return Value(std::move(ns));
    }
    // range()
    if (args.empty() || args.size() > 3) return fail(e.line, "range() takes 1 to 3 integers");
    for (const Value& a : args) {
      if (!a.is_int()) return fail(e.line, "range() takes integers");
    }
    int64_t start = args.size() > 1 ? args[0].as_int() : 0;
    const int64_t stop = args.size() > 1 ? args[1].as_int() : args[0].as_int();
    const int64_t step = args.size() > 2 ? args[2].as_int() : 1;
    if (step == 0) return fail(e.line, "range() step cannot be zero");
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= kMaxSteps) return fail(e.line, "range() is too long");
      out.emplace_back(i);
    }
    return make_list(std::move(out));
  }

  Result<Value> filter(const Expr& e) {
    TANDEM_ASSIGN(Value v, eval(*e.a));
    TANDEM_ASSIGN(std::vector<Value> args, eval_args(e));
    const std::string& f = e.name;
    auto text = [&](const Value& x) -> Result<std::string> {
      auto t = to_text(x);
      if (!t.ok()) return fail(e.line, t.error().message());
      return t;
    };
    if (f == "length" || f == "count") {
      if (v.is_string()) return Value(code_point_offsets(v.str()).size());
      if (v.is_list()) return Value(v.list().size());
      if (v.is_dict()) return Value(v.dict().items.size());
      if (v.is_undefined()) return Value(0);
      return fail(e.line, fmt::format("a {} has no length", type_name(v)));
    }
    if (f == "first" || f == "last") {
      if (v.is_list()) {
        if (v.list().empty()) return Value(Undefined{f});
        return f == "first" ? v.list().front() : v.list().back();
      }
      if (v.is_string()) {
        const auto offs = code_point_offsets(v.str());
        if (offs.empty()) return Value(Undefined{f});
        return item(v, Value(f == "first" ? int64_t{0} : int64_t{-1}), e.line);
      }
      return fail(e.line, fmt::format("|{} of a {}", f, type_name(v)));
    }
    if (f == "trim") {
      TANDEM_ASSIGN(std::string s, text(v));
      std::vector<Value> a;
      if (!args.empty()) a.push_back(args[0]);
      auto r = call_method(Value(std::move(s)), "strip", a);
      if (!r.ok()) return fail(e.line, r.error().message());
      return r;
    }
    if (f == "tojson") {
      int indent = -1;
      const Value* ind = args.empty() ? nullptr : &args[0];
      Value kw;
      for (const auto& [k, x] : e.kwargs) {
        if (k != "indent") return fail(e.line, fmt::format("|tojson({}=...) is not supported", k));
        TANDEM_ASSIGN(kw, eval(*x));
        ind = &kw;
      }
      if (ind && !ind->is_none()) {
        if (!ind->is_int() || ind->as_int() < 0 || ind->as_int() > 16) return fail(e.line, "|tojson(indent) takes 0..16");
        indent = static_cast<int>(ind->as_int());
      }
      auto j = to_json(v, indent);
      if (!j.ok()) return fail(e.line, j.error().message());
      return Value(std::move(j.value()));
    }
    if (f == "lower" || f == "upper") {
      TANDEM_ASSIGN(std::string s, text(v));
      auto r = call_method(Value(std::move(s)), f, {});
      if (!r.ok()) return fail(e.line, r.error().message());
      return r;
    }
    if (f == "join") {
      if (!e.kwargs.empty()) return fail(e.line, "|join with keyword arguments is not supported");
      TANDEM_ASSIGN(List items, iterate(v, e.line));
      std::string sep;
      if (!args.empty()) {
        TANDEM_ASSIGN(sep, text(args[0]));
      }
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += sep;
        TANDEM_ASSIGN(std::string s, text(items[i]));
        out += s;
      }
      return Value(std::move(out));
    }
    if (f == "default" || f == "d") {
      const bool boolean = args.size() > 1 && truthy(args[1]);
      if (v.is_undefined() || (boolean && !truthy(v))) return args.empty() ? Value(std::string()) : args[0];
      return v;
    }
    if (f == "string") {
      TANDEM_ASSIGN(std::string s, text(v));
      return Value(std::move(s));
    }
    if (f == "list") {
      TANDEM_ASSIGN(List items, iterate(v, e.line));
      return make_list(std::move(items));
    }
    if (f == "reverse") {
      if (v.is_string()) {
        std::string out;
        TANDEM_ASSIGN(List chars, iterate(v, e.line));
        for (size_t i = chars.size(); i-- > 0;) out += chars[i].str();
        return Value(std::move(out));
      }
      TANDEM_ASSIGN(List items, iterate(v, e.line));
      std::reverse(items.begin(), items.end());
      return make_list(std::move(items));
    }
    if (f == "replace") {
      TANDEM_ASSIGN(std::string s, text(v));
      auto r = call_method(Value(std::move(s)), "replace", args);
      if (!r.ok()) return fail(e.line, r.error().message());
      return r;
    }
    if (f == "int") {
      const int64_t dflt = !args.empty() && args[0].is_int() ? args[0].as_int() : 0;
      if (v.is_int()) return Value(v.as_int());
      if (v.is_number()) return Value(static_cast<int64_t>(v.as_double()));
      if (v.is_string()) {
        const std::string s = call_method(v, "strip", {}).value().str();
        char* end = nullptr;
        const long long x = std::strtoll(s.c_str(), &end, 10);
        if (!s.empty() && end == s.c_str() + s.size()) return Value(static_cast<int64_t>(x));
      }
      return Value(dflt);
    }
    if (f == "items") {
      if (v.is_undefined()) return make_list({});
      if (!v.is_dict()) return fail(e.line, fmt::format("|items of a {}", type_name(v)));
      return call_method(v, "items", {});
    }
    return v;  // safe: no autoescaping, so nothing to mark
  }

  Result<Value> test(const Expr& e) {
    TANDEM_ASSIGN(Value v, eval(*e.a));
    TANDEM_ASSIGN(std::vector<Value> args, eval_args(e));
    const std::string& t = e.name;
    bool r = false;
    if (t == "defined") r = !v.is_undefined();
    else if (t == "undefined") r = v.is_undefined();
    else if (t == "none") r = v.is_none();
    else if (t == "string") r = v.is_string();
    else if (t == "number") r = v.is_number();
    else if (t == "integer") r = v.v.index() == 3;
    else if (t == "float") r = v.v.index() == 4;
    else if (t == "boolean") r = v.is_bool();
    else if (t == "mapping") r = v.is_dict();
    else if (t == "iterable") r = v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
    else if (t == "sequence") r = v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
    else if (t == "true") r = v.is_bool() && std::get<bool>(v.v);
    else if (t == "false") r = v.is_bool() && !std::get<bool>(v.v);
    else if (t == "even" || t == "odd") {
      if (!v.is_int()) return fail(e.line, fmt::format("'is {}' of a {}", t, type_name(v)));
      r = (v.as_int() % 2 == 0) == (t == "even");
    } else if (t == "divisibleby") {
      if (!v.is_int() || args.size() != 1 || !args[0].is_int() || args[0].as_int() == 0) {
        return fail(e.line, "'is divisibleby' takes a non-zero integer");
      }
      r = v.as_int() % args[0].as_int() == 0;
    } else {  // equalto, eq, ne
      if (args.size() != 1) return fail(e.line, fmt::format("'is {}' takes one argument", t));
      r = equal(v, args[0]) == (t != "ne");
    }
    return Value(r != e.negated);
  }

  Result<Value> arithmetic(BinOp op, const Value& a, const Value& b, int line) {
    for (const Value* x : {&a, &b}) {
      if (x->is_undefined()) return undefined_use(*x, line, "in arithmetic");
    }
    const char* sym = "+";
    switch (op) {
      case BinOp::kSub: sym = "-"; break;
      case BinOp::kMul: sym = "*"; break;
      case BinOp::kDiv: sym = "/"; break;
      case BinOp::kFloorDiv: sym = "//"; break;
      case BinOp::kMod: sym = "%"; break;
      case BinOp::kPow: sym = "**"; break;
      case BinOp::kOr: case BinOp::kAnd: case BinOp::kEq: case BinOp::kNe: case BinOp::kLt: case BinOp::kLe:
      case BinOp::kGt: case BinOp::kGe: case BinOp::kIn: case BinOp::kNotIn: case BinOp::kAdd: case BinOp::kConcat:
        break;
    }
    if (op == BinOp::kAdd && a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (op == BinOp::kAdd && a.is_list() && b.is_list()) {
      List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return make_list(std::move(l));
    }
    if (op == BinOp::kMul && ((a.is_string() && b.is_int()) || (a.is_int() && b.is_string()))) {
      const std::string& s = a.is_string() ? a.str() : b.str();
      const int64_t n = a.is_string() ? b.as_int() : a.as_int();
      if (n > 0 && s.size() * static_cast<size_t>(n) > kMaxOutputBytes) return fail(line, "a repeated string is too long");
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += s;
      return Value(std::move(out));
    }
    if (!a.is_number() || !b.is_number() || (op == BinOp::kMod && a.is_string())) {
      return fail(line, fmt::format("unsupported operand types for {}: '{}' and '{}'", sym, type_name(a), type_name(b)));
    }
    const bool ints = a.is_int() && b.is_int();
    if (ints && op != BinOp::kDiv) {
      const int64_t x = a.as_int();
      const int64_t y = b.as_int();
      int64_t r = 0;
      switch (op) {
        case BinOp::kAdd: if (__builtin_add_overflow(x, y, &r)) return fail(line, "integer overflow"); return Value(r);
        case BinOp::kSub: if (__builtin_sub_overflow(x, y, &r)) return fail(line, "integer overflow"); return Value(r);
        case BinOp::kMul: if (__builtin_mul_overflow(x, y, &r)) return fail(line, "integer overflow"); return Value(r);
        case BinOp::kFloorDiv:
        case BinOp::kMod: {
          if (y == 0) return fail(line, "integer division or modulo by zero");
          if (x == INT64_MIN && y == -1) return fail(line, "integer overflow");
          int64_t q = x / y;
          int64_t m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) {
            --q;
            m += y;
          }
          return Value(op == BinOp::kFloorDiv ? q : m);
        }
        case BinOp::kPow: {
          if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
          int64_t acc = 1;
          for (int64_t i = 0; i < y; ++i) {
            if (__builtin_mul_overflow(acc, x, &acc)) return fail(line, "integer overflow");
            if (acc == 0 || acc == 1) break;
          }
          return Value(acc);
        }
        case BinOp::kOr: case BinOp::kAnd: case BinOp::kEq: case BinOp::kNe: case BinOp::kLt: case BinOp::kLe:
        case BinOp::kGt: case BinOp::kGe: case BinOp::kIn: case BinOp::kNotIn: case BinOp::kConcat:
        case BinOp::kDiv: break;
      }
    }
    const double x = a.as_double();
    const double y = b.as_double();
    switch (op) {
      case BinOp::kAdd: return Value(x + y);
      case BinOp::kSub: return Value(x - y);
      case BinOp::kMul: return Value(x * y);
      case BinOp::kDiv:
        if (y == 0) return fail(line, "division by zero");
        return Value(x / y);
      case BinOp::kFloorDiv:
        if (y == 0) return fail(line, "division by zero");
        return Value(std::floor(x / y));
      case BinOp::kMod: {
        if (y == 0) return fail(line, "modulo by zero");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value(m);
      }
      case BinOp::kPow: return Value(std::pow(x, y));
      case BinOp::kOr: case BinOp::kAnd: case BinOp::kEq: case BinOp::kNe: case BinOp::kLt: case BinOp::kLe:
      case BinOp::kGt: case BinOp::kGe: case BinOp::kIn: case BinOp::kNotIn: case BinOp::kConcat: break;
    }
    return fail(line, "unsupported operator");
  }

  Result<Value> binary(const Expr& e) {
    TANDEM_ASSIGN(Value a, eval(*e.a));
    if (e.op == BinOp::kAnd) {
      if (!truthy(a)) return a;
      return eval(*e.b);
    }
    if (e.op == BinOp::kOr) {
      if (truthy(a)) return a;
      return eval(*e.b);
    }
    TANDEM_ASSIGN(Value b, eval(*e.b));
    switch (e.op) {
      case BinOp::kEq: return Value(equal(a, b));
      case BinOp::kNe: return Value(!equal(a, b));
      case BinOp::kLt:
      case BinOp::kLe:
      case BinOp::kGt:
      case BinOp::kGe: {
        int c = 0;
        if (a.is_number() && b.is_number()) {
          c = a.as_double() < b.as_double() ? -1 : (a.as_double() > b.as_double() ? 1 : 0);
          if (a.is_int() && b.is_int()) c = a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
        } else if (a.is_string() && b.is_string()) {
          c = a.str().compare(b.str());
          c = c < 0 ? -1 : (c > 0 ? 1 : 0);
        } else {
          return fail(e.line, fmt::format("cannot compare a {} with a {}", type_name(a), type_name(b)));
        }
        if (e.op == BinOp::kLt) return Value(c < 0);
        if (e.op == BinOp::kLe) return Value(c <= 0);
        if (e.op == BinOp::kGt) return Value(c > 0);
        return Value(c >= 0);
      }
      case BinOp::kIn:
      case BinOp::kNotIn: {
        bool found = false;
        if (b.is_string()) {
          if (!a.is_string()) return fail(e.line, fmt::format("'in <string>' needs a string, not a {}", type_name(a)));
          found = b.str().find(a.str()) != std::string::npos;
        } else if (b.is_list()) {
          for (const Value& x : b.list()) found = found || equal(a, x);
        } else if (b.is_dict()) {
          found = a.is_string() && b.dict().find(a.str()) != nullptr;
        } else if (!b.is_undefined()) {
          return fail(e.line, fmt::format("a {} is not a container", type_name(b)));
        }
        return Value(found == (e.op == BinOp::kIn));
      }
      case BinOp::kConcat: {
        auto x = to_text(a);
        auto y = to_text(b);
        if (!x.ok()) return fail(e.line, x.error().message());
        if (!y.ok()) return fail(e.line, y.error().message());
        return Value(x.value() + y.value());
      }
      case BinOp::kOr:
      case BinOp::kAnd:
      case BinOp::kAdd:
      case BinOp::kSub:
      case BinOp::kMul:
      case BinOp::kDiv:
      case BinOp::kFloorDiv:
      case BinOp::kMod:
      case BinOp::kPow: break;
    }
    return arithmetic(e.op, a, b, e.line);
  }

  Result<Value> eval(const Expr& e) {
    if (++steps_ > kMaxSteps) return fail(e.line, fmt::format("the rendering takes over {} steps", kMaxSteps));
    switch (e.kind) {
      case ExprKind::kLiteral: return e.literal;
      case ExprKind::kName: return lookup(e.name);
      case ExprKind::kList: {
        TANDEM_ASSIGN(std::vector<Value> items, eval_args(e));
        return make_list(std::move(items));
      }
      case ExprKind::kDict: {
        Dict d;
        for (size_t i = 0; i < e.keys.size(); ++i) {
          TANDEM_ASSIGN(Value v, eval(*e.args[i]));
          d.items.emplace_back(e.keys[i], std::move(v));
        }
        return make_dict(std::move(d));
      }
      case ExprKind::kAttr: {
        TANDEM_ASSIGN(Value obj, eval(*e.a));
        return attr(obj, e.name, e.line);
      }
      case ExprKind::kItem: {
        TANDEM_ASSIGN(Value obj, eval(*e.a));
        TANDEM_ASSIGN(Value key, eval(*e.b));
        return item(obj, key, e.line);
      }
      case ExprKind::kSlice: return slice(e);
      case ExprKind::kCall: return call(e);
      case ExprKind::kMethod: {
        TANDEM_ASSIGN(Value obj, eval(*e.a));
        TANDEM_ASSIGN(std::vector<Value> args, eval_args(e));
        auto r = call_method(obj, e.name, args);
        if (!r.ok()) return fail(e.line, r.error().message());
        return r;
      }
      case ExprKind::kFilter: return filter(e);
      case ExprKind::kTest: return test(e);
      case ExprKind::kNot: {
        TANDEM_ASSIGN(Value v, eval(*e.a));
        return Value(!truthy(v));
      }
      case ExprKind::kNeg: {
        TANDEM_ASSIGN(Value v, eval(*e.a));
        if (v.is_int()) {
          if (v.as_int() == INT64_MIN) return fail(e.line, "integer overflow");
          return Value(-v.as_int());
        }
        if (v.is_number()) return Value(-v.as_double());
        return fail(e.line, fmt::format("bad operand type for unary -: '{}'", type_name(v)));
      }
      case ExprKind::kBinary: return binary(e);
      case ExprKind::kCondition: {
        TANDEM_ASSIGN(Value c, eval(*e.a));
        if (truthy(c)) return eval(*e.b);
        if (e.c) return eval(*e.c);
        return Value(Undefined{"the else branch"});
      }
    }
    return fail(e.line, "unknown expression");
  }

  std::vector<std::map<std::string, Value, std::less<>>> frames_;
  std::string out_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;  // every namespace() made: emptied at the end
  uint64_t steps_ = 0;
};

}  // namespace
}  // namespace jinja

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  TANDEM_ASSIGN(auto pieces, jinja::lex(source));
  TANDEM_ASSIGN(auto nodes, jinja::parse(pieces));
  ChatTemplate t;
  auto program = std::make_shared<Program>();
  program->nodes = std::move(nodes);
  t.program_ = std::move(program);
  return t;
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context) const {
  jinja::Renderer r(jinja::from_json(context));
  TANDEM_ASSIGN(auto flow, r.run(program_->nodes));
  (void)flow;
  return r.take();
}

}  // namespace tandem::coordinator
