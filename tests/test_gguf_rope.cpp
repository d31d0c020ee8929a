// RoPE's scaling as llama.cpp's files store it (part of test_gguf_models):
// Llama 3.1's rope_freqs, one divisor per pair as the converter computes
// them from rope_scaling (LlamaModel.generate_extra_tensors), and Phi-3's
// LongRoPE, rope_factors_short and rope_factors_long with the switch length
// and attention factor its converter (Phi3MiniModel) writes. The maps and
// next tokens against the double reference (family_reference.h) run with
// Hugging Face's rope_scaling of the same model, the ids and next tokens
// against llama.cpp's. The files refused are test_gguf_refusals.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "family_reference.h"
#include "gguf_models.h"
#include "gguf_vocabs.h"
#include "headscope/compute/backend.h"
#include "headscope/model/model.h"
#include "llama_cpp.h"
#include "prediction_checks.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

// Two texts of the small vocabulary, 11 and 7 tokens (the second padded), from bos.

// A 1-D F32 tensor of `values`.
template <typename T>
GgufTensorSpec f32_tensor(const std::string& name, const std::vector<T>& values) {
    GgufTensorSpec t{name, {values.size()}, 0, ""};
    for (T v : values) {
        const auto f = static_cast<float>(v);
        t.data.append(reinterpret_cast<const char*>(&f), sizeof f);
    }
    return t;
}

// rope_freqs as the converter computes it from Llama 3.1's rope_scaling,
// in float32 as its torch tensors are: a pair whose wavelength is under
// original / high_freq_factor keeps its frequency (1), one past original /
// low_freq_factor is slowed by the factor, and one between by
// 1 / ((1 - smooth) / factor + smooth).
std::vector<float> converter_rope_freqs(const FamilySpec& s) {
    const float factor = float(s.rope_factor), low = float(s.low_freq_factor), high = float(s.high_freq_factor);
    const float original = float(s.original_max_positions);
    std::vector<float> divisors;
    for (int i = 0; i < s.head_dim; i += 2) {
        const float wavelength = 2 * std::numbers::pi_v<float> * std::pow(float(s.rope_theta), float(i) / s.head_dim);
        const float smooth = (original / wavelength - low) / (high - low);
        divisors.push_back(wavelength < original / high  ? 1
                           : wavelength > original / low ? factor
                                                         : 1 / ((1 - smooth) / factor + smooth));
    }
    return divisors;
}

// The model's maps, head outputs and next tokens of a forward of `batch`
// against the reference's on the file's values: within 1e-5 (F32).
void expect_rope_reference(const Model& model, const FamilyCheckpoint& checkpoint, const Texts& batch) {
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionOptions opt;
    opt.capture_outputs = true;
    opt.top_k = 5;
    opt.sliding_window = checkpoint.spec.sliding_window;
    AttentionResult got;
    backend->forward(Batch{batch, model.config.pad_id()}, opt, got);
    const FamilyReference want = family_reference(checkpoint, batch, opt);
    const double tolerance = 1e-5 * tiles_widen(DType::F32);
    expect_maps_and_outputs_match(got, want, "", tolerance, 2 * tolerance);
    const int L = checkpoint.spec.n_layer, C = checkpoint.spec.n_embd;
    expect_top_5(got, batch, family_logits(checkpoint, real_rows(want.residual, L - 1, batch, got.T, C)),
                 checkpoint.spec.vocab_size, tolerance);
}

// llama.cpp's ids of a text, and its 5 next tokens after each of `batch`
// with their probabilities within 1e-5 of ours (F32); false when node cannot be run.
bool expect_rope_llama_cpps(const fs::path& file, const Model& model, const Texts& batch) {
    const std::string text = "The cat sat on the mat.";
    const auto ids = llama_cpp_token_ids(file, {text});
    if (!ids) return false;
    EXPECT_EQ(model.tokenizer.encode(text), ids->at(0));
    const auto theirs = ask_llama_cpp({{"next_tokens", file.string()}, {"texts", batch}});
    if (!theirs) return false;
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    expect_llama_cpps_next_tokens(*backend, model.config, batch, *theirs, {1e-5, 0, 1e-5});
    return true;
}

// Llama 3.1's scaling (factor 8, low_freq_factor 1, high_freq_factor 4,
// original 8192) over heads of 32 at base 500000: of the 16 pairs, 0 to 7
// keep their frequency, 8 is slowed 2.7 times and 9 to 15 8 times.
TEST(GgufRope, Llama31sRopeFreqsMatchTheReferenceAndLlamaCpp) {
    FamilySpec spec = gguf_family_spec(Family::llama);
    spec.rope_factor = 8, spec.low_freq_factor = 1, spec.high_freq_factor = 4, spec.original_max_positions = 8192;
    const std::vector<float> divisors = converter_rope_freqs(spec);
    ASSERT_EQ(divisors.size(), 16u);
    EXPECT_EQ(divisors[7], 1.f);
    EXPECT_GT(divisors[8], 2.f);
    EXPECT_LT(divisors[8], 3.f);
    EXPECT_EQ(divisors[9], 8.f);
    TempDir dir;
    const fs::path file = dir.path / "llama31.gguf";
    const FamilyCheckpoint checkpoint = write_gguf_family(file, spec, DType::F32, [&](GgufSpec& gguf) {
        gguf.tensors.push_back(f32_tensor("rope_freqs.weight", divisors));
    });
    const Model model = load_model(file.string());
    EXPECT_EQ(model.config.rope.frequency_divisors, divisors);
    EXPECT_EQ(model.config.rope.factor, 0.f) << "the file's divisors are its whole scaling";
    EXPECT_TRUE(model.config.rope.adjacent_pairs);
    expect_rope_reference(model, checkpoint, gguf_texts);
    if (!expect_rope_llama_cpps(file, model, gguf_texts)) GTEST_SKIP() << "node cannot be run: run tools/setup";
}

// Phi-4-mini's rotary dims (3/4 of each head's 32: 12 pairs) with LongRoPE
// switching at `original` of `positions`, the keys and tensors as the
// converter writes them: the attention factor sqrt(1 + ln(positions /
// original) / ln(original)) as rope.scaling.attn_factor.
FamilySpec longrope_spec(int original, int positions) {
    FamilySpec s = gguf_family_spec(Family::phi3);
    s.rotary_pct = 0.75, s.original_max_positions = original, s.max_positions = positions;
    s.short_factors = {1.5, 1.2, 1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.2, 4.0, 5.5, 7.0};
    s.long_factors = {2.0, 3.0, 1.5, 4.0, 6.0, 9.0, 13.0, 18.0, 25.0, 33.0, 42.0, 55.0};
    return s;
}

void write_longrope(GgufSpec& gguf, const FamilySpec& s) {
    const double scale = double(s.max_positions) / s.original_max_positions;
    gguf.metadata.emplace_back("phi3.rope.scaling.original_context_length",
                               gguf_uint32(uint32_t(s.original_max_positions)));
    gguf.metadata.emplace_back(
        "phi3.rope.scaling.attn_factor",
        gguf_float32(float(std::sqrt(1 + std::log(scale) / std::log(s.original_max_positions)))));
    gguf.tensors.push_back(f32_tensor("rope_factors_long.weight", s.long_factors));
    gguf.tensors.push_back(f32_tensor("rope_factors_short.weight", s.short_factors));
}

// Phi-3.5-mini's switch: 4096 of 131072 positions (attention factor
// 1.190). Both gguf_texts lie within it, where Hugging Face (by the text's
// length) and llama.cpp (by its context, 256 here) both take the short factors.
TEST(GgufRope, PhiLongRopeWithinTheOriginalContextMatchesTheReferenceAndLlamaCpp) {
    const FamilySpec spec = longrope_spec(4096, 131072);
    TempDir dir;
    const fs::path file = dir.path / "phi35.gguf";
    const FamilyCheckpoint checkpoint =
        write_gguf_family(file, spec, DType::F32, [&](GgufSpec& gguf) { write_longrope(gguf, spec); });
    const Model model = load_model(file.string());
    const Rope& rope = model.config.rope;
    EXPECT_EQ(rope.frequency_divisors, std::vector<float>(spec.short_factors.begin(), spec.short_factors.end()));
    EXPECT_EQ(rope.long_divisors, std::vector<float>(spec.long_factors.begin(), spec.long_factors.end()));
    EXPECT_EQ(rope.long_after, 4096);
    EXPECT_NEAR(rope.cos_sin_scale, std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-7);
    EXPECT_FLOAT_EQ(rope.fraction, 0.75f);
    expect_rope_reference(model, checkpoint, gguf_texts);
    if (!expect_rope_llama_cpps(file, model, gguf_texts)) GTEST_SKIP() << "node cannot be run: run tools/setup";
}

// A switch at 8 of 512 positions (attention factor sqrt(3)): the batch
// padded to 11 takes the long factors, the 7 tokens alone the short ones,
// as Hugging Face chooses by the length. llama.cpp chooses by its context
// (256, past 8): the long factors for any text, so only the 11 tokens are
// compared with it (the 7 alone are Hugging Face's, not llama.cpp's).
TEST(GgufRope, PhiLongRopePastTheOriginalContextTakesTheLongFactors) {
    const FamilySpec spec = longrope_spec(8, 512);
    TempDir dir;
    const fs::path file = dir.path / "phi3-long.gguf";
    const FamilyCheckpoint checkpoint =
        write_gguf_family(file, spec, DType::F32, [&](GgufSpec& gguf) { write_longrope(gguf, spec); });
    const Model model = load_model(file.string());
    EXPECT_EQ(model.config.rope.long_after, 8);
    EXPECT_NEAR(model.config.rope.cos_sin_scale, std::sqrt(3.0), 1e-6);
    expect_rope_reference(model, checkpoint, gguf_texts);
    expect_rope_reference(model, checkpoint, {gguf_texts[1]});
    if (!expect_rope_llama_cpps(file, model, {gguf_texts[0]})) GTEST_SKIP() << "node cannot be run: run tools/setup";
}

}  // namespace
