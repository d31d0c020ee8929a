// The families' reference (family_reference.h) checked on its own, without
// the engine: rotary positions keep norms and see only relative positions,
// Llama 3's frequencies are the formula's, every row is a distribution that
// honours the masks, a re-split to the model's own count is no re-split,
// heads of a group share their keys, and the test models' features change
// the maps (so that an engine without them fails the comparison).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "family_reference.h"
#include "family_writer.h"

using namespace headscope;
using namespace headscope::test;

namespace {

const FamilySpec& variant(const std::string& name) {
    static const std::vector<FamilyVariant> variants = family_variants();
    for (const FamilyVariant& v : variants)
        if (v.name == name) return v.spec;
    throw std::out_of_range("no variant " + name);
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (size_t n = 0; n < a.size(); ++n) m = std::max(m, std::abs(a[n] - b[n]));
    return m;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t n = 0; n < a.size(); ++n) s += a[n] * b[n];
    return s;
}

std::vector<double> rotated(const std::vector<float>& inv_freq, int position, std::vector<double> x) {
    rotate(inv_freq, position, x.data());
    return x;
}

TEST(FamilyReference, RopeKeepsNormsAndSeesOnlyRelativePositions) {
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal;
    for (const char* name : {"llama", "llama3_scaled", "qwen3", "gpt_neox_parallel"})
        for (int hs : {4, 8, 16}) {
            const FamilySpec& spec = variant(name);
            const std::vector<float> inv_freq = rope_inverse_frequencies(spec, hs);
            ASSERT_EQ(int(inv_freq.size()), spec.family == Family::gpt_neox ? hs / 8 : hs / 2) << name << " hs " << hs;
            std::vector<double> q(hs), k(hs);
            for (double& v : q) v = normal(rng);
            for (double& v : k) v = normal(rng);
            EXPECT_EQ(rotated(inv_freq, 0, q), q);
            const std::vector<double> q5 = rotated(inv_freq, 5, q);
            EXPECT_NEAR(dot(q5, q5), dot(q, q), 1e-12);
            for (int d = 2 * int(inv_freq.size()); d < hs; ++d) EXPECT_EQ(q5[d], q[d]) << "a dim past the rotary ones";
            // Scores depend on m - n only: (m, n) = (7, 2) and (12, 7).
            EXPECT_NEAR(dot(rotated(inv_freq, 7, q), rotated(inv_freq, 2, k)),
                        dot(rotated(inv_freq, 12, q), rotated(inv_freq, 7, k)), 1e-12);
            if (!inv_freq.empty()) {
                EXPECT_GT(std::abs(dot(q5, k) - dot(q, k)), 1e-6) << name << " hs " << hs;
            }
        }
}

// theta 500000, 8 dims: wavelengths 2 pi, 167, 4443 and 118143 against the
// bounds 256 / 4 = 64 and 256 / 1 = 256: the first stays, the second blends
// with smooth = (256 / 167.079 - 1) / 3 = 0.177403, the others slow by 8.
TEST(FamilyReference, Llama3FrequenciesFollowTheFormula) {
    const std::vector<float> inv_freq = rope_inverse_frequencies(variant("llama3_scaled"), 8);
    ASSERT_EQ(inv_freq.size(), 4u);
    EXPECT_FLOAT_EQ(inv_freq[0], 1.0f);
    EXPECT_FLOAT_EQ(inv_freq[1], 0.010538232746455323f);
    EXPECT_FLOAT_EQ(inv_freq[2], 0.00017677669529663688f);
    EXPECT_FLOAT_EQ(inv_freq[3], 6.647869871181236e-06f);
}

// Phi-3's LongRoPE: theta 10000 over 6 rotary dims gives 1, 10000^(-1/3)
// and 10000^(-2/3), divided by the short factors (1, 1.5, 3) up to 8
// positions and by the long ones (2, 5, 11) past them; the attention factor
// of 512 positions over 8 is sqrt(1 + ln 64 / ln 8) = sqrt(3).
TEST(FamilyReference, LongRopeFollowsTheFormula) {
    const FamilySpec& spec = variant("phi3_longrope");
    const std::vector<float> within = rope_inverse_frequencies(spec, 8, 8), past = rope_inverse_frequencies(spec, 8, 9);
    ASSERT_EQ(within.size(), 3u);
    ASSERT_EQ(past.size(), 3u);
    EXPECT_FLOAT_EQ(within[0], 1.0f);
    EXPECT_FLOAT_EQ(within[1], 0.0309439255f);
    EXPECT_FLOAT_EQ(within[2], 0.000718144897f);
    EXPECT_FLOAT_EQ(past[0], 0.5f);
    EXPECT_FLOAT_EQ(past[1], 0.00928317767f);
    EXPECT_FLOAT_EQ(past[2], 0.000195857699f);
    EXPECT_DOUBLE_EQ(rope_attention_factor(spec), std::sqrt(3.0));
    EXPECT_DOUBLE_EQ(rope_attention_factor(variant("phi3")), 1.0);
}

class EachVariant : public ::testing::TestWithParam<FamilyVariant> {
protected:
    static constexpr int B = 2, T = 11;  // family_texts' two texts, padded to 11
    FamilyCheckpoint model_ = make_family_checkpoint(GetParam().spec);
    std::vector<std::vector<int32_t>> texts_ = family_texts(GetParam().spec);
};

TEST_P(EachVariant, RowsAreDistributionsWithinTheMasks) {
    const FamilySpec& spec = GetParam().spec;
    int checked = 0;
    for (bool causal : {true, false})
        for (bool padding : {true, false})
            for (int window : {0, 4}) {
                AttentionOptions opt;
                opt.causal = causal, opt.padding_mask = padding, opt.sliding_window = window;
                const FamilyReference r = family_reference(model_, texts_, opt);
                ASSERT_EQ(r.weights.size(), size_t(spec.n_layer) * B * r.NH * T * T);
                for (size_t slot = 0; slot < size_t(spec.n_layer); ++slot)
                    for (int b = 0; b < B; ++b)
                        for (int h = 0; h < r.NH; ++h)
                            for (int i = 0; i < T; ++i) {
                                const int length = int(texts_[b].size());
                                const double* row = &r.weights[(((slot * B + b) * r.NH + h) * T + i) * T];
                                double sum = 0;
                                for (int j = 0; j < T; ++j) {
                                    // Gemma's and gpt-oss's window is on their sliding layers only.
                                    const bool layered = gemma(spec.family) || spec.family == Family::gpt_oss;
                                    const bool windowed = !layered || spec.windowed(int(slot));
                                    const bool allowed = (!causal || j <= i) &&
                                                         (!padding || (i < length && j < length)) &&
                                                         (!window || !windowed || j > i - window);
                                    if (!allowed) {
                                        EXPECT_EQ(row[j], 0.0);
                                    }
                                    EXPECT_GE(row[j], 0.0);
                                    sum += row[j];
                                }
                                const bool masked = padding && i >= length;
                                EXPECT_EQ(r.fully_masked[b * T + i], masked);
                                if (spec.family == Family::gpt_oss && !masked)  // the sink takes the rest
                                    EXPECT_LT(sum, 1.0);
                                else
                                    EXPECT_NEAR(sum, masked ? 0.0 : 1.0, 1e-12);
                                ++checked;
                            }
            }
    EXPECT_EQ(checked, 8 * spec.n_layer * B * spec.n_head * T);
}

TEST_P(EachVariant, ResplitToTheModelsOwnCountIsNoResplit) {
    AttentionOptions own;
    own.n_head = GetParam().spec.n_head;
    for (Split split : {Split::transpose, Split::naive_view}) {
        own.split = split;
        AttentionOptions plain;
        plain.split = split;
        const FamilyReference a = family_reference(model_, texts_, own), b = family_reference(model_, texts_, plain);
        EXPECT_EQ(a.weights, b.weights);
        EXPECT_EQ(a.outputs, b.outputs);
    }
}

// With one head the naive view reads the whole (T, width) buffer as it is
// (only models without groups have a one-head split).
TEST(FamilyReference, OneHeadsNaiveViewIsTheTranspose) {
    int checked = 0;
    for (const FamilyVariant& v : family_variants()) {
        if (v.spec.n_head != v.spec.kv_heads()) continue;
        const FamilyCheckpoint model = make_family_checkpoint(v.spec);
        AttentionOptions transpose, naive;
        transpose.n_head = naive.n_head = 1;
        naive.split = Split::naive_view;
        const auto texts = family_texts(v.spec);
        const FamilyReference a = family_reference(model, texts, transpose), b = family_reference(model, texts, naive);
        EXPECT_EQ(a.weights, b.weights) << v.name;
        EXPECT_EQ(a.outputs, b.outputs) << v.name;
        ++checked;
    }
    EXPECT_EQ(checked, 5);  // llama_tied, olmo2_biased, olmoe and the two GPT-NeoX
}

// Give head 1 head 0's Q columns (and, where Q is normed as a whole, as
// OLMo 2's is, head 0's norm weights; gpt-oss's head 0's sink): they share a
// K/V head exactly when in one group, and then their maps agree in every layer.
TEST_P(EachVariant, HeadsOfAGroupShareTheirKeys) {
    const FamilySpec& spec = GetParam().spec;
    const int group = spec.n_head / spec.kv_heads(), hs = spec.head_dim, C = spec.n_embd;
    FamilyCheckpoint copied = model_;
    for (NamedTensor& t : copied.tensors) {
        // qkv_proj's first rows are q_proj's.
        const bool q_weight = t.name.ends_with("q_proj.weight") || t.name.ends_with("qkv_proj.weight");
        const bool q_bias = t.name.ends_with("q_proj.bias");
        const bool fused_weight = t.name.ends_with("query_key_value.weight");
        const bool fused_bias = t.name.ends_with("query_key_value.bias");
        const bool whole_q_norm = t.name.ends_with("q_norm.weight") && t.values.size() > size_t(hs);
        if (whole_q_norm) std::copy_n(t.values.begin(), hs, t.values.begin() + hs);
        if (t.name.ends_with("self_attn.sinks")) t.values[1] = t.values[0];
        if (!(q_weight || q_bias || fused_weight || fused_bias)) continue;
        // Head 0's q rows are the first hs; head 1's follow them in q_proj,
        // and follow head 0's q, k and v in query_key_value.
        const size_t row_size = (q_weight || fused_weight) ? C : 1;
        const size_t head_1 = (q_weight || q_bias) ? hs : 3 * hs;
        std::copy_n(t.values.begin(), hs * row_size, t.values.begin() + head_1 * row_size);
    }
    const FamilyReference r = family_reference(copied, texts_, {});
    const size_t map = T * T;
    for (int l = 0; l < spec.n_layer; ++l)
        for (int b = 0; b < B; ++b) {
            const double* head0 = &r.weights[((size_t(l) * B + b) * r.NH) * map];
            const std::vector<double> h0(head0, head0 + map), h1(head0 + map, head0 + 2 * map);
            if (group > 1)
                EXPECT_EQ(h0, h1) << "layer " << l << " text " << b;
            else
                EXPECT_GT(max_difference(h0, h1), 1e-3) << "layer " << l << " text " << b;
        }
}

// The maps are peaked: the causal rows of 4 to 7 keys give their largest
// weight 0.35 or more on average, where uniform rows would give 0.19.
TEST_P(EachVariant, MapsArePeaked) {
    const FamilyReference r = family_reference(model_, texts_, {});
    double max_sum = 0;
    int rows = 0;
    for (size_t m = 0; m < r.weights.size() / (T * T); ++m)
        for (int i = 3; i < 7; ++i) {  // rows that both texts have
            const double* row = &r.weights[(m * T + i) * T];
            max_sum += *std::max_element(row, row + T);
            ++rows;
        }
    EXPECT_GT(max_sum / rows, 0.35);
}

INSTANTIATE_TEST_SUITE_P(Families, EachVariant, ::testing::ValuesIn(family_variants()),
                         [](const auto& info) { return info.param.name; });

// The features the test models were shaped for reach the maps of the test
// texts: without each, the reference differs by far more than the 1e-5 the
// engine is held to.
TEST(FamilyReference, TheTestModelsFeaturesChangeTheMaps) {
    const auto without = [](const char* name, auto&& change, const AttentionOptions& opt = {}) {
        const FamilyCheckpoint model = make_family_checkpoint(variant(name));
        FamilyCheckpoint changed = model;
        change(changed.spec);
        const auto texts = family_texts(model.spec);
        return max_difference(family_reference(model, texts, opt).weights,
                              family_reference(changed, texts, opt).weights);
    };
    EXPECT_GT(without("llama3_scaled", [](FamilySpec& s) { s.rope_factor = 0; }), 1e-3) << "llama3 scaling";
    EXPECT_GT(without("gpt_neox_parallel", [](FamilySpec& s) { s.rotary_pct = 1; }), 1e-3) << "partial rotary";
    EXPECT_GT(without("gpt_neox_parallel", [](FamilySpec& s) { s.parallel_residual = false; }), 1e-3) << "parallel";
    EXPECT_GT(without("llama", [](FamilySpec& s) { s.rope_theta = 10000; }), 1e-3) << "rope_theta";
    EXPECT_GT(without("phi3_longrope", [](FamilySpec& s) { s.long_factors = s.short_factors; }), 1e-3)
        << "LongRoPE's long factors";
    EXPECT_GT(without("phi3_su", [](FamilySpec& s) { s.short_factors.assign(4, 1.0); }), 1e-3)
        << "LongRoPE's short factors";
    EXPECT_GT(without("phi3_su", [](FamilySpec& s) { s.max_positions = s.original_max_positions; }), 1e-3)
        << "LongRoPE's attention factor";
    EXPECT_GT(without("phi3_longrope", [](FamilySpec& s) { s.rotary_pct = 0.5; }), 1e-3)
        << "Phi-4-mini's partial rotary";
    AttentionOptions windowed;
    windowed.sliding_window = 3;
    EXPECT_GT(without("gemma2", [](FamilySpec& s) { s.attn_softcap = 0; }), 1e-3) << "Gemma 2's score cap";
    EXPECT_GT(without("gemma2", [](FamilySpec& s) { s.query_pre_attn_scalar = s.head_dim; }), 1e-3)
        << "query_pre_attn_scalar, not hs";
    EXPECT_GT(without(
                  "gemma2", [](FamilySpec& s) { s.sliding_window = 0; }, windowed),
              1e-3)
        << "Gemma 2's window on its even layers";
    EXPECT_GT(without("gemma3_text", [](FamilySpec& s) { s.local_rope_theta = 0; }), 1e-3)
        << "Gemma 3's local rope base";
    EXPECT_GT(without("gemma3", [](FamilySpec& s) { s.rope_linear_factor = 0; }), 1e-3)
        << "Gemma 3's linear rope_scaling on its global layer 5";
    // sqrt(48) in bfloat16 (6.9375, not 6.928): the same bfloat16 weights with the scale unrounded.
    FamilySpec bf16 = variant("gemma2");
    bf16.dtype = FileDType::BF16;
    const FamilyCheckpoint rounded_scale = make_family_checkpoint(bf16);
    FamilyCheckpoint exact_scale = rounded_scale;
    exact_scale.spec.dtype = FileDType::F32;
    const auto texts = family_texts(bf16);
    EXPECT_GT(max_difference(family_reference(rounded_scale, texts, {}).weights,
                             family_reference(exact_scale, texts, {}).weights),
              1e-4)
        << "sqrt(C) rounded to bfloat16";
    // The final cap bends the logits the predictions are checked against.
    FamilyCheckpoint uncapped = rounded_scale;
    uncapped.spec.final_softcap = 0;
    const std::vector<double> rows = family_reference(rounded_scale, texts, {}).residual;
    const std::vector<double> last(rows.end() - bf16.n_embd, rows.end());
    EXPECT_GT(max_difference(family_logits(rounded_scale, last), family_logits(uncapped, last)), 0.5)
        << "Gemma 2's final logit cap";
    AttentionOptions pads_seen;
    pads_seen.padding_mask = false;
    EXPECT_GT(without(
                  "qwen3", [](FamilySpec& s) { s.pad_token_id = 0; }, pads_seen),
              1e-3)
        << "the pad id, when pads are attended to";
}

}  // namespace
