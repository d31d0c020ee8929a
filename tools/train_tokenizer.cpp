// headscope-train-tokenizer: trains the built-in model's byte-level BPE on a
// corpus from tools/corpus and writes GPT-2's vocab.json and merges.txt.
// --eval FILE loads the result with the engine's tokenizer and prints bytes
// per token and tokens per word on FILE. Bad usage or input: exit 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "bpe_trainer.h"
#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/tokenize/tokenizer.h"

using namespace headscope;

namespace {

// A token as text on one line of progress output.
std::string shown(const std::string& bytes) {
    std::string text;
    for (char c : bytes) {
        text += c == '\n' ? "\\n" : c == '\t' ? "\\t" : std::string(1, c);
    }
    return text;
}

size_t count_words(std::string_view text) {
    size_t words = 0;
    bool in_word = false;
    for (char c : text) {
        const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
        words += !space && !in_word;
        in_word = !space;
    }
    return words;
}

void evaluate(const std::filesystem::path& dir, const std::string& path) {
    const Tokenizer tokenizer = Tokenizer::load(dir / "vocab.json", dir / "merges.txt");
    const std::string text = read_file(path);
    size_t bytes = 0, words = 0, tokens = 0;
    for (std::string_view document : split_documents(text)) {
        bytes += document.size();
        words += count_words(document);
        tokens += tokenizer.encode(document).size();
    }
    std::printf("%s: %zu bytes, %zu words, %zu tokens: %.3f bytes/token, %.3f tokens/word\n", path.c_str(), bytes,
                words, tokens, static_cast<double>(bytes) / tokens, static_cast<double>(tokens) / words);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Trains a GPT-2-format byte-level BPE tokenizer on a tools/corpus text file."};
    std::string input;
    std::string out;
    std::string eval;
    size_t vocab_size = 4096;
    app.add_option("--input", input, "corpus: documents each followed by a line <|endoftext|>")->required();
    app.add_option("--vocab-size", vocab_size, "tokens including <|endoftext|>")->check(CLI::Range(257, 1 << 20));
    app.add_option("--out", out, "directory for vocab.json and merges.txt")->required();
    app.add_option("--eval", eval, "text to report bytes/token and tokens/word on (e.g. val.txt)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) {
            return app.exit(e);
        }
        std::fprintf(stderr, "headscope-train-tokenizer: error: %s\n", e.what());
        return 2;
    }

    try {
        const Clock::time_point start = Clock::now();
        const std::string corpus = read_file(input);
        const std::vector<std::string_view> documents = split_documents(corpus);
        PieceCounts pieces;
        for (std::string_view document : documents) {
            count_pieces(document, pieces);
        }
        std::printf("%s: %zu documents, %zu bytes, %zu distinct pieces (%.1f s)\n", input.c_str(), documents.size(),
                    corpus.size(), pieces.size(), ms_since(start) / 1000);

        const Clock::time_point train_start = Clock::now();
        // The last id is <|endoftext|>, added by the writer.
        const BpeVocab vocab = train_bpe(pieces, vocab_size - 1, [&](const BpeVocab& v) {
            if (v.merges.size() % 256 == 0) {
                const BpeMerge& m = v.merges.back();
                std::printf("merge %5zu  tokens %5zu  count %8lld  \"%s\" + \"%s\"  %.1f s\n", v.merges.size(),
                            v.tokens.size(), static_cast<long long>(m.count), shown(m.left).c_str(),
                            shown(m.right).c_str(), ms_since(train_start) / 1000);
                std::fflush(stdout);
            }
        });
        std::printf("%zu merges, %zu tokens + <|endoftext|> in %.1f s\n", vocab.merges.size(), vocab.tokens.size(),
                    ms_since(train_start) / 1000);
        if (vocab.tokens.size() < vocab_size - 1) {
            std::printf("the corpus ran out of pairs before --vocab-size %zu\n", vocab_size);
        }

        std::filesystem::create_directories(out);
        write_gpt2_tokenizer(vocab, out);
        std::printf("wrote %s/vocab.json and %s/merges.txt\n", out.c_str(), out.c_str());
        if (!eval.empty()) {
            evaluate(out, eval);
        }
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope-train-tokenizer: error: %s\n", e.what());
        return 2;
    } catch (const std::filesystem::filesystem_error& e) {
        std::fprintf(stderr, "headscope-train-tokenizer: error: %s\n", e.what());
        return 2;
    }
    return 0;
}
