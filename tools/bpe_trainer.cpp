// BPE training as in GPT-2 and Hugging Face's tokenizers: distinct pieces are
// words of symbol ids; pair counts live in a map, candidates in a lazy max-heap,
// and an index from each pair to the words holding it confines every merge's
// update to those words.
#include "bpe_trainer.h"

#include "headscope/files.h"
#include "headscope/tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>

namespace headscope {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

struct Word {
    std::vector<int32_t> symbols;
    int64_t count;
};

// A pair's count when it was pushed; stale once the pair's count changes.
struct Candidate {
    int64_t count;
    uint64_t pair;
};

// GPT-2's printable stand-ins for raw bytes, as UTF-8.
std::string unicode_of(std::string_view bytes) {
    std::string text;
    for (unsigned char b : bytes) {
        const char32_t cp = byte_to_unicode()[b];
        // Every stand-in is below U+0800: one or two UTF-8 bytes.
        if (cp < 0x80) {
            text.push_back(static_cast<char>(cp));
        } else {
            text.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    }
    return text;
}

}  // namespace

std::vector<std::string_view> split_documents(std::string_view corpus) {
    std::vector<std::string_view> documents;
    size_t start = 0;
    for (size_t line = 0; line < corpus.size();) {
        const size_t end = std::min(corpus.find('\n', line), corpus.size());
        if (corpus.substr(line, end - line) == end_of_text) {
            const size_t document_end = line > start ? line - 1 : start;
            if (document_end > start) {
                documents.push_back(corpus.substr(start, document_end - start));
            }
            start = std::min(end + 1, corpus.size());
        }
        line = end + 1;
    }
    if (start < corpus.size()) {
        documents.push_back(corpus.substr(start));
    }
    return documents;
}

void count_pieces(std::string_view document, PieceCounts& counts) {
    for (std::string_view piece : pretokenize(document)) {
        ++counts[std::string(piece)];
    }
}

BpeVocab train_bpe(const PieceCounts& pieces, size_t n_tokens, const std::function<void(const BpeVocab&)>& progress) {
    BpeVocab vocab;
    std::unordered_map<std::string, int32_t> token_ids;
    for (int b = 0; b < 256; ++b) {
        vocab.tokens.emplace_back(1, static_cast<char>(b));
        token_ids.emplace(vocab.tokens.back(), b);
    }

    std::vector<Word> words;
    words.reserve(pieces.size());
    std::unordered_map<uint64_t, int64_t> pair_counts;
    // May list a word twice or after the pair has left it; merging checks.
    std::unordered_map<uint64_t, std::vector<int32_t>> pair_words;
    for (const auto& [piece, count] : pieces) {
        Word word{{}, count};
        for (unsigned char b : piece) {
            word.symbols.push_back(b);
        }
        const auto index = static_cast<int32_t>(words.size());
        for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
            const uint64_t key = pair_key(word.symbols[i], word.symbols[i + 1]);
            pair_counts[key] += count;
            pair_words[key].push_back(index);
        }
        words.push_back(std::move(word));
    }

    // Heap order: the higher count first, then the pair whose bytes sort first,
    // so that the merge chosen never depends on hash or insertion order.
    auto lower_priority = [&](const Candidate& a, const Candidate& b) {
        if (a.count != b.count) {
            return a.count < b.count;
        }
        const std::string& a_left = vocab.tokens[left_of(a.pair)];
        const std::string& b_left = vocab.tokens[left_of(b.pair)];
        if (a_left != b_left) {
            return a_left > b_left;
        }
        return vocab.tokens[right_of(a.pair)] > vocab.tokens[right_of(b.pair)];
    };
    std::vector<Candidate> heap;
    heap.reserve(pair_counts.size());
    for (const auto& [key, count] : pair_counts) {
        heap.push_back({count, key});
    }
    std::make_heap(heap.begin(), heap.end(), lower_priority);
    auto push = [&](Candidate c) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), lower_priority);
    };

    std::unordered_map<uint64_t, int64_t> deltas;
    std::vector<int32_t> merged_symbols;
    while (vocab.tokens.size() < n_tokens && !heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), lower_priority);
        const Candidate top = heap.back();
        heap.pop_back();
        const auto found = pair_counts.find(top.pair);
        const int64_t count = found == pair_counts.end() ? 0 : found->second;
        // Every pair in use has an entry with at least its count, pushed when
        // the count last rose; a higher stale entry goes back at the true count.
        if (count != top.count) {
            if (count > 0 && count < top.count) {
                push({count, top.pair});
            }
            continue;
        }

        const int32_t left = left_of(top.pair);
        const int32_t right = right_of(top.pair);
        std::string merged = vocab.tokens[left] + vocab.tokens[right];
        vocab.merges.push_back({vocab.tokens[left], vocab.tokens[right], count});
        const auto [token, added] = token_ids.try_emplace(merged, static_cast<int32_t>(vocab.tokens.size()));
        if (added) {
            vocab.tokens.push_back(std::move(merged));
        }
        const int32_t result = token->second;

        std::vector<int32_t> holders = std::move(pair_words[top.pair]);
        pair_words.erase(top.pair);
        std::sort(holders.begin(), holders.end());
        holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
        deltas.clear();
        for (int32_t index : holders) {
            Word& word = words[index];
            const std::vector<int32_t>& symbols = word.symbols;
            // Left to right, non-overlapping, as GPT-2's bpe() applies a merge.
            merged_symbols.clear();
            for (size_t i = 0; i < symbols.size(); ++i) {
                if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
                    merged_symbols.push_back(result);
                    ++i;
                } else {
                    merged_symbols.push_back(symbols[i]);
                }
            }
            if (merged_symbols.size() == symbols.size()) {
                continue;
            }
            for (size_t i = 0; i + 1 < symbols.size(); ++i) {
                deltas[pair_key(symbols[i], symbols[i + 1])] -= word.count;
            }
            for (size_t i = 0; i + 1 < merged_symbols.size(); ++i) {
                const uint64_t key = pair_key(merged_symbols[i], merged_symbols[i + 1]);
                deltas[key] += word.count;
                // Only pairs with the new symbol are new to this word.
                if (merged_symbols[i] == result || merged_symbols[i + 1] == result) {
                    pair_words[key].push_back(index);
                }
            }
            word.symbols.swap(merged_symbols);
        }
        for (const auto& [key, delta] : deltas) {
            if (delta == 0) {
                continue;
            }
            int64_t& pair_count = pair_counts[key];
            pair_count += delta;
            if (pair_count == 0) {
                pair_counts.erase(key);
            } else if (delta > 0) {
                push({pair_count, key});
            }
        }
        if (progress) {
            progress(vocab);
        }
    }
    return vocab;
}

void write_gpt2_tokenizer(const BpeVocab& vocab, const std::filesystem::path& dir) {
    // One line ordered by id, as Hugging Face writes GPT-2's vocab.json.
    std::string json = "{";
    for (size_t id = 0; id < vocab.tokens.size(); ++id) {
        json += nlohmann::json(unicode_of(vocab.tokens[id])).dump() + ":" + std::to_string(id) + ",";
    }
    json += nlohmann::json(std::string(end_of_text)).dump() + ":" + std::to_string(vocab.tokens.size()) + "}";
    write_file_atomically(dir / "vocab.json", "the vocabulary", [&](std::ostream& out) { out << json; });

    // GPT-2's encoder reads lines 1..n-1 of the split text: the trailing
    // newline is needed, or the last merge is lost.
    std::string merges = "#version: 0.2\n";
    for (const BpeMerge& merge : vocab.merges) {
        merges += unicode_of(merge.left) + " " + unicode_of(merge.right) + "\n";
    }
    write_file_atomically(dir / "merges.txt", "the merges", [&](std::ostream& out) { out << merges; });
}

}  // namespace headscope
