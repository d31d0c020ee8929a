// GPT-2's pre-tokenizer (tokenizer.h's pretokenize): its regex written by hand
// over code points, with the character classes of unicode.h. GPT-2's own files
// pre-tokenize with it; tokenizer.json's ByteLevel runs the regex through PCRE2.
#include "headscope/tokenize/tokenizer.h"

#include "unicode.h"

namespace headscope {

namespace {

enum class CharClass : uint8_t { Letter, Number, Space, Other };

// \p{L}, \p{N}, GPT-2's \s (Unicode White_Space), or none of them.
CharClass classify(char32_t cp) {
    if (is_letter(cp)) return CharClass::Letter;
    if (is_number(cp)) return CharClass::Number;
    return is_white_space(cp) ? CharClass::Space : CharClass::Other;
}

struct CodePoint {
    char32_t value;
    size_t offset;  // of its first byte in the text
    CharClass cls;
};

// Throws Error on invalid UTF-8.
std::vector<CodePoint> decode_utf8(std::string_view text) {
    std::vector<CodePoint> code_points;
    code_points.reserve(text.size());
    for (size_t offset = 0; offset < text.size();) {
        const CodePointAt cp = checked_code_point_at(text, offset);
        code_points.push_back({cp.value, offset, classify(cp.value)});
        offset += cp.length;
    }
    return code_points;
}

size_t run_end(const std::vector<CodePoint>& code_points, size_t i, CharClass cls) {
    while (i < code_points.size() && code_points[i].cls == cls) {
        ++i;
    }
    return i;
}

// Where the leftmost alternative of GPT-2's pattern that matches at `i` ends.
size_t match_end(const std::vector<CodePoint>& code_points, size_t i) {
    const size_t n = code_points.size();
    if (code_points[i].value == U'\'' && i + 1 < n) {
        const char32_t a = code_points[i + 1].value;
        if (a == U's' || a == U't' || a == U'm' || a == U'd') {
            return i + 2;
        }
        if (i + 2 < n) {
            const char32_t b = code_points[i + 2].value;
            if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) {
                return i + 3;
            }
        }
    }
    // ` ?\p{L}+`, ` ?\p{N}+` and ` ?[^\s\p{L}\p{N}]+`: only U+0020 may lead a run.
    const size_t start = (code_points[i].value == U' ' && i + 1 < n) ? i + 1 : i;
    if (code_points[start].cls != CharClass::Space) {
        return run_end(code_points, start, code_points[start].cls);
    }
    // `\s+(?!\S)` backs off one code point before a non-space so that the last
    // space can lead the next word; `\s+` then takes a lone space.
    const size_t end = run_end(code_points, i, CharClass::Space);
    return (end < n && end - i >= 2) ? end - 1 : end;
}

}  // namespace

std::vector<std::string_view> pretokenize(std::string_view text) {
    const std::vector<CodePoint> code_points = decode_utf8(text);
    auto offset = [&](size_t i) { return i < code_points.size() ? code_points[i].offset : text.size(); };
    std::vector<std::string_view> pieces;
    for (size_t i = 0; i < code_points.size();) {
        const size_t end = match_end(code_points, i);
        pieces.push_back(text.substr(offset(i), offset(end) - offset(i)));
        i = end;
    }
    return pieces;
}

}  // namespace headscope
