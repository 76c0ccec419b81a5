// Inside the chat template renderer (chat_template.h): the values a template computes with (Python's, as
// Jinja2 sees them: undefined, None, bool, int, float, str, list, dict, namespace), the syntax tree the
// parser builds, and the lexer's tokens. Not for use outside chat_template_*.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "engine/core/result.h"

namespace tandem::coordinator::jinja {

struct Value;
using List = std::vector<Value>;
// A Python dict with string keys, in insertion order (what tojson and iteration see).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
};
// namespace(): the one mutable object a template has (`set ns.x = ...` crosses loop scopes).
struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;
  Value* find(std::string_view key);
};
struct Undefined {
  std::string name;  // what was looked up, for the message when it is used
};
struct None {};

struct Value {
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, std::shared_ptr<Namespace>>
      v;

  Value() = default;
  template <typename T>
    requires(!std::is_same_v<std::decay_t<T>, Value>)
  Value(T x) : v(std::move(x)) {}  // NOLINT: implicit by design, as Python values are
  Value(const char* s) : v(std::string(s)) {}  // NOLINT
  Value(int x) : v(int64_t{x}) {}  // NOLINT
  Value(size_t x) : v(static_cast<int64_t>(x)) {}  // NOLINT

  bool is_undefined() const { return v.index() == 0; }
  bool is_none() const { return v.index() == 1; }
  bool is_bool() const { return v.index() == 2; }
  bool is_int() const { return v.index() == 3 || v.index() == 2; }  // Python: bool is an int
  bool is_number() const { return v.index() >= 2 && v.index() <= 4; }
  bool is_string() const { return v.index() == 5; }
  bool is_list() const { return v.index() == 6; }
  bool is_dict() const { return v.index() == 7; }
  bool is_namespace() const { return v.index() == 8; }
  const std::string& str() const { return std::get<5>(v); }
  const List& list() const { return *std::get<6>(v); }
  const Dict& dict() const { return *std::get<7>(v); }
  int64_t as_int() const { return v.index() == 2 ? int64_t{std::get<2>(v)} : std::get<3>(v); }
  double as_double() const { return v.index() == 4 ? std::get<4>(v) : static_cast<double>(as_int()); }
};

Value make_list(List items);
Value make_dict(Dict dict);
const char* type_name(const Value& v);  // Python's: "str", "list", "dict", "NoneType", "undefined", ...

// Python semantics the evaluator shares.
bool truthy(const Value& v);
bool equal(const Value& a, const Value& b);
// str(v) as {{ v }} prints it; lists, dicts and namespaces are refused (their repr is not rendered).
Result<std::string> to_text(const Value& v);
// HF's tojson filter: json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: none).
Result<std::string> to_json(const Value& v, int indent);
// Code points of a UTF-8 string (Python's len and indices count them).
std::vector<size_t> code_point_offsets(std::string_view s);
// The code point at byte `pos` (U+FFFD for a malformed sequence); `len` gets its byte length.
char32_t decode_utf8(std::string_view s, size_t pos, size_t* len);
bool is_python_space(char32_t c);
// A method of a str, dict or list value (`s.split('x')`), Python's behaviour; `name` is checked by the
// parser against kMethods.
Result<Value> call_method(const Value& self, std::string_view name, const std::vector<Value>& args);

// What the parser accepts by name; everything else is refused when the template is loaded.
inline constexpr std::string_view kFilters[] = {"length", "count", "first", "last", "trim", "tojson", "lower",
                                                "upper", "join", "default", "d", "string", "list", "reverse",
                                                "replace", "int", "items", "safe"};
inline constexpr std::string_view kTests[] = {"defined", "undefined", "none", "string", "number", "integer",
                                              "float", "boolean", "mapping", "iterable", "sequence", "true",
                                              "false", "even", "odd", "equalto", "eq", "ne", "divisibleby"};
inline constexpr std::string_view kMethods[] = {"startswith", "endswith", "split", "strip", "lstrip", "rstrip",
                                                "lower", "upper", "replace", "get", "items", "keys", "values"};
inline constexpr std::string_view kFunctions[] = {"namespace", "raise_exception", "range"};

// Tokens inside {{ }} and {% %}.
enum class Tok : uint8_t { kName, kString, kInt, kFloat, kOp, kEnd };
struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // the name, the operator, the unescaped string, the number's digits
  int line = 1;
};

// The template's pieces after whitespace control: text to copy, or a tag's tokens.
enum class PieceKind : uint8_t { kText, kOutput, kStatement };
struct Piece {
  PieceKind kind = PieceKind::kText;
  std::string text;           // kText
  std::vector<Token> tokens;  // kOutput, kStatement (without the delimiters)
  int line = 1;
};
// Jinja2's lexer as HF configures it: trim_blocks, lstrip_blocks, "-" and "+" markers, comments, one
// trailing newline dropped, \r\n and \r read as \n.
Result<std::vector<Piece>> lex(std::string_view source);

enum class ExprKind : uint8_t {
  kLiteral, kName, kList, kDict, kAttr, kItem, kSlice, kCall, kMethod, kFilter, kTest, kNot, kNeg, kBinary,
  kCondition
};
enum class BinOp : uint8_t { kOr, kAnd, kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn, kAdd, kSub, kConcat, kMul,
                             kDiv, kFloorDiv, kMod, kPow };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 1;
  Value literal;      // kLiteral
  std::string name;   // kName, kAttr, kMethod, kFilter, kTest, kCall (the function)
  BinOp op = BinOp::kOr;
  bool negated = false;          // kTest: "is not"
  ExprPtr a, b, c;               // operands; kSlice: a[b:c] with d the step; kCondition: b if a else c
  ExprPtr d;
  std::vector<ExprPtr> args;     // kList items, kDict values, call/filter/test/method arguments
  std::vector<std::string> keys;   // kDict keys
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

enum class NodeKind : uint8_t { kText, kOutput, kIf, kFor, kSet, kBreak, kContinue };
struct Node {
  NodeKind kind = NodeKind::kText;
  int line = 1;
  std::string text;                   // kText
  ExprPtr expr;                       // kOutput, kSet value, kFor iterable
  ExprPtr filter;                     // kFor: `for x in xs if cond`
  std::vector<std::string> targets;   // kFor loop variables; kSet: the name (and attribute in `attr`)
  std::string attr;                   // kSet on a namespace: `set ns.attr = ...`
  std::vector<std::pair<ExprPtr, std::vector<Node>>> branches;  // kIf: (condition or null for else, body)
  std::vector<Node> body, else_body;  // kFor
};

Result<std::vector<Node>> parse(const std::vector<Piece>& pieces);

}  // namespace tandem::coordinator::jinja
