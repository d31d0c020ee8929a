// How the window writes a token: the 256 byte tokens of a GGUF file's
// byte-level vocabulary (gguf_models.h: id b is byte b), each between quotes
// as printable ASCII, an escaped line break or tab, or \xNN for another
// control character (no glyph) or a byte that is no whole UTF-8 character,
// which ImGui would draw as one U+FFFD that takes the closing quote with it;
// whole characters of several bytes as they are.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "gguf_models.h"
#include "headscope/model/model.h"
#include "process.h"
#include "widgets/ui.h"

using namespace headscope;

namespace {

TEST(ShownTokens, ByteTokensAreEscapedUnlessWholeCharacters) {
    test::TempDir dir;
    const auto file = dir.path / "bytes.gguf";
    test::write_gguf_family(file, test::gguf_family_spec(test::Family::llama), DType::Q8_0);
    const Tokenizer tokenizer = load_model(file.string()).tokenizer;
    for (int b = 0; b < 256; ++b) {
        std::string piece(1, static_cast<char>(b));
        if (b == '\n' || b == '\r' || b == '\t') {
            piece = b == '\n' ? "\\n" : b == '\r' ? "\\r" : "\\t";
        } else if (b < 0x20 || b >= 0x7f) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02X", b);
            piece = escaped;
        }
        EXPECT_EQ(shown_token(tokenizer, b, true), "'" + piece + "'") << "byte " << b;
    }
    EXPECT_EQ(visible_text("caf\xC3\xA9 \xE4\xB8\xAD\xF0\x9F\x98\x80\n"),
              "caf\xC3\xA9 \xE4\xB8\xAD\xF0\x9F\x98\x80\\n");
    EXPECT_EQ(visible_text("\xE4\xB8"), "\\xE4\\xB8");  // a character cut short
    EXPECT_EQ(visible_text("\xC3"
                           "a\xA9"),
              "\\xC3"
              "a\\xA9");  // a lead byte before no continuation
}

}  // namespace
