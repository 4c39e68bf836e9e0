#include "core/util/printer.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gs::print {

namespace {

std::string styled(const std::string& s, Style style, Format f) {
  if (f != Format::Markdown) return s;
  switch (style) {
    case Style::Plain: return s;
    case Style::Strong: return "**" + s + "**";
    case Style::Emphasis: return "_" + s + "_";
    case Style::Code: return "`" + s + "`";
  }
  return s;
}

std::string strip_right(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The rows a compact or markdown table prints: the header lines (column headers) and rows, each
// cell already rendered in `f`.
std::vector<std::vector<std::string>> rendered_rows(const Table& t, Format f) {
  std::vector<std::vector<std::string>> rows;
  for (const Table::Line& l : t.lines) {
    if (l.kind != Table::Line::Kind::Header && l.kind != Table::Line::Kind::Row) continue;
    std::vector<std::string> row;
    for (const Cell& c : l.kind == Table::Line::Kind::Header ? t.header_cells() : l.cells) row.push_back(c.render(f));
    rows.push_back(std::move(row));
  }
  return rows;
}

Align align_of(const Table& t, size_t i) { return i < t.columns.size() ? t.columns[i].align : Align::Right; }

// Compact: "  " indent, two spaces between columns, each as wide as its widest cell, a rule of
// '-' under the header; trailing spaces dropped. Rules and notes of the fixed layout: a rule as
// wide as the table, a note indented as the rows.
std::string compact_text(const Table& t) {
  std::vector<size_t> w;
  for (const auto& row : rendered_rows(t, Format::Text)) {
    if (w.size() < row.size()) w.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  size_t total = 0;
  for (size_t i = 0; i < w.size(); ++i) total += w[i] + (i ? 2 : 0);
  const std::string rule = "  " + std::string(total, '-') + "\n";
  std::string out;
  for (const Table::Line& l : t.lines) {
    if (l.kind == Table::Line::Kind::Rule) {
      out += "  " + std::string(total, l.rule) + "\n";
      continue;
    }
    if (l.kind == Table::Line::Kind::Note) {
      out += "  " + l.note + "\n";
      continue;
    }
    const bool header = l.kind == Table::Line::Kind::Header;
    std::string line = "  ";
    const std::vector<Cell> cells = header ? t.header_cells() : l.cells;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) line += "  ";
      const std::string s = cells[i].render(Format::Text);
      line += align_of(t, i) == Align::Left ? fmt::format("{:<{}}", s, w[i]) : fmt::format("{:>{}}", s, w[i]);
    }
    out += strip_right(line) + "\n";
    if (header) out += rule;
  }
  return out;
}

int fixed_width(const Table& t, size_t i) { return i < t.columns.size() ? t.columns[i].width : 12; }

// The fixed layout's separators are as wide as its rows can be (at least min_rule): each column
// after the second may take one more space than its width (a cell as wide as its column gets a
// space before it).
std::string fixed_rule(const Table& t, char c) {
  int w = 0;
  for (size_t i = 0; i < t.columns.size(); ++i) w += fixed_width(t, i) + (i > 1 ? 1 : 0);
  return std::string(static_cast<size_t>(std::max(w, t.min_rule)), c) + "\n";
}

std::string fixed_row(const Table& t, const std::vector<Cell>& row) {
  std::string out;
  int debt = 0;  // how far a left-aligned label ran past its column; an empty cell after it gives that room back
  for (size_t i = 0; i < row.size(); ++i) {
    const std::string cell = row[i].render(Format::Text);
    const bool left = align_of(t, i) == Align::Left;
    int w = fixed_width(t, i);
    if (cell.empty() && debt > 0) {
      const int give = std::min(debt, w);
      w -= give;
      debt -= give;
    }
    if (left && static_cast<int>(cell.size()) > w) debt += static_cast<int>(cell.size()) - w;
    // A cell never runs into the one before it: a cell as wide as its column (huge shapes or
    // values), or a label after a cell that filled its own, gets a space before it.
    if (i > 0 && !out.empty() && out.back() != ' ' && (static_cast<int>(cell.size()) >= w || (left && !cell.empty())))
      out += ' ';
    out += left ? fmt::format("{:<{}}", cell, w) : fmt::format("{:>{}}", cell, w);
  }
  return strip_right(out) + "\n";
}

std::string fixed_text(const Table& t) {
  std::string out;
  for (const Table::Line& l : t.lines) {
    switch (l.kind) {
      case Table::Line::Kind::Header: out += fixed_row(t, t.header_cells()); break;
      case Table::Line::Kind::Row: out += fixed_row(t, l.cells); break;
      case Table::Line::Kind::Rule: out += fixed_rule(t, l.rule); break;
      case Table::Line::Kind::Note: out += l.note + "\n"; break;
    }
  }
  return out;
}

std::string md_row(const std::vector<std::string>& cells) {
  std::string s = "|";
  for (const auto& c : cells) s += " " + c + " |";
  return s + "\n";
}

// Pipe table: the header (the first header or row line; the columns' headers when no header line
// comes first and a column has one), the alignment row, the rows; notes below.
std::string markdown_table(const Table& t) {
  auto rows = rendered_rows(t, Format::Markdown);
  const auto first = std::find_if(t.lines.begin(), t.lines.end(), [](const Table::Line& l) {
    return l.kind == Table::Line::Kind::Header || l.kind == Table::Line::Kind::Row;
  });
  const bool named = std::any_of(t.columns.begin(), t.columns.end(), [](const Column& c) { return !c.header.empty(); });
  if (named && (first == t.lines.end() || first->kind != Table::Line::Kind::Header)) {
    std::vector<std::string> head;
    for (const Cell& c : t.header_cells()) head.push_back(c.render(Format::Markdown));
    rows.insert(rows.begin(), std::move(head));
  }
  // A column that is blank in every row, its header included, is a spacer of the text layout: a
  // pipe table leaves it out.
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.size());
  std::vector<bool> keep(width, false);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i)
      if (row[i].find_first_not_of(' ') != std::string::npos) keep[i] = true;
  for (auto& row : rows) {
    std::vector<std::string> kept;
    for (size_t i = 0; i < row.size(); ++i)
      if (keep[i]) kept.push_back(std::move(row[i]));
    row = std::move(kept);
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    out += md_row(rows[r]);
    if (r == 0) {
      std::string a = "|";
      for (size_t i = 0; i < width; ++i)
        if (keep[i]) a += align_of(t, i) == Align::Left ? "---|" : "---:|";
      out += a + "\n";
    }
  }
  bool first_note = true;
  for (const Table::Line& l : t.lines)
    if (l.kind == Table::Line::Kind::Note) {
      if (first_note) out += '\n';
      out += l.note + "\n";
      first_note = false;
    }
  return out;
}

class TextPrinter final : public Printer {
 public:
  Format format() const override { return Format::Text; }

 protected:
  void heading(const Block& b, bool first, std::string& out) const override {
    if (!first && b.spaced) out += '\n';
    out += b.text.in(Format::Text).render(Format::Text) + "\n";
  }
  void paragraph(const Block& b, bool, std::string& out) const override {
    const std::string s = b.text.in(Format::Text).render(Format::Text);
    out += b.wrap > 0 ? wrap_text(s, b.wrap, b.indent, b.hang) : indent(b.indent) + s + "\n";
  }
  void list(const Block& b, bool, std::string& out) const override {
    for (const Item& item : b.items)
      if (item.only != Only::Markdown) out += indent(b.indent) + item.text.in(Format::Text).render(Format::Text) + "\n";
  }
  void table(const Block& b, bool, std::string& out) const override { out += render_table(b.table, Format::Text); }
  void rule(const Block& b, bool, std::string& out) const override {
    out += std::string(static_cast<size_t>(std::max(b.width, 0)), b.rule) + "\n";
  }

 private:
  static std::string indent(int n) { return std::string(static_cast<size_t>(std::max(n, 0)), ' '); }
};

class MarkdownPrinter final : public Printer {
 public:
  Format format() const override { return Format::Markdown; }

 protected:
  void heading(const Block& b, bool first, std::string& out) const override {
    if (!first) out += '\n';
    out += std::string(static_cast<size_t>(std::max(b.level, 1)), '#') + " " +
           b.text.in(Format::Markdown).render(Format::Markdown) + "\n";
  }
  void paragraph(const Block& b, bool first, std::string& out) const override {
    if (!first) out += '\n';
    out += b.text.in(Format::Markdown).render(Format::Markdown) + "\n";
  }
  void list(const Block& b, bool first, std::string& out) const override {
    if (!first) out += "\n";
    for (const Item& item : b.items)
      if (item.only != Only::Text) out += "- " + item.text.in(Format::Markdown).render(Format::Markdown) + "\n";
  }
  void table(const Block& b, bool first, std::string& out) const override {
    if (!first) out += '\n';
    out += render_table(b.table, Format::Markdown);
  }
  void rule(const Block&, bool, std::string&) const override {}  // rules are text's only (Document::rule)
};

}  // namespace

std::string format_ms(std::optional<double> ms) { return ms ? fmt::format("{:.3f}", *ms) : "N/A"; }

std::string format_speedup(double ratio) { return fmt::format("{:.2f}x", ratio); }

std::string Inline::render(Format f) const {
  std::string out;
  for (const Span& s : spans) out += styled(s.text, s.style, f);
  return out;
}

std::string Cell::render(Format f) const {
  if (f == Format::Markdown && !md_mark.empty()) return styled(value + " " + md_mark, md_style, f);
  const std::string s = mark.empty() ? value : value + " " + mark;
  return f == Format::Markdown ? styled(s, md_style, f) : s;
}

std::vector<Cell> Table::header_cells() const {
  std::vector<Cell> out;
  for (const Column& c : columns) out.emplace_back(c.header);
  return out;
}

std::string render_table(const Table& t, Format f) {
  if (f == Format::Markdown) return markdown_table(t);
  return t.layout == Table::Layout::Fixed ? fixed_text(t) : compact_text(t);
}

Document& Document::heading(Text t, int level, Only only) {
  Block b;
  b.kind = Block::Kind::Heading;
  b.text = std::move(t);
  b.level = level;
  b.only = only;
  blocks.push_back(std::move(b));
  return *this;
}

Document& Document::paragraph(Text t, Only only) {
  Block b;
  b.kind = Block::Kind::Paragraph;
  b.text = std::move(t);
  b.only = only;
  blocks.push_back(std::move(b));
  return *this;
}

Document& Document::list(std::vector<Item> items, Only only) {
  Block b;
  b.kind = Block::Kind::List;
  b.items = std::move(items);
  b.only = only;
  blocks.push_back(std::move(b));
  return *this;
}

Document& Document::table(print::Table t, Only only) {
  Block b;
  b.kind = Block::Kind::Table;
  b.table = std::move(t);
  b.only = only;
  blocks.push_back(std::move(b));
  return *this;
}

Document& Document::title(Text t, int level, Only only) {
  heading(std::move(t), level, only);
  blocks.back().spaced = false;
  return *this;
}

Document& Document::line(Text t, int indent, Only only) {
  paragraph(std::move(t), only);
  blocks.back().indent = indent;
  blocks.back().hang = indent;
  return *this;
}

Document& Document::wrapped(Text t, int width, int indent, int hang, Only only) {
  line(std::move(t), indent, only);
  blocks.back().hang = hang;
  blocks.back().wrap = width;
  return *this;
}

Document& Document::rule(char c, int width) {
  Block b;
  b.kind = Block::Kind::Rule;
  b.only = Only::Text;
  b.rule = c;
  b.width = width;
  blocks.push_back(std::move(b));
  return *this;
}

Document& Document::append(Document other) {
  for (Block& b : other.blocks) blocks.push_back(std::move(b));
  return *this;
}

std::string wrap_text(const std::string& text, int width, int indent, int hang) {
  const size_t w = static_cast<size_t>(std::max(width, 0));
  std::string out, line(static_cast<size_t>(std::max(indent, 0)), ' ');
  bool fresh = true;  // no word on `line` yet
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    if (!fresh && line.size() + 1 + word.size() > w) {
      out += line + "\n";
      line.assign(static_cast<size_t>(std::max(hang, 0)), ' ');
      fresh = true;
    }
    line += (fresh ? "" : " ") + word;
    fresh = false;
    at = end + 1;
  }
  return out + line + "\n";
}

std::string Printer::print(const Document& d) const {
  std::string out;
  bool first = true;
  for (const Block& b : d.blocks) {
    if (b.only == Only::Text && format() != Format::Text) continue;
    if (b.only == Only::Markdown && format() != Format::Markdown) continue;
    if (b.kind == Block::Kind::List && std::none_of(b.items.begin(), b.items.end(), [&](const Item& i) {
          return i.only == Only::Both || (i.only == Only::Text) == (format() == Format::Text);
        }))
      continue;  // a list without an item in this format prints nothing
    switch (b.kind) {
      case Block::Kind::Heading: heading(b, first, out); break;
      case Block::Kind::Paragraph: paragraph(b, first, out); break;
      case Block::Kind::List: list(b, first, out); break;
      case Block::Kind::Table: table(b, first, out); break;
      case Block::Kind::Rule: rule(b, first, out); break;
    }
    first = false;
  }
  return out;
}

std::unique_ptr<Printer> make_printer(Format f) {
  if (f == Format::Markdown) return std::make_unique<MarkdownPrinter>();
  return std::make_unique<TextPrinter>();
}

std::string render(const Document& d, Format f) { return make_printer(f)->print(d); }

}  // namespace gs::print
