// The strings the tokenizer tests compare with their references: word
// lists (tokenizer_texts.cpp says what each holds and what is left out on
// purpose) and the few hundred strings generated from them.
#pragma once
#include <string>
#include <vector>

namespace headscope::test::texts {

extern const std::vector<std::string> scripts, decomposed, emoji, spaces, unusual, numbers, contractions, code,
    specials, fixed;

// The fixed strings, digit runs of every length to 24, long runs, then
// random mixtures of the lists, the same with any standard library.
std::vector<std::string> generated_strings();

}  // namespace headscope::test::texts
