// libFuzzer harness for the tokenizer's encode, with the built-in model's
// vocabulary: the input is the text, any bytes. On valid UTF-8 the
// pre-tokenizer's pieces must tile the text, in order, none empty, and the
// tokens' bytes must join back to it; on invalid UTF-8 both must throw Error.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "headscope/model/model.h"
#include "headscope/tokenize/tokenizer.h"

using namespace headscope;

namespace {

const Tokenizer& builtin_tokenizer() {
    static const Tokenizer tokenizer = [] {
        const std::filesystem::path dir = resolve_model_path(builtin_model);
        return Tokenizer::load(dir / "vocab.json", dir / "merges.txt");
    }();
    return tokenizer;
}

// Well-formed UTF-8 as Unicode's table 3-7 has it (no overlong forms, no
// surrogates, nothing past U+10FFFF), written here independently of the
// tokenizer's decoder.
bool is_valid_utf8(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
        const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
        const unsigned char b0 = byte(i);
        size_t length;
        unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
        if (b0 < 0x80) {
            length = 1;
        } else if (b0 >= 0xC2 && b0 <= 0xDF) {
            length = 2;
        } else if (b0 >= 0xE0 && b0 <= 0xEF) {
            length = 3;
            if (b0 == 0xE0) low = 0xA0;
            if (b0 == 0xED) high = 0x9F;
        } else if (b0 >= 0xF0 && b0 <= 0xF4) {
            length = 4;
            if (b0 == 0xF0) low = 0x90;
            if (b0 == 0xF4) high = 0x8F;
        } else {
            return false;
        }
        if (i + length > text.size()) return false;
        if (length > 1 && (byte(i + 1) < low || byte(i + 1) > high)) return false;
        for (size_t k = 2; k < length; ++k)
            if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return false;
        i += length;
    }
    return true;
}

// Runs `f` and aborts unless it throws an Error with a one-line message.
template <typename F>
void expect_error(const char* what, F&& f) {
    try {
        f();
    } catch (const Error& e) {
        fuzz::check_error_message(e.what());
        return;
    }
    fuzz::fail(std::string(what) + " accepted invalid UTF-8");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text = fuzz::as_bytes(data, size);
    const Tokenizer& tokenizer = builtin_tokenizer();
    if (!is_valid_utf8(text)) {
        expect_error("pretokenize", [&] { pretokenize(text); });
        expect_error("encode", [&] { tokenizer.encode(text); });
        return 0;
    }

    try {
        size_t offset = 0;
        for (std::string_view piece : pretokenize(text)) {
            if (piece.empty() || piece.data() != text.data() + offset)
                fuzz::fail("a piece at byte " + std::to_string(offset) + " is empty or out of place");
            offset += piece.size();
        }
        if (offset != text.size()) fuzz::fail("the pieces end at byte " + std::to_string(offset));

        std::string joined;
        for (int32_t id : tokenizer.encode(text)) {
            if (id < 0 || id >= tokenizer.vocab_size()) fuzz::fail("encode gave token id " + std::to_string(id));
            joined += tokenizer.token_bytes(id);
        }
        if (joined != text) fuzz::fail("the tokens join to other bytes than the text");
    } catch (const Error& e) {
        fuzz::fail(std::string("valid UTF-8 was refused: ") + e.what());
    }
    return 0;
}
