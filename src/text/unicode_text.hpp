// unicode_text.hpp - the Unicode steps of CLIP's text clean-up, through ICU (libicu-dev): UTF-8 <-> code
// points, NFC, lower-casing, and the character classes of CLIP's pre-tokenisation pattern.
#pragma once
#include <string>

namespace attnmap {

/// The code points of UTF-8 `text`. Errors: bytes that are not well-formed UTF-8 (RFC 3629) throw Error
/// naming `what` (e.g. "text \"...\"") and the byte offset.
std::u32string utf8_to_code_points(const std::string& text, const std::string& what);

/// UTF-8 of code points (each a valid scalar value, as utf8_to_code_points gives).
std::string code_points_to_utf8(const std::u32string& text);
void append_utf8(std::string& out, char32_t c);

/// Unicode Normalization Form C (ICU's Normalizer2), as Python's unicodedata.normalize("NFC", s) and
/// ftfy.fix_text's last step (normalization="NFC").
std::u32string nfc(const std::u32string& text);

/// Python's str.lower(): the full Unicode lower-case mapping (SpecialCasing: "İ" -> "i̇"), with the
/// Final_Sigma context ("ΟΔΟΣ" -> "οδος"); ICU's language-independent (root) lower-casing.
std::u32string lower_like_python(const std::u32string& text);

/// The Hugging Face tokenizers library's Lowercase normalizer: each code point by itself through the full
/// lower-case mapping (Rust's char::to_lowercase), no context: a word-final "Σ" becomes "σ", not "ς".
std::u32string lower_each_code_point(const std::u32string& text);

/// Python's str.isspace() (Zs, Zl, Zp and U+0009..U+000D, U+001C..U+001F, U+0085): what str.split(),
/// str.strip() and the re module's \s see.
bool is_python_space(char32_t c);

/// The Unicode White_Space property: what the regex module's \s (OpenAI CLIP's whitespace_clean and
/// pattern) and Oniguruma's \s (Hugging Face tokenizers) match. Not U+001C..U+001F, unlike is_python_space.
bool is_white_space(char32_t c);

/// General category L (Lu, Ll, Lt, Lm, Lo): the pattern's \p{L}.
bool is_letter(char32_t c);

/// General category N (Nd, Nl, No): the pattern's \p{N}.
bool is_number(char32_t c);

/// The pattern's [^\s\p{L}\p{N}] under the regex module's IGNORECASE (OpenAI CLIP, open_clip): a negated
/// class matches c only when none of its case variants (c, its simple lower, upper, title and folded forms)
/// is white space, a letter or a number. So U+0345 COMBINING GREEK YPOGEGRAMMENI (a mark whose upper case is
/// "Ι") matches no part of the pattern there and is dropped like a space; [\p{L}] itself is not widened.
bool is_other_ignoring_case(char32_t c);

/// The simple case folding of c (ICU u_foldCase, default folding): what the regex module's IGNORECASE
/// compares ("ſ" matches "s").
char32_t fold_case(char32_t c);

}  // namespace attnmap
