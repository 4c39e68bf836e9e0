#include "core/util/suggest.hpp"
#include "core/util/text_util.hpp"

#include <algorithm>
#include <cctype>

namespace gs {

size_t edit_distance(const std::string& a, const std::string& b) {
  return bounded_edit_distance(a, b, std::max(a.size(), b.size()));
}

size_t bounded_edit_distance(const std::string& a, const std::string& b, size_t limit) {
  const size_t n = a.size(), m = b.size();
  if ((n > m ? n - m : m - n) > limit) return limit + 1;
  // Three rows of the table, and only the band |i - j| <= limit of each: O((n + m) x limit).
  // Cells outside the band hold `far` (more than any distance within the limit).
  const size_t far = limit + 1;
  std::vector<size_t> prev2(m + 1, far), prev(m + 1, far), cur(m + 1, far);
  for (size_t j = 0; j <= std::min(m, limit); ++j) prev[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    const size_t lo = i > limit ? i - limit : 1, hi = std::min(m, i + limit);
    std::fill(cur.begin(), cur.end(), far);
    if (i <= limit) cur[0] = i;
    size_t row_min = cur[0];
    for (size_t j = lo; j <= hi; ++j) {
      size_t d = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d = std::min(d, prev2[j - 2] + 1);
      cur[j] = std::min(d, far);
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > limit) return far;  // every path already costs more than the limit
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return std::min(prev[m], far);
}

namespace {

std::string lower(std::string_view s) { return ascii_lower(s); }

// Lower case, '_' as '-', no leading dashes.
std::string norm(const std::string& s) {
  std::string out = lower(s);
  for (char& ch : out) ch = ch == '_' ? '-' : ch;
  while (!out.empty() && out.front() == '-') out.erase(0, 1);
  return out;
}

std::vector<std::string> words(const std::string& normed) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : normed) {
    if (ch == '-' || ch == '.' || ch == ' ') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// Every typed word begins the candidate's word at the same position (the candidate may have more).
bool word_prefix(const std::vector<std::string>& typed, const std::vector<std::string>& cand) {
  if (typed.empty() || typed.size() > cand.size()) return false;
  for (size_t i = 0; i < typed.size(); ++i)
    if (!starts_with(cand[i], typed[i])) return false;
  return true;
}

// The typed words are the candidate's last words (and the candidate has more).
bool word_suffix(const std::vector<std::string>& typed, const std::vector<std::string>& cand) {
  if (typed.empty() || typed.size() >= cand.size()) return false;
  return std::equal(typed.begin(), typed.end(), cand.end() - static_cast<std::ptrdiff_t>(typed.size()));
}

}  // namespace

std::vector<std::string> suggestions(const std::string& typed, const std::vector<std::string>& candidates) {
  // No name is this long: nothing to suggest, and no work that grows with what was typed.
  if (typed.size() > kMaxSuggestChars) return {};
  const std::string want = norm(typed);
  if (want.empty()) return {};
  std::string raw = lower(typed);
  while (!raw.empty() && raw.front() == '-') raw.erase(0, 1);
  // 1. Nearest spelling within max(2, length / 4) edits (every one as near, up to three).
  std::vector<std::string> nearest;
  size_t best_d = 2 * (std::max<size_t>(2, want.size() / 4) + 1);
  for (const std::string& c : candidates) {
    const std::string n = norm(c);
    std::string cr = lower(c);
    while (!cr.empty() && cr.front() == '-') cr.erase(0, 1);
    // Only distances below the best so far matter: banded at that bound.
    const size_t bound = best_d / 2;
    const size_t dn = bounded_edit_distance(want, n, bound);
    if (dn > bound) continue;
    const size_t d = 2 * dn + (bounded_edit_distance(raw, cr, dn) > dn);
    if (d < best_d) {
      best_d = d;
      nearest = {c};
    } else if (d == best_d && !nearest.empty() && nearest.size() < 3 &&
               std::find(nearest.begin(), nearest.end(), c) == nearest.end()) {
      nearest.push_back(c);
    }
  }
  if (!nearest.empty()) return nearest;
  // 2. and 3. Word prefixes, then word suffixes.
  const std::vector<std::string> tw = words(want);
  std::vector<std::string> out;
  for (bool prefix : {true, false}) {
    for (const std::string& c : candidates) {
      const std::vector<std::string> cw = words(norm(c));
      if ((prefix ? word_prefix(tw, cw) : word_suffix(tw, cw)) &&
          std::find(out.begin(), out.end(), c) == out.end() && out.size() < 3)
        out.push_back(c);
    }
    if (!out.empty()) return out;
  }
  return out;
}

std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates) {
  const std::vector<std::string> s = suggestions(typed, candidates);
  if (s.empty()) return {};
  std::string list;
  for (size_t i = 0; i < s.size(); ++i) list += (i == 0 ? "" : i + 1 == s.size() ? " or " : ", ") + s[i];
  return " (did you mean " + list + "?)";
}

}  // namespace gs
