// PCRE2 patterns under limits: see pattern.h.
#include "pattern.h"

#include <time.h>

#include <new>

#include "headscope/base/error.h"
#include "unicode.h"

namespace headscope {

namespace {

// Longer than any pre-tokenizer pattern in use (Llama 3's is 120 bytes).
constexpr uint32_t max_pattern_bytes = 64 * 1024;
// Steps one search may take. A pre-tokenizer's search costs about a step per
// character it spans; a catastrophically backtracking one meets the limit in
// milliseconds instead of running for years.
constexpr uint32_t match_limit = 5'000'000;
// The JIT's backtracking stack grows up to this; the interpreter's heap too.
constexpr size_t jit_stack_bytes = 8 << 20;
constexpr uint32_t heap_limit_kib = 64 * 1024;

// The calling thread's CPU time: the work it did, whatever else the machine does.
double thread_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}
// Reading that clock costs a system call: it is read every this many items visited.
constexpr uint64_t visits_per_check = 4096;

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    const int length = pcre2_get_error_message(code, buffer, sizeof buffer);
    return length < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<char*>(buffer));
}

}  // namespace

MatchScratch::MatchScratch()
    : data_(pcre2_match_data_create(1, nullptr), pcre2_match_data_free),
      context_(pcre2_match_context_create(nullptr), pcre2_match_context_free),
      jit_stack_(pcre2_jit_stack_create(32 * 1024, jit_stack_bytes, nullptr), pcre2_jit_stack_free) {
    if (!data_ || !context_ || !jit_stack_) throw std::bad_alloc();
    pcre2_set_match_limit(context_.get(), match_limit);
    pcre2_set_heap_limit(context_.get(), heap_limit_kib);
    pcre2_jit_stack_assign(context_.get(), nullptr, jit_stack_.get());
    pcre2_set_callout(context_.get(), visit, this);
}

int MatchScratch::visit(pcre2_callout_block*, void* scratch) {
    auto& s = *static_cast<MatchScratch*>(scratch);
    if (++s.visits_ % visits_per_check != 0) return 0;
    // A negative answer ends the whole search (a positive one only fails this path).
    return s.spent_ + thread_cpu_seconds() - s.entered_ > budget_seconds ? PCRE2_ERROR_CALLOUT : 0;
}

Pattern::Pattern(std::string_view regex, bool literal, const std::string& where)
    : code_(nullptr, pcre2_code_free), where_(where) {
    const std::unique_ptr<pcre2_compile_context, decltype(&pcre2_compile_context_free)> context(
        pcre2_compile_context_create(nullptr), pcre2_compile_context_free);
    if (!context) throw std::bad_alloc();
    pcre2_set_max_pattern_length(context.get(), max_pattern_bytes);
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    // \C could split a character's bytes, and every piece must stay UTF-8.
    const uint32_t options =
        literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C | PCRE2_AUTO_CALLOUT;
    code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(), options, &error, &error_offset,
                              context.get()));
    if (!code_) {
        throw Error(where + ": " + pcre2_message(error) + " at byte " + std::to_string(error_offset) +
                    " of the pattern");
    }
    // Without the JIT (a platform PCRE2 lacks it for, or a pattern it refuses)
    // the interpreter matches the same, only slower.
    pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);
}

bool Pattern::matches_empty() const {
    const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create_from_pattern(code_.get(), nullptr), pcre2_match_data_free);
    if (!data) throw std::bad_alloc();
    return pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(""), 0, 0, 0, data.get(), nullptr) >= 0;
}

void Pattern::find_all(std::string_view text, MatchScratch& scratch, std::vector<Match>& out) const {
    // The budget counts the searches' time only, not the encode's other work.
    scratch.entered_ = thread_cpu_seconds();
    struct Leaving {
        MatchScratch& s;
        ~Leaving() { s.spent_ += thread_cpu_seconds() - s.entered_; }
    } leaving{scratch};
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t offset = 0;
    while (offset < text.size()) {
        // The text was checked once; PCRE2 would otherwise check it all again at every search.
        const int rc = pcre2_match(code_.get(), subject, text.size(), offset, PCRE2_NO_UTF_CHECK, scratch.data_.get(),
                                   scratch.context_.get());
        if (rc == PCRE2_ERROR_NOMATCH) return;
        if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT ||
            rc == PCRE2_ERROR_DEPTHLIMIT) {
            throw Error(where_ + ": the pattern took too many steps on this text (" + pcre2_message(rc) + ")");
        }
        if (rc == PCRE2_ERROR_CALLOUT)  // MatchScratch::visit: over the budget
            throw Error(where_ + ": the pattern took more than " +
                        std::to_string(static_cast<int>(MatchScratch::budget_seconds)) +
                        " s of work on this text (it backtracks too much)");
        if (rc < 0) throw Error(where_ + ": " + pcre2_message(rc));
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data_.get());
        const size_t start = ovector[0], end = ovector[1];
        if (end > start) out.push_back({start, end});
        if (end > offset) {
            offset = end;
        } else {
            // Past the code point at `offset`.
            offset += utf8_length(text[offset]);
        }
    }
}

}  // namespace headscope
