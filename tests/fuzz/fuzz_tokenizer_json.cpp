// libFuzzer harness for Tokenizer::load_json: the input is tokenizer.json,
// then optionally the line "---" and a text to encode; that is, the bytes
// before the first "\n---\n" are the file and the bytes after it the text (a
// fixed sample when there is no separator). The separator cannot occur in
// valid JSON, whose strings hold no raw newline. A tokenizer that loads
// encodes the text, with and without special tokens, into ids below
// vocab_size() whose bytes token_bytes gives, or throws Error.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "headscope/tokenize/tokenizer.h"

using namespace headscope;

namespace {

// Letters, digits, punctuation, contractions, runs of spaces, CJK, emoji and special tokens.
constexpr std::string_view sample_text =
    "<s>Hello, world! It's 2024: they'LL see\r\n\n  naïve café 日本語 😀 <|im_start|>user\nhi<|im_end|>";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input = fuzz::as_bytes(data, size);
    const auto [file, given_text] = fuzz::split_at_dashes(input);
    const std::string_view text = given_text.value_or(sample_text);
    const std::filesystem::path path = fuzz::scratch_dir() / "tokenizer.json";
    fuzz::write_file(path, file);

    fuzz::expect_success_or_error([&] {
        const Tokenizer tokenizer = Tokenizer::load_json(path);
        for (const bool add_special : {true, false}) {
            std::vector<int32_t> ids;
            try {
                ids = tokenizer.encode(text, add_special);
            } catch (const Error& e) {  // invalid UTF-8, a character without a token, a pattern's step limit
                fuzz::check_error_message(e.what());
                continue;
            }
            for (const int32_t id : ids) {
                if (id < 0 || id >= tokenizer.vocab_size()) fuzz::fail("encode gave token id " + std::to_string(id));
                tokenizer.token_bytes(id);
            }
        }
    });
    return 0;
}
