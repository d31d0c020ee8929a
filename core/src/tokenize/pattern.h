// PCRE2 regular expressions for tokenizer.json's pre-tokenizers (private to
// core): compiled once, JIT where PCRE2 has it, and matched under a step
// limit, so that no pattern, however it backtracks, can hang an encode.
#pragma once
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace headscope {

// A match's byte range in the text searched.
struct Match {
    size_t start;
    size_t end;
};

// What matching needs besides the compiled pattern (match data, the JIT
// stack, the limits): one per encode, never shared between threads.
class MatchScratch {
public:
    MatchScratch();

private:
    friend class Pattern;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data_;
    std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context_;
    std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)> jit_stack_;
};

class Pattern {
public:
    // `regex` in PCRE2's syntax with Unicode classes (PCRE2_UTF | PCRE2_UCP),
    // or with `literal` a plain string. Throws Error "<where>: <PCRE2's
    // message> at byte N of the pattern"; `where` (the file and field) also
    // starts find_all's errors.
    Pattern(std::string_view regex, bool literal, const std::string& where);

    // Appends the non-empty matches in `text`, which must be valid UTF-8, left
    // to right, as JavaScript's matchAll finds them (after an empty match the
    // search goes on one code point later). Throws Error when one search
    // takes more steps than the limit.
    void find_all(std::string_view text, MatchScratch& scratch, std::vector<Match>& out) const;

private:
    std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> code_;
    std::string where_;
};

}  // namespace headscope
