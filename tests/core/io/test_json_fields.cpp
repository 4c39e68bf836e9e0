// Field tables (core/io/json_fields.hpp): one description per field, written and read with it.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/io/json_fields.hpp"
#include "core/util/error.hpp"

using namespace gs;
using namespace gs::json_fields;

namespace {

struct Inner {
  int id = -1;
  std::string name;
};
struct Outer {
  double ms = 0, median = 0;
  std::optional<double> power;
  int64_t count = 0;
  bool flagged = false;
  std::string note;
  std::optional<Inner> inner;
  std::vector<Inner> rows;
};

const Fields<Inner>& inner_fields() {
  static const Fields<Inner> t = {
      integer<Inner>("id", [](auto& x) -> auto& { return x.id; }),
      text<Inner>("name", [](auto& x) -> auto& { return x.name; }),
  };
  return t;
}

const Fields<Outer>& outer_fields() {
  static const Fields<Outer> t = {
      number<Outer>("ms", [](auto& x) -> auto& { return x.ms; }, kTimeMs),
      number<Outer>("median", [](auto& x) -> auto& { return x.median; }, kTimeMs, [](const Outer& x) { return x.ms; }),
      number<Outer>("power", [](auto& x) -> auto& { return x.power; }, {0, 1000, " W"}),
      integer<Outer>("count", [](auto& x) -> auto& { return x.count; }),
      flag<Outer>("flagged", [](auto& x) -> auto& { return x.flagged; }, [](const Outer& x) { return x.flagged; }),
      text<Outer>("note", [](auto& x) -> auto& { return x.note; }, [](const Outer& x) { return !x.note.empty(); }, 8),
      object<Outer>("inner", [](auto& x) -> auto& { return x.inner; }, inner_fields()),
      list<Outer>("rows", [](auto& x) -> auto& { return x.rows; }, inner_fields(), 2),
      derived<Outer>("twice", [](const Outer& x) -> std::optional<json> { return 2 * x.ms; }),
  };
  return t;
}

Outer read(const json& j) {
  Outer o;
  read_fields(outer_fields(), j, o, "x.json: t");
  return o;
}

std::string error_of(const json& j) {
  try {
    read(j);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(JsonFields, OneTableBothWays) {
  Outer a;
  a.ms = 1.5;
  a.median = 1.25;
  a.count = 7;
  a.inner = Inner{3, "x"};
  a.rows = {Inner{1, "a"}, Inner{2, "b"}};
  json j = json::object();
  write_fields(outer_fields(), a, j);
  // unset optionals and fields whose `when` says no are not written; derived ones are
  EXPECT_FALSE(j.contains("power"));
  EXPECT_FALSE(j.contains("flagged"));
  EXPECT_FALSE(j.contains("note"));
  EXPECT_DOUBLE_EQ(j["twice"].get<double>(), 3.0);
  const Outer b = read(j);
  EXPECT_DOUBLE_EQ(b.ms, 1.5);
  EXPECT_DOUBLE_EQ(b.median, 1.25);
  EXPECT_FALSE(b.power.has_value());
  EXPECT_EQ(b.count, 7);
  ASSERT_TRUE(b.inner.has_value());
  EXPECT_EQ(b.inner->name, "x");
  ASSERT_EQ(b.rows.size(), 2u);
  EXPECT_EQ(b.rows[1].id, 2);
  json again = json::object();
  write_fields(outer_fields(), b, again);
  EXPECT_EQ(again, j);
  // an absent key takes its default, here from another field
  const Outer c = read(json{{"ms", 2.0}});
  EXPECT_DOUBLE_EQ(c.median, 2.0);
  // a string is cut to its limit and made printable
  EXPECT_EQ(read(json{{"note", "ab\x1b" "cdefghijk"}}).note.substr(0, 8), "ab?cdefg");
}

TEST(JsonFields, ReadingNamesTheFieldThatIsWrong) {
  EXPECT_NE(error_of({{"ms", 0.0}}).find("x.json: t.ms must be from 1e-09 to 1e+09 ms, got 0.0"), std::string::npos)
      << error_of({{"ms", 0.0}});
  EXPECT_NE(error_of({{"ms", "1"}}).find("x.json: t.ms must be a number"), std::string::npos);
  EXPECT_NE(error_of({{"power", 2000}}).find("x.json: t.power must be from 0 to 1000 W"), std::string::npos);
  EXPECT_NE(error_of({{"count", 1.5}}).find("x.json: t.count must be an integer"), std::string::npos);
  EXPECT_NE(error_of({{"flagged", 1}}).find("x.json: t.flagged must be true or false"), std::string::npos);
  EXPECT_NE(error_of({{"note", 3}}).find("x.json: t.note must be a string"), std::string::npos);
  EXPECT_NE(error_of({{"inner", 3}}).find("x.json: t.inner must be an object"), std::string::npos);
  EXPECT_NE(error_of({{"inner", {{"id", "1"}}}}).find("x.json: t.inner.id must be an integer"), std::string::npos);
  EXPECT_NE(error_of({{"rows", json::array({1})}}).find("x.json: t.rows[0] must be an object"), std::string::npos);
  // lists are bounded
  EXPECT_NE(error_of({{"rows", json::array({json::object(), json::object(), json::object()})}})
                .find("x.json: t.rows must be a list of at most 2 objects"),
            std::string::npos);
  // null reads as absent for optional values
  EXPECT_FALSE(read({{"power", nullptr}}).power.has_value());
  // a derived field is never read
  EXPECT_EQ(error_of({{"twice", "anything"}}), "(accepted)");
}

namespace {
enum class Colour { Red, Green };
struct Paint {
  Colour colour = Colour::Red;
};
const EnumNames<Colour>& colour_names() {
  static const EnumNames<Colour> n{{{Colour::Red, {"red", "rouge"}}, {Colour::Green, {"green"}}}};
  return n;
}
}  // namespace

TEST(JsonFields, AChoiceIsWrittenByItsFirstNameAndReadByAnyOfThem) {
  const Fields<Paint> t = {choice<Paint>("colour", [](auto& p) -> auto& { return p.colour; }, colour_names())};
  Paint p;
  p.colour = Colour::Green;
  nlohmann::json j = nlohmann::json::object();
  write_fields(t, p, j);
  EXPECT_EQ(j["colour"], "green");
  Paint back;
  read_fields(t, nlohmann::json{{"colour", "ROUGE"}}, back, "x.json: paint");
  EXPECT_EQ(back.colour, Colour::Red);
  read_fields(t, j, back, "x.json: paint");
  EXPECT_EQ(back.colour, Colour::Green);
  for (const nlohmann::json& bad : {nlohmann::json{{"colour", "blue"}}, nlohmann::json{{"colour", 3}}, nlohmann::json::object()}) {
    try {
      read_fields(t, bad, back, "x.json: paint");
      FAIL() << bad.dump();
    } catch (const UsageError& e) {
      EXPECT_STREQ(e.what(), "x.json: paint.colour must be \"red\" or \"green\"");
    }
  }
}
