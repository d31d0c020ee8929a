// The strings the tokenizer tests compare with their references
// (tokenizer_texts.h): word lists of many scripts, whitespace, numbers,
// contractions, code and special tokens, and strings generated from them.
#include "tokenizer_texts.h"

#include <random>

namespace headscope::test::texts {
// Word lists laid out by hand: clang-format 14 packs these one a line.
// Left out on purpose, where the reference's JavaScript regex and PCRE2
// disagree: U+0085 and U+180E (\s to PCRE2, not to JavaScript), U+FEFF (the
// reverse), "'ſ" (PCRE2's caseless 's also matches ſ), and code points newer
// than Unicode 14 (PCRE2 10.42's tables).
// clang-format off
const std::vector<std::string> scripts = {
    "café", "naïve", "Ærøskøbing", "Łódź", "São Paulo", "crème brûlée", "Straße", "İstanbul", "œuvre", "Ångström",
    "Привет, мир", "Москва", "съешь же ещё этих мягких французских булок", "Καλημέρα κόσμε", "ΑΒΓΔ Ελληνικά",
    "مرحبا بالعالم", "العربية", "שלום עולם", "עברית", "नमस्ते दुनिया", "हिन्दी", "สวัสดีชาวโลก", "ภาษาไทย",
    "你好，世界", "日本語のテキスト", "東京タワー", "中文分词", "안녕하세요 세계", "한국어", "Hello", "world",
    "the", "quick", "brown", "fox", "tokenizer", "attention", "HEADSCOPE", "camelCase", "snake_case",
    "supercalifragilisticexpialidocious", "x", "I", "a", "ǅemal", "ǈubljana", "ʰaspirated", "HELLOworld",
    "helloWORLD", "iPhone", "XMLHttpRequest", "McDonald", "ﬁne", "ᏣᎳᎩ",
};
// Decomposed (NFD) text: Qwen's NFC normalizer composes it, the others do not.
const std::vector<std::string> decomposed = {
    "cafe\u0301", "e\u0301te\u0301", "man\u0303ana", "A\u030angstro\u0308m", "\u1100\u1161\u11a8",
    "o\u0308\u0304", "Cre\u0300me", "n\u0303", "\u0915\u093c", "a\u0301\u0302\u0303",
};
const std::vector<std::string> emoji = {
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸🇫🇷", "❤️", "🤖", "✨", "😀😀😀", "🧑🏿‍💻",
};
const std::vector<std::string> spaces = {
    " ", "  ", "   ", "      ", "\t", "\t\t", " \t ", "\t ", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n ", "\n ",
    " \n", "\r", "\u00a0", "\u3000", "\u2009", "\u2028", "\v", "\f", " \u00a0 ", "\u2003", " \t\n",
    "\t\t\t\t\t\t\t\t\t", "\n\n\n\n\n\n", "                                 ", "\n\t\t", "\r\n\t",
};
// Characters Gemma 3's vocabulary lacks (it falls back to their bytes):
// controls, private use, old scripts, a musical symbol.
const std::vector<std::string> unusual = {
    "\u0001", "\u001b[0m", "\u007f", "\ue000", "\U000F0000", "𠀀", "𓀀", "\u2066", "ꙮ", "\U0001D11E",
};
const std::vector<std::string> numbers = {
    "3.14159", "1,000,000", "٣٤٥", "१२३", "½", "²", "Ⅻ", "2024-06-07", "v1.2.3", "0x1F", "1234567",
    "12345678901", "3.14e-10", "1st", "١٢٣٤٥٦٧",
};
const std::vector<std::string> contractions = {
    "'s", "'S", "'LL", "'ll", "'Re", "'VE", "'d", "'M", "'t", "it's", "IT'S", "they'LL", "We'Re", "'", "''",
    "don't", "DON'T", "I'M", "YOU'RE", "she'd've", "y'all", "'Ll", "O'Neil", "ǅemal's", "ʰ's",
};
const std::vector<std::string> code = {
    "def f(x): return x * 2", "for (int i = 0; i < n; ++i) {", "std::vector<int> v;", "if x == y:\n    pass\n",
    "\tif (ok) {\n\t\treturn;\n\t}", "console.log(\"hi\");", "<div class=\"a\">", "SELECT * FROM t WHERE id = 1;",
    "#include <stdio.h>", "λx. x", "a+b=c", "->", "=>", "!=", "&&", "||", "::", "/*", "*/", "//", "...", "—",
    "“quoted”", "(parenthesis)", "[brackets]", "{braces}", "@user", "$100", "50%", "^_^", "a/b/c\n\n",
    "path/to/file.txt\r\n", "// comment\n", "!!!\n\n", "):\r\n", "\t\tx = {'a': 1}\n",
};
// Every tokenizer's special tokens, in every tokenizer's texts: elsewhere they are plain text.
const std::vector<std::string> specials = {
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|reserved_special_token_5|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
    "<tool_call>", "<s>", "</s>", "<unk>", "<|im_start", "<s", "<0x41>", "<bos>", "<eos>", "<pad>", "<mask>",
    "[multimodal]", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
    "<image_soft_token>", "<unused0>", "<unused6241>", "<start_of_turn", "<|startoftext|>", "<|start|>",
    "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|constrain|>", "<|call|>", "<|endofprompt|>",
    "<|reserved_200017|>", "<|start",
};
const std::vector<std::string> fixed = {
    "", " ", "a", "'s", "'S", "\n", "  ", "   x", "x   ", "\t\tx", " \t x", "Hello world", " Hello",
    "<|im_start|>user\nhi<|im_end|>", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
    "<s>", "<s>Hello", "Hello<s>", "<s> Hello</s>", "<|begin_of_text|>", "<|begin_of_text|>Hello world",
    "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "<think>\nok\n</think>\n\nyes", "<<s>>",
    "HE'S HERE AND THEY'RE LATE, WE'LL SEE", "She said, \"Don't!\" and I've agreed.", "line one\r\nline two\r\n",
    "trailing spaces   ", "  leading", "tabs\tand\tspaces \t mixed", "\n\n\n", "\r\n\r\n",
    "<bos><start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_image><image_soft_token><image_soft_token><end_of_image>", "<start_of_turn> user <end_of_turn>",
    "<|start|>system<|message|>You are helpful.<|end|><|start|>user<|message|>hi<|end|><|start|>assistant",
    "<|start|>assistant<|channel|>analysis<|message|>Think.<|end|>",
    "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"x\": 1}<|call|>",
};
// clang-format on

// The strings each tokenizer is compared on: the fixed ones, digit runs of
// every length to 24, long runs, then random mixtures of the lists above.
std::vector<std::string> generated_strings() {
    std::mt19937 rng(20250101);
    // rng() % n rather than a distribution: the same strings with any standard library.
    auto pick = [&](const std::vector<std::string>& from) -> const std::string& { return from[rng() % from.size()]; };
    std::vector<std::string> strings = fixed;
    for (int n = 1; n <= 24; ++n) {
        std::string digits;
        for (int i = 0; i < n; ++i) digits.push_back(static_cast<char>('0' + rng() % 10));
        strings.push_back(digits);
        strings.push_back("x" + digits + " " + digits + "y");
    }
    for (int n = 1; n <= 6; ++n) {
        strings.push_back("word" + std::string(n, ' ') + "word");
        strings.push_back("word" + std::string(n, '\t') + "word");
        strings.push_back(std::string(n, ' ') + "42");
        strings.push_back("end" + std::string(n, ' '));
    }
    strings.push_back(std::string(300, ' '));
    strings.push_back(std::string(200, '\n'));
    strings.push_back(std::string(100, '\t'));
    for (int i = 0; i < 40; ++i) strings.back() += " \t\n";
    strings.push_back(std::string(300, '9'));
    std::string letters;
    for (int i = 0; i < 2000; ++i) letters.push_back(static_cast<char>('a' + rng() % 26));
    strings.push_back(letters);

    const std::vector<const std::vector<std::string>*> kinds = {
        &scripts, &scripts, &scripts, &decomposed, &emoji, &spaces, &numbers, &contractions, &code, &specials, &unusual,
    };
    while (strings.size() < 400) {
        std::string s;
        const int fragments = 1 + static_cast<int>(rng() % 8);
        for (int f = 0; f < fragments; ++f) {
            switch (rng() % 4) {
                case 0: break;
                case 1: s += pick(spaces); break;
                default: s += ' '; break;
            }
            s += pick(*kinds[rng() % kinds.size()]);
            if (rng() % 6 == 0) s += std::to_string(rng() % 100000);
        }
        if (rng() % 6 == 0) s += pick(spaces);
        strings.push_back(std::move(s));
    }
    return strings;
}

}  // namespace headscope::test::texts
