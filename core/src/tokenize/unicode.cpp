// UTF-8 and Unicode for the tokenizer: see unicode.h. The one place in the
// tokenizer that calls utf8proc, for decoding, encoding, NFC and character
// categories alike.
#include "unicode.h"

#include "headscope/base/error.h"

#include <utf8proc.h>
#include <algorithm>
#include <cstdlib>

namespace headscope {

CodePointAt code_point_at(std::string_view text, size_t offset) {
    utf8proc_int32_t value = 0;
    // utf8proc rejects overlong forms, surrogates and values past U+10FFFF.
    const utf8proc_ssize_t length = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data()) + offset,
                                                     static_cast<utf8proc_ssize_t>(text.size() - offset), &value);
    if (length <= 0) return {0, 0};
    return {static_cast<char32_t>(value), static_cast<size_t>(length)};
}

CodePointAt checked_code_point_at(std::string_view text, size_t offset) {
    const CodePointAt cp = code_point_at(text, offset);
    if (cp.length == 0) throw Error("invalid UTF-8 at byte " + std::to_string(offset));
    return cp;
}

void check_utf8(std::string_view text) {
    for (size_t offset = 0; offset < text.size();) {
        offset += static_cast<unsigned char>(text[offset]) < 0x80 ? 1 : checked_code_point_at(text, offset).length;
    }
}

size_t utf8_length(char lead) { return static_cast<size_t>(utf8proc_utf8class[static_cast<unsigned char>(lead)]); }

size_t code_point_start_before(std::string_view text, size_t end) {
    size_t start = end - 1;
    while (start > 0 && is_continuation_byte(text[start])) --start;  // back to the lead byte
    return start;
}

std::string utf8_of(char32_t cp) {
    utf8proc_uint8_t buffer[4];
    const utf8proc_ssize_t length = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buffer);
    return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length));
}

namespace {

// `text` in normalization form C (`compose`) or D, or with `compat` KC.
std::string normalized(std::string_view text, bool compose, bool compat = false) {
    // ASCII text is in both forms already.
    if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
        return std::string(text);
    }
    utf8proc_uint8_t* composed = nullptr;
    const utf8proc_ssize_t length = utf8proc_map(
        reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()), &composed,
        static_cast<utf8proc_option_t>(UTF8PROC_STABLE | (compose ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
                                       (compat ? UTF8PROC_COMPAT : 0)));
    if (length < 0) throw Error(std::string("Unicode normalization failed: ") + utf8proc_errmsg(length));
    std::string out(reinterpret_cast<const char*>(composed), static_cast<size_t>(length));
    std::free(composed);
    return out;
}

}  // namespace

std::string to_nfc(std::string_view text) { return normalized(text, true); }
std::string to_nfd(std::string_view text) { return normalized(text, false); }
std::string to_nfkc(std::string_view text) { return normalized(text, true, true); }

char32_t to_lower(char32_t cp) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))); }

char32_t nfd_first_code_point(char32_t cp) {
    // A canonical decomposition has at most 4 code points.
    constexpr utf8proc_ssize_t room = 8;
    utf8proc_int32_t decomposed[room];
    const utf8proc_ssize_t length =
        utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), decomposed, room, UTF8PROC_DECOMPOSE, nullptr);
    return length > 0 && length <= room ? static_cast<char32_t>(decomposed[0]) : cp;
}

namespace {

utf8proc_category_t category_of(char32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); }

}  // namespace

bool is_letter(char32_t cp) {
    switch (category_of(cp)) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO: return true;
        default: return false;
    }
}

bool is_number(char32_t cp) {
    const utf8proc_category_t category = category_of(cp);
    return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL || category == UTF8PROC_CATEGORY_NO;
}

bool is_white_space(char32_t cp) {
    // TAB..CR, U+0085, U+2028, U+2029 and category Zs. (JavaScript's \s, used
    // by the test reference, differs in two code points: it adds U+FEFF and
    // lacks U+0085.)
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x85 || cp == 0x2028 || cp == 0x2029 ||
           category_of(cp) == UTF8PROC_CATEGORY_ZS;
}

bool is_word_char(char32_t cp) {
    if (is_letter(cp)) return true;
    switch (category_of(cp)) {
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC:
        case UTF8PROC_CATEGORY_ME:
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_PC: return true;
        default: return cp == 0x200C || cp == 0x200D;
    }
}

bool is_other(char32_t cp) {
    switch (category_of(cp)) {
        case UTF8PROC_CATEGORY_CC:
        case UTF8PROC_CATEGORY_CF:
        case UTF8PROC_CATEGORY_CN:
        case UTF8PROC_CATEGORY_CO:
        case UTF8PROC_CATEGORY_CS: return true;
        default: return false;
    }
}

bool is_punctuation(char32_t cp) {
    switch (category_of(cp)) {
        case UTF8PROC_CATEGORY_PC:
        case UTF8PROC_CATEGORY_PD:
        case UTF8PROC_CATEGORY_PS:
        case UTF8PROC_CATEGORY_PE:
        case UTF8PROC_CATEGORY_PI:
        case UTF8PROC_CATEGORY_PF:
        case UTF8PROC_CATEGORY_PO: return true;
        default: return false;
    }
}

bool is_nonspacing_mark(char32_t cp) { return category_of(cp) == UTF8PROC_CATEGORY_MN; }

bool is_mark(char32_t cp) {
    const utf8proc_category_t category = category_of(cp);
    return category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_MC || category == UTF8PROC_CATEGORY_ME;
}

}  // namespace headscope
