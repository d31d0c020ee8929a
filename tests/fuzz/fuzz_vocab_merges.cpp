// libFuzzer harness for Tokenizer::load: the input is vocab.json, then the
// line "---", then merges.txt; that is, the bytes before the first "\n---\n"
// are vocab.json and the bytes after it merges.txt (empty when there is no
// separator). The separator cannot occur in valid JSON, whose strings hold
// no raw newline. A tokenizer that loads then encodes a fixed text whose
// tokens must join back to it, or throws Error.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "headscope/tokenize/tokenizer.h"

using namespace headscope;

namespace {

// Letters, digits, punctuation, contractions, runs of spaces and CJK.
constexpr std::string_view sample_text = "Hello, world! It's 2024: they'll see\n\n  naïve café 日本語 ;-)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input = fuzz::as_bytes(data, size);
    const auto [vocab, merges] = fuzz::split_at_dashes(input);
    const std::filesystem::path vocab_path = fuzz::scratch_dir() / "vocab.json";
    const std::filesystem::path merges_path = fuzz::scratch_dir() / "merges.txt";
    fuzz::write_file(vocab_path, vocab);
    fuzz::write_file(merges_path, merges.value_or(""));

    fuzz::expect_success_or_error([&] {
        const Tokenizer tokenizer = Tokenizer::load(vocab_path, merges_path);
        std::vector<int32_t> ids;
        try {
            ids = tokenizer.encode(sample_text);
        } catch (const Error& e) {  // a merge whose result the vocab lacks, say
            fuzz::check_error_message(e.what());
            return;
        }
        std::string joined;
        for (int32_t id : ids) {
            if (id < 0 || id >= tokenizer.vocab_size()) fuzz::fail("encode gave token id " + std::to_string(id));
            joined += tokenizer.token_bytes(id);
        }
        if (joined != sample_text) fuzz::fail("the sample text's tokens join to \"" + joined + "\"");
    });
    return 0;
}
