// Tokenizer::encode: the added tokens found in the text, then each stretch
// between them normalized, split by the pre-tokenizers (pre_tokenizers.cpp)
// and its pieces merged by BPE (bpe.cpp), or given to Marian's SentencePiece
// model (sentencepiece.cpp).
#include "charsmap.h"
#include "encode_scratch.h"
#include "headscope/base/error.h"
#include "headscope/tokenize/tokenizer.h"
#include "pattern.h"
#include "tokenizer_internal.h"
#include "unicode.h"

namespace headscope {

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
    return encode_side(text, add_special, Side::source);
}

std::vector<int32_t> Tokenizer::encode_target(std::string_view text, bool add_special) const {
    return encode_side(text, add_special, Side::target);
}

std::vector<int32_t> Tokenizer::encode_side(std::string_view text, bool add_special, Side side) const {
    check_utf8(text);
    std::vector<int32_t> ids;
    Scratch scratch;
    std::vector<Section> sections;
    const Section whole{text, -1, true};
    if (added_.empty()) {
        sections.push_back(whole);
    } else {
        added_.split(whole, sections);
    }
    for (const Section& section : sections) {
        if (section.id >= 0) {
            ids.push_back(section.id);
        } else if (sentencepiece_) {
            sentencepiece_section(section.text, side, ids);
        } else {
            encode_section(section, scratch, ids);
        }
    }
    if (!add_special) return ids;
    const std::vector<int32_t>* texts[2] = {&ids, nullptr};
    std::vector<int32_t> wrapped;
    PostProcessor::apply(post_.single, texts, wrapped, nullptr);
    return wrapped;
}

Tokenizer::Pair Tokenizer::encode_pair(std::string_view first, std::string_view second) const {
    if (!has_pair_template()) throw Error("the tokenizer has no template for a pair of texts");
    const std::vector<int32_t> a = encode(first, false), b = encode(second, false);
    const std::vector<int32_t>* texts[2] = {&a, &b};
    Pair pair;
    pair.second_start = PostProcessor::apply(post_.pair, texts, pair.ids, &pair.types);
    return pair;
}

void Tokenizer::encode_section(const Section& section, Scratch& scratch, std::vector<int32_t>& ids) const {
    scratch.owned.clear();
    // Hugging Face normalizes each stretch between added tokens on its own (a
    // Prepend normalizer prepends to each), then finds the normalized added
    // tokens in it.
    Section normalized = section;
    if (!normalizers_.empty()) {
        if (!scratch.patterns) scratch.patterns.emplace();
        normalized.text = scratch.owned.emplace_back(normalize(section.text, *scratch.patterns));
    }
    scratch.parts.clear();
    if (normalized_added_.empty()) {
        scratch.parts.push_back(normalized);
    } else {
        normalized_added_.split(normalized, scratch.parts);
    }
    for (const Section& part : scratch.parts) {
        if (part.id >= 0) {
            ids.push_back(part.id);
            continue;
        }
        pre_tokenize(part, scratch);
        for (const Section& piece : scratch.pieces) encode_piece(piece.text, scratch, ids);
    }
}

namespace {

// Normalizers may lengthen a text (Llama 2's ▁ for each space makes it up
// to three times longer), but a hostile file's never without bound.
void check_normalized_size(size_t size, size_t max_size) {
    if (size > max_size) throw Error("the tokenizer's normalizers make this text over 16 times longer");
}

// `text` with each match of `pattern` replaced by `replacement`.
std::string replaced_matches(const std::string& text, const Pattern& pattern, const std::string& replacement,
                             MatchScratch& scratch, size_t max_size) {
    std::vector<Match> matches;
    pattern.find_all(text, scratch, matches);
    std::string out;
    size_t at = 0;
    for (const Match& m : matches) {
        out.append(text, at, m.start - at).append(replacement);
        at = m.end;
        check_normalized_size(out.size(), max_size);
    }
    return out.append(text, at);
}

// `text` less the Unicode whitespace at its start (`left`) and its end (`right`).
std::string stripped(const std::string& text, bool left, bool right) {
    size_t begin = 0, end = text.size();
    while (left && begin < end) {
        const CodePointAt cp = code_point_at(text, begin);
        if (!is_white_space(cp.value)) break;
        begin += cp.length;
    }
    while (right && end > begin) {
        size_t last = end - 1;
        while (last > begin && (static_cast<unsigned char>(text[last]) & 0xC0) == 0x80) --last;
        if (!is_white_space(code_point_at(text, last).value)) break;
        end = last;
    }
    return text.substr(begin, end - begin);
}

}  // namespace

std::string Tokenizer::normalize(std::string_view text, MatchScratch& scratch) const {
    const size_t max_size = 16 * text.size() + 4096;
    std::string out(text);
    for (const Normalizer& n : normalizers_) {
        switch (n.kind) {
            case Normalizer::Kind::nfc: out = to_nfc(out); break;
            case Normalizer::Kind::prepend:
                if (!out.empty()) out.insert(0, n.content);
                break;
            // NFKC: at most 18 times longer a character, rarely.
            case Normalizer::Kind::nmt_nfkc: out = nmt_nfkc_normalized(out); break;
            // A hostile charsmap's replacements may be long: it stops past max_size.
            case Normalizer::Kind::charsmap: out = n.charsmap->normalized(out, max_size); break;
            // At most about three times longer (an ideograph spaced out, a syllable decomposed).
            case Normalizer::Kind::bert:
                out = bert_normalized(out, n.clean_text, n.chinese_chars, n.strip_accents, n.accents_as_llama_cpp,
                                      n.lowercase);
                break;
            case Normalizer::Kind::replace:
                out = replaced_matches(out, *n.pattern, n.content, scratch, max_size);
                break;
            case Normalizer::Kind::strip: out = stripped(out, n.strip_left, n.strip_right); break;
        }
        check_normalized_size(out.size(), max_size);
    }
    return out;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_texts(const std::vector<std::string>& texts,
                                                          bool add_special) const {
    std::vector<std::vector<int32_t>> ids;
    for (size_t i = 0; i < texts.size(); ++i) {
        if (texts[i].empty()) throw Error("text " + std::to_string(i + 1) + " is empty");
        try {
            ids.push_back(encode(texts[i], add_special));
        } catch (const Error& e) {
            throw Error("text " + std::to_string(i + 1) + ": " + e.what());
        }
    }
    return ids;
}

}  // namespace headscope
