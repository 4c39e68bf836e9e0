// split_list / trim: the list splitting behind --shapes and --precisions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/text_util.hpp"

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

}  // namespace
