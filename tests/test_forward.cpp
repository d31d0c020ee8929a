// The CPU engine's attention against an independent reference: GPT-2's
// forward written again here in plain double-precision loops, one head at a
// time (the tutorials' mha_by_loop), for every combination of options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headscope/backend.h"
#include "headscope/error.h"
#include "model_writer.h"

using namespace headscope;

namespace {

using Matrix = std::vector<std::vector<double>>;  // [row][column]

struct Reference {
    std::vector<double> weights;      // (layers, B, NH, T, T)
    std::vector<uint8_t> fully_masked;  // (B, T)
    std::vector<double> outputs;      // (layers, B, T, C) heads merged, before c_proj
};

Matrix zeros(int rows, int cols) { return Matrix(rows, std::vector<double>(cols, 0.0)); }

// x W + b, W given row-major (in, out) as stored in the model.
Matrix affine(const Matrix& x, const float* w, const float* b, int in, int out) {
    Matrix y = zeros(static_cast<int>(x.size()), out);
    for (size_t t = 0; t < x.size(); ++t)
        for (int o = 0; o < out; ++o) {
            double sum = b[o];
            for (int i = 0; i < in; ++i) sum += x[t][i] * w[static_cast<size_t>(i) * out + o];
            y[t][o] = sum;
        }
    return y;
}

Matrix norm(const Matrix& x, const float* w, const float* b, double eps) {
    Matrix y = x;
    for (auto& row : y) {
        double mean = 0, var = 0;
        for (double v : row) mean += v;
        mean /= row.size();
        for (double v : row) var += (v - mean) * (v - mean);
        var /= row.size();
        for (size_t c = 0; c < row.size(); ++c) row[c] = (row[c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
    }
    return y;
}

// Where element (h, t, d) of a head view lives in a (T, C) matrix.
struct Place {
    int row, col;
};
Place head_place(Split split, int h, int t, int d, int T, int C, int hs) {
    if (split == Split::transpose) return {t, h * hs + d};
    const int flat = (h * T + t) * hs + d;  // (NH, T, hs) read straight off the (T, C) buffer
    return {flat / C, flat % C};
}

Reference reference_attention(const Model& model, const std::vector<std::vector<int32_t>>& texts,
                              const AttentionOptions& opt) {
    const Config& cfg = model.config;
    const int B = static_cast<int>(texts.size()), C = cfg.n_embd;
    const int NH = opt.n_head ? opt.n_head : cfg.n_head, hs = C / NH;
    int T = 0;
    for (const auto& ids : texts) T = std::max(T, static_cast<int>(ids.size()));
    std::vector<int> layers = opt.layers;
    if (layers.empty())
        for (int l = 0; l < cfg.n_layer; ++l) layers.push_back(l);

    Reference ref;
    ref.weights.assign(layers.size() * B * NH * T * T, 0.0);
    ref.fully_masked.assign(B * T, 0);
    ref.outputs.assign(layers.size() * B * T * C, 0.0);
    const double scale = opt.scale == Scale::head ? 1.0 / std::sqrt(double(hs))
                         : opt.scale == Scale::model ? 1.0 / std::sqrt(double(C))
                                                     : 1.0;
    for (int b = 0; b < B; ++b) {
        const int length = static_cast<int>(texts[b].size());
        Matrix x = zeros(T, C);
        for (int t = 0; t < T; ++t) {
            const int id = t < length ? texts[b][t] : cfg.eos_token_id;
            for (int c = 0; c < C; ++c) x[t][c] = double(model.wte[size_t(id) * C + c]) + model.wpe[size_t(t) * C + c];
        }
        for (int l = 0; l < cfg.n_layer; ++l) {
            const LayerWeights& w = model.layers[l];
            const Matrix qkv = affine(norm(x, w.ln_1_w, w.ln_1_b, cfg.layer_norm_epsilon), w.attn_w, w.attn_b, C, 3 * C);
            Matrix merged = zeros(T, C);
            for (int h = 0; h < NH; ++h) {
                // This head's (T, hs) slices of Q, K and V.
                Matrix q = zeros(T, hs), k = zeros(T, hs), v = zeros(T, hs);
                for (int t = 0; t < T; ++t)
                    for (int d = 0; d < hs; ++d) {
                        const Place p = head_place(opt.split, h, t, d, T, C, hs);
                        q[t][d] = qkv[p.row][p.col];
                        k[t][d] = qkv[p.row][C + p.col];
                        v[t][d] = qkv[p.row][2 * C + p.col];
                    }
                Matrix att = zeros(T, T);
                for (int i = 0; i < T; ++i) {
                    std::vector<bool> visible(T);
                    bool any = false;
                    for (int j = 0; j < T; ++j) {
                        visible[j] = (!opt.causal || j <= i) && (!opt.padding_mask || (i < length && j < length));
                        any = any || visible[j];
                    }
                    if (!any) {
                        ref.fully_masked[b * T + i] = 1;
                        continue;
                    }
                    double max_score = -INFINITY, sum = 0;
                    for (int j = 0; j < T; ++j) {
                        if (!visible[j]) continue;
                        double s = 0;
                        for (int d = 0; d < hs; ++d) s += q[i][d] * k[j][d];
                        att[i][j] = s * scale;
                        max_score = std::max(max_score, att[i][j]);
                    }
                    for (int j = 0; j < T; ++j) {
                        att[i][j] = visible[j] ? std::exp(att[i][j] - max_score) : 0.0;
                        sum += att[i][j];
                    }
                    for (int j = 0; j < T; ++j) att[i][j] /= sum;
                }
                const auto slot = std::find(layers.begin(), layers.end(), l);
                if (slot != layers.end())
                    for (int i = 0; i < T; ++i)
                        for (int j = 0; j < T; ++j)
                            ref.weights[((((slot - layers.begin()) * B + b) * NH + h) * T + i) * T + j] = att[i][j];
                for (int t = 0; t < T; ++t)
                    for (int d = 0; d < hs; ++d) {
                        double y = 0;
                        for (int j = 0; j < T; ++j) y += att[t][j] * v[j][d];
                        const Place p = head_place(opt.split, h, t, d, T, C, hs);
                        merged[p.row][p.col] = y;
                    }
            }
            if (const auto slot = std::find(layers.begin(), layers.end(), l); slot != layers.end())
                for (int t = 0; t < T; ++t)
                    for (int c = 0; c < C; ++c)
                        ref.outputs[(((slot - layers.begin()) * B + b) * T + t) * C + c] = merged[t][c];
            const Matrix proj = affine(merged, w.attn_proj_w, w.attn_proj_b, C, C);
            for (int t = 0; t < T; ++t)
                for (int c = 0; c < C; ++c) x[t][c] += proj[t][c];
            Matrix hidden = affine(norm(x, w.ln_2_w, w.ln_2_b, cfg.layer_norm_epsilon), w.fc_w, w.fc_b, C, 4 * C);
            for (auto& row : hidden)
                for (double& u : row) u = 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
            const Matrix out = affine(hidden, w.fc_proj_w, w.fc_proj_b, 4 * C, C);
            for (int t = 0; t < T; ++t)
                for (int c = 0; c < C; ++c) x[t][c] += out[t][c];
        }
    }
    return ref;
}

class ForwardTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path, {.n_layer = 3, .n_head = 4, .n_embd = 32, .n_positions = 24});
        model_ = new Model(load_model(dir_->path.string()));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete dir_;
    }

    AttentionResult run(const std::vector<std::vector<int32_t>>& texts, const AttentionOptions& opt) {
        backend_->load_weights(*model_);
        AttentionResult result;
        backend_->forward(Batch{texts, model_->config.eos_token_id}, opt, result);
        return result;
    }

    static test::TempDir* dir_;
    static Model* model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    // Three texts of different lengths, so that two of them are padded.
    const std::vector<std::vector<int32_t>> texts_ = {
        {464, 3797, 3332, 319, 262, 2603, 780, 340, 373, 2705},
        {15496, 995, 0, 11},
        {40, 716, 257, 1332, 286, 262, 5951},
    };
};
test::TempDir* ForwardTest::dir_ = nullptr;
Model* ForwardTest::model_ = nullptr;

TEST_F(ForwardTest, MatchesPerHeadLoopForEveryOptionCombination) {
    int combinations = 0;
    for (bool causal : {true, false})
        for (bool padding_mask : {true, false})
            for (int heads : {0, 1, 2, 8, 32})
                for (Scale scale : {Scale::head, Scale::model, Scale::none})
                    for (Split split : {Split::transpose, Split::naive_view}) {
                        AttentionOptions opt{causal, padding_mask, heads, scale, split, {}, true};
                        const AttentionResult got = run(texts_, opt);
                        const Reference want = reference_attention(*model_, texts_, opt);
                        ASSERT_EQ(got.weights.size(), want.weights.size());
                        double max_diff = 0;
                        for (size_t n = 0; n < want.weights.size(); ++n)
                            max_diff = std::max(max_diff, std::abs(got.weights[n] - want.weights[n]));
                        EXPECT_LT(max_diff, 1e-5) << "causal " << causal << " padding " << padding_mask << " heads "
                                                  << heads << " scale " << to_string(scale) << " split "
                                                  << to_string(split);
                        EXPECT_EQ(got.fully_masked, want.fully_masked);
                        ASSERT_EQ(got.outputs.size(), want.outputs.size());
                        double max_output_diff = 0;
                        for (size_t n = 0; n < want.outputs.size(); ++n)
                            max_output_diff = std::max(max_output_diff, std::abs(got.outputs[n] - want.outputs[n]));
                        EXPECT_LT(max_output_diff, 1e-4);
                        ++combinations;
                    }
    EXPECT_EQ(combinations, 120);
}

TEST_F(ForwardTest, LayerSubsetReturnsThoseLayersOfTheFullRun) {
    AttentionOptions all;
    const AttentionResult full = run(texts_, all);
    AttentionOptions subset;
    subset.layers = {0, 2};
    const AttentionResult part = run(texts_, subset);
    ASSERT_EQ(part.layers, (std::vector<int>{0, 2}));
    const size_t map_floats = size_t(full.B) * full.NH * full.T * full.T;
    ASSERT_EQ(part.weights.size(), 2 * map_floats);
    for (size_t n = 0; n < map_floats; ++n) {
        EXPECT_EQ(part.weights[n], full.weights[n]);
        EXPECT_EQ(part.weights[map_floats + n], full.weights[2 * map_floats + n]);
    }
}

TEST_F(ForwardTest, PaddedRowsEqualTheTextRunAlone) {
    for (bool causal : {true, false}) {
        AttentionOptions opt;
        opt.causal = causal;
        const AttentionResult batch = run(texts_, opt);
        for (int b = 0; b < batch.B; ++b) {
            const AttentionResult alone = run({texts_[b]}, opt);
            const int n = alone.T;
            for (size_t slot = 0; slot < batch.layers.size(); ++slot)
                for (int h = 0; h < batch.NH; ++h)
                    for (int i = 0; i < n; ++i)
                        for (int j = 0; j < batch.T; ++j) {
                            const float want = j < n ? alone.map(slot, 0, h)[i * n + j] : 0.f;
                            EXPECT_NEAR(batch.map(slot, b, h)[i * batch.T + j], want, 1e-6)
                                << "text " << b << " layer " << slot << " head " << h << " row " << i;
                        }
        }
    }
}

TEST_F(ForwardTest, CausalMaskKeepsEarlierRowsWhenTheLastTokenChanges) {
    std::vector<int32_t> edited = texts_[0];
    edited.back() = 1110;
    for (bool causal : {true, false}) {
        AttentionOptions opt;
        opt.causal = causal;
        const AttentionResult before = run({texts_[0]}, opt), after = run({edited}, opt);
        const int T = before.T;
        double earlier_rows_diff = 0;
        for (size_t slot = 0; slot < before.layers.size(); ++slot)
            for (int h = 0; h < before.NH; ++h)
                for (int i = 0; i < T - 1; ++i)
                    for (int j = 0; j < T; ++j)
                        earlier_rows_diff = std::max(earlier_rows_diff, double(std::abs(before.map(slot, 0, h)[i * T + j] -
                                                                                         after.map(slot, 0, h)[i * T + j])));
        if (causal)
            EXPECT_EQ(earlier_rows_diff, 0.0);
        else
            EXPECT_GT(earlier_rows_diff, 1e-3);
    }
}

TEST_F(ForwardTest, EveryRowSumsToOneOrIsAFlaggedZeroRow) {
    for (bool causal : {true, false})
        for (bool padding_mask : {true, false}) {
            AttentionOptions opt;
            opt.causal = causal;
            opt.padding_mask = padding_mask;
            const AttentionResult r = run(texts_, opt);
            int flagged = 0;
            for (size_t slot = 0; slot < r.layers.size(); ++slot)
                for (int b = 0; b < r.B; ++b)
                    for (int h = 0; h < r.NH; ++h)
                        for (int i = 0; i < r.T; ++i) {
                            double sum = 0;
                            for (int j = 0; j < r.T; ++j) {
                                const float w = r.map(slot, b, h)[i * r.T + j];
                                ASSERT_TRUE(std::isfinite(w));
                                ASSERT_GE(w, 0.f);
                                sum += w;
                            }
                            const bool masked = r.fully_masked[b * r.T + i];
                            EXPECT_NEAR(sum, masked ? 0.0 : 1.0, 1e-5);
                            flagged += masked;
                        }
            // Pad query rows are empty exactly when the padding mask is on.
            const int pad_rows = (10 - 4) + (10 - 7);
            EXPECT_EQ(flagged, padding_mask ? pad_rows * int(r.layers.size()) * r.NH : 0);
        }
}

TEST_F(ForwardTest, ResplitKeepsTheParameterCount) {
    const int C = model_->config.n_embd, L = model_->config.n_layer;
    const int64_t expected = int64_t(model_->config.vocab_size) * C + int64_t(model_->config.n_positions) * C +
                             int64_t(L) * (12 * C * C + 13 * C) + 2 * C;
    for (int heads : {1, 2, 4, 8, 16, 32}) {
        AttentionOptions opt;
        opt.n_head = heads;
        const AttentionResult r = run({texts_[1]}, opt);
        EXPECT_EQ(r.NH, heads);
        EXPECT_EQ(r.NH * r.hs, C);
        EXPECT_EQ(model_->params, expected);
    }
}

TEST_F(ForwardTest, BadInputIsAnErrorNamingTheProblem) {
    auto error_of = [&](const std::vector<std::vector<int32_t>>& texts, const AttentionOptions& opt) -> std::string {
        try {
            run(texts, opt);
        } catch (const Error& e) {
            return e.what();
        }
        return "no error";
    };
    AttentionOptions opt;
    opt.n_head = 5;
    EXPECT_NE(error_of(texts_, opt).find("does not divide"), std::string::npos);
    opt = {};
    opt.layers = {3};
    EXPECT_NE(error_of(texts_, opt).find("layer 3 out of range"), std::string::npos);
    EXPECT_NE(error_of({{}}, {}).find("empty"), std::string::npos);
    EXPECT_NE(error_of({std::vector<int32_t>(25, 11)}, {}).find("25 tokens, more than the model's limit of 24"),
              std::string::npos);
    EXPECT_NE(error_of({{50257}}, {}).find("outside the vocabulary"), std::string::npos);
}

}  // namespace
