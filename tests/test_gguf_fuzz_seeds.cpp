// The fuzz_gguf_model harness's seeds (tests/fuzz/corpus/gguf_model/): a
// small file of each architecture Headscope reads, as the tests' writer
// writes it (gguf_models.h) but with C = 32, heads of 16, one key/value
// head, feed-forward widths of 32 (GPT-2's 4C), a layer (Gemma 3's three),
// the token table (and an untied output) in Q4_0 and the other matrices in
// every type whose blocks fit rows of 32 in turn (rotated_types), so that
// each file is at most 48 KB (BERT's and T5's vocabularies cut to 128
// tokens). Each must open with load_model: a seed the reader
// refused would fuzz only its first checks. HEADSCOPE_WRITE_FUZZ_SEEDS=1
// writes the seeds anew into the corpus first. Part of test_gguf_models.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gguf_models.h"
#include "headscope/model/model.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

FamilySpec small(Family family) {
    FamilySpec s = gguf_family_spec(family);
    s.n_embd = 32, s.n_head = 2, s.n_kv_head = 1, s.head_dim = 16, s.mlp_dim = 32, s.max_positions = 16;
    if (family != Family::gemma3_text) s.n_layer = 1;
    if (family == Family::gpt2) s.mlp_dim = 4 * s.n_embd;
    if (family == Family::olmoe) s.n_kv_head = s.n_head;  // llama.cpp norms OLMoE's K over all C
    if (gemma(family)) s.query_pre_attn_scalar = s.head_dim;
    if (s.n_experts) s.expert_mlp_dim = 32;
    if (family == Family::gpt_oss) s.max_positions = 512, s.original_max_positions = 16;
    return s;
}

// The 259 rows of the token table in Q4_0's 18 bytes a block, the rest in turn.
MatrixTypes seed_types() {
    const MatrixTypes rotated = rotated_types(0);
    return {2, [rotated](const std::string& name, int64_t row) {
                return name == "token_embd.weight" || name == "output.weight" ? DType::Q4_0 : rotated(name, row);
            }};
}

// The first `n` elements of metadata array `array` (GGUF's element type, count, then the elements).
GgufMetaValue first_of(const GgufMetaValue& array, uint64_t n) {
    uint32_t type = 0;
    std::memcpy(&type, array.bytes.data(), 4);
    static const std::map<uint32_t, size_t> sizes = {{0, 1}, {1, 1}, {2, 2},  {3, 2},  {4, 4}, {5, 4},
                                                     {6, 4}, {7, 1}, {10, 8}, {11, 8}, {12, 8}};
    size_t end = 12;
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t length = sizes.count(type) ? sizes.at(type) : 0;
        if (type == 8) std::memcpy(&length, array.bytes.data() + end, 8), end += 8;
        end += length;
    }
    std::string bytes = array.bytes.substr(0, end);
    std::memcpy(bytes.data() + 4, &n, 8);
    return {array.type, bytes};
}

// BERT's and T5's vocabularies cut to their first 128 tokens (their
// special ones among them), and the token table to its first 128 rows;
// T5's without its charsmap of 240 KB (fuzz_gguf's seeds have one).
void cut_vocabulary(GgufSpec& gguf, uint64_t V) {
    constexpr uint64_t n = 128;
    std::erase_if(gguf.metadata,
                  [](const auto& entry) { return entry.first == "tokenizer.ggml.precompiled_charsmap"; });
    for (auto& [key, value] : gguf.metadata) {
        uint64_t count = 0;
        if (value.type == 9) std::memcpy(&count, value.bytes.data() + 4, 8);
        if (key.starts_with("tokenizer.ggml.") && count == V) value = first_of(value, n);
    }
    for (GgufTensorSpec& t : gguf.tensors)
        if (t.name == "token_embd.weight") t.data.resize(t.data.size() / t.ne[1] * n), t.ne[1] = n;
}

// Each seed's name and how the writer writes it into a file.
std::vector<std::pair<std::string, std::function<void(const fs::path&)>>> seeds() {
    std::vector<std::pair<std::string, std::function<void(const fs::path&)>>> all;
    for (Family family :
         {Family::llama, Family::qwen2, Family::qwen3, Family::olmo2, Family::phi3, Family::gpt2, Family::gpt_neox,
          Family::gemma2, Family::gemma3_text, Family::qwen3_moe, Family::olmoe, Family::mixtral, Family::gpt_oss})
        all.emplace_back(model_type(family),
                         [family](const fs::path& file) { write_gguf_family(file, small(family), seed_types()); });
    all.emplace_back("bert", [](const fs::path& file) {
        EncoderSpec s = gguf_bert_spec();
        s.n_layer = 1, s.n_embd = 32, s.n_head = 2, s.mlp_dim = 32;
        write_gguf_bert(file, s, seed_types(), [&](GgufSpec& gguf) { cut_vocabulary(gguf, s.vocab_size); });
    });
    all.emplace_back("t5", [](const fs::path& file) {
        Seq2SeqSpec s = gguf_t5_spec("t5", 16);
        s.encoder_layers = s.decoder_layers = 1, s.n_embd = 32, s.n_head = 2, s.mlp_dim = 32;
        write_gguf_t5(file, s, seed_types(), [&](GgufSpec& gguf) { cut_vocabulary(gguf, s.vocab_size); });
    });
    return all;
}

TEST(GgufFuzzSeeds, EachArchitecturesSeedOpens) {
    const fs::path corpus = fs::path(HEADSCOPE_TESTS_DIR) / "fuzz" / "corpus" / "gguf_model";
    const char* write = std::getenv("HEADSCOPE_WRITE_FUZZ_SEEDS");
    if (write && std::string(write) == "1") {
        fs::create_directories(corpus);
        for (const auto& [name, write_seed] : seeds()) write_seed(corpus / (name + ".gguf"));
    }
    for (const auto& [name, write_seed] : seeds()) {
        SCOPED_TRACE(name);
        const fs::path seed = corpus / (name + ".gguf");
        ASSERT_TRUE(fs::exists(seed)) << "write it: HEADSCOPE_WRITE_FUZZ_SEEDS=1 test_gguf_models";
        EXPECT_LT(fs::file_size(seed), 48'000u) << "small enough to fuzz";
        EXPECT_EQ(load_model(seed.string()).config.architecture, name);
    }
}

}  // namespace
