// The CPU engine on today's families (Llama, Qwen 2, Qwen 3, Mistral,
// GPT-NeoX), each model written as Hugging Face saves it (family_writer.h) in
// F32 and BF16, in one file and in shards, against an independent
// double-precision reference written from Hugging Face's code
// (family_reference.h): every combination of masks, sliding window, head
// re-split, scale and split, layer subsets, padding and causality; the config
// as read (bad checkpoints: test_family_refusals.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "family_models.h"
#include "family_reference.h"
#include "family_writer.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/model/model.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

// The head counts a re-split may take (forward.h's head_split): multiples of
// the group size that divide the query width NH * hs.
// A LongRoPE model has only its own (its factors are per pair of its heads'
// dims), and gpt-oss too (its sinks are per head).
std::vector<int> resplit_counts(const FamilySpec& spec) {
    if (!spec.long_factors.empty() || spec.family == Family::gpt_oss) return {spec.n_head};
    const int group = spec.n_head / spec.kv_heads(), width = spec.n_head * spec.head_dim;
    std::vector<int> counts;
    for (int n = group; n <= width; n += group)
        if (width % n == 0) counts.push_back(n);
    return counts;
}

double max_abs(const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::abs(x));
    return m;
}

template <typename Got>
double max_difference(const Got& got, const std::vector<double>& want) {
    double m = 0;
    for (size_t n = 0; n < want.size(); ++n) m = std::max(m, std::abs(got[n] - want[n]));
    return m;
}

// The engine within 1e-5 of the reference on the weights (absolute), and
// within 2e-5 of the largest output on the outputs: float32 sums over C and
// the MLP's width, in the order the matrix products split them among the
// threads. With the scale off, the scores and their rounding are sqrt(hs)
// times larger, and the steeper softmax passes that on to the weights and
// the outputs: both bounds are then sqrt(hs) times larger (gpt-oss in F32,
// split naive-view, through Eigen's products: 2.6e-5 on the weights).
void expect_engine_matches(Backend& backend, const Model& model, const FamilyCheckpoint& checkpoint,
                           const std::vector<std::vector<int32_t>>& texts, const AttentionOptions& opt,
                           const std::string& what) {
    AttentionResult got;
    backend.forward(Batch{texts, model.config.pad_id()}, opt, got);
    const FamilyReference want = family_reference(checkpoint, texts, opt);
    ASSERT_EQ(got.NH, want.NH) << what;
    ASSERT_EQ(got.NKV, want.NKV) << what;
    ASSERT_EQ(got.hs, want.hs) << what;
    ASSERT_EQ(got.weights.size(), want.weights.size()) << what;
    const double unscaled = opt.scale == Scale::none ? std::sqrt(static_cast<double>(got.hs)) : 1.0;
    EXPECT_LT(max_difference(got.weights, want.weights), 1e-5 * unscaled) << what;
    EXPECT_EQ(got.fully_masked, want.fully_masked) << what;
    ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
    EXPECT_LT(max_difference(got.outputs, want.outputs), 2e-5 * unscaled * max_abs(want.outputs)) << what;
}

using Param = std::tuple<FamilyVariant, FileDType, int>;  // the model, its dtype, its shard count

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
    const auto& [variant, dtype, shards] = info.param;
    return variant.name + "_" + dtype_name(dtype) + (shards > 1 ? "_sharded" : "_single");
}

// The parameter's checkpoint as written and loaded, which its tests share (loaded_family).
const LoadedFamily& parameter_family(const Param& param) {
    const auto& [variant, dtype, shards] = param;
    FamilySpec spec = variant.spec;
    spec.dtype = dtype;
    spec.shards = shards;
    return loaded_family(variant.name + "_" + dtype_name(dtype) + "_" + std::to_string(shards), spec);
}

class FamilyForward : public ::testing::TestWithParam<Param> {
protected:
    FamilyForward() { backend_->load_weights(model_); }

    const FamilySpec& spec() const { return checkpoint_.spec; }

    AttentionResult run(const std::vector<std::vector<int32_t>>& texts, const AttentionOptions& opt) {
        AttentionResult result;
        backend_->forward(Batch{texts, model_.config.pad_id()}, opt, result);
        return result;
    }

    void expect_matches(const AttentionOptions& opt, const std::string& what) {
        expect_engine_matches(*backend_, model_, checkpoint_, texts_, opt, what);
    }

    const LoadedFamily& family_ = parameter_family(GetParam());
    const FamilyCheckpoint& checkpoint_ = family_.checkpoint;
    const Model& model_ = family_.model;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    std::vector<std::vector<int32_t>> texts_ = family_texts(std::get<0>(GetParam()).spec);
};

TEST_P(FamilyForward, MatchesTheReferenceForEveryOptionCombination) {
    std::vector<int> windows = {0};
    if (spec().sliding_window) windows.push_back(spec().sliding_window);
    std::vector<int> head_counts = resplit_counts(spec());
    head_counts.insert(head_counts.begin(), 0);
    for (bool causal : {true, false})
        for (bool padding_mask : {true, false})
            for (int window : windows)
                for (int heads : head_counts)
                    for (Scale scale : {Scale::head, Scale::model, Scale::none})
                        for (Split split : {Split::transpose, Split::naive_view}) {
                            AttentionOptions opt{causal, padding_mask, heads, scale, split, {}, true, window};
                            expect_matches(opt, "causal " + std::to_string(causal) + " padding " +
                                                    std::to_string(padding_mask) + " window " + std::to_string(window) +
                                                    " heads " + std::to_string(heads) + " scale " + to_string(scale) +
                                                    " split " + to_string(split));
                        }
}

TEST_P(FamilyForward, LayerSubsetsMatchTheReference) {
    for (const std::vector<int>& layers : std::vector<std::vector<int>>{{0}, {1}, {2}, {0, 2}, {1, 2}}) {
        AttentionOptions opt;
        opt.layers = layers;
        opt.capture_outputs = true;
        opt.sliding_window = spec().sliding_window;
        EXPECT_EQ(run(texts_, opt).layers, layers);
        expect_matches(opt, "layers " + std::to_string(layers.front()) + ".." + std::to_string(layers.back()));
    }
}

// Text 1 padded to text 0's length gives the rows it gives alone; except
// where LongRoPE's switch length lies between the two lengths, since the
// padded length picks its factors (as in transformers): then they differ.
TEST_P(FamilyForward, PaddedRowsEqualTheTextAlone) {
    for (bool causal : {true, false}) {
        AttentionOptions opt;
        opt.causal = causal;
        opt.sliding_window = spec().sliding_window;
        const AttentionResult batch = run(texts_, opt), alone = run({texts_[1]}, opt);
        const int n = alone.T, T = batch.T;
        ASSERT_LT(n, T);
        double diff = 0;
        for (size_t slot = 0; slot < batch.layers.size(); ++slot)
            for (int h = 0; h < batch.NH; ++h)
                for (int i = 0; i < n; ++i)
                    for (int j = 0; j < T; ++j) {
                        const float want = j < n ? alone.map(slot, 0, h)[i * n + j] : 0.f;
                        diff = std::max(diff, double(std::abs(batch.map(slot, 1, h)[i * T + j] - want)));
                    }
        const bool switches =
            !spec().long_factors.empty() && n <= spec().original_max_positions && T > spec().original_max_positions;
        if (switches)
            EXPECT_GT(diff, 1e-3) << "causal " << causal;
        else
            EXPECT_LT(diff, 1e-6) << "causal " << causal;
    }
}

// Under the causal mask no row sees the last token, so changing it leaves
// every earlier row exactly as it was; without the mask they all move.
TEST_P(FamilyForward, CausalMaskKeepsEarlierRowsWhenTheLastTokenChanges) {
    std::vector<int32_t> edited = texts_[0];
    edited.back() = 500;
    for (bool causal : {true, false}) {
        AttentionOptions opt;
        opt.causal = causal;
        opt.sliding_window = spec().sliding_window;
        const AttentionResult before = run({texts_[0]}, opt), after = run({edited}, opt);
        const int T = before.T;
        double earlier_rows_diff = 0;
        for (size_t slot = 0; slot < before.layers.size(); ++slot)
            for (int h = 0; h < before.NH; ++h)
                for (int i = 0; i < T - 1; ++i)
                    for (int j = 0; j < T; ++j)
                        earlier_rows_diff = std::max(
                            earlier_rows_diff,
                            double(std::abs(before.map(slot, 0, h)[i * T + j] - after.map(slot, 0, h)[i * T + j])));
        if (causal)
            EXPECT_EQ(earlier_rows_diff, 0.0);
        else
            EXPECT_GT(earlier_rows_diff, 1e-3);
    }
}

// What Gemma's config.json says, as transformers reads it; none of it for the other families.
void expect_gemma_config(const FamilySpec& s, const Config& c) {
    const bool is_gemma = gemma(s.family);
    EXPECT_EQ(c.norm_offset, is_gemma ? 1.f : 0.f);
    EXPECT_FLOAT_EQ(c.attention_scale, is_gemma ? float(1 / std::sqrt(s.query_pre_attn_scalar)) : 0.f);
    EXPECT_FLOAT_EQ(c.attention_softcap, float(s.attn_softcap));
    EXPECT_FLOAT_EQ(c.logit_softcap, float(s.final_softcap));
    EXPECT_FLOAT_EQ(c.local_rope_theta, float(s.local_rope_theta));
    EXPECT_FLOAT_EQ(c.rope.linear_factor, s.rope_linear_factor > 0 ? float(s.rope_linear_factor) : 1.f);
    EXPECT_EQ(c.vision_tower_left_out, s.family == Family::gemma3);
    for (int l = 0; l < s.n_layer; ++l) EXPECT_EQ(c.windowed(l), s.windowed(l)) << "layer " << l;
    // sqrt(C) rounded to the embedding table's dtype: bfloat16's 8 significant bits.
    const float root = std::sqrt(float(s.n_embd));
    if (!is_gemma)
        EXPECT_EQ(c.embedding_scale, 1.f);
    else if (s.dtype == FileDType::BF16)
        EXPECT_EQ(c.embedding_scale, std::ldexp(std::round(std::ldexp(root, 5)), -5)) << "bfloat16's step in [4, 8)";
    else
        EXPECT_EQ(c.embedding_scale, root);
}

// The files read: every dtype and shard count. (The forward's tests above
// run on single files: sharded tensors reach the same forward.)
class FamilyFiles : public FamilyForward {};

// config.json read as Hugging Face reads it, and the tensors as written.
TEST_P(FamilyFiles, ReadsTheConfigAndTensorsAsWritten) {
    const FamilySpec& s = spec();
    const Config& c = model_.config;
    const bool neox = s.family == Family::gpt_neox, llama_like = !neox;
    EXPECT_EQ(c.architecture, model_type(s.family));
    EXPECT_EQ(c.n_layer, s.n_layer);
    EXPECT_EQ(c.n_embd, s.n_embd);
    EXPECT_EQ(c.n_head, s.n_head);
    EXPECT_EQ(c.kv_heads(), s.kv_heads());
    EXPECT_EQ(c.head_size(), s.head_dim);
    EXPECT_EQ(c.mlp_size(), s.mlp_dim);
    EXPECT_EQ(c.vocab_size, s.vocab_size);
    EXPECT_EQ(c.n_positions, s.max_positions);
    EXPECT_EQ(c.pad_id(), s.pad_id());
    EXPECT_EQ(c.eos_token_id, s.eos_ids.at(0));  // a list's first; every one ends a generation
    EXPECT_EQ(c.more_eos_ids, std::vector<int>(s.eos_ids.begin() + 1, s.eos_ids.end()));
    for (int id : s.eos_ids) EXPECT_TRUE(c.is_eos(id)) << id;
    EXPECT_FALSE(c.is_eos(s.vocab_size - 1));  // no family lists its last id
    EXPECT_FLOAT_EQ(c.layer_norm_epsilon, float(s.norm_eps));
    EXPECT_EQ(c.norm, neox ? Norm::layer_norm : Norm::rms_norm);
    EXPECT_EQ(c.positions, Positions::rotary);
    EXPECT_EQ(c.mlp, neox ? Mlp::gelu_exact : gemma(s.family) ? Mlp::gated_gelu : Mlp::swiglu);
    EXPECT_FLOAT_EQ(c.rope.theta, float(s.rope_theta));
    EXPECT_FLOAT_EQ(c.rope.fraction, float(s.rotary_pct));
    EXPECT_FLOAT_EQ(c.rope.factor, float(s.rope_factor));
    if (s.rope_factor > 0) {
        EXPECT_FLOAT_EQ(c.rope.low_freq_factor, float(s.low_freq_factor));
        EXPECT_FLOAT_EQ(c.rope.high_freq_factor, float(s.high_freq_factor));
        EXPECT_EQ(c.rope.original_max_positions, s.original_max_positions);
    }
    EXPECT_EQ(c.qkv_bias, neox || s.attention_bias || s.family == Family::qwen2);
    EXPECT_EQ(c.o_bias, neox || (s.attention_bias && s.family != Family::qwen2));
    const bool gemma3 = gemma(s.family) && s.family != Family::gemma2;
    const bool olmo = s.family == Family::olmo2 || s.family == Family::olmoe;
    EXPECT_EQ(c.qk_norm, s.family == Family::qwen3 || s.family == Family::qwen3_moe || olmo || gemma3);
    EXPECT_EQ(c.qk_norm_whole, olmo);
    EXPECT_EQ(c.input_norms, s.family != Family::olmo2);
    EXPECT_EQ(c.output_norms, s.family == Family::olmo2 || gemma(s.family));
    expect_gemma_config(s, c);
    EXPECT_EQ(c.parallel_residual, neox && s.parallel_residual);
    EXPECT_EQ(c.tied_embeddings, s.tied_embeddings && llama_like);
    EXPECT_EQ(c.sliding_window, s.sliding_window) << "Qwen's window is off: use_sliding_window is false";

    int64_t params = 0;
    std::vector<std::string> names;
    for (const auto* list : {&checkpoint_.tensors, &checkpoint_.unpacked})  // gpt-oss's experts as their weights
        for (const NamedTensor& t : *list) {
            if (t.name.starts_with("vision_tower.")) continue;  // a gemma3 checkpoint's, not read
            params += int64_t(t.values.size());
            names.push_back(t.name);
        }
    std::sort(names.begin(), names.end());
    std::vector<std::string> loaded;
    for (const TensorInfo& t : model_.tensors) loaded.push_back(t.name);
    EXPECT_EQ(loaded, names);
    EXPECT_EQ(model_.params, params);
    EXPECT_EQ(model_.dtype, s.dtype == FileDType::BF16 ? DType::BF16 : DType::F32);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyForward,
                         ::testing::Combine(::testing::ValuesIn(family_variants()),
                                            ::testing::Values(FileDType::F32, FileDType::BF16), ::testing::Values(1)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Families, FamilyFiles,
                         ::testing::Combine(::testing::ValuesIn(family_variants()),
                                            ::testing::Values(FileDType::F32, FileDType::BF16),
                                            ::testing::Values(1, 3)),
                         param_name);

// Older checkpoints saved buffers beside the weights: every rotary model its
// rotary_emb.inv_freq, GPT-NeoX also masked_bias and its causal mask, a
// (1, 1, P, P) of bytes, uint8 or bool as the transformers that saved it had
// it (Pythia's files hold them). Loading passes over them.
TEST(FamilyCheckpoints, OldBuffersBesideTheWeightsArePassedOver) {
    for (Family family : {Family::llama, Family::gpt_neox}) {
        FamilySpec spec = family_spec(family);
        spec.max_positions = 16;
        const FamilyCheckpoint checkpoint = make_family_checkpoint(spec);
        const int P = spec.max_positions;
        std::vector<RawTensor> buffers;
        for (int l = 0; l < spec.n_layer; ++l) {
            const std::vector<float> inv_freq = rope_inverse_frequencies(spec, spec.head_dim);
            const std::string prefix = family == Family::gpt_neox
                                           ? "gpt_neox.layers." + std::to_string(l) + ".attention."
                                           : "model.layers." + std::to_string(l) + ".self_attn.";
            buffers.push_back(
                {prefix + "rotary_emb.inv_freq", "F32", {int64_t(inv_freq.size())}, encode(inv_freq, FileDType::F32)});
            if (family != Family::gpt_neox) continue;
            std::vector<uint8_t> causal(size_t(P) * P);
            for (int i = 0; i < P; ++i)
                for (int j = 0; j <= i; ++j) causal[size_t(i) * P + j] = 1;
            buffers.push_back({prefix + "bias", l % 2 ? "BOOL" : "U8", {1, 1, P, P}, causal});
            buffers.push_back({prefix + "masked_bias", "F32", {}, encode({-1e9f}, FileDType::F32)});
        }
        TempDir dir;
        write_family_checkpoint(dir.path, checkpoint, buffers);
        const Model model = load_model(dir.path.string());
        const std::unique_ptr<Backend> backend = make_cpu_backend();
        backend->load_weights(model);
        AttentionOptions opt;
        opt.capture_outputs = true;
        expect_engine_matches(*backend, model, checkpoint, family_texts(spec), opt, model_type(family));
    }
}

}  // namespace
