// The layer loop's calls (layer_ops.h), as a second backend sees them: a
// recording LayerOps run over one layer of each arrangement the model
// description gives (pre-LN, post-LN, a parallel residual, output norms,
// experts, an encoder–decoder's cross-attention, the last layer needed).
// The numerics of the CPU's operations are the families' tests'.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "headscope/compute/layer_ops.h"

using namespace headscope;

namespace {

const char* name(Tensor t) {
    switch (t) {
        case Tensor::x: return "x";
        case Tensor::ln: return "ln";
        case Tensor::out: return "out";
        case Tensor::y: return "y";
    }
    return "?";
}

const char* name(LayerPoint p) {
    switch (p) {
        case LayerPoint::input: return "input";
        case LayerPoint::heads: return "heads";
        case LayerPoint::attention_end: return "attention_end";
        case LayerPoint::mlp_input: return "mlp_input";
        case LayerPoint::mlp_output: return "mlp_output";
        case LayerPoint::output: return "output";
    }
    return "?";
}

// Each call as one word, and which weight a norm or product read.
class Recording final : public LayerOps {
public:
    explicit Recording(const LayerWeights& w) : w_(w) {}
    std::vector<std::string> calls;

    void copy(Tensor from, Tensor to) override { calls.push_back(std::string("copy ") + name(from) + ">" + name(to)); }
    void norm(Tensor in, const float* w, const float*, Tensor out) override {
        calls.push_back(std::string("norm ") + weight(w) + " " + name(in) + ">" + name(out));
    }
    void linear(Tensor in, const Matrix& w, const float*, Tensor out, bool accumulate) override {
        calls.push_back(std::string("linear ") + (&w == &w_.attn_proj ? "attn_proj " : "? ") + name(in) +
                        (accumulate ? ">+" : ">") + name(out));
    }
    void project_qkv(const LayerWeights&) override { calls.push_back("qkv"); }
    void rotary(int) override { calls.push_back("rotary"); }
    void attention(int) override { calls.push_back("attention"); }
    void cross_attention(int) override { calls.push_back("cross_attention"); }
    void mlp(const LayerWeights&, Tensor out) override { calls.push_back(std::string("mlp >") + name(out)); }
    void experts(const LayerWeights&, int, Tensor out) override {
        calls.push_back(std::string("experts >") + name(out));
    }
    void add(Sublayer s, int, const float* norm_w) override {
        calls.push_back(std::string("add ") + (s == Sublayer::attention ? "attention " : "mlp ") + weight(norm_w));
    }
    void check_finite(int, const char* after) override { calls.push_back(std::string("check ") + after); }
    void at(LayerPoint p, int) override { calls.push_back(std::string("at ") + name(p)); }

private:
    std::string weight(const float* w) const {
        if (w == w_.ln_1_w) return "ln_1";
        if (w == w_.ln_2_w) return "ln_2";
        if (w == w_.attn_out_norm) return "attn_out_norm";
        if (w == w_.mlp_out_norm) return "mlp_out_norm";
        return "?";
    }
    const LayerWeights& w_;
};

// Distinct addresses for the norms the loop may read.
struct Weights {
    float ln_1[1], ln_2[1], attn_out[1], mlp_out[1];
    LayerWeights layer() {
        LayerWeights w;
        w.ln_1_w = ln_1, w.ln_2_w = ln_2, w.attn_out_norm = attn_out, w.mlp_out_norm = mlp_out;
        return w;
    }
};

std::vector<std::string> calls(const Config& config, LayerStep step) {
    Weights weights;
    const LayerWeights w = weights.layer();
    Recording ops(w);
    forward_layer(ops, config, w, step);
    return ops.calls;
}

const std::vector<std::string> attention_part = {"at input", "norm ln_1 x>ln", "qkv",
                                                 "rotary",   "attention",      "at heads"};

TEST(LayerLoop, PreNormAddsEachSublayerIntoTheResidual) {
    std::vector<std::string> expected = attention_part;
    expected.insert(expected.end(), {"at attention_end", "linear attn_proj y>+x", "check the attention", "at mlp_input",
                                     "norm ln_2 x>ln", "mlp >x", "at mlp_output", "check the MLP", "at output"});
    EXPECT_EQ(calls(Config{}, {1, false, false}), expected);
}

TEST(LayerLoop, TheLastLayerNeededStopsAtItsHeads) { EXPECT_EQ(calls(Config{}, {3, true, false}), attention_part); }

TEST(LayerLoop, PostNormNormalizesTheSumsAndReadsTheResidual) {
    Config bert;
    bert.post_norm = true;
    EXPECT_EQ(calls(bert, {0, false, false}),
              (std::vector<std::string>{"at input", "copy x>ln", "qkv", "rotary", "attention", "at heads",
                                        "at attention_end", "linear attn_proj y>+x", "check the attention",
                                        "norm ln_1 x>x", "at mlp_input", "copy x>ln", "mlp >x", "at mlp_output",
                                        "norm ln_2 x>x", "check the MLP", "at output"}));
}

TEST(LayerLoop, AParallelResidualNormsTheLayerInputForBoth) {
    Config pythia;
    pythia.parallel_residual = true;
    std::vector<std::string> expected = attention_part;
    expected.insert(expected.end(),
                    {"at attention_end", "norm ln_2 x>ln", "linear attn_proj y>+x", "check the attention",
                     "at mlp_input", "mlp >x", "at mlp_output", "check the MLP", "at output"});
    EXPECT_EQ(calls(pythia, {1, false, false}), expected);
}

TEST(LayerLoop, OutputNormsAndPatchingComputeEachSublayerApart) {
    Config olmo2;
    olmo2.input_norms = false;
    olmo2.output_norms = true;
    olmo2.n_experts = 4;  // a layer of experts in the MLP's place
    EXPECT_EQ(calls(olmo2, {1, false, true}),
              (std::vector<std::string>{"at input", "copy x>ln", "qkv", "rotary", "attention", "at heads",
                                        "at attention_end", "linear attn_proj y>out", "add attention attn_out_norm",
                                        "check the attention", "at mlp_input", "copy x>ln", "experts >out",
                                        "at mlp_output", "add mlp mlp_out_norm", "check the MLP", "at output"}));
}

TEST(LayerLoop, AnEncoderDecodersLastLayerStillCrossAttends) {
    Config marian;
    marian.encoder_layers = 2;
    marian.first_attention_norm = false;  // layer 0 reads the residual itself (ModernBERT's rule)
    std::vector<std::string> expected = {"at input",
                                         "copy x>ln",
                                         "qkv",
                                         "rotary",
                                         "attention",
                                         "at heads",
                                         "at attention_end",
                                         "linear attn_proj y>+x",
                                         "check the attention",
                                         "cross_attention"};
    EXPECT_EQ(calls(marian, {0, true, false}), expected);
}

}  // namespace
