// The chat template renderer (coordinator/chat_template.h) against goldens rendered by transformers'
// chat template environment (tests/fixtures/chat/goldens.json, tools/make_chat_template_fixture.py): the
// shipped pylm's ChatML template, Qwen3's, and templates exercising each supported construct, byte for
// byte; raise_exception() as the template's refusal; and templates with unsupported constructs refused at
// parse time, naming the construct and line.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "coordinator/chat_template.h"

namespace tandem::coordinator {
namespace {

using nlohmann::ordered_json;

ordered_json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return ordered_json::parse(s.str());
}

TEST(ChatTemplate, RendersEveryGoldenExactly) {
  const ordered_json goldens = read_json(std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/chat/goldens.json");
  std::map<std::string, ChatTemplate> templates;
  for (auto it = goldens["templates"].begin(); it != goldens["templates"].end(); ++it) {
    auto t = ChatTemplate::parse(it.value().get<std::string>());
    ASSERT_TRUE(t.ok()) << it.key() << ": " << t.error().message();
    templates.emplace(it.key(), std::move(t.value()));
  }
  ASSERT_GE(goldens["cases"].size(), 90u);
  size_t rendered = 0;
  size_t refused = 0;
  for (size_t i = 0; i < goldens["cases"].size(); ++i) {
    const ordered_json& c = goldens["cases"][i];
    const std::string name = c["template"].get<std::string>();
    auto out = templates.at(name).render(c["context"]);
    if (c.contains("error")) {
      ASSERT_FALSE(out.ok()) << "case " << i << " (" << name << ") should be refused";
      EXPECT_EQ(out.error().kind(), ErrorKind::kInvalidArgument);
      EXPECT_EQ(out.error().message(),
                "the chat template refused the conversation: " + c["error"].get<std::string>());
      ++refused;
      continue;
    }
    ASSERT_TRUE(out.ok()) << "case " << i << " (" << name << "): " << out.error().message();
    EXPECT_EQ(out.value(), c["rendered"].get<std::string>()) << "case " << i << " (" << name << ")";
    ++rendered;
  }
  EXPECT_GT(rendered, 80u);
  EXPECT_GT(refused, 0u);
}

TEST(ChatTemplate, ShippedPylmTemplateIsChatMl) {
  const ordered_json config = read_json(std::string(TANDEM_SOURCE_DIR) + "/models/pylm/tokenizer_config.json");
  auto t = ChatTemplate::parse(config["chat_template"].get<std::string>());
  ASSERT_TRUE(t.ok()) << t.error().message();
  ordered_json ctx = {{"messages", {{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "u"}}}},
                      {"add_generation_prompt", true}};
  auto out = t.value().render(ctx);
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(out.value(), "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\n");
}

struct Refusal {
  const char* source;
  const char* message;
};

TEST(ChatTemplate, UnsupportedConstructsAreRefusedAtParse) {
  const Refusal cases[] = {
      {"{% macro f(x) %}{{ x }}{% endmacro %}", "line 1: {% macro %} is not supported"},
      {"a\n{{ messages|selectattr('role', 'equalto', 'user')|list }}", "line 2: the filter 'selectattr' is not supported"},
      {"{% if x is callable %}{% endif %}", "line 1: the test 'callable' is not supported"},
      {"{{ 'a'.format(1) }}", "line 1: the method .format() is not supported"},
      {"{{ strftime_now('%Y') }}", "line 1: the function strftime_now() is not supported"},
      {"{% set a, b = 1, 2 %}", "line 1: {% set a, b = ... %} (unpacking) is not supported"},
      {"{% set x %}block{% endset %}", "line 1: {% set %}...{% endset %} (a block set) is not supported"},
      {"{% for m in messages recursive %}{% endfor %}", "line 1: a recursive for loop is not supported"},
      {"{% raw %}{{ x }}{% endraw %}", "line 1: {% raw %} is not supported"},
      {"{% include 'other.jinja' %}", "line 1: {% include %} is not supported"},
      {"{{ 1 < 2 < 3 }}", "line 1: a chained comparison (a < b < c) is not supported"},
      {"{{ 99999999999999999999 }}", "line 1: an integer literal this large is not supported"},
      {"{{ messages.99999999999999999999 }}", "line 1: an integer literal this large is not supported"},
      {"{{ f(*args) }}", "line 1: the function f() is not supported"},
      {"{% if true %}never closed", "the template ends before {% elif %} or {% else %} or {% endif %}"},
      {"{{ 'open string }}", "line 1: a string literal is never closed"},
      {"{{ x ", "line 1: a tag opened here is never closed with }}"},
      {"{{ x @ y }}", "line 1: unexpected character '@' in a tag"},
      {"{% frobnicate %}", "line 1: {% frobnicate %} is not a statement this renderer knows"},
  };
  for (const Refusal& r : cases) {
    auto t = ChatTemplate::parse(r.source);
    ASSERT_FALSE(t.ok()) << r.source;
    EXPECT_EQ(t.error().kind(), ErrorKind::kUnsupported) << r.source;
    EXPECT_EQ(t.error().message(), r.message) << r.source;
  }
}

TEST(ChatTemplate, WhatItCannotReproduceIsAnErrorNotARendering) {
  const Refusal cases[] = {
      {"{{ messages }}", "chat template line 1: printing a list is not supported (Python's repr); use |tojson"},
      {"{{ 'É'.lower() }}", "chat template line 1: lower() of non-ASCII text is not supported"},
      {"{{ nothing.field }}", "chat template line 1: 'nothing' is undefined (reading .field)"},
      {"{{ nothing + 'x' }}", "chat template line 1: 'nothing' is undefined (in arithmetic)"},
      {"{{ 'a' + 1 }}", "chat template line 1: unsupported operand types for +: 'str' and 'int'"},
      {"{% for i in range(2000) %}{% for j in range(2000) %}{% endfor %}{% endfor %}",
       "chat template line 1: the rendering takes over 1000000 steps"},
  };
  for (const Refusal& r : cases) {
    auto t = ChatTemplate::parse(r.source);
    ASSERT_TRUE(t.ok()) << r.source << ": " << t.error().message();
    auto out = t.value().render(ordered_json{{"messages", ordered_json::array()}});
    ASSERT_FALSE(out.ok()) << r.source << " rendered " << out.value();
    EXPECT_EQ(out.error().message(), r.message) << r.source;
  }
}

TEST(ChatTemplate, LinesAndNewlinesFollowJinja) {
  // \r\n reads as \n and one trailing newline is dropped (keep_trailing_newline=False).
  auto t = ChatTemplate::parse("a\r\nb\rc\n");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value().render(ordered_json::object()).value(), "a\nb\nc");
  auto bad = ChatTemplate::parse("line one\n{% if %}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "line 2: an expression expected at the end of the tag");
}

// A namespace that comes to hold itself (found by fuzz_chat_template as a leak under ASan: a cycle of
// shared pointers) renders as Jinja does, and the rendering frees it (this test runs under the sanitizers).
TEST(ChatTemplate, ANamespaceThatHoldsItselfRendersAndIsFreed) {
  auto t = ChatTemplate::parse(
      "{% set ns = namespace(n=1) %}{% set ns.me = ns %}{% set ns.all = [ns, ns.me] %}{{ ns.me.me.n }}"
      "{{ ns.all[1].n + 1 }}");
  ASSERT_TRUE(t.ok()) << t.error().message();
  auto out = t.value().render(ordered_json::object());
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(out.value(), "12");
}

}  // namespace
}  // namespace tandem::coordinator
