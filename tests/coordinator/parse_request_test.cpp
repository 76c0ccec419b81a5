// Request bodies at the edge (coordinator/parse_request.h): well-formed /v1/score and /v1/decide bodies
// parse to exactly what they say; every malformed one gets the right status, the field at fault and a
// message saying what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "coordinator/parse_request.h"

namespace tandem::coordinator {
namespace {

RequestLimits limits() {
  RequestLimits l;
  l.vocab = 100;
  l.max_sequences = 4;
  l.max_questions = 3;
  l.max_options = 5;
  l.max_request_tokens = 20;
  l.max_sequence_tokens = 12;
  l.max_sequence_markers = 6;
  return l;
}

TEST(ParseScore, WellFormed) {
  auto r = parse_score_request(
      R"({"model": "m", "sequences": [{"ids": [1, 2, 3], "markers": [0, 2], "qtype": "noul"},
                                      {"ids": [], "markers": [], "qtype": 1}]})",
      limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().model, "m");
  ASSERT_EQ(r.value().sequences.size(), 2u);
  EXPECT_EQ(r.value().sequences[0].ids, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(r.value().sequences[0].markers, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(r.value().sequences[0].qtype, 2);
  EXPECT_TRUE(r.value().sequences[1].ids.empty());
  EXPECT_EQ(r.value().sequences[1].qtype, 1);
}

TEST(ParseDecide, WellFormed) {
  auto r = parse_decide_request(
      R"({"state": "a ticket", "questions": [{"id": "want", "qtype": "choice", "question": "what?",
          "options": ["a", "b"]}, {"qtype": 2, "question": "", "options": ["true"]}]})",
      limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r.value().model.has_value());
  EXPECT_EQ(r.value().state, "a ticket");
  ASSERT_EQ(r.value().questions.size(), 2u);
  EXPECT_EQ(r.value().questions[0].id, "want");
  EXPECT_EQ(r.value().questions[0].qtype, 0);
  EXPECT_EQ(r.value().questions[0].options, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.value().questions[1].id, "q1");
  EXPECT_EQ(r.value().questions[1].qtype, 2);
}

struct Case {
  const char* name;
  bool decide;
  std::string body;
  unsigned status;
  std::optional<std::string> param;
  std::string message_part;
};

class Malformed : public ::testing::TestWithParam<Case> {};

TEST_P(Malformed, IsRejectedNamingTheField) {
  const Case& c = GetParam();
  const ApiError e = c.decide ? parse_decide_request(c.body, limits()).error() : parse_score_request(c.body, limits()).error();
  EXPECT_EQ(e.status, c.status) << e.message;
  EXPECT_EQ(e.param, c.param) << e.message;
  EXPECT_NE(e.message.find(c.message_part), std::string::npos) << e.message;
  EXPECT_FALSE(e.type.empty());
}

const std::string kSeq = R"({"ids": [1, 2], "markers": [1], "qtype": "choice"})";
const std::string kQ = R"({"qtype": "choice", "question": "q", "options": ["a"]})";

INSTANTIATE_TEST_SUITE_P(
    Bodies, Malformed,
    ::testing::Values(
        Case{"NotJson", false, "{\"sequences\": [", 400, "sequences[0]", "not valid JSON at sequences[0]"},
        Case{"Empty", false, "", 400, std::nullopt, "not valid JSON"},
        Case{"TrailingGarbage", false, "{} x", 400, std::nullopt, "not valid JSON"},
        Case{"NotAnObject", false, "[1, 2]", 400, std::nullopt, "must be a JSON object, not an array"},
        Case{"TooDeep", false, std::string(40, '[') + std::string(40, ']'), 400, std::nullopt, "deeper than 32"},
        Case{"InvalidUtf8", false, "{\"model\": \"\xff\"}", 400, "model", "not valid JSON at model"},
        // A number a double cannot hold: nlohmann raises out_of_range, not parse_error; still a 400 naming it.
        Case{"NumberOverflowTop", false, "[1e999]", 400, "[0]", "number overflow parsing '1e999'"},
        Case{"NumberOverflow", false, R"({"sequences": [{"ids": [1, 1e999], "markers": [], "qtype": 0}]})", 400,
             "sequences[0].ids[1]", "not valid JSON at sequences[0].ids[1]: number overflow parsing '1e999'"},
        Case{"NumberOverflowDecide", true, R"({"state": "s", "questions": [{"qtype": -1e400, "question": "q"}]})", 400,
             "questions[0].qtype", "number overflow"},
        Case{"BadKeyAfterValue", false, R"({"model": "m", 5: 1})", 400, std::nullopt, "not valid JSON"},
        Case{"UnknownTopField", false, "{\"sequences\": [" + kSeq + "], \"temperature\": 1}", 400, "temperature",
             "unknown field 'temperature'"},
        Case{"NoSequences", false, "{}", 400, "sequences", "sequences is required"},
        Case{"SequencesNotList", false, R"({"sequences": {"ids": []}})", 400, "sequences",
             "sequences must be an array, not an object"},
        Case{"SequencesEmpty", false, R"({"sequences": []})", 400, "sequences", "sequences is empty"},
        Case{"TooManySequences", false, "{\"sequences\": [" + kSeq + "," + kSeq + "," + kSeq + "," + kSeq + "," + kSeq + "]}",
             413, "sequences", "at most 4"},
        Case{"SequenceNotObject", false, R"({"sequences": [7]})", 400, "sequences[0]", "must be an object"},
        Case{"UnknownSequenceField", false, R"({"sequences": [{"ids": [1], "markers": [], "qtype": 0, "mask": 1}]})",
             400, "sequences[0].mask", "unknown field 'sequences[0].mask'"},
        Case{"MissingIds", false, R"({"sequences": [{"markers": [], "qtype": 0}]})", 400, "sequences[0].ids",
             "is required"},
        Case{"IdsNotList", false, R"({"sequences": [{"ids": "1 2", "markers": [], "qtype": 0}]})", 400,
             "sequences[0].ids", "must be an array of integers, not a string"},
        Case{"IdNegative", false, R"({"sequences": [{"ids": [1, -2], "markers": [], "qtype": 0}]})", 400,
             "sequences[0].ids[1]", "-2 is outside the vocabulary of 100 tokens"},
        Case{"IdFraction", false, R"({"sequences": [{"ids": [1.5], "markers": [], "qtype": 0}]})", 400,
             "sequences[0].ids[0]", "must be an integer, not a number with a fraction"},
        Case{"IdOutsideVocab", false, R"({"sequences": [{"ids": [100], "markers": [], "qtype": 0}]})", 400,
             "sequences[0].ids[0]", "100 is outside the vocabulary"},
        Case{"IdHuge", false, R"({"sequences": [{"ids": [18446744073709551615], "markers": [], "qtype": 0}]})", 400,
             "sequences[0].ids[0]", "outside the vocabulary"},
        Case{"MarkerOutside", false, R"({"sequences": [{"ids": [1, 2], "markers": [2], "qtype": 0}]})", 400,
             "sequences[0].markers[0]", "2 is outside the sequence of 2 tokens"},
        Case{"UnknownQtype", false, R"({"sequences": [{"ids": [1], "markers": [], "qtype": "maybe"}]})", 400,
             "sequences[0].qtype", "\"maybe\" is not a question type"},
        Case{"QtypeOutOfRange", false, R"({"sequences": [{"ids": [1], "markers": [], "qtype": 3}]})", 400,
             "sequences[0].qtype", "3 is not a question type"},
        Case{"SequenceTooLong", false, R"({"sequences": [{"ids": [1,1,1,1,1,1,1,1,1,1,1,1,1], "markers": [], "qtype": 0}]})",
             422, "sequences[0].ids", "13 tokens; a sequence may have at most 12"},
        Case{"TooManyMarkers", false, R"({"sequences": [{"ids": [1,1,1,1,1,1,1], "markers": [0,1,2,3,4,5,6], "qtype": 0}]})",
             422, "sequences[0].markers", "7 markers; a sequence may have at most 6"},
        Case{"RequestTooManyTokens", false,
             R"({"sequences": [{"ids": [1,1,1,1,1,1,1,1,1,1,1], "markers": [], "qtype": 0},
                               {"ids": [1,1,1,1,1,1,1,1,1,1,1], "markers": [], "qtype": 0}]})",
             413, "sequences", "22 tokens; a request may have at most 20"},
        Case{"ModelNotString", false, "{\"model\": 5, \"sequences\": [" + kSeq + "]}", 400, "model",
             "model must be a string, not an integer"},
        Case{"NoState", true, "{\"questions\": [" + kQ + "]}", 400, "state", "state is required"},
        Case{"StateNotString", true, "{\"state\": {\"a\": 1}, \"questions\": [" + kQ + "]}", 400, "state",
             "state must be a string, not an object"},
        Case{"NoQuestions", true, R"({"state": "s"})", 400, "questions", "questions is required"},
        Case{"QuestionsEmpty", true, R"({"state": "s", "questions": []})", 400, "questions", "questions is empty"},
        Case{"TooManyQuestions", true, "{\"state\": \"s\", \"questions\": [" + kQ + "," + kQ + "," + kQ + "," + kQ + "]}",
             413, "questions", "at most 3"},
        Case{"UnknownDecideField", true, "{\"state\": \"s\", \"questions\": [" + kQ + "], \"stream\": true}", 400,
             "stream", "unknown field 'stream'"},
        Case{"UnknownQuestionField", true,
             R"({"state": "s", "questions": [{"qtype": "choice", "question": "q", "options": ["a"], "labels": 1}]})",
             400, "questions[0].labels", "unknown field"},
        Case{"QuestionUnknownQtype", true,
             R"({"state": "s", "questions": [{"qtype": "rank", "question": "q", "options": ["a"]}]})", 400,
             "questions[0].qtype", "\"rank\" is not a question type; allowed: \"choice\", \"score\", \"noul\""},
        Case{"QuestionNoOptions", true, R"({"state": "s", "questions": [{"qtype": "choice", "question": "q"}]})", 400,
             "questions[0].options", "is required"},
        Case{"QuestionEmptyOptions", true,
             R"({"state": "s", "questions": [{"qtype": "choice", "question": "q", "options": []}]})", 400,
             "questions[0].options", "needs at least one option"},
        Case{"OptionNotString", true,
             R"({"state": "s", "questions": [{"qtype": "choice", "question": "q", "options": ["a", 2]}]})", 400,
             "questions[0].options[1]", "must be a string, not an integer"},
        Case{"TooManyOptions", true,
             R"({"state": "s", "questions": [{"qtype": "choice", "question": "q", "options": ["a","b","c","d","e","f"]}]})",
             413, "questions[0].options", "6 options; at most 5"},
        Case{"QuestionNotString", true,
             R"({"state": "s", "questions": [{"qtype": "choice", "question": ["q"], "options": ["a"]}]})", 400,
             "questions[0].question", "must be a string, not an array"},
        Case{"IdNotString", true,
             R"({"state": "s", "questions": [{"id": 3, "qtype": "choice", "question": "q", "options": ["a"]}]})", 400,
             "questions[0].id", "must be a string, not an integer"}),
    [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

// The checkpoint's own length limit comes before the batch's, and the message names it.
TEST(ParseScore, LongerThanTheModelTakesIs422NamingTheLimit) {
  RequestLimits l = limits();
  l.max_model_tokens = 10;
  l.model_limit = "max_len 10 in rl_agent_config.json, max_position_embeddings 1024 in encoder/config.json";
  auto ok = parse_score_request(R"({"sequences": [{"ids": [1,1,1,1,1,1,1,1,1,1], "markers": [], "qtype": 0}]})", l);
  EXPECT_TRUE(ok.ok()) << ok.error().message;
  auto r = parse_score_request(R"({"sequences": [{"ids": [1,1,1,1,1,1,1,1,1,1,1], "markers": [], "qtype": 0}]})", l);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 422u);
  EXPECT_EQ(r.error().param, "sequences[0].ids");
  EXPECT_EQ(r.error().message, "sequences[0].ids has 11 tokens; the model takes at most 10 (max_len 10 in "
                               "rl_agent_config.json, max_position_embeddings 1024 in encoder/config.json)");
}

TEST(ParseQuestionType, NamesAndIndexes) {
  EXPECT_EQ(question_type("choice"), 0);
  EXPECT_EQ(question_type("score"), 1);
  EXPECT_EQ(question_type("noul"), 2);
  EXPECT_EQ(question_type("Choice"), -1);
}

TEST(ApiErrorJson, HasMessageTypeAndParam) {
  EXPECT_EQ(error_json(bad_request("bad \"x\"", "a.b")),
            R"({"error":{"message":"bad \"x\"","param":"a.b","type":"invalid_request_error"}})");
  EXPECT_EQ(error_json(unavailable("down")), R"({"error":{"message":"down","param":null,"type":"unavailable"}})");
}

}  // namespace
}  // namespace tandem::coordinator
