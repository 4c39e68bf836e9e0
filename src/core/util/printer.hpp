// The printer layer: what a report says is built once as a Document (headings, paragraphs, lists,
// tables of cells), and each output format is one Printer over it. A report's builder decides
// the content and the order; a printer decides only how a format spells it (indentation, table
// layout, markdown's | pipes |, **strong**, `code`). Text and markdown are the two back ends.
//
//   print::Document d;
//   d.heading("Mode per-gemm: totals");
//   print::Table t({{"Total", print::Align::Left}, {"A ms", print::Align::Right}});
//   t.add_header();
//   t.add_row({"full model", "20.883"});
//   d.table(std::move(t));
//   const std::string text = print::render(d, print::Format::Text);
//
// Where two formats word a line differently (a heading that text writes with its legend and
// markdown without), the builder says so explicitly with Text::split, or places a block in one
// format only (Only::Text, Only::Markdown); everything else, every table row and value, is the same
// data in every format. Tables also render alone (render_table), in the compact layout (computed
// column widths) or the fixed layout of the run report (each column's width given, rule lines
// and notes between rows).
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gs::print {

enum class Format { Text, Markdown };

// The text reports' width: their rules and the lines they wrap.
constexpr int kReportWidth = 90;

// The reports' numbers, spelled one way everywhere: a time in ms with three decimals, "N/A" where
// there is none ("12.345"), and a speedup (a ratio of times) with two decimals and an x ("1.42x").
std::string format_ms(std::optional<double> ms);
std::string format_speedup(double ratio);

// Inline emphasis. Text prints the words only; markdown marks them: **strong**, _emphasis_, `code`.
enum class Style { Plain, Strong, Emphasis, Code };

struct Span {
  std::string text;
  Style style = Style::Plain;
};

// A run of inline text: spans, each with its style.
struct Inline {
  std::vector<Span> spans;
  Inline() = default;
  Inline(std::string s) : spans{Span{std::move(s)}} {}  // NOLINT: a plain string is inline text
  Inline(const char* s) : Inline(std::string(s)) {}     // NOLINT
  Inline(std::initializer_list<Span> s) : spans(s) {}
  std::string render(Format f) const;
};

// What a block says, and markdown's own wording where it differs (split).
struct Text {
  Inline text;
  std::optional<Inline> markdown;
  Text() = default;
  Text(Inline t) : text(std::move(t)) {}  // NOLINT
  Text(std::string s) : text(std::move(s)) {}  // NOLINT
  Text(const char* s) : text(s) {}  // NOLINT
  static Text split(Inline text, Inline markdown) {
    Text t(std::move(text));
    t.markdown = std::move(markdown);
    return t;
  }
  const Inline& in(Format f) const { return f == Format::Markdown && markdown ? *markdown : text; }
};

enum class Align { Left, Right };

struct Column {
  std::string header;
  Align align = Align::Left;
  int width = 0;  // the fixed layout's width; the compact layout computes its own
};

// One table cell: a value and an optional mark after it. Text prints "value mark" ("1.100 R");
// markdown prints md_mark instead of the mark where there is one, and the whole cell in md_style
// ("**1.100 slower**").
struct Cell {
  std::string value;
  std::string mark;
  std::string md_mark;
  Style md_style = Style::Plain;
  Cell() = default;
  Cell(std::string v) : value(std::move(v)) {}  // NOLINT
  Cell(const char* v) : value(v) {}             // NOLINT
  static Cell marked(std::string value, std::string mark, std::string md_mark = {}, Style md_style = Style::Plain) {
    Cell c(std::move(value));
    c.mark = std::move(mark);
    c.md_mark = std::move(md_mark);
    c.md_style = md_style;
    return c;
  }
  std::string render(Format f) const;
};

struct Table {
  // Compact: indented two spaces, columns two spaces apart, as wide as their widest cell, a rule
  // of '-' under the header. Fixed: the run report's layout (report_text.cpp): each column
  // Column::width wide (left-aligned columns may run into the empty cells after them; a cell that
  // would touch the one before it gets a space first), no indent, trailing spaces dropped, rule
  // lines and notes where the builder adds them, rules at least `min_rule` wide. A table laid out
  // with separators ("{:<7} {:>9}") is a fixed table whose widths hold them (8, 10).
  enum class Layout { Compact, Fixed };
  struct Line {
    enum class Kind { Header, Row, Rule, Note } kind = Kind::Row;
    std::vector<Cell> cells;  // Row
    char rule = '-';          // Rule
    std::string note;         // Note: a line of its own (fixed layout: where it is; markdown: below the table)
  };

  std::vector<Column> columns;
  Layout layout = Layout::Compact;
  int min_rule = 0;
  std::vector<Line> lines;

  Table() = default;
  explicit Table(std::vector<Column> c, Layout l = Layout::Compact) : columns(std::move(c)), layout(l) {}

  Table& add_header() {
    lines.push_back({Line::Kind::Header, {}, '-', {}});
    return *this;
  }
  Table& add_row(std::vector<Cell> cells) {
    lines.push_back({Line::Kind::Row, std::move(cells), '-', {}});
    return *this;
  }
  Table& add_rule(char c) {
    lines.push_back({Line::Kind::Rule, {}, c, {}});
    return *this;
  }
  Table& add_note(std::string text) {
    lines.push_back({Line::Kind::Note, {}, '-', std::move(text)});
    return *this;
  }
  std::vector<Cell> header_cells() const;
};

std::string render_table(const Table& t, Format f);

// Which formats print a block (or a list item).
enum class Only { Both, Text, Markdown };

struct Item {
  Text text;
  Only only = Only::Both;
  Item(Text t, Only o = Only::Both) : text(std::move(t)), only(o) {}  // NOLINT
  Item(Inline t, Only o = Only::Both) : text(std::move(t)), only(o) {}  // NOLINT
  Item(std::string t, Only o = Only::Both) : text(std::move(t)), only(o) {}  // NOLINT
  Item(const char* t, Only o = Only::Both) : text(t), only(o) {}  // NOLINT
};

struct Block {
  enum class Kind { Heading, Paragraph, List, Table, Rule } kind = Kind::Paragraph;
  Only only = Only::Both;
  Text text;                // Heading, Paragraph
  int level = 2;            // Heading: markdown's "##" count
  std::vector<Item> items;  // List
  print::Table table;       // Table
  // Where text puts a block (markdown has its own spacing and ignores these):
  int indent = 2;       // Paragraph, List: spaces before each line
  int hang = 2;         // Paragraph: spaces before the lines a wrapped paragraph continues on
  int wrap = 0;         // Paragraph: the width it wraps at, between words (0: one line however long)
  bool spaced = true;   // Heading: a blank line before it (never before the first block)
  char rule = '-';      // Rule: a line of `width` of these
  int width = 0;
};

// Two text styles live in one document model. Compare's (heading, paragraph, list): a blank line
// before each heading, paragraphs and items indented two spaces. The run report's (title, line,
// wrapped, rule): titles and lines where the builder puts them, no blank lines, rules between
// sections; markdown prints a title as a heading, a line or a wrapped paragraph as a paragraph,
// and no rules.
struct Document {
  std::vector<Block> blocks;
  Document& heading(Text t, int level = 2, Only only = Only::Both);
  Document& paragraph(Text t, Only only = Only::Both);
  Document& list(std::vector<Item> items, Only only = Only::Both);
  Document& table(print::Table t, Only only = Only::Both);
  // A heading that text prints as a line of its own, without the blank line before it.
  Document& title(Text t, int level = 3, Only only = Only::Both);
  // A paragraph that text prints `indent` spaces in, on one line.
  Document& line(Text t, int indent = 0, Only only = Only::Both);
  // A paragraph that text wraps between words at `width` columns: its first line `indent` spaces
  // in, the others `hang` spaces in.
  Document& wrapped(Text t, int width, int indent, int hang, Only only = Only::Both);
  // Text only: a line of `width` characters `c`.
  Document& rule(char c, int width);
  // Another document's blocks after these.
  Document& append(Document other);
};

// `text` in lines of at most `width` characters, broken at spaces (a word longer than the width
// gets a line of its own): the first line after `indent` spaces, the others after `hang`; each
// line ends in '\n'.
std::string wrap_text(const std::string& text, int width, int indent, int hang);

// The printer base: walks a document's blocks in order, skipping the blocks of other formats, and
// hands each to the format's hook. A new output format is one subclass (printer.cpp).
class Printer {
 public:
  virtual ~Printer() = default;
  std::string print(const Document& d) const;
  virtual Format format() const = 0;

 protected:
  // `first`: no block was printed before this one.
  virtual void heading(const Block& b, bool first, std::string& out) const = 0;
  virtual void paragraph(const Block& b, bool first, std::string& out) const = 0;
  virtual void list(const Block& b, bool first, std::string& out) const = 0;
  virtual void table(const Block& b, bool first, std::string& out) const = 0;
  virtual void rule(const Block& b, bool first, std::string& out) const = 0;
};

// Text: headings after a blank line (titles without it), paragraphs and list items indented as their
// block says (two spaces unless told), tables in their layout. Markdown: blocks one blank line
// apart, "## heading", "- item", pipe tables (a table without a header line gets its columns'
// headers), no rules.
std::unique_ptr<Printer> make_printer(Format f);
std::string render(const Document& d, Format f);

}  // namespace gs::print
