// TokenTrie (token_trie.h): built breadth first from the sorted tokens, so
// that each node's edges are contiguous and sorted, without recursion (a
// hostile token may be long).
#include "headscope/tokenize/token_trie.h"

#include <algorithm>
#include <deque>
#include <string>

#include "headscope/base/error.h"
#include "headscope/tokenize/tokenizer.h"

namespace headscope {

TokenTrie::TokenTrie(std::vector<std::pair<std::string_view, int32_t>> tokens) {
    std::sort(tokens.begin(), tokens.end());  // string_view orders bytes as unsigned
    struct Pending {
        int32_t node;
        size_t first, last, depth;  // the tokens [first, last) share their first `depth` bytes
    };
    std::deque<Pending> pending = {{root, 0, tokens.size(), 0}};
    while (!pending.empty()) {
        const Pending p = pending.front();
        pending.pop_front();
        size_t i = p.first;
        if (i < p.last && tokens[i].first.size() == p.depth)
            nodes_[static_cast<size_t>(p.node)].id = tokens[i++].second;
        nodes_[static_cast<size_t>(p.node)].first = static_cast<uint32_t>(edge_bytes_.size());
        while (i < p.last) {
            const char byte = tokens[i].first[p.depth];
            size_t j = i;
            while (j < p.last && tokens[j].first[p.depth] == byte) ++j;
            const auto child = static_cast<int32_t>(nodes_.size());
            nodes_.emplace_back();
            edge_bytes_.push_back(static_cast<uint8_t>(byte));
            edge_nodes_.push_back(child);
            pending.push_back({child, i, j, p.depth + 1});
            i = j;
        }
        nodes_[static_cast<size_t>(p.node)].count =
            static_cast<uint32_t>(edge_bytes_.size()) - nodes_[static_cast<size_t>(p.node)].first;
    }
}

int32_t TokenTrie::child(int32_t node, uint8_t byte) const {
    const Node& n = nodes_[static_cast<size_t>(node)];
    const auto begin = edge_bytes_.begin() + n.first, end = begin + n.count;
    const auto it = std::lower_bound(begin, end, byte);
    return it != end && *it == byte ? edge_nodes_[static_cast<size_t>(it - edge_bytes_.begin())] : none;
}

int32_t TokenTrie::walk(int32_t node, std::string_view text) const {
    for (size_t i = 0; i < text.size() && node != none; ++i) node = child(node, static_cast<uint8_t>(text[i]));
    return node;
}

// A WordPiece or Unigram token, or WordPiece's continuing prefix ("##"),
// costs its length at every place of a text; BERT's and T5's are at most a
// few dozen bytes.
constexpr size_t max_token_bytes = 1024;

void Tokenizer::index_tokens() {
    const auto refuse_past = [](const char* what, size_t bytes) {
        if (bytes > max_token_bytes)
            throw Error(std::string(what) + " of " + std::to_string(bytes) + " bytes, over the " +
                        std::to_string(max_token_bytes) + " Headscope reads");
    };
    refuse_past("a continuing_subword_prefix", continuing_prefix_.size());
    std::vector<std::pair<std::string_view, int32_t>> tokens;
    tokens.reserve(symbol_ids_.size());
    for (const auto& [token, id] : symbol_ids_) {
        refuse_past("a token", token.size());
        tokens.emplace_back(token, id);
    }
    token_trie_ = TokenTrie(std::move(tokens));
    continuing_node_ = token_trie_.walk(TokenTrie::root, continuing_prefix_);
}

}  // namespace headscope
