// PCRE2 regular expressions for tokenizer.json's pre-tokenizers and Replace
// normalizers (private to core): compiled once, JIT where PCRE2 has it, and
// matched under two limits, so that no pattern, however it backtracks, can hang an encode:
// PCRE2's step limit on each search, and one work budget for the whole
// encode, the CPU time its searches take. A count of steps cannot be the
// budget: PCRE2 counts backtracking points, not the bytes a repeat scans
// again ("a*c|a" on 80,000 a's makes 320,000 steps in 5.7 s). Every pattern
// item a search visits calls back (PCRE2's auto-callout), so the budget is
// checked as the search goes, however long one search runs.
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
// stack, the limits, the encode's work so far): one per encode, made on the
// thread that encodes and never shared with another.
class MatchScratch {
public:
    // The CPU time an encode's searches may take together: the real patterns
    // take at most 31 ms on 128 KB of any text (GPT-2's, Llama 3's, Qwen 3's).
    static constexpr double budget_seconds = 2;

    MatchScratch();
    MatchScratch(const MatchScratch&) = delete;  // PCRE2 calls back with its address
    MatchScratch& operator=(const MatchScratch&) = delete;

private:
    friend class Pattern;
    // PCRE2's callout: counts the items visited and, every so many, looks
    // at the clock; over the budget it ends the search.
    static int visit(pcre2_callout_block* block, void* scratch);

    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data_;
    std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context_;
    std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)> jit_stack_;
    double spent_ = 0;     // the CPU time the encode's searches took before this find_all, in seconds
    double entered_ = 0;   // the thread's CPU time when this find_all began
    uint64_t visits_ = 0;  // pattern items the encode's searches visited
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
    // takes more steps than the limit, or the encode its work budget.
    void find_all(std::string_view text, MatchScratch& scratch, std::vector<Match>& out) const;
    // Whether it matches the empty text.
    bool matches_empty() const;

private:
    std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> code_;
    std::string where_;
};

}  // namespace headscope
