// Added tokens (tokenizer.json's added_tokens): a byte trie of their contents,
// and the split of a text at them as Hugging Face's tokenizers finds them,
// with their lstrip, rstrip and single_word options.
#include "headscope/tokenize/tokenizer.h"
#include "unicode.h"

#include <algorithm>

namespace headscope {

namespace {

// Where the edge for `byte` is in a node's edges, sorted by byte, or where it would go.
template <class Edges>
auto edge_for(Edges& edges, unsigned char byte) {
    return std::lower_bound(edges.begin(), edges.end(), byte,
                            [](const std::pair<unsigned char, int32_t>& e, unsigned char b) { return e.first < b; });
}

}  // namespace

void Tokenizer::AddedTokens::add(std::string_view content, const Token& token) {
    if (nodes.empty()) nodes.emplace_back();
    int32_t node = 0;
    for (const char c : content) {
        const auto byte = static_cast<unsigned char>(c);
        auto& next = nodes[node].next;
        const auto it = edge_for(next, byte);
        if (it != next.end() && it->first == byte) {
            node = it->second;
        } else {
            const auto child = static_cast<int32_t>(nodes.size());
            next.insert(it, {byte, child});
            nodes.emplace_back();  // after the insert: it reallocates `nodes`
            node = child;
        }
    }
    nodes[node].token = static_cast<int32_t>(tokens.size());
    tokens.push_back(token);
}

void Tokenizer::AddedTokens::split(const Section& section, std::vector<Section>& out) const {
    const std::string_view text = section.text;
    auto child = [&](int32_t node, char c) {
        const auto& next = nodes[node].next;
        const auto byte = static_cast<unsigned char>(c);
        const auto it = edge_for(next, byte);
        return it != next.end() && it->first == byte ? it->second : -1;
    };
    // The code point before byte `at`, and the one from it.
    auto before = [&](size_t at) { return code_point_at(text, code_point_start_before(text, at)).value; };
    auto from = [&](size_t at) { return code_point_at(text, at).value; };
    size_t emitted = 0;  // the text before this is in `out`
    for (size_t i = 0; i < text.size();) {
        // The longest token that starts at i.
        int32_t found = -1;
        size_t end = i;
        int32_t node = 0;
        for (size_t j = i; j < text.size() && (node = child(node, text[j])) >= 0; ++j) {
            if (nodes[node].token >= 0) {
                found = nodes[node].token;
                end = j + 1;
            }
        }
        if (found < 0) {
            ++i;
            continue;
        }
        const Token& token = tokens[static_cast<size_t>(found)];
        size_t start = i;
        // The search goes on after a match whether or not it is kept, as in Hugging Face's tokenizers.
        i = end;
        if (token.single_word &&
            ((start > 0 && is_word_char(before(start))) || (end < text.size() && is_word_char(from(end))))) {
            continue;
        }
        if (token.lstrip) {
            while (start > emitted && is_white_space(before(start))) start = code_point_start_before(text, start);
        }
        if (token.rstrip) {
            while (end < text.size() && is_white_space(from(end))) end += utf8_length(text[end]);
            i = end;
        }
        if (start > emitted)
            out.push_back({text.substr(emitted, start - emitted), -1, section.at_text_start && emitted == 0});
        out.push_back({text.substr(start, end - start), token.id, false});
        emitted = end;
    }
    if (emitted < text.size()) out.push_back({text.substr(emitted), -1, section.at_text_start && emitted == 0});
}

}  // namespace headscope
