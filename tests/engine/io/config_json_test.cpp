// engine/io strict JSON and typed member reads (json_parse_impl.h, json_fields_impl.h): duplicate keys
// at any depth, the nesting cap, bounded file reads, and the key path in every message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/io/json_fields_impl.h"
#include "engine/io/json_parse_impl.h"
#include "tests/engine/io/safetensors_test_util.h"

namespace tandem::io {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(StrictJson, DuplicateKeysAtAnyDepth) {
  auto nested = parse_json_strict(R"({"a": {"b": 1, "c": [{"d": 1, "d": 2}]}})", "f.json", 16);
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.error().kind(), ErrorKind::kFormat);
  EXPECT_THAT(nested.error().message(), HasSubstr("f.json: duplicate key \"d\" in object \"c\""));
  // The same key in sibling objects is fine.
  auto siblings = parse_json_strict(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})", "f.json", 16);
  ASSERT_TRUE(siblings.ok()) << siblings.error().message();
  EXPECT_EQ((*siblings)["b"]["x"], 2);
}

TEST(StrictJson, NestingCapAndSyntaxErrors) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto too_deep = parse_json_strict(deep, "deep.json", 64);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_THAT(too_deep.error().message(), HasSubstr("deep.json: nesting deeper than 64 levels"));
  auto ok = parse_json_strict("[[[1]]]", "f.json", 3);
  EXPECT_TRUE(ok.ok());
  auto trailing = parse_json_strict("{} x", "f.json", 8);
  ASSERT_FALSE(trailing.ok());
  EXPECT_THAT(trailing.error().message(), HasSubstr("f.json: invalid JSON: parse error"));
  auto overflow = parse_json_strict("[1e999]", "f.json", 8);
  ASSERT_FALSE(overflow.ok());
  EXPECT_THAT(overflow.error().message(), HasSubstr("f.json: invalid JSON"));
}

TEST(StrictJson, DescribeNeverDumpsWholeValues) {
  EXPECT_EQ(describe_json(json::array({1, 2, 3})), "an array of 3 elements");
  EXPECT_EQ(describe_json(json::object()), "an object with 0 keys");
  EXPECT_EQ(describe_json(json("abc")), "\"abc\"");
  EXPECT_EQ(describe_json(json(-3)), "-3");
  EXPECT_EQ(describe_json(json(nullptr)), "null");
  const std::string long_text = describe_json(json(std::string(1000, 'x')));
  EXPECT_THAT(long_text, HasSubstr("(1000 bytes)"));
  EXPECT_LT(long_text.size(), 100u);
}

TEST(StrictJson, ReadFileCapped) {
  testing::TempDir dir;
  testing::write_file(dir.file("big.json"), std::string(100, ' '));
  auto big = read_file_capped(dir.file("big.json"), 99);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.error().message(), HasSubstr("file is 100 bytes, more than the 99 allowed"));
  auto fits = read_file_capped(dir.file("big.json"), 100);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->size(), 100u);
  auto not_file = read_file_capped(dir.path(), 100);
  ASSERT_FALSE(not_file.ok());
  EXPECT_THAT(not_file.error().message(), HasSubstr("not a regular file"));
}

TEST(JsonFields, TypedReadsNameTheKeyPath) {
  const json j = json::parse(R"({"n": 5, "neg": -1, "f": 1.5, "big": 4294967296, "s": "x", "b": true,
                                 "null": null, "o": {"inner": {"k": "v"}}, "list": [1, "two"]})");
  auto f = JsonFields::of(j, JsonLoc("c.json"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->u32("n"), 5u);
  EXPECT_EQ(*f->u32_or("absent", 7), 7u);
  EXPECT_EQ(*f->u32_or("null", 7), 7u) << "null counts as absent";
  EXPECT_FALSE(f->opt_u32("null")->has_value());
  EXPECT_EQ(*f->bool_or("b", false), true);
  EXPECT_EQ(**f->opt_string("s"), "x");
  EXPECT_EQ(*f->f32_or("f", 0.0f, 0.0, 2.0), 1.5f);

  const auto message = [](const auto& r) { return r.ok() ? std::string("ok") : r.error().message(); };
  EXPECT_EQ(message(f->u32("neg")), "c.json: key \"neg\": expected an integer in [0, 4294967295], found -1");
  EXPECT_EQ(message(f->u32("f")), "c.json: key \"f\": expected an integer in [0, 4294967295], found 1.5");
  EXPECT_EQ(message(f->u32("big")), "c.json: key \"big\": expected an integer in [0, 4294967295], found 4294967296");
  EXPECT_EQ(message(f->u32("n", 6, 9)), "c.json: key \"n\": expected an integer in [6, 9], found 5");
  EXPECT_EQ(message(f->u32("absent")), "c.json: key \"absent\": missing (required)");
  EXPECT_EQ(f->u32("absent").error().kind(), ErrorKind::kNotFound);
  EXPECT_EQ(message(f->bool_or("s", false)), "c.json: key \"s\": expected true or false, found \"x\"");
  EXPECT_EQ(message(f->opt_string("n")), "c.json: key \"n\": expected a string, found 5");
  EXPECT_EQ(message(f->opt_number("s", 0.0, 1.0)), "c.json: key \"s\": expected a number in [0, 1], found \"x\"");

  auto o = f->opt_object("o");
  ASSERT_TRUE(o.ok() && o->has_value());
  auto inner = (*o)->opt_object("inner");
  ASSERT_TRUE(inner.ok() && inner->has_value());
  EXPECT_EQ(message((*inner)->u32("k")), "c.json: key \"o.inner.k\": expected an integer in [0, 4294967295], "
                                         "found \"v\"");
  EXPECT_EQ(message(f->opt_object("list")), "c.json: key \"list\": expected an object, found an array of 2 elements");
  EXPECT_EQ(message(json_to_u32(j["list"][1], f->loc("list").index(1))),
            "c.json: key \"list[1]\": expected an integer in [0, 4294967295], found \"two\"");
}

}  // namespace
}  // namespace tandem::io
