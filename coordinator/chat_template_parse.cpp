// The chat template parser (chat_template_impl.h): Jinja2's grammar and operator precedence for the
// statements and expressions HF chat templates use. Whatever else a template holds (macros, blocks,
// unknown filters, tests, methods or functions) is refused here, naming it and its line, so no template
// is ever rendered with a construct this renderer does not implement.
#include <algorithm>
#include <optional>

#include "coordinator/chat_template_impl.h"

namespace tandem::coordinator::jinja {
namespace {

template <size_t N>
bool listed(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Error unsupported(int line, std::string_view what) {
  return Error::make(ErrorKind::kUnsupported, "line {}: {} is not supported", line, what);
}

ExprPtr node(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Expressions of one tag, by recursive descent in Jinja2's order (parser.py): condexpr, or, and, not,
// compare, + -, ~, * / // %, **, unary, primary with postfix, filters and tests.
class ExprParser {
 public:
  ExprParser(const std::vector<Token>& tokens, size_t start, int line) : t_(tokens), pos_(start), line_(line) {}

  bool at_end() const { return pos_ >= t_.size(); }
  const Token* peek(size_t ahead = 0) const { return pos_ + ahead < t_.size() ? &t_[pos_ + ahead] : nullptr; }
  bool is_name(std::string_view n, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    return t && t->kind == Tok::kName && t->text == n;
  }
  bool is_op(std::string_view o, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    return t && t->kind == Tok::kOp && t->text == o;
  }
  int line() const { return at_end() ? line_ : t_[pos_].line; }
  Status expect_op(std::string_view o) {
    if (!is_op(o)) return fail(fmt::format("'{}' expected", o));
    ++pos_;
    return ok_status();
  }
  Result<std::string> expect_name() {
    const Token* t = peek();
    if (!t || t->kind != Tok::kName) return fail("a name expected");
    ++pos_;
    return t->text;
  }
  Error fail(std::string_view what) const {
    const std::string near = at_end() ? std::string("the end of the tag") : "'" + t_[pos_].text + "'";
    return Error::make(ErrorKind::kUnsupported, "line {}: {} at {}", line(), what, near);
  }
  Status expect_end() {
    if (!at_end()) return fail("unexpected token");
    return ok_status();
  }

  Result<ExprPtr> expression(bool with_condexpr = true) {
    if (!with_condexpr) return parse_or();
    TANDEM_ASSIGN(ExprPtr e, parse_or());
    while (is_name("if")) {
      const int l = line();
      ++pos_;
      auto c = node(ExprKind::kCondition, l);
      TANDEM_ASSIGN(c->a, parse_or());
      c->b = std::move(e);
      if (is_name("else")) {
        ++pos_;
        TANDEM_ASSIGN(c->c, expression());
      }
      e = std::move(c);
    }
    return e;
  }

 private:
  Result<ExprPtr> binary(BinOp op, ExprPtr a, ExprPtr b, int l) {
    auto e = node(ExprKind::kBinary, l);
    e->op = op;
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }
  Result<ExprPtr> parse_or() {
    TANDEM_ASSIGN(ExprPtr e, parse_and());
    while (is_name("or")) {
      const int l = line();
      ++pos_;
      TANDEM_ASSIGN(ExprPtr r, parse_and());
      TANDEM_ASSIGN(e, binary(BinOp::kOr, std::move(e), std::move(r), l));
    }
    return e;
  }
  Result<ExprPtr> parse_and() {
    TANDEM_ASSIGN(ExprPtr e, parse_not());
    while (is_name("and")) {
      const int l = line();
      ++pos_;
      TANDEM_ASSIGN(ExprPtr r, parse_not());
      TANDEM_ASSIGN(e, binary(BinOp::kAnd, std::move(e), std::move(r), l));
    }
    return e;
  }
  Result<ExprPtr> parse_not() {
    if (is_name("not")) {
      auto e = node(ExprKind::kNot, line());
      ++pos_;
      TANDEM_ASSIGN(e->a, parse_not());
      return e;
    }
    return parse_compare();
  }
  Result<ExprPtr> parse_compare() {
    TANDEM_ASSIGN(ExprPtr e, parse_math1());
    int compared = 0;
    for (;;) {
      std::optional<BinOp> op;
      size_t width = 1;
      const Token* t = peek();
      if (t && t->kind == Tok::kOp) {
        if (t->text == "==") op = BinOp::kEq;
        if (t->text == "!=") op = BinOp::kNe;
        if (t->text == "<") op = BinOp::kLt;
        if (t->text == "<=") op = BinOp::kLe;
        if (t->text == ">") op = BinOp::kGt;
        if (t->text == ">=") op = BinOp::kGe;
      } else if (is_name("in")) {
        op = BinOp::kIn;
      } else if (is_name("not") && is_name("in", 1)) {
        op = BinOp::kNotIn;
        width = 2;
      }
      if (!op) return e;
      if (++compared > 1) return unsupported(line(), "a chained comparison (a < b < c)");
      const int l = line();
      pos_ += width;
      TANDEM_ASSIGN(ExprPtr r, parse_math1());
      TANDEM_ASSIGN(e, binary(*op, std::move(e), std::move(r), l));
    }
  }
  Result<ExprPtr> parse_math1() {
    TANDEM_ASSIGN(ExprPtr e, parse_concat());
    while (is_op("+") || is_op("-")) {
      const BinOp op = is_op("+") ? BinOp::kAdd : BinOp::kSub;
      const int l = line();
      ++pos_;
      TANDEM_ASSIGN(ExprPtr r, parse_concat());
      TANDEM_ASSIGN(e, binary(op, std::move(e), std::move(r), l));
    }
    return e;
  }
  Result<ExprPtr> parse_concat() {
    TANDEM_ASSIGN(ExprPtr e, parse_math2());
    while (is_op("~")) {
      const int l = line();
      ++pos_;
      TANDEM_ASSIGN(ExprPtr r, parse_math2());
      TANDEM_ASSIGN(e, binary(BinOp::kConcat, std::move(e), std::move(r), l));
    }
    return e;
  }
  Result<ExprPtr> parse_math2() {
    TANDEM_ASSIGN(ExprPtr e, parse_pow());
    for (;;) {
      std::optional<BinOp> op;
      if (is_op("*")) op = BinOp::kMul;
      if (is_op("/")) op = BinOp::kDiv;
      if (is_op("//")) op = BinOp::kFloorDiv;
      if (is_op("%")) op = BinOp::kMod;
      if (!op) return e;
      const int l = line();
      ++pos_;
      TANDEM_ASSIGN(ExprPtr r, parse_pow());
      TANDEM_ASSIGN(e, binary(*op, std::move(e), std::move(r), l));
    }
  }
  Result<ExprPtr> parse_pow() {
    TANDEM_ASSIGN(ExprPtr e, parse_unary(true));
    while (is_op("**")) {
      const int l = line();
      ++pos_;
      TANDEM_ASSIGN(ExprPtr r, parse_unary(true));
      TANDEM_ASSIGN(e, binary(BinOp::kPow, std::move(e), std::move(r), l));
    }
    return e;
  }
  Result<ExprPtr> parse_unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-")) {
      e = node(ExprKind::kNeg, line());
      ++pos_;
      TANDEM_ASSIGN(e->a, parse_unary(false));
    } else if (is_op("+")) {
      ++pos_;
      TANDEM_ASSIGN(e, parse_unary(false));
    } else {
      TANDEM_ASSIGN(e, parse_primary());
    }
    TANDEM_ASSIGN(e, parse_postfix(std::move(e)));
    if (with_filter) {
      TANDEM_ASSIGN(e, parse_filters(std::move(e)));
    }
    return e;
  }

  Result<ExprPtr> parse_primary() {
    const Token* t = peek();
    if (!t) return fail("an expression expected");
    const int l = t->line;
    if (t->kind == Tok::kName) {
      ++pos_;
      auto e = node(ExprKind::kLiteral, l);
      if (t->text == "true" || t->text == "True") e->literal = true;
      else if (t->text == "false" || t->text == "False") e->literal = false;
      else if (t->text == "none" || t->text == "None") e->literal = None{};
      else {
        e->kind = ExprKind::kName;
        e->name = t->text;
      }
      return e;
    }
    if (t->kind == Tok::kString) {
      auto e = node(ExprKind::kLiteral, l);
      std::string s;
      while (peek() && peek()->kind == Tok::kString) s += t_[pos_++].text;  // adjacent literals join
      e->literal = std::move(s);
      return e;
    }
    if (t->kind == Tok::kInt || t->kind == Tok::kFloat) {
      ++pos_;
      auto e = node(ExprKind::kLiteral, l);
      if (t->kind == Tok::kInt) {
        if (t->text.size() > 18) return unsupported(l, "an integer literal this large");
        e->literal = static_cast<int64_t>(std::stoll(t->text));
      } else {
        e->literal = std::strtod(t->text.c_str(), nullptr);
      }
      return e;
    }
    if (is_op("(")) {
      ++pos_;
      if (is_op(")")) {
        ++pos_;
        auto e = node(ExprKind::kList, l);  // an empty tuple
        return e;
      }
      TANDEM_ASSIGN(ExprPtr first, expression());
      if (is_op(")")) {
        ++pos_;
        return first;
      }
      auto e = node(ExprKind::kList, l);  // a tuple, which behaves as a list for what is supported
      e->args.push_back(std::move(first));
      while (is_op(",")) {
        ++pos_;
        if (is_op(")")) break;
        TANDEM_ASSIGN(ExprPtr item, expression());
        e->args.push_back(std::move(item));
      }
      TANDEM_TRY(expect_op(")"));
      return e;
    }
    if (is_op("[")) {
      ++pos_;
      auto e = node(ExprKind::kList, l);
      while (!is_op("]")) {
        TANDEM_ASSIGN(ExprPtr item, expression());
        e->args.push_back(std::move(item));
        if (!is_op(",")) break;
        ++pos_;
      }
      TANDEM_TRY(expect_op("]"));
      return e;
    }
    if (is_op("{")) {
      ++pos_;
      auto e = node(ExprKind::kDict, l);
      while (!is_op("}")) {
        const Token* k = peek();
        if (!k || k->kind != Tok::kString) return unsupported(line(), "a dict literal key that is not a string literal");
        e->keys.push_back(k->text);
        ++pos_;
        TANDEM_TRY(expect_op(":"));
        TANDEM_ASSIGN(ExprPtr v, expression());
        e->args.push_back(std::move(v));
        if (!is_op(",")) break;
        ++pos_;
      }
      TANDEM_TRY(expect_op("}"));
      return e;
    }
    return fail("an expression expected");
  }

  Result<ExprPtr> parse_postfix(ExprPtr e) {
    for (;;) {
      const int l = line();
      if (is_op(".")) {
        ++pos_;
        const Token* t = peek();
        if (t && t->kind == Tok::kInt) {  // x.0 is x[0]
          if (t->text.size() > 18) return unsupported(l, "an integer literal this large");
          auto item = node(ExprKind::kItem, l);
          item->a = std::move(e);
          item->b = node(ExprKind::kLiteral, l);
          item->b->literal = static_cast<int64_t>(std::stoll(t->text));
          ++pos_;
          e = std::move(item);
          continue;
        }
        TANDEM_ASSIGN(std::string name, expect_name());
        auto attr = node(ExprKind::kAttr, l);
        attr->a = std::move(e);
        attr->name = std::move(name);
        e = std::move(attr);
      } else if (is_op("[")) {
        ++pos_;
        TANDEM_ASSIGN(e, parse_subscript(std::move(e), l));
      } else if (is_op("(")) {
        TANDEM_ASSIGN(e, parse_call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> parse_subscript(ExprPtr target, int l) {
    ExprPtr parts[3];
    int colons = 0;
    for (;;) {
      if (is_op("]")) break;
      if (is_op(":")) {
        if (++colons > 2) return fail("a slice has at most two colons");
        ++pos_;
        continue;
      }
      if (parts[colons]) return fail("':' or ']' expected");
      TANDEM_ASSIGN(parts[colons], expression());
    }
    TANDEM_TRY(expect_op("]"));
    if (colons == 0) {
      if (!parts[0]) return fail("an index expected");
      auto e = node(ExprKind::kItem, l);
      e->a = std::move(target);
      e->b = std::move(parts[0]);
      return e;
    }
    auto e = node(ExprKind::kSlice, l);
    e->a = std::move(target);
    e->b = std::move(parts[0]);
    e->c = std::move(parts[1]);
    e->d = std::move(parts[2]);
    return e;
  }

  Status parse_args(Expr& e) {
    TANDEM_TRY(expect_op("("));
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) return unsupported(line(), "*args and **kwargs in a call");
      if (peek() && peek()->kind == Tok::kName && is_op("=", 1)) {
        std::string key = peek()->text;
        pos_ += 2;
        TANDEM_ASSIGN(ExprPtr v, expression());
        e.kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!e.kwargs.empty()) return fail("a positional argument after a keyword argument");
        TANDEM_ASSIGN(ExprPtr v, expression());
        e.args.push_back(std::move(v));
      }
      if (!is_op(",")) break;
      ++pos_;
    }
    return expect_op(")");
  }

  Result<ExprPtr> parse_call(ExprPtr callee) {
    const int l = line();
    ExprPtr e;
    if (callee->kind == ExprKind::kAttr) {
      if (!listed(kMethods, callee->name)) return unsupported(l, fmt::format("the method .{}()", callee->name));
      e = node(ExprKind::kMethod, l);
      e->name = callee->name;
      e->a = std::move(callee->a);
    } else if (callee->kind == ExprKind::kName) {
      if (!listed(kFunctions, callee->name)) return unsupported(l, fmt::format("the function {}()", callee->name));
      e = node(ExprKind::kCall, l);
      e->name = callee->name;
    } else {
      return unsupported(l, "calling the result of an expression");
    }
    TANDEM_TRY(parse_args(*e));
    if (e->kind == ExprKind::kMethod && !e->kwargs.empty()) {
      return unsupported(l, fmt::format("keyword arguments to .{}()", e->name));
    }
    return e;
  }

  Result<ExprPtr> parse_filters(ExprPtr e) {
    for (;;) {
      const int l = line();
      if (is_op("|")) {
        ++pos_;
        TANDEM_ASSIGN(std::string name, expect_name());
        if (!listed(kFilters, name)) return unsupported(l, fmt::format("the filter '{}'", name));
        auto f = node(ExprKind::kFilter, l);
        f->name = std::move(name);
        f->a = std::move(e);
        if (is_op("(")) TANDEM_TRY(parse_args(*f));
        e = std::move(f);
      } else if (is_name("is")) {
        ++pos_;
        auto t = node(ExprKind::kTest, l);
        if (is_name("not")) {
          t->negated = true;
          ++pos_;
        }
        TANDEM_ASSIGN(std::string name, expect_name());
        if (!listed(kTests, name)) return unsupported(l, fmt::format("the test '{}'", name));
        t->name = std::move(name);
        t->a = std::move(e);
        const Token* n = peek();
        if (is_op("(")) {
          TANDEM_TRY(parse_args(*t));
        } else if (n && !is_name("else") && !is_name("or") && !is_name("and") &&
                   (n->kind == Tok::kName || n->kind == Tok::kString || n->kind == Tok::kInt ||
                    n->kind == Tok::kFloat || is_op("[") || is_op("{"))) {
          TANDEM_ASSIGN(ExprPtr arg, parse_primary());
          TANDEM_ASSIGN(arg, parse_postfix(std::move(arg)));
          t->args.push_back(std::move(arg));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        TANDEM_ASSIGN(e, parse_call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t pos_;
  int line_;
};

constexpr std::string_view kRefusedStatements[] = {"macro", "call", "filter", "include", "import", "from", "extends",
                                                   "block", "with", "autoescape", "do", "trans", "pluralize"};

// Statements over the pieces: bodies up to one of the closing keywords.
class BlockParser {
 public:
  explicit BlockParser(const std::vector<Piece>& pieces) : p_(pieces) {}

  // Parses until a statement whose keyword is in `ends` (returned, its piece at `pos_`), or the end.
  Result<std::string> body(std::vector<Node>& out, std::initializer_list<std::string_view> ends) {
    while (pos_ < p_.size()) {
      const Piece& piece = p_[pos_];
      if (piece.kind == PieceKind::kText) {
        Node n;
        n.kind = NodeKind::kText;
        n.line = piece.line;
        n.text = piece.text;
        out.push_back(std::move(n));
        ++pos_;
        continue;
      }
      if (piece.kind == PieceKind::kOutput) {
        ExprParser ep(piece.tokens, 0, piece.line);
        Node n;
        n.kind = NodeKind::kOutput;
        n.line = piece.line;
        TANDEM_ASSIGN(n.expr, ep.expression());
        TANDEM_TRY(ep.expect_end());
        out.push_back(std::move(n));
        ++pos_;
        continue;
      }
      if (piece.tokens.empty() || piece.tokens[0].kind != Tok::kName) {
        return Error::make(ErrorKind::kUnsupported, "line {}: a statement tag without a keyword", piece.line);
      }
      const std::string& kw = piece.tokens[0].text;
      if (std::find(ends.begin(), ends.end(), kw) != ends.end()) return kw;
      TANDEM_TRY(statement(out, kw, piece));
    }
    if (ends.size() > 0) {
      std::string list;
      for (std::string_view e : ends) list += (list.empty() ? "" : " or ") + fmt::format("{{% {} %}}", e);
      return Error::make(ErrorKind::kUnsupported, "the template ends before {}", list);
    }
    return std::string();
  }

 private:
  Status statement(std::vector<Node>& out, const std::string& kw, const Piece& piece) {
    const int l = piece.line;
    ExprParser ep(piece.tokens, 1, l);
    Node n;
    n.line = l;
    if (kw == "if") {
      n.kind = NodeKind::kIf;
      TANDEM_ASSIGN(ExprPtr cond, ep.expression());
      TANDEM_TRY(ep.expect_end());
      ++pos_;
      for (;;) {
        std::vector<Node> branch;
        TANDEM_ASSIGN(std::string end, body(branch, {"elif", "else", "endif"}));
        n.branches.emplace_back(std::move(cond), std::move(branch));
        const Piece& closer = p_[pos_];
        ExprParser cp(closer.tokens, 1, closer.line);
        ++pos_;
        if (end == "endif") {
          TANDEM_TRY(cp.expect_end());
          break;
        }
        if (end == "elif") {
          TANDEM_ASSIGN(cond, cp.expression());
        } else {
          cond = nullptr;
        }
        TANDEM_TRY(cp.expect_end());
        if (end == "else") {
          std::vector<Node> last;
          TANDEM_ASSIGN(std::string e2, body(last, {"endif"}));
          (void)e2;
          n.branches.emplace_back(nullptr, std::move(last));
          ++pos_;
          break;
        }
      }
    } else if (kw == "for") {
      n.kind = NodeKind::kFor;
      for (;;) {
        TANDEM_ASSIGN(std::string target, ep.expect_name());
        n.targets.push_back(std::move(target));
        if (!ep.is_op(",")) break;
        ep.expect_op(",").ok();
      }
      if (!ep.is_name("in")) return ep.fail("'in' expected");
      ep.expect_name().ok();
      TANDEM_ASSIGN(n.expr, ep.expression(false));
      if (ep.is_name("if")) {
        ep.expect_name().ok();
        TANDEM_ASSIGN(n.filter, ep.expression(false));
      }
      if (ep.is_name("recursive")) return unsupported(l, "a recursive for loop");
      TANDEM_TRY(ep.expect_end());
      ++pos_;
      TANDEM_ASSIGN(std::string end, body(n.body, {"else", "endfor"}));
      ++pos_;
      if (end == "else") {
        TANDEM_ASSIGN(std::string e2, body(n.else_body, {"endfor"}));
        (void)e2;
        ++pos_;
      }
    } else if (kw == "set") {
      n.kind = NodeKind::kSet;
      TANDEM_ASSIGN(std::string target, ep.expect_name());
      n.targets.push_back(std::move(target));
      if (ep.is_op(".")) {
        ep.expect_op(".").ok();
        TANDEM_ASSIGN(n.attr, ep.expect_name());
      }
      if (ep.is_op(",")) return unsupported(l, "{% set a, b = ... %} (unpacking)");
      if (!ep.is_op("=")) return unsupported(l, "{% set %}...{% endset %} (a block set)");
      ep.expect_op("=").ok();
      TANDEM_ASSIGN(n.expr, ep.expression());
      TANDEM_TRY(ep.expect_end());
      ++pos_;
    } else if (kw == "break" || kw == "continue") {
      n.kind = kw == "break" ? NodeKind::kBreak : NodeKind::kContinue;
      TANDEM_TRY(ep.expect_end());
      ++pos_;
    } else if (kw == "generation") {
      // HF's AssistantTracker: {% generation %} marks assistant text for masks and renders its body.
      TANDEM_TRY(ep.expect_end());
      ++pos_;
      TANDEM_ASSIGN(std::string end, body(out, {"endgeneration"}));
      (void)end;
      ++pos_;
      return ok_status();
    } else if (std::find(std::begin(kRefusedStatements), std::end(kRefusedStatements), kw) !=
               std::end(kRefusedStatements)) {
      return unsupported(l, fmt::format("{{% {} %}}", kw));
    } else {
      return Error::make(ErrorKind::kUnsupported, "line {}: {{% {} %}} is not a statement this renderer knows", l, kw);
    }
    out.push_back(std::move(n));
    return ok_status();
  }

  const std::vector<Piece>& p_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::vector<Node>> parse(const std::vector<Piece>& pieces) {
  BlockParser parser(pieces);
  std::vector<Node> out;
  TANDEM_ASSIGN(std::string end, parser.body(out, {}));
  (void)end;
  return out;
}

}  // namespace tandem::coordinator::jinja
