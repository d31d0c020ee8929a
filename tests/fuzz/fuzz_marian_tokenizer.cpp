// libFuzzer harness for Tokenizer::load_marian: the input is vocab.json, then
// the line "---", then a SentencePiece model (a serialized proto), which the
// harness writes as both source.spm and target.spm. A tokenizer that loads
// then encodes a fixed text on each side into ids within its vocabulary, or
// throws Error.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "headscope/tokenize/tokenizer.h"

using namespace headscope;

namespace {

// Language codes, special tokens, runs of spaces, NFKC's forms, CJK and emoji.
constexpr std::string_view sample_text =
    ">>fr<< Hello,  world</s> \xEF\xAC\x81ne caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input = fuzz::as_bytes(data, size);
    const auto [vocab, model] = fuzz::split_at_dashes(input);
    const std::filesystem::path dir = fuzz::scratch_dir();
    fuzz::write_file(dir / "vocab.json", vocab);
    fuzz::write_file(dir / "source.spm", model.value_or(""));
    fuzz::write_file(dir / "target.spm", model.value_or(""));

    fuzz::expect_success_or_error([&] {
        const Tokenizer tokenizer = Tokenizer::load_marian(dir);
        for (const std::vector<int32_t>& ids : {tokenizer.encode(sample_text), tokenizer.encode_target(sample_text)}) {
            for (int32_t id : ids)
                if (id < 0 || id >= tokenizer.vocab_size()) fuzz::fail("encode gave token id " + std::to_string(id));
        }
    });
    return 0;
}
