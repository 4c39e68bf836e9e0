// The printer layer (core/util/printer.hpp): documents and tables in text and markdown, and compare's
// two formats printed from one document carry the same rows and values.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/analysis/compare.hpp"
#include "core/util/printer.hpp"

namespace {

namespace print = gs::print;
using print::Align;
using print::Format;

const std::string kData = GS_TEST_DATA_DIR;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(Printer, CompactTableInTextAndMarkdown) {
  print::Table t({{"Name"}, {"ms", Align::Right}, {"B/A", Align::Right}});
  t.add_header();
  t.add_row({"fprop qkv", "1.250", print::Cell::marked("1.100", "R", "slower", print::Style::Strong)});
  t.add_row({"wgrad", "12.000", print::Cell::marked("0.950", "I", "faster", print::Style::Emphasis)});
  t.add_row({"dgrad", "3.000", print::Cell::marked("1.010", "~")});
  EXPECT_EQ(print::render_table(t, Format::Text),
            "  Name           ms      B/A\n"
            "  --------------------------\n"
            "  fprop qkv   1.250  1.100 R\n"
            "  wgrad      12.000  0.950 I\n"
            "  dgrad       3.000  1.010 ~\n");
  EXPECT_EQ(print::render_table(t, Format::Markdown),
            "| Name | ms | B/A |\n"
            "|---|---:|---:|\n"
            "| fprop qkv | 1.250 | **1.100 slower** |\n"
            "| wgrad | 12.000 | _0.950 faster_ |\n"
            "| dgrad | 3.000 | 1.010 ~ |\n");
}

TEST(Printer, FixedTableKeepsTheReportLayout) {
  print::Table t({{"Op", Align::Left, 6}, {"Shape", Align::Left, 8}, {"BF16 ms", Align::Right, 9}},
                 print::Table::Layout::Fixed);
  t.min_rule = 20;
  t.add_rule('=');
  t.add_header();
  t.add_rule('-');
  t.add_row({"QKV", "1x2x3", "1.000"});
  t.add_row({"A long label:", "", "2.000"});  // runs into the empty cell after it
  t.add_note("* a note");
  t.add_row({"x", "123456789", "123456789"});  // as wide as its column: still a space before it
  EXPECT_EQ(print::render_table(t, Format::Text),
            "========================\n"  // 6 + 8 + 9 and one space before the third column
            "Op    Shape     BF16 ms\n"
            "------------------------\n"
            "QKV   1x2x3       1.000\n"
            "A long label:     2.000\n"
            "* a note\n"
            "x     123456789 123456789\n");
}

TEST(Printer, DocumentBlocksAndFormatOnlyParts) {
  print::Document d;
  d.heading(print::Text::split("Report (text legend)", "Report"));
  d.list({print::Inline{print::Span{"A:", print::Style::Strong}, print::Span{" a.json"}},
          print::Item("text only", print::Only::Text), print::Item("markdown only", print::Only::Markdown)});
  d.paragraph(print::Inline{print::Span{"Result: fine.", print::Style::Strong}}, print::Only::Markdown);
  d.heading("Section", 3);
  d.list({print::Inline{print::Span{"only in A: "}, print::Span{"fprop qkv", print::Style::Code}}});
  d.heading("Result: fine", 3, print::Only::Text);
  EXPECT_EQ(print::render(d, Format::Text),
            "Report (text legend)\n"
            "  A: a.json\n"
            "  text only\n"
            "\n"
            "Section\n"
            "  only in A: fprop qkv\n"
            "\n"
            "Result: fine\n");
  EXPECT_EQ(print::render(d, Format::Markdown),
            "## Report\n"
            "\n"
            "- **A:** a.json\n"
            "- markdown only\n"
            "\n"
            "**Result: fine.**\n"
            "\n"
            "### Section\n"
            "\n"
            "- only in A: `fprop qkv`\n");
}

TEST(Printer, ReportStyleBlocks) {
  print::Document d;
  d.title("Block (in words):");
  d.line("flush line");
  d.line("indented line", 4);
  d.wrapped("one two three four five six", 15, 2, 4);
  d.rule('=', 12);
  print::Document more;
  more.title("Second:", 3);
  more.list({"[1] a note"});
  d.append(std::move(more));
  EXPECT_EQ(print::render(d, Format::Text),
            "Block (in words):\n"  // titles: no blank line before
            "flush line\n"
            "    indented line\n"
            "  one two three\n"  // 15 columns; " four" would make 20
            "    four five\n"
            "    six\n"
            "============\n"
            "Second:\n"
            "  [1] a note\n");
  // Markdown: titles are headings, lines and wrapped text paragraphs (unwrapped), no rules.
  EXPECT_EQ(print::render(d, Format::Markdown),
            "### Block (in words):\n"
            "\n"
            "flush line\n"
            "\n"
            "indented line\n"
            "\n"
            "one two three four five six\n"
            "\n"
            "### Second:\n"
            "\n"
            "- [1] a note\n");
}

TEST(Printer, WrapTextBreaksBetweenWords) {
  EXPECT_EQ(print::wrap_text("aa bb cc", 8, 0, 0), "aa bb cc\n");  // exactly the width: one line
  EXPECT_EQ(print::wrap_text("aa bb cc", 7, 0, 2), "aa bb\n  cc\n");
  // A word longer than the width gets a line of its own, never cut.
  EXPECT_EQ(print::wrap_text("a verylongword b", 6, 1, 1), " a\n verylongword\n b\n");
  EXPECT_EQ(print::wrap_text("", 10, 2, 2), "  \n");
}

TEST(Printer, FixedCellsNeverTouch) {
  // Widths that hold a one-space separator (a "{:<4} {:<5} {:>4}" layout).
  print::Table t({{"Key", Align::Left, 5}, {"Name", Align::Left, 6}, {"N", Align::Right, 5}}, print::Table::Layout::Fixed);
  t.add_row({"ab", "cd", "1"});
  t.add_row({"abcde", "cd", "1"});       // fills its column: a space before the next label
  t.add_row({"abcdefg", "cdefghij", "1"});  // runs past it: the same
  t.add_row({"ab", "cd", "123456"});     // a number as wide as its column
  EXPECT_EQ(print::render_table(t, Format::Text),
            "ab   cd        1\n"
            "abcde cd        1\n"
            "abcdefg cdefghij    1\n"
            "ab   cd    123456\n");
}

TEST(Printer, MarkdownTableWithoutHeaderLineTakesTheColumnHeaders) {
  print::Table t({{"Total", Align::Left, 10}, {"BF16", Align::Right, 8}}, print::Table::Layout::Fixed);
  t.add_row({"Fprop", "1.000"});
  EXPECT_EQ(print::render_table(t, Format::Text), "Fprop        1.000\n");
  EXPECT_EQ(print::render_table(t, Format::Markdown),
            "| Total | BF16 |\n"
            "|---|---:|\n"
            "| Fprop | 1.000 |\n");
  // Without any column header the first row stays the header, as before.
  print::Table bare({{"", Align::Left, 4}, {"", Align::Right, 4}}, print::Table::Layout::Fixed);
  bare.add_row({"a", "1"});
  EXPECT_EQ(print::render_table(bare, Format::Markdown), "| a | 1 |\n|---|---:|\n");
}

TEST(Printer, MarkdownLeavesOutSpacerColumns) {
  // A fixed layout's spacer (no header, blank in every row) indents the text; a pipe table has no
  // use for it. A column with a header or any value stays, even where most of its cells are blank.
  print::Table t({{"Precision", Align::Left, 10}, {"", Align::Left, 2}, {"ms", Align::Right, 8}, {"note", Align::Left, 6}},
                 print::Table::Layout::Fixed);
  t.add_header();
  t.add_row({"BF16", "", "1.000", ""});
  t.add_row({"FP8", "", "0.600", "x"});
  EXPECT_EQ(print::render_table(t, Format::Markdown),
            "| Precision | ms | note |\n"
            "|---|---:|---|\n"
            "| BF16 | 1.000 |  |\n"
            "| FP8 | 0.600 | x |\n");
  EXPECT_NE(print::render_table(t, Format::Text).find("BF16"), std::string::npos);
}

TEST(Printer, ReportNumbers) {
  EXPECT_EQ(print::format_ms(12.3456), "12.346");
  EXPECT_EQ(print::format_ms(std::nullopt), "N/A");
  EXPECT_EQ(print::format_ms(0.0), "0.000");
  EXPECT_EQ(print::format_speedup(1.4249), "1.42x");
  EXPECT_EQ(print::format_speedup(2.0), "2.00x");
}

// The rows of every table in a compare report, each cell without its flag: text tables are the
// lines after a "  ----" rule with as many columns (split at two spaces) as the header above it;
// markdown tables the "| ... |" lines but the alignment rows.
std::string unflag(std::string c) {
  static const std::regex md(R"(^\*\*(.*) (slower|less)\*\*$|^_(.*) (faster|more)_$)");
  std::smatch m;
  if (std::regex_match(c, m, md)) c = m[1].matched ? m[1].str() : m[3].str();
  for (const char* mark : {" R", " I"})
    if (c.size() > 2 && c.compare(c.size() - 2, 2, mark) == 0) c.erase(c.size() - 2);
  return c;
}

std::vector<std::string> split_cells(const std::string& line, const std::regex& sep) {
  std::vector<std::string> out;
  for (std::sregex_token_iterator it(line.begin(), line.end(), sep, -1), end; it != end; ++it)
    if (!it->str().empty()) out.push_back(unflag(it->str()));
  return out;
}

std::vector<std::vector<std::string>> text_rows(const std::string& text) {
  const std::regex sep(" {2,}");
  const std::vector<std::string> ls = lines_of(text);
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 1; i < ls.size(); ++i) {
    if (!std::regex_match(ls[i], std::regex("^  -+$"))) continue;
    const auto head = split_cells(ls[i - 1], sep);
    rows.push_back(head);
    for (size_t j = i + 1; j < ls.size(); ++j) {
      auto row = split_cells(ls[j], sep);
      if (row.size() != head.size()) break;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::vector<std::vector<std::string>> markdown_rows(const std::string& md) {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& l : lines_of(md)) {
    if (l.rfind("| ", 0) != 0) continue;
    std::vector<std::string> row;
    for (size_t a = 2; a < l.size();) {
      const size_t b = l.find(" |", a);
      row.push_back(unflag(l.substr(a, b - a)));
      a = b + 3;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void expect_same_rows(const gs::CompareResult& r) {
  auto t = text_rows(gs::format_compare_text(r));
  auto m = markdown_rows(gs::format_compare_markdown(r));
  ASSERT_FALSE(t.empty());
  std::sort(t.begin(), t.end());
  std::sort(m.begin(), m.end());
  EXPECT_EQ(t, m);
}

TEST(CompareFormats, TextAndMarkdownCarryTheSameRowsAndValues) {
  expect_same_rows(gs::compare_files(kData + "/compare_a.json", kData + "/compare_b.json"));
  expect_same_rows(gs::compare_files(kData + "/compare_b.json", kData + "/compare_a.json"));
  expect_same_rows(gs::compare_files(kData + "/moe_mixtral_a.json", kData + "/moe_mixtral_a.json"));
  expect_same_rows(gs::compare_files(kData + "/shapes_4.json", kData + "/shapes_4.json"));
}

TEST(CompareFormats, OneDocumentForBoth) {
  const auto r = gs::compare_files(kData + "/compare_a.json", kData + "/compare_b.json");
  const print::Document d = gs::compare_document(r);
  EXPECT_EQ(print::render(d, Format::Text), gs::format_compare_text(r));
  EXPECT_EQ(print::render(d, Format::Markdown), gs::format_compare_markdown(r));
  // Every table of the document prints in both formats (the per-GEMM one in each at its place).
  size_t text_tables = 0, md_tables = 0;
  for (const print::Block& b : d.blocks)
    if (b.kind == print::Block::Kind::Table) {
      text_tables += b.only != print::Only::Markdown;
      md_tables += b.only != print::Only::Text;
    }
  EXPECT_EQ(text_tables, md_tables);
  EXPECT_GE(text_tables, 3u);
}

}  // namespace
