// Tests of the BPE tokenizer trainer (tools/bpe_trainer): merges worked out by
// hand, the written vocab.json/merges.txt loaded by the engine's tokenizer and
// round-tripping any text, determinism, and corpus document splitting.
#include "bpe_trainer.h"
#include "headscope/io/files.h"
#include "headscope/tokenize/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using headscope::BpeVocab;
using headscope::PieceCounts;
using headscope::read_file;
using headscope::Tokenizer;

// A directory under the system temp dir named after this process, removed by
// the destructor.
struct ScratchDir {
    explicit ScratchDir(const std::string& name)
        : path(fs::temp_directory_path() / ("headscope-bpe-" + std::to_string(getpid()) + "-" + name)) {
        fs::create_directories(path);
    }
    ~ScratchDir() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    fs::path path;
};

PieceCounts count_corpus(const std::string& corpus) {
    PieceCounts counts;
    for (std::string_view document : headscope::split_documents(corpus)) {
        headscope::count_pieces(document, counts);
    }
    return counts;
}

// A few hundred documents of English-like text, with end-of-text lines.
std::string small_corpus() {
    const std::vector<std::string> sentences = {
        "The attention head looks back at the previous token.",
        "Every head of the model has its own attention pattern.",
        "A small model learns to copy what came before; induction heads do it.",
        "The cat sat on the mat, and the dog sat on the log.",
        "Tokens are pieces of words: lower, lowest, newer, wider.",
    };
    std::string corpus;
    for (int i = 0; i < 300; ++i) {
        corpus += sentences[static_cast<size_t>(i) % sentences.size()] + " (" + std::to_string(i) + ")\n";
        corpus += sentences[static_cast<size_t>(i * 7 + 3) % sentences.size()] + "\n<|endoftext|>\n";
    }
    return corpus;
}

// Valid UTF-8 mixing ASCII, control characters, Latin-1, CJK and emoji:
// most of these bytes never occur in the training corpus.
std::string random_text(std::mt19937& rng) {
    const std::vector<std::string> parts = {"the",
                                            " attention",
                                            " head",
                                            "lowest",
                                            " ",
                                            "  ",
                                            "\n",
                                            "\t",
                                            "\x01",
                                            "\x7f",
                                            "'s",
                                            "123",
                                            "é",
                                            "ü",
                                            "ß",
                                            "日本語",
                                            "한국어",
                                            "😀",
                                            "\xF0\x9F\xA7\xA0",
                                            "…",
                                            "<|endoftext|>",
                                            "\r\n"};
    std::uniform_int_distribution<size_t> pick(0, parts.size() - 1);
    std::uniform_int_distribution<int> length(0, 30);
    std::string text;
    for (int n = length(rng); n > 0; --n) {
        text += parts[pick(rng)];
    }
    return text;
}

TEST(BpeTrainer, MergesMatchHandWorkedExample) {
    // Sennrich et al.'s example, counts per word:
    //   l o w (5)   l o w e r (2)   n e w e s t (6)   w i d e s t (3)
    // Pairs: e s 9, s t 9, w e 8, l o 7, o w 7, n e 6, e w 6, w i 3, i d 3, d e 3, e r 2.
    // 1. e+s (9; ties with s t, "e" < "s"): n e w es t, w i d es t; w e drops to 2.
    // 2. es+t (9): n e w est, w i d est.
    // 3. l+o (7; ties with o w, "l" < "o"): lo w, lo w e r.
    // 4. lo+w (7): low, low e r.
    // 5. e+w (6; ties with n e and w est, "e" < "n" < "w"): n ew est.
    // 6. ew+est (6; ties with n ew, "ew" < "n"): n ewest.
    // 7. n+ewest (6): newest.
    // 8. d+est (3; ties with w i and i d, "d" < "i" < "w"), 9. i+dest, 10. w+idest.
    // 11. e+r (2; ties with low e, "e" < "low"), 12. low+er; then no pair is left.
    const PieceCounts pieces = {{"low", 5}, {"lower", 2}, {"newest", 6}, {"widest", 3}};
    const BpeVocab vocab = headscope::train_bpe(pieces, 1000);

    struct Expected {
        const char* left;
        const char* right;
        int64_t count;
    };
    const std::vector<Expected> expected = {
        {"e", "s", 9},     {"es", "t", 9},  {"l", "o", 7},    {"lo", "w", 7},    {"e", "w", 6}, {"ew", "est", 6},
        {"n", "ewest", 6}, {"d", "est", 3}, {"i", "dest", 3}, {"w", "idest", 3}, {"e", "r", 2}, {"low", "er", 2},
    };
    ASSERT_EQ(vocab.merges.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
        SCOPED_TRACE("merge " + std::to_string(i + 1));
        EXPECT_EQ(vocab.merges[i].left, expected[i].left);
        EXPECT_EQ(vocab.merges[i].right, expected[i].right);
        EXPECT_EQ(vocab.merges[i].count, expected[i].count);
    }
    ASSERT_EQ(vocab.tokens.size(), 256 + expected.size());
    EXPECT_EQ(vocab.tokens[256], "es");
    EXPECT_EQ(vocab.tokens.back(), "lower");

    // n_tokens stops training early.
    EXPECT_EQ(headscope::train_bpe(pieces, 256 + 3).merges.size(), 3u);
}

TEST(BpeTrainer, WrittenFilesLoadAndRoundTripAnyText) {
    const ScratchDir dir("roundtrip");
    const BpeVocab vocab = headscope::train_bpe(count_corpus(small_corpus()), 400);
    ASSERT_EQ(vocab.tokens.size(), 400u);
    headscope::write_gpt2_tokenizer(vocab, dir.path);
    EXPECT_TRUE(read_file(dir.path / "merges.txt").starts_with("#version: 0.2\n"));

    const Tokenizer tokenizer = Tokenizer::load(dir.path / "vocab.json", dir.path / "merges.txt");
    ASSERT_EQ(tokenizer.vocab_size(), 401);
    for (int b = 0; b < 256; ++b) {
        EXPECT_EQ(tokenizer.token_bytes(b), std::string(1, static_cast<char>(b)));
    }
    for (size_t id = 256; id < vocab.tokens.size(); ++id) {
        EXPECT_EQ(tokenizer.token_bytes(static_cast<int32_t>(id)), vocab.tokens[id]);
    }
    EXPECT_EQ(tokenizer.token_bytes(400), "<|endoftext|>");

    std::mt19937 rng(4);
    for (int i = 0; i < 300; ++i) {
        const std::string text = random_text(rng);
        std::string decoded;
        for (int32_t id : tokenizer.encode(text)) {
            ASSERT_LT(id, 400) << "the end-of-text token is never produced by encoding text";
            decoded += tokenizer.token_bytes(id);
        }
        ASSERT_EQ(decoded, text);
    }
}

TEST(BpeTrainer, FrequentWordBecomesOneToken) {
    const ScratchDir dir("frequent");
    headscope::write_gpt2_tokenizer(headscope::train_bpe(count_corpus(small_corpus()), 400), dir.path);
    const Tokenizer tokenizer = Tokenizer::load(dir.path / "vocab.json", dir.path / "merges.txt");
    for (const char* word : {" attention", "The", " the", " model"}) {
        const std::vector<int32_t> ids = tokenizer.encode(word);
        ASSERT_EQ(ids.size(), 1u) << word;
        EXPECT_EQ(tokenizer.token_bytes(ids[0]), word);
    }
}

TEST(BpeTrainer, Deterministic) {
    const PieceCounts pieces = count_corpus(small_corpus());
    // The same counts inserted in another order hash into another layout.
    PieceCounts reordered(pieces.bucket_count() * 4 + 1);
    std::vector<std::pair<std::string, int64_t>> sorted(pieces.begin(), pieces.end());
    std::sort(sorted.rbegin(), sorted.rend());
    reordered.insert(sorted.begin(), sorted.end());

    const ScratchDir a("det-a");
    const ScratchDir b("det-b");
    headscope::write_gpt2_tokenizer(headscope::train_bpe(pieces, 400), a.path);
    headscope::write_gpt2_tokenizer(headscope::train_bpe(reordered, 400), b.path);
    EXPECT_EQ(read_file(a.path / "vocab.json"), read_file(b.path / "vocab.json"));
    EXPECT_EQ(read_file(a.path / "merges.txt"), read_file(b.path / "merges.txt"));
}

TEST(BpeTrainer, SplitsDocumentsOnEndOfTextLines) {
    const std::string corpus =
        "one\ntwo\n<|endoftext|>\nthree <|endoftext|> inline\n<|endoftext|>\n<|endoftext|>\nlast";
    const std::vector<std::string_view> documents = headscope::split_documents(corpus);
    ASSERT_EQ(documents.size(), 3u);
    EXPECT_EQ(documents[0], "one\ntwo");
    EXPECT_EQ(documents[1], "three <|endoftext|> inline");
    EXPECT_EQ(documents[2], "last");

    // No piece spans a document boundary, and the marker lines are not text.
    const PieceCounts counts = count_corpus("a\n<|endoftext|>\nb\n<|endoftext|>\n");
    EXPECT_EQ(counts, (PieceCounts{{"a", 1}, {"b", 1}}));
}

}  // namespace
