// Tokenizers: GPT-2's byte-level BPE from vocab.json and merges.txt, and
// those a Hugging Face tokenizer.json describes: BPE (Llama 2 and 3,
// Mistral, Qwen 2 and 3, SmolLM2, Pythia), BERT's WordPiece and XLM-R's and
// T5's Unigram; a GGUF file's (its metadata read as the tokenizer.json it
// stands for); and Marian's SentencePiece models, which libsentencepiece
// runs. One pipeline encodes them all: added tokens found verbatim in
// the text, the normalizers on the text between them, the pre-tokenizers
// splitting it into pieces, and the model on each piece: BPE merging it, from
// its bytes (byte-level) or its characters, pair by pair in merge-rank order;
// WordPiece taking the longest tokens that spell it; or Unigram taking the
// split whose tokens' scores add up to the most.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "headscope/tokenize/token_trie.h"

namespace headscope {

// The 256 unicode code points GPT-2 uses to stand for bytes 0..255.
const std::array<char32_t, 256>& byte_to_unicode();

// Splits UTF-8 text the way GPT-2's regex does:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s as GPT-2's Python `regex` has it (Unicode White_Space). Throws Error on invalid UTF-8. The pieces are views
// into `text`.
std::vector<std::string_view> pretokenize(std::string_view text);

class GgufFile;      // io/gguf.h
class JsonFields;    // io/json_fields.h
class Pattern;       // a compiled PCRE2 pattern (core/src/tokenize/pattern.h)
class Charsmap;      // SentencePiece's precompiled charsmap (core/src/tokenize/charsmap.h)
class MatchScratch;  // what matching it needs
struct Match;        // a byte range it matched

// What the tokenizer class that reads GPT-2's vocab.json and merges.txt adds
// to them: GPT2Tokenizer nothing; RobertaTokenizer and BartTokenizer (a
// RoBERTa's or BART's checkpoint without a tokenizer.json) their special
// tokens <s> <pad> </s> <unk> <mask>, found in the text (<mask> taking the
// whitespace before it), and <s> A </s> around a text, <s> A </s></s> B </s>
// around a pair.
enum class VocabFilesStyle : uint8_t { gpt2, roberta };

class Tokenizer {
public:
    // GPT-2's vocab.json and merges.txt, read as `style`'s class reads them.
    // Throws Error naming the file when either is missing or malformed, or
    // lacks a token the style needs (RoBERTa's <s> and </s>).
    static Tokenizer load(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
                          VocabFilesStyle style = VocabFilesStyle::gpt2);
    // A Hugging Face tokenizer.json with a BPE model. Throws Error naming the
    // file and the field for anything malformed or not supported (a model,
    // normalizer, pre-tokenizer or post-processor type by name).
    static Tokenizer load_json(const std::filesystem::path& tokenizer_json);
    // The tokenizer a GGUF file's tokenizer.ggml.* metadata describes
    // (gguf_tokenizer.cpp): a "gpt2" model (byte-level BPE with the
    // pre-tokenizer tokenizer.ggml.pre names), a "llama" one (SentencePiece
    // BPE from scores, with byte fallback), a "bert" one (WordPiece) or a
    // "t5" one (Unigram with the file's precompiled charsmap), encoding as
    // llama.cpp's llama_tokenize with add_special and without parse_special:
    // its user-defined tokens are found in the text, its control tokens are not.
    // Throws Error naming the file and the key for anything malformed or not
    // supported.
    static Tokenizer load_gguf(const GgufFile& file);
    // A Marian checkpoint's: dir/source.spm for source texts and
    // dir/target.spm for targets, SentencePiece models whose pieces
    // dir/vocab.json numbers (sentencepiece.cpp). Throws Error naming the file.
    static Tokenizer load_marian(const std::filesystem::path& dir);
    // dir/tokenizer.json when present, else Marian's dir/source.spm, else
    // dir/vocab.json and dir/merges.txt read as `style` says. Throws Error
    // naming the missing files when none is there.
    static Tokenizer load_directory(const std::filesystem::path& dir, VocabFilesStyle style = VocabFilesStyle::gpt2);

    // Token ids of UTF-8 text. `add_special` adds the special tokens of the
    // tokenizer's post-processor (Llama 2's <s>), as transformers'
    // add_special_tokens does; added tokens in the text are found either way.
    // Throws Error on invalid UTF-8.
    std::vector<int32_t> encode(std::string_view text, bool add_special = true) const;
    // The ids of an encoder-decoder's target text: Marian's from its
    // target.spm, as transformers' text_target; any other tokenizer's as encode.
    std::vector<int32_t> encode_target(std::string_view text, bool add_special = true) const;
    // A sentence pair's ids and each token's type (0 for the first text's
    // part, 1 for the second's, as the post-processor's pair template says:
    // [CLS] A [SEP] B [SEP] for BERT, <s> A </s></s> B </s> for RoBERTa).
    // Throws Error when the tokenizer defines no pair template, or on invalid UTF-8.
    struct Pair {
        std::vector<int32_t> ids, types;
        int second_start = -1;  // where the second text's own tokens start (after [SEP], </s></s>)
    };
    Pair encode_pair(std::string_view first, std::string_view second) const;
    bool has_pair_template() const { return !post_.pair.empty(); }
    // Each text's ids; throws Error naming the text ("text 2 is empty", "text 1: invalid UTF-8 ...").
    std::vector<std::vector<int32_t>> encode_texts(const std::vector<std::string>& texts,
                                                   bool add_special = true) const;
    // The raw bytes a token stands for (may be a partial UTF-8 sequence), as
    // the tokenizer's decoder makes them of it alone: a Metaspace token's ▁
    // as a space, a byte-fallback token <0xAB> as its byte, an added token
    // as its content, decoded the same way (Gemma 3's "▁▁" as two spaces).
    std::string token_bytes(int32_t id) const;
    // The highest token id + 1.
    int32_t vocab_size() const { return static_cast<int32_t>(id_to_bytes_.size()); }

    // The ids a GGUF file's metadata names (load_gguf; -1 when none, and for
    // every other loader, whose checkpoints name them in config.json).
    struct SpecialIds {
        int32_t bos = -1, eos = -1, eot = -1, pad = -1, unk = -1;
        int32_t sep = -1, mask = -1;  // BERT's [SEP] and [MASK] (its [CLS] is bos)
    };
    const SpecialIds& special_ids() const { return special_ids_; }

private:
    // The result of merging a pair of symbols, and the merge's rank.
    struct Merge {
        int32_t rank;
        int32_t result;
    };

    // Hashes string_views too, so that a lookup needs no std::string.
    struct StringHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    using SymbolIds = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

    // A stretch of the text: an added token (id >= 0) or the text between
    // them (id -1). `at_text_start` says whether it begins the whole text.
    struct Section {
        std::string_view text;
        int32_t id;
        bool at_text_start;
    };

    // Added tokens found verbatim, as Hugging Face's tokenizers finds them:
    // the longest token at the leftmost position where one starts. A byte
    // trie, node 0 its root.
    struct AddedTokens {
        struct Token {
            int32_t id;
            bool lstrip;       // takes the whitespace before it
            bool rstrip;       // takes the whitespace after it
            bool single_word;  // only where no word character touches it
        };
        struct Node {
            std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
            int32_t token = -1;                                   // index in `tokens` ending here
        };
        std::vector<Token> tokens;
        std::vector<Node> nodes;

        bool empty() const { return tokens.empty(); }
        void add(std::string_view content, const Token& token);
        // Appends the sections of `section` (id -1): its added tokens and the
        // text between them.
        void split(const Section& section, std::vector<Section>& out) const;
    };

    struct Normalizer {
        // nmt_nfkc: SentencePiece's Precompiled charsmap as its models (T5's,
        // XLM-R's) use it: controls dropped, other spaces made spaces, NFKC.
        // charsmap: a charsmap's rules applied as llama.cpp applies a GGUF file's.
        enum class Kind : uint8_t { nfc, prepend, replace, strip, bert, nmt_nfkc, charsmap };
        Kind kind{};
        std::shared_ptr<const Pattern> pattern{};      // replace: what is replaced, a string or a regular expression
        std::string content{};                         // prepend: what goes first; replace: the replacement
        bool strip_left = false, strip_right = false;  // strip: the whitespace at either end
        // bert (BertNormalizer): drop controls and map whitespace to spaces,
        // space out CJK ideographs, strip accents (as Hugging Face, or as
        // llama.cpp), lowercase.
        bool clean_text = false, chinese_chars = false, strip_accents = false, lowercase = false;
        bool accents_as_llama_cpp = false;
        std::shared_ptr<const Charsmap> charsmap{};  // charsmap
    };

    // How a split keeps the matches of its pattern (Hugging Face's SplitDelimiterBehavior).
    enum class SplitBehavior : uint8_t { removed, isolated, merged_with_previous, merged_with_next, contiguous };
    enum class PrependScheme : uint8_t { always, first, never };

    struct PreTokenizer {
        // whitespace_split: at whitespace, which goes.
        enum class Kind : uint8_t { gpt2, split, byte_level, metaspace, digits, bert, whitespace_split };
        Kind kind;
        std::shared_ptr<const Pattern> pattern{};       // split; byte_level: GPT-2's pattern, or none
        SplitBehavior behavior{};                       // split
        bool add_prefix_space = false;                  // byte_level
        std::string replacement{};                      // metaspace: what a space becomes
        PrependScheme prepend = PrependScheme::always;  // metaspace
        bool split = false;                             // metaspace: into pieces that each start with `replacement`
        bool individual_digits = false;                 // digits
    };

    static constexpr std::array<int32_t, 256> no_tokens() {
        std::array<int32_t, 256> ids{};
        for (int32_t& id : ids) id = -1;  // not fill(): the CUDA build's C++17 has no constexpr fill
        return ids;
    }

public:
    // The special tokens the post-processor puts around a text or a pair:
    // templates of items, each a special token or a text, with its type.
    struct PostProcessor {
        struct Item {
            int32_t id;       // a special token; -1: the text `sequence`
            int8_t sequence;  // 0: the first text (A), 1: the second (B)
            int8_t type;      // the type of the item's tokens
        };
        std::vector<Item> single{{-1, 0, 0}};  // A alone
        std::vector<Item> pair;                // empty: no pair template
        // RobertaProcessing's: <s> A </s>, and <s> A </s></s> B </s>, every type 0.
        static PostProcessor roberta(int32_t cls, int32_t sep);
        // tokenizer.json's post_processor (post_processor.cpp): TemplateProcessing,
        // BertProcessing, RobertaProcessing, ByteLevel and a Sequence of them;
        // a later processor wraps what the earlier made. Throws Error naming the field.
        void read(const JsonFields& f, const nlohmann::json& value, const std::string& field, size_t id_bound);
        // Appends `template_`'s tokens: its special tokens, and the texts'
        // `ids`; returns where the second text's tokens start (-1: none).
        static int apply(const std::vector<Item>& template_, const std::vector<int32_t>* ids[2],
                         std::vector<int32_t>& out_ids, std::vector<int32_t>* out_types);
    };

private:
    class JsonLoader;  // reads tokenizer.json (tokenizer_json.cpp)
    // A parsed tokenizer.json; `name` (a file's) starts its messages.
    static Tokenizer from_json(const nlohmann::json& root, const std::string& name);
    struct SentencePieceModels;  // Marian's two models (sentencepiece.cpp)
    enum class Side : uint8_t { source, target };
    struct Scratch;  // what one encode reuses: BPE arrays, PCRE2 match data, rewritten pieces (encode_scratch.h)

    std::vector<int32_t> encode_side(std::string_view text, bool add_special, Side side) const;
    // VocabFilesStyle::roberta's special tokens and templates, from the vocabulary read from `file`.
    void add_roberta_special_tokens(const std::string& file);
    // Marian: a section between added tokens through the side's SentencePiece
    // model, its pieces numbered by vocab.json; a language code (">>fr<<")
    // that starts it is one token.
    void sentencepiece_section(std::string_view text, Side side, std::vector<int32_t>& ids) const;
    // Normalizes, pre-tokenizes and encodes a section between added tokens.
    void encode_section(const Section& section, Scratch& scratch, std::vector<int32_t>& ids) const;
    std::string normalize(std::string_view text, MatchScratch& scratch) const;
    // The pieces of `section` after every pre-tokenizer, in scratch's.
    void pre_tokenize(const Section& section, Scratch& scratch) const;
    void pre_tokenize_piece(const PreTokenizer& step, const Section& piece, Scratch& scratch) const;
    // Appends the pieces of `piece` that a split at `matches` (byte ranges in
    // it, in order, not overlapping) gives, as Hugging Face's split does.
    static void split_at(const Section& piece, const std::vector<Match>& matches, SplitBehavior behavior,
                         std::vector<Section>& out);
    // One pre-tokenizer piece through the model: its first symbols, then bpe;
    // or, for a WordPiece model, word_pieces.
    void encode_piece(std::string_view piece, Scratch& scratch, std::vector<int32_t>& out) const;
    // WordPiece: the longest token that starts the word, then the longest
    // (prefixed) that starts the rest, ...; the unknown token for a word too
    // long or with a rest no token starts (wordpiece.cpp).
    void word_pieces(std::string_view word, std::vector<int32_t>& out) const;
    // Unigram: the split of the piece into tokens whose scores add up to the
    // most (Viterbi over its characters; on a tie the longer token ending
    // there); a character no token starts with is unknown, and consecutive
    // unknowns are one (unigram.cpp).
    void unigram_pieces(std::string_view piece, std::vector<int32_t>& out) const;
    // A symbol for a byte or character without a token of its own.
    void add_missing_symbol(std::string_view unit, Scratch& scratch) const;
    void bpe(Scratch& scratch, std::vector<int32_t>& out) const;

    std::vector<std::string> id_to_bytes_;         // token id -> raw bytes (token_bytes)
    SymbolIds symbol_ids_;                         // symbol string -> id: vocab tokens, then merge-only symbols
    std::vector<std::string> merge_only_symbols_;  // symbol id - vocab size -> symbol string (merges.txt only)
    std::unordered_map<uint64_t, Merge> merges_;   // (left << 32 | right) -> merge

    // BPE starts from the piece's bytes (byte-level: symbols are raw bytes),
    // or else from its characters (symbols are the vocabulary's strings).
    bool byte_level_ = true;
    std::array<int32_t, 256> byte_symbol_ = no_tokens();  // byte -> its one-byte symbol, -1 when the vocab has none
    bool ignore_merges_ = false;                          // a piece that is a token is that token
    bool byte_fallback_ = false;                          // a character without a token becomes <0xAB> byte tokens
    std::array<int32_t, 256> byte_fallback_ids_ = no_tokens();  // byte -> its <0xAB> token, -1 when none
    int32_t unk_id_ = -1;                                       // the unknown token, -1 when none
    bool fuse_unk_ = false;                                     // consecutive unknowns become one
    // A WordPiece model instead of BPE: its pieces after a word's first carry
    // this prefix ("##"), and longer words are unknown; llama.cpp's instead
    // spells each word behind word_prefix_ ("▁") with unprefixed pieces.
    bool word_piece_ = false;
    std::string continuing_prefix_;
    std::string word_prefix_;
    size_t max_word_chars_ = 0;
    // A Unigram model instead: each token's score (log-probability) by id,
    // and the unknown token's (the lowest less 10, unless the file says), in
    // double as Hugging Face's tokenizers keeps them.
    bool unigram_ = false;
    std::vector<double> unigram_scores_;
    double unknown_score_ = 0;
    // Either model's tokens as a trie, and the node its continuing prefix
    // leads to, built by index_tokens (token_trie.cpp), which throws Error
    // for a token or prefix longer than it reads.
    TokenTrie token_trie_;
    int32_t continuing_node_ = TokenTrie::none;
    void index_tokens();
    // What a vocabulary symbol shows as (token_bytes): a byte-level symbol is
    // its bytes already; otherwise `space_symbol` (▁) is a space, and a
    // byte-fallback token its byte (tokenizer.cpp).
    std::string shown_bytes(const std::string& symbol, const std::string& space_symbol) const;

    // Marian's models instead of the normalizers, pre-tokenizers and model above.
    std::shared_ptr<const SentencePieceModels> sentencepiece_;

    AddedTokens added_;             // matched in the text as it comes
    AddedTokens normalized_added_;  // matched in the normalized text between those
    std::vector<Normalizer> normalizers_;
    std::vector<PreTokenizer> pre_tokenizers_;
    PostProcessor post_;
    SpecialIds special_ids_;
};

// The text of any id a model can predict: its bytes (token_bytes), or "" for
// a row of the output embedding past the tokenizer's last id (Qwen's and
// Pythia's checkpoints pad the vocabulary).
std::string token_text(const Tokenizer& tokenizer, int32_t id);

}  // namespace headscope
