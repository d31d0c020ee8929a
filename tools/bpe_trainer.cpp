// BPE training as in GPT-2 and Hugging Face's tokenizers: distinct pieces are
// words of symbol ids; pair counts live in a map, candidates in a lazy max-heap,
// and an index from each pair to the words holding it confines every merge's
// update to those words.
#include "bpe_trainer.h"

#include "headscope/io/files.h"
#include "headscope/tokenize/tokenizer.h"

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

namespace {

// One training run: the words, the pair counts and the heap of candidates.
class BpeTraining {
    // Heap order: the higher count first, then the pair whose bytes sort first,
    // so that the merge chosen never depends on hash or insertion order.
    struct LowerPriority {
        const BpeVocab& vocab;
        bool operator()(const Candidate& a, const Candidate& b) const {
            if (a.count != b.count) return a.count < b.count;
            const std::string& a_left = vocab.tokens[left_of(a.pair)];
            const std::string& b_left = vocab.tokens[left_of(b.pair)];
            if (a_left != b_left) return a_left > b_left;
            return vocab.tokens[right_of(a.pair)] > vocab.tokens[right_of(b.pair)];
        }
    };

public:
    explicit BpeTraining(const PieceCounts& pieces) {
        for (int b = 0; b < 256; ++b) {
            vocab.tokens.emplace_back(1, static_cast<char>(b));
            token_ids_.emplace(vocab.tokens.back(), b);
        }
        words_.reserve(pieces.size());
        for (const auto& [piece, count] : pieces) {
            Word word{{}, count};
            for (unsigned char b : piece) word.symbols.push_back(b);
            const auto index = static_cast<int32_t>(words_.size());
            for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
                const uint64_t key = pair_key(word.symbols[i], word.symbols[i + 1]);
                pair_counts_[key] += count;
                pair_words_[key].push_back(index);
            }
            words_.push_back(std::move(word));
        }
        heap_.reserve(pair_counts_.size());
        for (const auto& [key, count] : pair_counts_) heap_.push_back({count, key});
        std::make_heap(heap_.begin(), heap_.end(), LowerPriority{vocab});
    }

    bool done() const { return heap_.empty(); }

    // Pops the best candidate; merges it when its count is current and says
    // so, else puts it back at its true count.
    bool merge_best() {
        std::pop_heap(heap_.begin(), heap_.end(), LowerPriority{vocab});
        const Candidate top = heap_.back();
        heap_.pop_back();
        const auto found = pair_counts_.find(top.pair);
        const int64_t count = found == pair_counts_.end() ? 0 : found->second;
        // Every pair in use has an entry with at least its count, pushed when
        // the count last rose; a higher stale entry goes back at the true count.
        if (count != top.count) {
            if (count > 0 && count < top.count) push({count, top.pair});
            return false;
        }
        const int32_t left = left_of(top.pair), right = right_of(top.pair);
        std::string merged = vocab.tokens[left] + vocab.tokens[right];
        vocab.merges.push_back({vocab.tokens[left], vocab.tokens[right], count});
        const auto [token, added] = token_ids_.try_emplace(merged, static_cast<int32_t>(vocab.tokens.size()));
        if (added) vocab.tokens.push_back(std::move(merged));
        merge_in_words(top.pair, token->second);
        return true;
    }

    BpeVocab vocab;

private:
    void push(Candidate c) {
        heap_.push_back(c);
        std::push_heap(heap_.begin(), heap_.end(), LowerPriority{vocab});
    }

    // `pair` becomes `result` in every word holding it, and the pair counts follow.
    void merge_in_words(uint64_t pair, int32_t result) {
        const int32_t left = left_of(pair), right = right_of(pair);
        std::vector<int32_t> holders = std::move(pair_words_[pair]);
        pair_words_.erase(pair);
        std::sort(holders.begin(), holders.end());
        holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
        deltas_.clear();
        for (int32_t index : holders) {
            Word& word = words_[index];
            const std::vector<int32_t>& symbols = word.symbols;
            // Left to right, non-overlapping, as GPT-2's bpe() applies a merge.
            merged_symbols_.clear();
            for (size_t i = 0; i < symbols.size(); ++i) {
                const bool match = i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right;
                merged_symbols_.push_back(match ? result : symbols[i]);
                i += match;
            }
            if (merged_symbols_.size() == symbols.size()) continue;
            for (size_t i = 0; i + 1 < symbols.size(); ++i) deltas_[pair_key(symbols[i], symbols[i + 1])] -= word.count;
            for (size_t i = 0; i + 1 < merged_symbols_.size(); ++i) {
                const uint64_t key = pair_key(merged_symbols_[i], merged_symbols_[i + 1]);
                deltas_[key] += word.count;
                // Only pairs with the new symbol are new to this word.
                if (merged_symbols_[i] == result || merged_symbols_[i + 1] == result) pair_words_[key].push_back(index);
            }
            word.symbols.swap(merged_symbols_);
        }
        for (const auto& [key, delta] : deltas_) {
            if (delta == 0) continue;
            int64_t& pair_count = pair_counts_[key];
            pair_count += delta;
            if (pair_count == 0)
                pair_counts_.erase(key);
            else if (delta > 0)
                push({pair_count, key});
        }
    }

    std::unordered_map<std::string, int32_t> token_ids_;
    std::vector<Word> words_;
    std::unordered_map<uint64_t, int64_t> pair_counts_;
    // May list a word twice or after the pair has left it; merging checks.
    std::unordered_map<uint64_t, std::vector<int32_t>> pair_words_;
    std::vector<Candidate> heap_;
    std::unordered_map<uint64_t, int64_t> deltas_;  // one merge's changes to the pair counts
    std::vector<int32_t> merged_symbols_;           // one word after the merge
};

}  // namespace

BpeVocab train_bpe(const PieceCounts& pieces, size_t n_tokens, const std::function<void(const BpeVocab&)>& progress) {
    BpeTraining training(pieces);
    while (training.vocab.tokens.size() < n_tokens && !training.done())
        if (training.merge_best() && progress) progress(training.vocab);
    return std::move(training.vocab);
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
