// UTF-8 and Unicode for the tokenizer (private to core), all through
// utf8proc: decoding and checking UTF-8, encoding a code point, NFC and NFD,
// lowercasing, and the character classes the normalizers, pre-tokenizers and
// added tokens test.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace headscope {

// A code point decoded from UTF-8, and how many bytes it took.
struct CodePointAt {
    char32_t value;
    size_t length;  // 0 when no well-formed character starts there
};

// The code point that starts at byte `offset` (below text.size()) of `text`.
// Well-formed means no overlong form, surrogate or value past U+10FFFF, and
// no missing or stray continuation byte.
CodePointAt code_point_at(std::string_view text, size_t offset);
// code_point_at, but throws Error "invalid UTF-8 at byte N" where no
// well-formed character starts.
CodePointAt checked_code_point_at(std::string_view text, size_t offset);
// Throws Error "invalid UTF-8 at byte N" unless `text` is well-formed UTF-8.
void check_utf8(std::string_view text);
// The length in bytes of the character that byte `lead` starts, in
// well-formed UTF-8.
size_t utf8_length(char lead);
// Whether `byte` continues a character (10xxxxxx) rather than starting one.
inline bool is_continuation_byte(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }
// Where the code point that ends at byte `end` (above 0) of well-formed UTF-8
// `text` starts.
size_t code_point_start_before(std::string_view text, size_t end);

// Each code point of well-formed `text` through `f`, which appends to `out`.
template <typename F>
std::string each_code_point(std::string_view text, F f) {
    std::string out;
    out.reserve(text.size());
    for (size_t at = 0; at < text.size();) {
        const CodePointAt cp = code_point_at(text, at);
        f(cp.value, out);
        at += cp.length;
    }
    return out;
}

// A code point as UTF-8.
std::string utf8_of(char32_t cp);
// Well-formed UTF-8 `text` in Unicode's normalization form C, D, or KC.
std::string to_nfc(std::string_view text);
std::string to_nfd(std::string_view text);
std::string to_nfkc(std::string_view text);
// A code point's simple lowercase mapping (itself when it has none).
char32_t to_lower(char32_t cp);
// The first code point of a code point's NFD (its base letter, when it is one
// with accents; a Hangul syllable's leading consonant).
char32_t nfd_first_code_point(char32_t cp);

// \p{L}: a letter.
bool is_letter(char32_t cp);
// \p{N}: a number (decimal digit, letter number or other number), which is
// also Rust's char::is_numeric.
bool is_number(char32_t cp);
// Unicode White_Space: GPT-2's \s, that of Python's `regex` module.
bool is_white_space(char32_t cp);
// Rust's char::is_other: a control, format, unassigned, private-use or surrogate code point.
bool is_other(char32_t cp);
// \p{P}: punctuation of any kind.
bool is_punctuation(char32_t cp);
// \p{Mn}: a nonspacing mark (an accent, once decomposed).
bool is_nonspacing_mark(char32_t cp);
// \p{M}: a mark of any kind (nonspacing, spacing or enclosing).
bool is_mark(char32_t cp);
// A word character as Rust's regex \w has one: a letter, mark, decimal digit
// or letter number, connector punctuation, or a zero-width (non-)joiner.
bool is_word_char(char32_t cp);

}  // namespace headscope
