// The pre-tokenizers, each splitting the pieces the one before made: GPT-2's
// pattern, Split on a pattern, ByteLevel, Metaspace, Digits, WhitespaceSplit
// and BERT's whitespace and punctuation split, with Hugging Face's split behaviors for
// where a match goes.
#include "encode_scratch.h"
#include "headscope/tokenize/tokenizer.h"
#include "tokenizer_internal.h"
#include "unicode.h"

#include <algorithm>

namespace headscope {

namespace {

// BERT's punctuation: ASCII's (symbols such as $ and ^ included) and Unicode's \p{P}.
bool is_bert_punctuation(char32_t cp) {
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126) ||
           is_punctuation(cp);
}

// Each code point of `text` that passes `test`, as a match.
void matches_of(std::string_view text, bool (*test)(char32_t), std::vector<Match>& out) {
    out.clear();
    for (size_t at = 0; at < text.size();) {
        const CodePointAt cp = code_point_at(text, at);
        if (test(cp.value)) out.push_back({at, at + cp.length});
        at += cp.length;
    }
}

}  // namespace

void Tokenizer::split_at(const Section& piece, const std::vector<Match>& matches, SplitBehavior behavior,
                         std::vector<Section>& out) {
    struct Segment {
        size_t start, end;
        bool is_match;
    };
    std::vector<Segment> segments;
    size_t at = 0;
    for (const Match& m : matches) {
        if (m.start > at) segments.push_back({at, m.start, false});
        segments.push_back({m.start, m.end, true});
        at = m.end;
    }
    if (at < piece.text.size()) segments.push_back({at, piece.text.size(), false});

    std::vector<Segment> kept;
    switch (behavior) {
        case SplitBehavior::removed:
            for (const Segment& s : segments)
                if (!s.is_match) kept.push_back(s);
            break;
        case SplitBehavior::isolated: kept = segments; break;
        case SplitBehavior::merged_with_previous:
            // A match joins the text before it.
            for (size_t i = 0; i < segments.size(); ++i) {
                if (segments[i].is_match && i > 0 && !segments[i - 1].is_match) {
                    kept.back().end = segments[i].end;
                } else {
                    kept.push_back(segments[i]);
                }
            }
            break;
        case SplitBehavior::merged_with_next:
            // A match joins the text after it.
            for (size_t i = segments.size(); i-- > 0;) {
                if (segments[i].is_match && i + 1 < segments.size() && !segments[i + 1].is_match) {
                    kept.back().start = segments[i].start;
                } else {
                    kept.push_back(segments[i]);
                }
            }
            std::reverse(kept.begin(), kept.end());
            break;
        case SplitBehavior::contiguous:
            // Adjacent matches become one.
            for (size_t i = 0; i < segments.size(); ++i) {
                if (segments[i].is_match && i > 0 && segments[i - 1].is_match) {
                    kept.back().end = segments[i].end;
                } else {
                    kept.push_back(segments[i]);
                }
            }
            break;
    }
    for (const Segment& s : kept) {
        out.push_back({piece.text.substr(s.start, s.end - s.start), -1, piece.at_text_start && s.start == 0});
    }
}

void Tokenizer::pre_tokenize(const Section& part, Scratch& s) const {
    s.pieces.assign(1, part);
    for (const PreTokenizer& step : pre_tokenizers_) {
        s.next_pieces.clear();
        for (const Section& piece : s.pieces) pre_tokenize_piece(step, piece, s);
        std::swap(s.pieces, s.next_pieces);
    }
}

void Tokenizer::pre_tokenize_piece(const PreTokenizer& step, const Section& piece, Scratch& s) const {
    auto split_by_pattern = [&](const Section& on, SplitBehavior behavior) {
        if (!s.patterns) s.patterns.emplace();
        s.matches.clear();
        step.pattern->find_all(on.text, *s.patterns, s.matches);
        split_at(on, s.matches, behavior, s.next_pieces);
    };
    switch (step.kind) {
        case PreTokenizer::Kind::gpt2:
            for (const std::string_view p : pretokenize(piece.text)) {
                s.next_pieces.push_back({p, -1, piece.at_text_start && p.data() == piece.text.data()});
            }
            return;
        case PreTokenizer::Kind::split: return split_by_pattern(piece, step.behavior);
        case PreTokenizer::Kind::byte_level: {
            Section spaced = piece;
            if (step.add_prefix_space && !piece.text.starts_with(' ')) {
                spaced.text = s.owned.emplace_back(1, ' ').append(piece.text);
            }
            if (step.pattern) return split_by_pattern(spaced, SplitBehavior::isolated);
            s.next_pieces.push_back(spaced);
            return;
        }
        case PreTokenizer::Kind::metaspace: {
            std::string text = replace_all(piece.text, " ", step.replacement);
            const bool prepend =
                step.prepend == PrependScheme::always || (step.prepend == PrependScheme::first && piece.at_text_start);
            if (prepend && !text.starts_with(step.replacement)) text.insert(0, step.replacement);
            const Section replaced{s.owned.emplace_back(std::move(text)), -1, piece.at_text_start};
            if (!step.split) {
                s.next_pieces.push_back(replaced);
                return;
            }
            s.matches.clear();
            for (size_t at = replaced.text.find(step.replacement); at != std::string_view::npos;
                 at = replaced.text.find(step.replacement, at + step.replacement.size())) {
                s.matches.push_back({at, at + step.replacement.size()});
            }
            return split_at(replaced, s.matches, SplitBehavior::merged_with_next, s.next_pieces);
        }
        case PreTokenizer::Kind::digits: {
            matches_of(piece.text, is_number, s.matches);
            const SplitBehavior behavior = step.individual_digits ? SplitBehavior::isolated : SplitBehavior::contiguous;
            return split_at(piece, s.matches, behavior, s.next_pieces);
        }
        case PreTokenizer::Kind::whitespace_split:
            matches_of(piece.text, is_white_space, s.matches);
            return split_at(piece, s.matches, SplitBehavior::removed, s.next_pieces);
        case PreTokenizer::Kind::bert: {
            // Split at whitespace, which goes, then each punctuation character on its own.
            std::vector<Section> words;
            matches_of(piece.text, is_white_space, s.matches);
            split_at(piece, s.matches, SplitBehavior::removed, words);
            for (const Section& word : words) {
                matches_of(word.text, is_bert_punctuation, s.matches);
                split_at(word, s.matches, SplitBehavior::isolated, s.next_pieces);
            }
            return;
        }
    }
}

}  // namespace headscope
