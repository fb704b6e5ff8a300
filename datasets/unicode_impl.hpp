// Bodies of <ipuml/datasets/unicode.hpp>: compiled once in src/lib/datasets_text.cpp, or
// included by the header in header-only mode.
#pragma once

#include <ipuml/datasets/unicode.hpp>
#include <ipuml/datasets/unicode_tables_impl.hpp>

#include <algorithm>
#include <iterator>

namespace ipuml::datasets::unicode {

namespace unicode_detail {

template <size_t N>
inline bool in_ranges(const unicode_tables::CodeRange (&table)[N], char32_t cp) {
  auto it =
      std::upper_bound(std::begin(table), std::end(table), cp,
                       [](char32_t c, const unicode_tables::CodeRange& r) { return c < r.lo; });
  return it != std::begin(table) && cp <= std::prev(it)->hi;
}

template <typename Entry, size_t N>
inline const Entry* find_mapping(const Entry (&table)[N], char32_t cp) {
  auto it = std::lower_bound(std::begin(table), std::end(table), cp,
                             [](const Entry& e, char32_t c) { return e.cp < c; });
  return it != std::end(table) && it->cp == cp ? &*it : nullptr;
}

// Unicode's "cased" property, as far as the final-sigma rule needs it: any letter (Greek
// sigma only ever sits among Greek or Latin letters in practice).
inline bool is_cased(char32_t cp);

}  // namespace unicode_detail

IPUML_INLINE std::vector<Char> decode_utf8(std::string_view text) {
  std::vector<Char> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = s[i];
    size_t len = 0;
    char32_t cp = 0, min = 0;
    if (b < 0x80) {
      out.push_back({b, i, 1, true});
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07, min = 0x10000;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok) {
      out.push_back({cp, i, len, true});
      i += len;
    } else {
      out.push_back({0xFFFD, i, 1, false});
      ++i;
    }
  }
  return out;
}

IPUML_INLINE void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

IPUML_INLINE std::string to_utf8(const std::u32string& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

IPUML_INLINE bool is_letter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return unicode_detail::in_ranges(unicode_tables::kLetter, cp);
}
IPUML_INLINE bool is_number(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return unicode_detail::in_ranges(unicode_tables::kNumber, cp);
}
IPUML_INLINE bool is_punctuation(char32_t cp) {
  return unicode_detail::in_ranges(unicode_tables::kPunctuation, cp);
}
IPUML_INLINE bool is_nonspacing_mark(char32_t cp) {
  return unicode_detail::in_ranges(unicode_tables::kNonspacingMark, cp);
}
IPUML_INLINE bool is_other(char32_t cp) {
  return unicode_detail::in_ranges(unicode_tables::kOther, cp);
}
IPUML_INLINE bool is_space_separator(char32_t cp) {
  return unicode_detail::in_ranges(unicode_tables::kSpaceSeparator, cp);
}

IPUML_INLINE bool is_js_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

IPUML_INLINE void append_lower(std::u32string& out, char32_t cp) {
  if (cp < 0x80) {
    out += (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    return;
  }
  if (const auto* m = unicode_detail::find_mapping(unicode_tables::kLower, cp)) {
    for (int k = 0; k < m->n; ++k) out += m->to[k];
    return;
  }
  out += cp;
}

namespace unicode_detail {
inline bool is_cased(char32_t cp) { return is_letter(cp); }
}  // namespace unicode_detail

IPUML_INLINE std::u32string lower(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    // Final sigma: a capital sigma after a cased letter and not before one becomes U+03C2.
    if (s[i] == 0x3A3) {
      const bool after = i > 0 && unicode_detail::is_cased(s[i - 1]);
      const bool before = i + 1 < s.size() && unicode_detail::is_cased(s[i + 1]);
      out += (after && !before) ? char32_t{0x3C2} : char32_t{0x3C3};
      continue;
    }
    append_lower(out, s[i]);
  }
  return out;
}

IPUML_INLINE std::u32string strip_accents(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t cp : s) {
    if (cp >= 0xAC00 && cp <= 0xD7A3) {
      // Hangul syllables decompose algorithmically into leading, vowel and trailing jamo.
      const char32_t index = cp - 0xAC00;
      out += char32_t{0x1100} + index / (21 * 28);
      out += char32_t{0x1161} + (index % (21 * 28)) / 28;
      if (index % 28) out += char32_t{0x11A7} + index % 28;
      continue;
    }
    if (const auto* m = unicode_detail::find_mapping(unicode_tables::kStripped, cp)) {
      for (int k = 0; k < m->n; ++k) out += m->to[k];
      continue;
    }
    if (cp >= 0x300 && is_nonspacing_mark(cp)) continue;
    out += cp;
  }
  return out;
}

}  // namespace ipuml::datasets::unicode
