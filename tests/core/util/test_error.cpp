// The core's error types and parsed_at (core/util/error.hpp): where a value was read goes in front
// of the UsageError its parser throws, and nothing else changes.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "core/recipes/modes.hpp"
#include "core/util/error.hpp"

using namespace gs;

namespace {

std::string usage_error_of(const std::string& where, const std::string& text) {
  try {
    parsed_at(where, text, mode_from_string);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(ParsedAt, ReturnsWhatTheParserReturns) {
  EXPECT_EQ(parsed_at("a.json: \"modes\"", "per-gemm", mode_from_string), Mode::PerGemm);
  EXPECT_EQ(parsed_at("x", "42", [](const std::string& s) { return std::stoi(s); }), 42);
}

TEST(ParsedAt, PutsWhereInFrontOfTheUsageError) {
  std::string bare;
  try {
    mode_from_string("nope");
  } catch (const UsageError& e) {
    bare = e.what();
  }
  ASSERT_FALSE(bare.empty());
  EXPECT_EQ(usage_error_of("a.json: \"modes\"", "nope"), "a.json: \"modes\": " + bare);
  // Nested: each place adds its own prefix, outermost first.
  try {
    parsed_at("outer", "nope", [](const std::string& s) { return parsed_at("inner", s, mode_from_string); });
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "outer: inner: " + bare);
  }
}

TEST(ParsedAt, LeavesOtherExceptionsAsTheyAre) {
  const auto throws_logic = [](const std::string& s) -> int { throw std::logic_error("bug: " + s); };
  try {
    parsed_at("where", "x", throws_logic);
    ADD_FAILURE() << "accepted";
  } catch (const UsageError&) {
    ADD_FAILURE() << "a logic_error became a UsageError";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()), "bug: x");
  }
  const auto throws_unsupported = [](const std::string&) -> int { throw Unsupported("no"); };
  EXPECT_THROW(parsed_at("where", "x", throws_unsupported), Unsupported);
}
