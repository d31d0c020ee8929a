// GGUF files of every decoder architecture Headscope reads (llama, qwen2,
// qwen3, olmo2, phi3, gemma2, gemma3, gpt2, gptneox, and the mixtures of
// experts qwen3moe, olmoe, llama's Mixtral and gpt-oss), opened by
// load_model and computed as stored: llama's in each type Headscope reads
// alone (each kernel by itself); every architecture in F32 and with every
// type among its matrices, in turn (rotated_types); llama.cpp's Q4_K_M and
// Q3_K_L mixes, and Q4_K_M and Q2_K ones of a feed-forward width of 288, not
// a multiple of 256, where llama.cpp falls back to Q5_0, Q8_0 and Q4_0
// (llama_cpp_mix). Their maps, head outputs and next tokens against the
// double-precision references written from Hugging Face's code on the
// values the file holds (read by the tests' own block formulas and put back
// in Hugging Face's layout, gguf_models.h; family_reference.h), and their
// token ids and next tokens against llama.cpp's. BERT's and T5's are
// test_gguf_encoders.cpp's; the files the loader refuses,
// test_gguf_refusals.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "family_reference.h"
#include "gguf_models.h"
#include "gguf_vocabs.h"
#include "gguf_writer.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/model/model.h"
#include "llama_cpp.h"
#include "prediction_checks.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

const std::vector<std::vector<int32_t>>& texts = gguf_texts;

struct Param {
    Family family;
    DType dtype;  // every matrix's, unless `mix` says otherwise
    // "sequential": GPT-NeoX with use_parallel_residual false; "untied": GPT-2
    // with its own output.weight, as older converters wrote it, or a Gemma 3
    // with its own; "capped": Gemma 3 with final_logit_softcapping;
    // "narrow": a feed-forward width of 288.
    std::string variant;
    // "every_type": every type read in turn over the matrices, with layers
    // enough for 16 of them; a llama.cpp file type's name ("Q4_K_M"): its mix.
    std::string mix;
};

// llama.cpp's file types (llama_ftype) the rows write, by name.
const std::map<std::string, uint32_t> mixes = {{"Q2_K", 10}, {"Q3_K_L", 13}, {"Q4_K_M", 15}};

FamilySpec spec_of(const Param& param) {
    FamilySpec spec = gguf_family_spec(param.family);
    spec.parallel_residual = param.variant != "sequential";
    if (param.variant == "untied") spec.tied_embeddings = false;
    if (param.variant == "partial") spec.rotary_pct = 0.75;  // Phi-4-mini's: 24 of each head's 32 dims
    if (param.variant == "capped") spec.final_softcap = 3;
    if (param.variant == "narrow") spec.mlp_dim = 288;            // ffn_down's rows of 9 blocks of 32
    if (param.mix == "every_type") spec = every_type_spec(spec);  // layers enough for 16 matrices
    return spec;
}

MatrixTypes matrix_types(const Param& param, const FamilySpec& spec) {
    if (param.mix.empty()) return param.dtype;
    if (param.mix == "every_type") return rotated_types(0);
    return llama_cpp_mix(mixes.at(param.mix), spec);
}

// llama.cpp's names of the file types the rows write.
std::string file_type_name(uint32_t id) {
    static const std::map<uint32_t, std::string> names = {
        {0, "F32"},     {1, "F16"},     {32, "BF16"},   {7, "Q8_0"},    {14, "Q4_K_S"}, {15, "Q4_K_M"},
        {18, "Q6_K"},   {2, "Q4_0"},    {3, "Q4_1"},    {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"},
        {12, "Q3_K_M"}, {13, "Q3_K_L"}, {16, "Q5_K_S"}, {25, "IQ4_NL"}, {30, "IQ4_XS"}, {38, "MXFP4_MOE"}};
    return names.at(id);
}

// Where llama.cpp computes a Gemma otherwise than transformers, as its
// llama_model_gemma2 and llama_model_gemma3 do: the norms' weights as stored
// (the converter added the 1), sqrt(C) in float32 unrounded, the head scale
// 1 / sqrt(hs) below the 27B; each pattern-th layer global; Gemma 3's local
// layers at RoPE base 10000 without the global ones' linear factor.
void expect_gemma_config(const FamilySpec& spec, const Config& c) {
    EXPECT_EQ(c.norm_offset, 0.f);
    EXPECT_EQ(c.embedding_scale, std::sqrt(float(spec.n_embd)));
    EXPECT_FALSE(c.embedding_scale_rounded);
    EXPECT_EQ(c.attention_scale, 1 / std::sqrt(float(spec.head_dim)));
    EXPECT_EQ(c.sliding_window, spec.sliding_window);
    for (int l = 0; l < spec.n_layer; ++l) EXPECT_EQ(c.windowed(l), spec.windowed(l)) << "layer " << l;
    EXPECT_TRUE(c.mixed_windows());
    EXPECT_EQ(c.attention_softcap, float(spec.attn_softcap));
    EXPECT_EQ(c.logit_softcap, float(spec.final_softcap));
    EXPECT_EQ(c.rope.theta, float(spec.rope_theta));
    EXPECT_EQ(c.qk_norm, spec.family != Family::gemma2);
    if (spec.family == Family::gemma3_text) {
        EXPECT_EQ(c.local_rope_theta, 10000.f);
        EXPECT_EQ(c.rope.linear_factor, float(spec.rope_linear_factor));
    }
}

class GgufModel : public ::testing::TestWithParam<Param> {};

TEST_P(GgufModel, MapsHeadOutputsAndNextTokensMatchTheReference) {
    const Param& param = GetParam();
    const Family family = param.family;
    TempDir dir;
    const fs::path file = dir.path / "model.gguf";
    const FamilySpec spec = spec_of(param);
    const MatrixTypes matrices = matrix_types(param, spec);
    const FamilyCheckpoint checkpoint = write_gguf_family(file, spec, matrices);
    const Model model = load_model(file.string());

    const bool fused = family == Family::gpt2 || family == Family::gpt_neox || family == Family::phi3;
    EXPECT_EQ(model.config.architecture, model_type(family));
    EXPECT_EQ(model.config.rope.adjacent_pairs, family == Family::llama || family == Family::mixtral)
        << "llama.cpp reorders llama's Q and K only";
    EXPECT_TRUE(model.config.weights_out_by_in) << "every matrix of a GGUF file is stored (out, in), GPT-2's too";
    EXPECT_EQ(model.config.qkv_layout, fused ? QkvLayout::fused : QkvLayout::separate)
        << "llama.cpp gathers GPT-NeoX's per-head [q k v] into [Q | K | V]";
    if (family != Family::gpt2) {
        EXPECT_FLOAT_EQ(model.config.rope.fraction, static_cast<float>(spec.rotary_pct));
    }
    if (family == Family::gpt_neox) {
        EXPECT_EQ(model.config.parallel_residual, spec.parallel_residual);
    }
    EXPECT_EQ(model.config.tied_embeddings, spec.tied_embeddings);
    if (gemma(family)) expect_gemma_config(spec, model.config);
    EXPECT_EQ(model.config.kv_heads(), spec.kv_heads());
    EXPECT_EQ(model.config.head_size(), spec.head_dim);
    if (param.variant == "narrow") {
        EXPECT_EQ(model.config.mlp_dim, spec.mlp_dim);
    }
    EXPECT_EQ(model.tokenizer.vocab_size(), spec.vocab_size);
    // Every tensor in the type written (vectors and GPT-2's learned positions
    // in F32), the weights the forward reads too; general.file_type as llama.cpp names it.
    EXPECT_EQ(tensor_types_unlike(model, matrices), "");
    EXPECT_EQ((fused ? model.layers.at(0).attn : model.layers.at(0).q).dtype,
              matrices.written(fused ? "blk.0.attn_qkv.weight" : "blk.0.attn_q.weight"));
    EXPECT_EQ(model.wte.dtype, matrices.written("token_embd.weight"));
    EXPECT_EQ(model.file_type, file_type_name(matrices.file_type()));
    if (param.mix == "every_type") {
        EXPECT_EQ(matrices.types().size(), std::size(dtype_names)) << "every type read";
    }

    // Quantized experts run a few rows at a time through integer products,
    // whose activations are split into two 8-bit parts (about 1.6e-5 of a
    // group's largest value), which moves the later layers' maps past 1e-5.
    bool quantized_experts = false;
    for (const TensorInfo& t : model.tensors)
        quantized_experts |= t.name.find("experts") != std::string::npos && t.dtype != DType::F32;
    const double tolerance = quantized_experts ? 2e-3 : 1e-5 * tiles_widen(matrices);
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    // The masks' grid on F32 files (the masks are the same whatever the types); the model's own options else.
    const bool grid = matrices.types() == std::set<DType>{DType::F32};
    for (bool causal : {true, false})
        for (bool padding_mask : {true, false}) {
            if (!grid && !(causal && padding_mask)) continue;
            SCOPED_TRACE(testing::Message() << "causal " << causal << " padding " << padding_mask);
            AttentionOptions opt;
            opt.causal = causal;
            opt.padding_mask = padding_mask;
            opt.capture_outputs = true;
            opt.sliding_window = spec.sliding_window;
            opt.top_k = 5;
            AttentionResult got;
            backend->forward(Batch{texts, model.config.pad_id()}, opt, got);
            const FamilyReference want = family_reference(checkpoint, texts, opt);
            expect_maps_and_outputs_match(got, want, "", tolerance, 2 * tolerance);
            EXPECT_EQ(got.fully_masked, want.fully_masked);
            if (causal && padding_mask)  // the model's own options: its next tokens, the final norm and head too
                expect_top_5(
                    got, texts,
                    family_logits(checkpoint, real_rows(want.residual, spec.n_layer - 1, texts, got.T, spec.n_embd)),
                    spec.vocab_size, tolerance);
        }
}

// llama.cpp itself (llama_cpp.h) on the same file, after each text: its 5
// most likely next tokens (expect_llama_cpps_next_tokens), its probabilities
// within llama_cpp_tolerance of ours: 1e-5 in F32; more for GPT-2, GPT-NeoX
// and Gemma, whose GELU llama.cpp's CPU code reads from a table of halves
// at its input rounded to a half (ggml-cpu's GGML_GELU_FP16), in the tanh
// form where GPT-NeoX's is erf's (Headscope computes Hugging Face's); more
// with a half or a quantized matrix, where llama.cpp rounds its activations
// to the half type or to 8 bits before the products. A mixed file's token
// ids are llama.cpp's too.
TEST_P(GgufModel, TokenIdsAndNextTokensAreLlamaCpps) {
    const Param& param = GetParam();
    TempDir dir;
    const fs::path file = dir.path / "model.gguf";
    const FamilySpec spec = spec_of(param);
    const MatrixTypes matrices = matrix_types(param, spec);
    write_gguf_family(file, spec, matrices);
    const Model model = load_model(file.string());
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    const Family family = param.family;
    const ProbabilityTolerance tolerance =
        llama_cpp_tolerance(matrices, family == Family::gpt2 || family == Family::gpt_neox || gemma(family));
    const std::optional<nlohmann::json> all_theirs = ask_llama_cpp({{"next_tokens", file.string()}, {"texts", texts}});
    if (!all_theirs) GTEST_SKIP() << "node cannot be run: run tools/setup";
    expect_llama_cpps_next_tokens(*backend, model.config, texts, *all_theirs, tolerance);
    if (param.mix.empty()) return;
    const std::vector<std::string> words = {"The cat sat on the mat.", " two  spaces\tand a tab"};
    const auto ids = llama_cpp_token_ids(file, words);
    ASSERT_TRUE(ids);
    for (size_t i = 0; i < words.size(); ++i) EXPECT_EQ(model.tokenizer.encode(words[i]), ids->at(i)) << words[i];
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
    const std::string variant = info.param.variant.empty() ? "" : "_" + info.param.variant;
    return model_type(info.param.family) + variant + "_" +
           (info.param.mix.empty() ? std::string(to_string(info.param.dtype)) : info.param.mix);
}

std::vector<Param> params() {
    std::vector<Param> all;
    // Every type read on llama alone: the halves, and the other blocks through the products' row-widening path.
    for (size_t d = 0; d < std::size(dtype_names); ++d) all.push_back({Family::llama, static_cast<DType>(d), "", ""});
    // Every architecture in F32 and with every type among its matrices.
    for (Family family :
         {Family::llama, Family::qwen2, Family::qwen3, Family::olmo2, Family::phi3, Family::gpt2, Family::gpt_neox,
          Family::gemma2, Family::gemma3_text, Family::qwen3_moe, Family::olmoe, Family::mixtral, Family::gpt_oss}) {
        if (family != Family::llama) all.push_back({family, DType::F32, "", ""});
        all.push_back({family, DType::F32, "", "every_type"});
    }
    // llama.cpp's mixes: Llama's Q4_K_M, the most common; Phi-3's Q3_K_L (its attn_qkv as attn_v);
    // and where ffn_down's rows are not whole blocks of 256 its fallbacks: Q5_0 and Q8_0, Q4_0.
    all.push_back({Family::llama, DType::F32, "", "Q4_K_M"});
    all.push_back({Family::phi3, DType::F32, "partial", "Q3_K_L"});
    all.push_back({Family::llama, DType::F32, "narrow", "Q4_K_M"});
    all.push_back({Family::qwen3, DType::F32, "narrow", "Q2_K"});
    all.push_back({Family::gpt_neox, DType::F32, "sequential", ""});
    all.push_back({Family::gpt2, DType::F32, "untied", ""});
    all.push_back({Family::gemma3_text, DType::F32, "capped", ""});
    all.push_back({Family::gemma3_text, DType::Q8_0, "untied", ""});
    return all;
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufModel, ::testing::ValuesIn(params()), param_name);

// The mixes the rows above write, as llama-quant.cpp chooses them: Llama's
// Q4_K_M (2 layers, untied) with Q6_K on attn_v and ffn_down of layer 1
// (its use_more_bits) and on the output, and its fallbacks on ffn_down's
// rows of 288, Q4_K to Q5_0 and Q6_K to Q8_0; Qwen 3's Q2_K (tied, 4 query
// heads a key head) and its Q3_K to Q4_0; Phi-3's Q3_K_L, attn_qkv as attn_v.
TEST(GgufMixes, TheTypesAreLlamaQuantizesChoices) {
    const FamilySpec llama = gguf_family_spec(Family::llama);
    const MatrixTypes q4_k_m = llama_cpp_mix(15, llama);
    EXPECT_EQ(q4_k_m.file_type(), 15u);
    for (const auto& [name, want] : {std::pair{"token_embd.weight", DType::Q4_K},
                                     {"output.weight", DType::Q6_K},
                                     {"blk.0.attn_v.weight", DType::Q4_K},
                                     {"blk.1.attn_v.weight", DType::Q6_K},
                                     {"blk.0.ffn_down.weight", DType::Q4_K},
                                     {"blk.1.ffn_down.weight", DType::Q6_K},
                                     {"blk.1.attn_q.weight", DType::Q4_K},
                                     {"blk.1.attn_output.weight", DType::Q4_K}})
        EXPECT_EQ(q4_k_m(name, 256), want) << name;
    const MatrixTypes narrow = llama_cpp_mix(15, llama);
    EXPECT_EQ(narrow("blk.0.ffn_down.weight", 288), DType::Q5_0);
    EXPECT_EQ(narrow("blk.1.ffn_down.weight", 288), DType::Q8_0);
    EXPECT_EQ(narrow("blk.1.ffn_up.weight", 256), DType::Q4_K);
    const MatrixTypes q2_k = llama_cpp_mix(10, gguf_family_spec(Family::qwen3));
    EXPECT_EQ(q2_k("token_embd.weight", 256), DType::Q6_K) << "tied: the output's type";
    EXPECT_EQ(q2_k("blk.0.attn_v.weight", 256), DType::Q4_K) << "4 query heads a key head";
    EXPECT_EQ(q2_k("blk.0.attn_output.weight", 256), DType::Q3_K);
    EXPECT_EQ(q2_k("blk.0.ffn_down.weight", 288), DType::Q4_0);
    EXPECT_EQ(q2_k("blk.0.ffn_gate.weight", 256), DType::Q2_K);
    const MatrixTypes q3_k_l = llama_cpp_mix(13, gguf_family_spec(Family::phi3));
    for (const char* name : {"blk.0.attn_qkv.weight", "blk.0.attn_output.weight", "blk.1.ffn_down.weight"})
        EXPECT_EQ(q3_k_l(name, 256), DType::Q5_K) << name;
    EXPECT_EQ(q3_k_l("blk.0.ffn_up.weight", 256), DType::Q3_K);
}

// The Config of a small Gemma file of `spec` changed by `edit`.
Config gemma_config(FamilySpec spec, const std::function<void(GgufSpec&)>& edit = {}) {
    TempDir dir;
    const fs::path file = dir.path / "gemma.gguf";
    write_gguf_family(file, spec, DType::F32, edit);
    return load_model(file.string()).config;
}

// llama.cpp's head scale by the model's size, as its hparams tell the 27B
// by its layers (Gemma 2's 46, Gemma 3's 62): 1 / sqrtf(C / NH) there, else
// 1 / sqrtf(hs); here heads of 64 from C = 64 in 4 heads.
TEST(GgufGemma, TheHeadScaleIsLlamaCppsBySize) {
    for (const auto& [family, layers_27b] : {std::pair{Family::gemma2, 46}, std::pair{Family::gemma3_text, 62}})
        for (int layers : {layers_27b - 1, layers_27b}) {
            FamilySpec spec = gguf_family_spec(family);
            spec.n_embd = 64, spec.n_head = 4, spec.n_kv_head = 1, spec.head_dim = 64, spec.mlp_dim = 64;
            spec.n_layer = layers, spec.window_pattern = 0;
            const Config c = gemma_config(spec);
            EXPECT_EQ(c.attention_scale, 1 / std::sqrt(float(layers == layers_27b ? 16 : 64)))
                << model_type(family) << " of " << layers << " layers";
        }
}

// Gemma 3's window only where attention.sliding_window is above 0 (then
// every layer global, at rope.freq_base with its scaling); a
// sliding_window_pattern of 0 windows every layer, of 1 none.
TEST(GgufGemma, TheWindowsAreLlamaCpps) {
    const FamilySpec spec = gguf_family_spec(Family::gemma3_text);
    for (uint32_t window : {0u, 4u}) {
        const Config c = gemma_config(spec, [&](GgufSpec& s) {
            for (auto& [key, value] : s.metadata)
                if (key == "gemma3.attention.sliding_window") value = gguf_uint32(window);
        });
        EXPECT_EQ(c.sliding_window, int(window));
        EXPECT_EQ(c.mixed_windows(), window > 0);
        EXPECT_FALSE(c.windowed(0) && !window);
    }
    for (uint32_t pattern : {0u, 1u}) {
        const Config c = gemma_config(spec, [&](GgufSpec& s) {
            for (auto& [key, value] : s.metadata)
                if (key == "gemma3.attention.sliding_window_pattern") value = gguf_uint32(pattern);
        });
        for (int l = 0; l < spec.n_layer; ++l) EXPECT_EQ(c.windowed(l), pattern == 0) << pattern << " layer " << l;
    }
}

}  // namespace
