// The tokens of a WordPiece or Unigram vocabulary as a byte trie, so that
// finding every token that starts at a place in a text costs the length of
// the longest one found there, not a hash of each candidate substring.
#pragma once
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace headscope {

class TokenTrie {
public:
    static constexpr int32_t root = 0, none = -1;

    TokenTrie() = default;
    // From every (token, id); tokens distinct.
    explicit TokenTrie(std::vector<std::pair<std::string_view, int32_t>> tokens);

    // The node `byte` leads to from `node`, or `none`.
    int32_t child(int32_t node, uint8_t byte) const;
    // The node the bytes of `text` lead to from `node`, or `none`.
    int32_t walk(int32_t node, std::string_view text) const;
    // The id of the token whose bytes lead to `node`, or -1.
    int32_t id(int32_t node) const { return nodes_[static_cast<size_t>(node)].id; }

private:
    struct Node {
        int32_t id = -1;
        uint32_t first = 0, count = 0;  // its edges [first, first + count), sorted by byte
    };
    std::vector<Node> nodes_ = {Node{}};
    std::vector<uint8_t> edge_bytes_;
    std::vector<int32_t> edge_nodes_;
};

}  // namespace headscope
