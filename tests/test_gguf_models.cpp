// GGUF files of every architecture Headscope reads, with their matrices in
// F32 and in quantized types, opened by load_model and computed as stored,
// against the double-precision references written from Hugging Face's code
// on the values the file holds (read by the tests' own block formulas and
// put back in Hugging Face's layout, gguf_models.h): the decoders' (llama,
// qwen2, qwen3, olmo2, phi3, gemma2, gemma3, gpt2, gptneox, and the
// mixtures of experts qwen3moe, olmoe, llama's Mixtral and gpt-oss) maps and head
// outputs (family_reference.h)
// and next tokens against llama.cpp's, BERT's maps (encoder_reference.h),
// T5's maps and next tokens (seq2seq_reference.h). The files the loader
// refuses are test_gguf_refusals.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "encoder_reference.h"
#include "family_reference.h"
#include "gguf_models.h"
#include "gguf_writer.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/model/model.h"
#include "llama_cpp.h"
#include "prediction_checks.h"
#include "seq2seq_reference.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

// Two texts of the small vocabulary, 11 and 7 tokens (the second padded), from bos.
const std::vector<std::vector<int32_t>> texts = {{257, 9, 100, 200, 129, 17, 30, 258, 42, 5, 77},
                                                 {257, 64, 256, 12, 90, 33, 2}};

struct Param {
    Family family;
    DType dtype;
    // "sequential": GPT-NeoX with use_parallel_residual false; "untied": GPT-2
    // with its own output.weight, as older converters wrote it, or a Gemma 3
    // with its own; "capped": Gemma 3 with final_logit_softcapping.
    std::string variant;
};

FamilySpec spec_of(const Param& param) {
    FamilySpec spec = gguf_family_spec(param.family);
    spec.parallel_residual = param.variant != "sequential";
    if (param.variant == "untied") spec.tied_embeddings = false;
    if (param.variant == "partial") spec.rotary_pct = 0.75;  // Phi-4-mini's: 24 of each head's 32 dims
    if (param.variant == "capped") spec.final_softcap = 3;
    return spec;
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
    const auto [family, dtype, variant] = GetParam();
    TempDir dir;
    const fs::path file = dir.path / "model.gguf";
    const FamilySpec spec = spec_of(GetParam());
    const FamilyCheckpoint checkpoint = write_gguf_family(file, spec, dtype);
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
    EXPECT_EQ((fused ? model.layers.at(0).attn : model.layers.at(0).q).dtype, dtype);
    EXPECT_EQ(model.wte.dtype, dtype);
    EXPECT_EQ(model.tokenizer.vocab_size(), spec.vocab_size);
    // general.file_type as llama.cpp names it, and every tensor's bits: the norms' 32, the matrices' own.
    // (llama.cpp's names for the file types the writer gives each: a K type's _S or _M.)
    static const std::map<DType, std::string> file_types = {
        {DType::F32, "F32"},     {DType::F16, "F16"},       {DType::BF16, "BF16"},     {DType::Q8_0, "Q8_0"},
        {DType::Q4_K, "Q4_K_S"}, {DType::Q6_K, "Q6_K"},     {DType::Q4_0, "Q4_0"},     {DType::Q4_1, "Q4_1"},
        {DType::Q5_0, "Q5_0"},   {DType::Q5_1, "Q5_1"},     {DType::Q2_K, "Q2_K"},     {DType::Q3_K, "Q3_K_M"},
        {DType::Q5_K, "Q5_K_S"}, {DType::IQ4_NL, "IQ4_NL"}, {DType::IQ4_XS, "IQ4_XS"}, {DType::MXFP4, "MXFP4_MOE"}};
    EXPECT_EQ(model.file_type, file_types.at(dtype));
    const WeightStorage storage = weight_storage(model);
    // The rest are F32: vectors, and GPT-2's learned positions.
    // A layer of experts: its attention's 4 and each expert's 3, the router F32.
    const int per_layer = fused ? 4 : spec.n_experts ? 4 + 3 * spec.n_experts : 7;
    const int matrices = 1 + per_layer * spec.n_layer + (spec.tied_embeddings ? 0 : 1);
    // gpt-oss's experts are MXFP4 whatever the other matrices' type (but F32's).
    const int mxfp4_experts = family == Family::gpt_oss && dtype != DType::F32 ? 3 * spec.n_experts * spec.n_layer : 0;
    EXPECT_EQ(storage.tensors_by_dtype.at(to_string(dtype)),
              (dtype == DType::F32 ? static_cast<int>(model.tensors.size()) : matrices) - mxfp4_experts);

    // Quantized experts run a few rows at a time through integer products,
    // whose activations are split into two 8-bit parts (about 1.6e-5 of a
    // group's largest value), which moves the later layers' maps past 1e-5.
    const double tolerance = spec.n_experts && dtype != DType::F32 ? 2e-3 : 1e-5 * tiles_widen(dtype);
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    for (bool causal : {true, false})
        for (bool padding_mask : {true, false}) {
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

// llama.cpp itself (llama_cpp.h) on the same file,
// after each text. F32: the same 5 most likely next tokens, their
// probabilities within 1e-5; within 5e-5 for GPT-2, GPT-NeoX and Gemma,
// whose GELU llama.cpp's CPU code reads from a table of halves at its input
// rounded to a half (ggml-cpu's GGML_GELU_FP16), in the tanh form where
// GPT-NeoX's is erf's (Headscope computes Hugging Face's): that moves its
// probabilities here by up to 1.5e-5 (3.1e-5 for Gemma 3). Quantized: llama.cpp rounds its activations to
// 8 bits before the products, which moves its probabilities by up to 5e-2,
// so each of its 5 tokens has our probability within 5e-2 of its own, and
// its most likely token is ours wherever it leads the next by more than that.
// F16 and BF16: it rounds its activations to the weights' half type: within
// 1e-3, and the same leading token by the same rule.
TEST_P(GgufModel, NextTokensAreLlamaCpps) {
    const auto [family, dtype, variant] = GetParam();
    TempDir dir;
    const fs::path file = dir.path / "model.gguf";
    write_gguf_family(file, spec_of(GetParam()), dtype);
    const Model model = load_model(file.string());
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    const bool gelu = family == Family::gpt2 || family == Family::gpt_neox || gemma(family);
    const bool halves = dtype == DType::F16 || dtype == DType::BF16;
    const bool f32 = dtype == DType::F32;
    const double tolerance = f32 ? (gelu ? 5e-5 : 1e-5) : halves ? 1e-3 : 5e-2;
    const std::optional<nlohmann::json> all_theirs = ask_llama_cpp({{"next_tokens", file.string()}, {"texts", texts}});
    if (!all_theirs) GTEST_SKIP() << "node cannot be run: run tools/setup";
    ASSERT_EQ(all_theirs->size(), texts.size());
    for (size_t t = 0; t < texts.size(); ++t) {
        const std::vector<int32_t>& text = texts[t];
        AttentionOptions opt;
        opt.top_k = 5;
        opt.sliding_window = model.config.sliding_window;  // llama.cpp's windows are always on
        AttentionResult ours;
        backend->forward(Batch{{text}, model.config.pad_id()}, opt, ours);
        std::vector<double> p(ours.last_logits.begin(), ours.last_logits.begin() + ours.V);
        const double top = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (double& x : p) sum += x = std::exp(x - top);
        for (double& x : p) x /= sum;

        const nlohmann::json& theirs = (*all_theirs)[t];
        ASSERT_EQ(theirs.size(), 5u);
        const Prediction* ranked = ours.predictions_at(0, static_cast<int>(text.size()) - 1);
        for (int k = 0; k < 5; ++k) {
            const int id = theirs[k][0].get<int>();
            EXPECT_NEAR(p.at(static_cast<size_t>(id)), theirs[k][1].get<double>(), tolerance)
                << "text " << t << " rank " << k << ": " << theirs.dump();
            const bool leads = theirs[k][1].get<double>() - (k < 4 ? theirs[k + 1][1].get<double>() : 0) > tolerance;
            if (f32 || (k == 0 && leads)) {
                EXPECT_EQ(ranked[k].id, id) << "text " << t << " rank " << k << ": " << theirs.dump();
            }
        }
    }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
    const std::string variant = info.param.variant.empty() ? "" : "_" + info.param.variant;
    return model_type(info.param.family) + variant + "_" + to_string(info.param.dtype);
}

std::vector<Param> params() {
    std::vector<Param> all;
    for (Family family :
         {Family::llama, Family::qwen2, Family::qwen3, Family::olmo2, Family::phi3, Family::gpt2, Family::gpt_neox})
        for (DType dtype : {DType::F32, DType::Q8_0, DType::Q4_K, DType::Q6_K}) all.push_back({family, dtype, ""});
    // Every other type read, on llama: the halves, and the other blocks through the products' row-widening path.
    for (DType dtype : {DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,
                        DType::Q3_K, DType::Q5_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4})
        all.push_back({Family::llama, dtype, ""});
    all.push_back({Family::gpt_neox, DType::F32, "sequential"});
    all.push_back({Family::gpt2, DType::F32, "untied"});
    all.push_back({Family::phi3, DType::Q4_K, "partial"});
    for (Family family : {Family::gemma2, Family::gemma3_text})
        for (DType dtype : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K}) all.push_back({family, dtype, ""});
    for (Family family : {Family::qwen3_moe, Family::olmoe, Family::mixtral})
        for (DType dtype : {DType::F32, DType::Q8_0, DType::Q4_K}) all.push_back({family, dtype, ""});
    for (DType dtype : {DType::F32, DType::Q8_0, DType::Q4_K}) all.push_back({Family::gpt_oss, dtype, ""});
    all.push_back({Family::gemma3_text, DType::F32, "capped"});
    all.push_back({Family::gemma3_text, DType::Q8_0, "untied"});
    return all;
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufModel, ::testing::ValuesIn(params()), param_name);

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

// The largest difference between one text's maps in a padded batch, their
// rows of `padded` keys read by `row` (layer, head, query), and the
// reference's `want` (L, NH, n, m) of the text alone: n queries, m keys.
template <typename Row>
double worst_map(const Row& row, int layers, int NH, int padded, const std::vector<double>& want, int n, int m) {
    double worst = 0;
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < NH; ++h)
            for (int i = 0; i < n; ++i)
                for (int j = 0; j < padded; ++j) {
                    const double expected = j < m ? want[((size_t(l) * NH + h) * n + i) * m + j] : 0;
                    worst = std::max(worst, std::abs(row(l, h, i)[j] - expected));
                }
    return worst;
}

class GgufBert : public ::testing::TestWithParam<DType> {};

// BERT as the converter writes it, without its masked-LM head: a bare
// encoder whose maps of a padded batch of pairs (token types 0 and 1) equal
// the reference's (encoder_reference.h) of each text alone.
TEST_P(GgufBert, MapsMatchTheReference) {
    const DType dtype = GetParam();
    TempDir dir;
    const fs::path file = dir.path / "bert.gguf";
    const EncoderSpec spec = gguf_bert_spec();
    const EncoderCheckpoint checkpoint = write_gguf_bert(file, spec, dtype);
    const Model model = load_model(file.string());
    EXPECT_EQ(model.config.architecture, "bert");
    EXPECT_STREQ(model_kind(model.config), "encoder");
    EXPECT_FALSE(model.config.mlm_head) << "the converter leaves the masked-LM head out";
    EXPECT_EQ(model.config.type_vocab_size, spec.type_vocab_size);
    EXPECT_EQ(model.tokenizer.vocab_size(), spec.vocab_size) << "the file's own bert tokenizer";
    EXPECT_EQ(model.layers.at(0).q.dtype, dtype);
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    const std::vector<std::vector<int32_t>> types = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1}};
    AttentionOptions options;
    options.causal = false;
    AttentionResult got;
    backend->forward(Batch{texts, model.config.pad_id(), types}, options, got);
    for (int b = 0; b < got.B; ++b) {
        const EncoderReference want = encoder_reference(checkpoint, texts[b], types[b], options);
        const auto row = [&](int l, int h, int i) { return got.row(l, b, h, i); };
        EXPECT_LT(worst_map(row, spec.n_layer, want.NH, got.T, want.weights, want.T, want.T), 2e-5 * tiles_widen(dtype))
            << "text " << b;
    }
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufBert, ::testing::Values(DType::F32, DType::Q4_K),
                         [](const auto& info) { return std::string(to_string(info.param)); });

struct T5Param {
    std::string variant;  // t5 (ReLU, tied) or flan_t5 (gated GELU, untied, 3 decoder layers)
    int head_dim;         // 16: heads of 128 columns, not C
    DType dtype;
};

class GgufT5 : public ::testing::TestWithParam<T5Param> {};

// T5 and Flan-T5 as the converter writes them: of a padded batch, each
// text's encoder, decoder and cross-attention maps and its top-5 next tokens
// equal the reference's (seq2seq_reference.h) of the text alone. The maps
// within 2e-5, or 5e-5 for quantized matrices: their random blocks have
// heavier tails than the drawn floats, and T5 scales no score, so its maps
// are steeper and float32's rounding of the scores moves them further
// (3.3e-5 for Flan-T5 in Q4_K).
TEST_P(GgufT5, MapsAndPredictionsMatchTheReference) {
    const auto [variant, head_dim, dtype] = GetParam();
    TempDir dir;
    const fs::path file = dir.path / "t5.gguf";
    const Seq2SeqSpec spec = gguf_t5_spec(variant, head_dim);
    const Seq2SeqCheckpoint checkpoint = write_gguf_t5(file, spec, dtype);
    const Model model = load_model(file.string());
    EXPECT_STREQ(model_kind(model.config), "encoder-decoder");
    ASSERT_TRUE(model.encoder);
    EXPECT_EQ(model.encoder->config.n_layer, spec.encoder_layers);
    EXPECT_EQ(model.config.n_layer, spec.decoder_layers);
    EXPECT_EQ(model.config.tied_embeddings, spec.tied);
    EXPECT_EQ(model.config.mlp, spec.activation == "relu" ? Mlp::relu : Mlp::gated_gelu);
    EXPECT_EQ(model.config.decoder_start_token_id, spec.start_id);
    EXPECT_EQ(model.tokenizer.vocab_size(), spec.vocab_size) << "the file's own t5 tokenizer";
    EXPECT_EQ(model.layers.at(0).cross_q.dtype, dtype);
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    Batch batch{{{spec.start_id, 12, 250, 40, 31, 8}, {spec.start_id, 90, 3, 86}}, model.config.pad_id()};
    batch.source_ids = {{7, 100, 258, 200, 45, 9, 129, 30, spec.eos_id}, {256, 5, 77, 134, spec.eos_id}};
    AttentionOptions options;
    options.scale = own_scale(model.config.scaled_scores);
    options.top_k = 5;
    AttentionResult got;
    backend->forward(batch, options, got);
    ASSERT_TRUE(got.encoder);
    const double tolerance = dtype == DType::F32 ? 2e-5 : 5e-5 * tiles_widen(dtype);
    for (int b = 0; b < got.B; ++b) {
        const Seq2SeqReference want = seq2seq_reference(checkpoint, batch.source_ids[b], batch.token_ids[b], options);
        const int S = want.S, T = want.T, NH = want.NH;
        const auto encoder = [&](int l, int h, int i) { return got.encoder->row(l, b, h, i); };
        const auto decoder = [&](int l, int h, int i) { return got.row(l, b, h, i); };
        const auto cross = [&](int l, int h, int i) { return got.cross_row(l, b, h, i); };
        EXPECT_LT(worst_map(encoder, spec.encoder_layers, NH, got.encoder->T, want.encoder, S, S), tolerance) << b;
        EXPECT_LT(worst_map(decoder, spec.decoder_layers, NH, got.T, want.decoder, T, T), tolerance) << b;
        EXPECT_LT(worst_map(cross, spec.decoder_layers, NH, got.S, want.cross, T, S), tolerance) << b;
        double p = 0;
        for (int t = 0; t < T; ++t) {
            const double* logits = want.logits.data() + size_t(t) * want.V;
            const double top = *std::max_element(logits, logits + want.V);
            double sum = 0;
            for (int v = 0; v < want.V; ++v) sum += std::exp(logits[v] - top);
            const Prediction* ranked = got.predictions_at(b, t);
            EXPECT_NEAR(logits[ranked[0].id], top, 1e-6) << "text " << b << " position " << t;
            for (int k = 0; k < 5; ++k)
                p = std::max(p, std::abs(ranked[k].p - std::exp(logits[ranked[k].id] - top) / sum));
        }
        EXPECT_LT(p, 1e-4) << "text " << b;
    }
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufT5,
                         ::testing::Values(T5Param{"t5", 16, DType::F32}, T5Param{"t5", 16, DType::Q8_0},
                                           T5Param{"flan_t5", 32, DType::F32}, T5Param{"flan_t5", 32, DType::Q4_K}),
                         [](const auto& info) { return info.param.variant + "_" + to_string(info.param.dtype); });

}  // namespace
