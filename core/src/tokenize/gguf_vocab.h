// The reader of a GGUF file's tokenizer.ggml.* metadata (private to core):
// what llama.cpp's src/llama-vocab.cpp reads, written out as the
// tokenizer.json it stands for. gguf_tokenizer.cpp reads the tokens, the
// special ids and what goes around a text; gguf_vocab_models.cpp writes each
// tokenizer.ggml.model's model, normalizers and pre-tokenizers.
#pragma once
#include "headscope/io/gguf.h"
#include "headscope/tokenize/tokenizer.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace headscope {

// tokenizer.ggml.token_type's values (gguf-py's TokenType).
enum class GgufTokenType : int { undefined, normal, unknown, control, user_defined, unused, byte };

// What llama.cpp's llama_vocab::impl::load takes for a tokenizer.ggml.model
// when a key is absent: the special ids (-1: none; an id past the tokens is
// none too) and whether bos and eos go around a text.
struct GgufVocabDefaults {
    int32_t bos, eos, unk, sep, pad, mask;
    bool add_bos, add_eos;
};

class GgufVocabReader {
public:
    using json = nlohmann::json;

    explicit GgufVocabReader(const GgufFile& file) : file_(file) {}

    // The tokenizer.json the metadata stands for; then special_ids() are the ids it names.
    json tokenizer_json();
    const Tokenizer::SpecialIds& special_ids() const { return ids_; }

private:
    // A tokenizer.ggml.model: its name, llama.cpp's defaults for it, and what
    // writes its tokenizer.json (less the added tokens and the post-processor).
    struct Model {
        const char* name;
        GgufVocabDefaults defaults;
        json (GgufVocabReader::*model_json)();
    };
    static const std::vector<Model>& models();
    json tokenizer_json(const Model& model);

    [[noreturn]] void fail(const std::string& key, const std::string& what) const;
    std::string required_string(const char* key) const;
    std::optional<GgufArray> array_of_tokens_size(const char* key) const;
    void read_tokens();
    int32_t special_id(const char* key, int32_t fallback) const;
    // A token the tokenizer adds around each text, which it must have.
    int32_t added_id(const char* key, int32_t id) const;
    // The unknown token, which a `model` ("bert", "t5") tokenizer must have.
    int32_t unknown_id(const char* model) const;
    int32_t eot_by_text() const;
    json added_tokens() const;
    json post_processor() const;
    json bert_post_processor() const;
    json template_processing(int32_t first, int32_t last) const;

    // The models (gguf_vocab_models.cpp).
    json vocab() const;
    json byte_level_json();
    json sentencepiece_json();
    json merges_from_scores() const;
    json wordpiece_json();
    json unigram_json();
    json unigram_normalizers() const;
    std::optional<std::string> precompiled_charsmap() const;

    const GgufFile& file_;
    std::vector<std::string> tokens_;
    std::vector<GgufTokenType> types_;
    std::vector<double> scores_;
    GgufVocabDefaults defaults_{};
    Tokenizer::SpecialIds ids_;
};

}  // namespace headscope
