// split_list / trim: the list splitting behind --shapes and --precisions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace {

using gs::split_list;
using gs::trim;
using Items = std::vector<std::string>;

TEST(TextUtil, TrimRemovesOuterWhiteSpaceOnly) {
  EXPECT_EQ(trim("  a b\t\n"), "a b");
  EXPECT_EQ(trim("ab"), "ab");
  EXPECT_EQ(trim(" \t\r\n "), "");
  EXPECT_EQ(trim(""), "");
}

TEST(TextUtil, SplitListTrimsEveryItem) {
  EXPECT_EQ(split_list("BF16,FP8Current"), (Items{"BF16", "FP8Current"}));
  EXPECT_EQ(split_list(" 15872x4096x12288 ,\t1024, 2048 "), (Items{"15872x4096x12288", "1024", "2048"}));
  EXPECT_EQ(split_list("a b, c"), (Items{"a b", "c"}));  // inner white space is part of the item
  EXPECT_EQ(split_list("1024"), (Items{"1024"}));
}

TEST(TextUtil, SplitListKeepsEmptyItemsInPlace) {
  EXPECT_EQ(split_list("a,,b"), (Items{"a", "", "b"}));
  EXPECT_EQ(split_list("a, ,b"), (Items{"a", "", "b"}));
  EXPECT_EQ(split_list("a,"), (Items{"a", ""}));
  EXPECT_EQ(split_list(",a"), (Items{"", "a"}));
  EXPECT_EQ(split_list(","), (Items{"", ""}));
  EXPECT_EQ(split_list(""), (Items{""}));
  EXPECT_EQ(split_list("   "), (Items{""}));
}

TEST(TextUtil, SplitListOtherSeparator) {
  EXPECT_EQ(split_list("16 x 32x 8", 'x'), (Items{"16", "32", "8"}));
  EXPECT_EQ(split_list("a,b", ';'), (Items{"a,b"}));
  EXPECT_EQ(split_list("16xx8", 'x'), (Items{"16", "", "8"}));
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const gs::UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(TextUtil, DecimalIntegersOnly) {
  using gs::parse_decimal_int;
  EXPECT_EQ(parse_decimal_int("4096", "--x"), 4096);
  EXPECT_EQ(parse_decimal_int("010", "--x"), 10);  // leading zeros are decimal, not octal
  EXPECT_EQ(parse_decimal_int("0", "--x"), 0);
  EXPECT_EQ(parse_decimal_int("-8", "--x"), -8);  // the range check is the caller's
  EXPECT_EQ(parse_decimal_int("9223372036854775807", "--x"), INT64_MAX);
  EXPECT_EQ(error_of([] { parse_decimal_int("0x200", "--sequence_length"); }),
            "--sequence_length '0x200' is not a decimal integer (hex, octal and binary prefixes are not accepted)");
  EXPECT_EQ(error_of([] { parse_decimal_int("0b11", "--x"); }),
            "--x '0b11' is not a decimal integer (hex, octal and binary prefixes are not accepted)");
  EXPECT_EQ(error_of([] { parse_decimal_int("0o17", "--x"); }),
            "--x '0o17' is not a decimal integer (hex, octal and binary prefixes are not accepted)");
  for (const char* bad : {"abc", "12abc", "1e3", "1.0", "+5", " 5", "5 ", "--5", "-", "0x", "1_000", "１２"})
    EXPECT_NE(error_of([&] { parse_decimal_int(bad, "--x"); }).find("is not a decimal integer"), std::string::npos) << bad;
  EXPECT_EQ(error_of([] { parse_decimal_int("", "--x"); }), "--x is empty");
  EXPECT_EQ(error_of([] { parse_decimal_int("99999999999999999999", "--x"); }), "--x '99999999999999999999' is too large");
  EXPECT_EQ(error_of([] { parse_decimal_int("-99999999999999999999", "--x"); }), "--x '-99999999999999999999' is too small");
}

TEST(TextUtil, DecimalUnsigned) {
  using gs::parse_decimal_uint;
  EXPECT_EQ(parse_decimal_uint("18446744073709551615", "--seed"), UINT64_MAX);
  EXPECT_EQ(parse_decimal_uint("01234", "--seed"), 1234u);
  EXPECT_EQ(error_of([] { parse_decimal_uint("-1", "--seed"); }), "--seed must be >= 0, got '-1'");
  EXPECT_EQ(error_of([] { parse_decimal_uint("18446744073709551616", "--seed"); }),
            "--seed '18446744073709551616' is too large (at most 18446744073709551615)");
  EXPECT_NE(error_of([] { parse_decimal_uint("0x10", "--seed"); }).find("not a decimal integer (hex"), std::string::npos);
  EXPECT_NE(error_of([] { parse_decimal_uint("-x", "--seed"); }).find("not a decimal integer"), std::string::npos);
}

TEST(TextUtil, DecimalNumbers) {
  using gs::parse_decimal_number;
  EXPECT_DOUBLE_EQ(parse_decimal_number("5", "--x"), 5.0);
  EXPECT_DOUBLE_EQ(parse_decimal_number("2.5", "--x"), 2.5);
  EXPECT_DOUBLE_EQ(parse_decimal_number(".5", "--x"), 0.5);
  EXPECT_DOUBLE_EQ(parse_decimal_number("5.", "--x"), 5.0);
  EXPECT_DOUBLE_EQ(parse_decimal_number("1e2", "--x"), 100.0);
  EXPECT_DOUBLE_EQ(parse_decimal_number("1.5E-1", "--x"), 0.15);
  EXPECT_DOUBLE_EQ(parse_decimal_number("-0.25", "--x"), -0.25);
  EXPECT_DOUBLE_EQ(parse_decimal_number("010", "--x"), 10.0);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "0x10", "0x1p3", "1e400", "abc", ".", "-", "e5", "1e",
                          "1e+", "+1", " 1", "1 ", "1,5", "1.2.3", "5%"})
    EXPECT_NE(error_of([&] { parse_decimal_number(bad, "--x"); }).find("is not a finite decimal number"), std::string::npos)
        << bad;
  EXPECT_EQ(error_of([] { parse_decimal_number("", "--x"); }), "--x is empty");
}

TEST(TextUtil, PrintableReplacesControlCharacters) {
  EXPECT_EQ(gs::printable("NVIDIA H100"), "NVIDIA H100");
  EXPECT_EQ(gs::printable("a\x1b[2Jb\nc\td\x7f"), "a?[2Jb?c?d?");
  EXPECT_EQ(gs::printable("\xc2\x9b" "31m"), "?31m");                        // U+009B (CSI) in UTF-8
  EXPECT_EQ(gs::printable("M\xc3\xbcller \xc2\xb5s"), "M\xc3\xbcller \xc2\xb5s");  // ü and µ stay
  EXPECT_EQ(gs::printable(std::string("a\0b", 3)), "a?b");
}

}  // namespace
