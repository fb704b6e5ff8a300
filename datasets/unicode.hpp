// UTF-8 decoding and the few Unicode properties the tokenizers need (letters, numbers,
// punctuation, marks, lower-casing, accent stripping), from tables generated out of node's
// Unicode data by scripts/gen-unicode-tables.js: no ICU.
#pragma once

#include <ipuml/core/config.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ipuml::datasets::unicode {

// One decoded character: its code point and where its bytes are. A byte that starts no valid
// UTF-8 sequence (stray continuation, overlong form, surrogate, truncated sequence) is one
// character of its own with cp = U+FFFD and valid = false, so the bytes are never lost.
struct Char {
  char32_t cp = 0;
  size_t offset = 0;
  size_t length = 0;
  bool valid = true;
};

std::vector<Char> decode_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t cp);
std::string to_utf8(const std::u32string& cps);

bool is_letter(char32_t cp);           // category L
bool is_number(char32_t cp);           // category N
bool is_punctuation(char32_t cp);      // category P
bool is_nonspacing_mark(char32_t cp);  // category Mn
bool is_other(char32_t cp);            // category C (Cc, Cf, Cn, Co, Cs)
bool is_space_separator(char32_t cp);  // category Zs

// JavaScript's \s (WhiteSpace and LineTerminator), which the GPT-2 encoder's pattern uses.
bool is_js_space(char32_t cp);

// The full lower-case mapping of one code point (one or two code points), without context.
void append_lower(std::u32string& out, char32_t cp);
// Lower-cases a string as Python's str.lower() does, Greek final sigma included.
std::u32string lower(const std::u32string& s);
// NFD with nonspacing marks dropped (BERT's _run_strip_accents), Hangul by formula.
std::u32string strip_accents(const std::u32string& s);

}  // namespace ipuml::datasets::unicode

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/unicode_impl.hpp>
#endif
