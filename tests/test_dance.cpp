// The reshape dance's steps and element owners against strides worked out
// by hand and PyTorch's figures, the weights its projections name (a GGUF
// file's quantized blocks), and the naive split's output error against the
// tests' double-precision reference forward.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "gguf_models.h"
#include "headscope/base/error.h"
#include "headscope/inspect/checks.h"
#include "headscope/inspect/dance.h"
#include "model_writer.h"
#include "reference_forward.h"

using namespace headscope;

namespace {

using Dims = std::vector<int64_t>;

// A GPT-2 configuration of C channels in NH heads: all the dance reads.
Config gpt2(int C, int NH) {
    Config config;
    config.n_embd = C;
    config.n_head = NH;
    return config;
}

TEST(Dance, TransposeWalkShapesStridesAndCopies) {
    const int B = 2, T = 3, C = 8, NH = 2, hs = 4;
    const Dance d = reshape_dance(B, T, gpt2(C, NH), 0, Split::transpose);
    ASSERT_EQ(d.steps.size(), 8u);
    EXPECT_EQ(d.buffers[d.steps[0].buffer].name, "qkv");
    EXPECT_EQ(d.buffers[d.steps[0].buffer].shape, (Dims{B, T, 3 * C}));
    const std::vector<Dims> shapes = {{B, T, C},      {B, T, NH, hs}, {B, NH, T, hs}, {B, NH, T, T},
                                      {B, NH, T, hs}, {B, T, NH, hs}, {B, T, NH, hs}, {B, T, C}};
    const std::vector<Dims> strides = {{T * 3 * C, 3 * C, 1},
                                       {T * 3 * C, 3 * C, hs, 1},
                                       {T * 3 * C, hs, 3 * C, 1},
                                       {NH * T * T, T * T, T, 1},
                                       {NH * T * hs, T * hs, hs, 1},
                                       {NH * T * hs, hs, T * hs, 1},
                                       {T * C, C, hs, 1},
                                       {T * C, C, 1}};
    const std::vector<bool> contiguous = {false, false, false, true, true, false, true, true};
    for (size_t s = 0; s < d.steps.size(); ++s) {
        EXPECT_EQ(d.steps[s].layout.shape, shapes[s]) << s;
        EXPECT_EQ(d.steps[s].layout.strides, strides[s]) << s;
        EXPECT_EQ(d.steps[s].layout.offset, 0) << s;
        EXPECT_EQ(d.steps[s].layout.is_contiguous(), contiguous[s]) << s;
        EXPECT_EQ(d.steps[s].dims.size(), shapes[s].size()) << s;
    }
    // Views and transposes share memory; attention, att @ v and contiguous() write new buffers.
    EXPECT_EQ(d.steps[0].buffer, d.steps[1].buffer);
    EXPECT_EQ(d.steps[1].buffer, d.steps[2].buffer);
    EXPECT_EQ(d.steps[4].buffer, d.steps[5].buffer);
    EXPECT_NE(d.steps[5].buffer, d.steps[6].buffer);
    EXPECT_EQ(d.steps[6].buffer, d.steps[7].buffer);

    // After the transpose, element (b, h, t, i) is token t's slice of head h.
    const DanceStep& split = d.steps[2];
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < NH; ++h)
            for (int64_t t = 0; t < T; ++t)
                for (int64_t i = 0; i < hs; ++i) {
                    const ElementOwner o = d.owner(split.buffer, split.layout.storage_index(Dims{b, h, t, i}));
                    EXPECT_EQ(o.b, b);
                    EXPECT_EQ(o.t, t);
                    EXPECT_EQ(o.head, h);
                }
    // Merged back, row t of (B, T, C) holds token t's output of every head, in head order.
    const DanceStep& merged = d.steps[7];
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) {
            const ElementOwner o = d.owner(merged.buffer, merged.layout.storage_index(Dims{1, t, c}));
            EXPECT_EQ(o.t, t);
            EXPECT_EQ(o.head, c / hs);
        }
}

// GPT-2's naive split: view refuses c_attn's split Q (a dimension of
// (B, NH, T, hs) would span rows 3C apart), so the bug is a reshape, which
// copies Q contiguous first; where T = NH, view succeeds and nothing is copied.
TEST(Dance, NaiveViewMixesTokensIntoHeads) {
    const int B = 1, T = 3, C = 8, NH = 2, hs = 4;
    const Dance d = reshape_dance(B, T, gpt2(C, NH), 0, Split::naive_view);
    ASSERT_EQ(d.steps.size(), 5u);
    const DanceStep& split = d.steps[1];
    EXPECT_EQ(d.buffers[split.buffer].name, "q_copied");
    EXPECT_NE(split.code.find(".reshape(B, NH, T, hs)"), std::string::npos) << split.code;
    EXPECT_EQ(split.layout.shape, (Dims{B, NH, T, hs}));
    EXPECT_TRUE(split.layout.is_contiguous());
    const Dance square = reshape_dance(1, 2, gpt2(C, NH), 0, Split::naive_view);  // T = NH
    EXPECT_EQ(square.steps[1].buffer, square.steps[0].buffer);
    EXPECT_EQ(square.steps[1].layout.strides, (Dims{2 * 3 * C, 3 * C, hs, 1}));
    // "Head" 0, row 1 is the second run of hs floats: token 0's head-1 channels, not token 1's.
    for (int64_t i = 0; i < hs; ++i) {
        const ElementOwner o = d.owner(split.buffer, split.layout.storage_index(Dims{0, 0, 1, i}));
        EXPECT_EQ(o.t, 0);
        EXPECT_EQ(o.head, 1);
    }
    // Back in (B, T, C), row 0 holds "head" 0's rows 0 and 1: two query rows in one token's slot.
    const DanceStep& back = d.steps[4];
    EXPECT_EQ(back.layout.shape, (Dims{B, T, C}));
    EXPECT_EQ(d.owner(back.buffer, back.layout.storage_index(Dims{0, 0, 0})).t, 0);
    EXPECT_EQ(d.owner(back.buffer, back.layout.storage_index(Dims{0, 0, hs})).t, 1);
    EXPECT_THROW(reshape_dance(1, 3, gpt2(8, 2), 3, Split::naive_view), Error);
}

// A Llama-shaped attention: NH query heads of hs, NKV key/value heads, rotary.
Config llama(int C, int NH, int NKV, int hs) {
    Config config = gpt2(C, NH);
    config.architecture = "llama";
    config.qkv_layout = QkvLayout::separate;
    config.weights_out_by_in = true;
    config.n_kv_head = NKV;
    config.head_dim = hs;
    config.positions = Positions::rotary;
    config.norm = Norm::rms_norm;
    config.mlp = Mlp::swiglu;
    return config;
}

// A buffer written contiguously in `shape`, then read with its dimensions in
// the order `perm` names: the strides, worked out from the shape alone.
Dims permuted_strides(const Dims& shape, const std::vector<int>& perm) {
    Dims row_major(shape.size(), 1), strides;
    for (size_t d = shape.size() - 1; d-- > 0;) row_major[d] = row_major[d + 1] * shape[d + 1];
    for (int d : perm) strides.push_back(row_major[d]);
    return strides;
}

// GQA and RoPE, the correct split: Q's and then K's view and transpose, both
// rotated into new buffers in their memory order, K expanded to the group
// with stride 0 (no float moved) and reshaped (a copy), then as GPT-2.
TEST(Dance, GroupedRotaryWalkExpandsKeysWithStrideZeroThenCopies) {
    const int64_t B = 2, T = 3, C = 32, NH = 4, NKV = 2, g = 2, hs = 8;
    const Dance d = reshape_dance(B, T, llama(C, NH, NKV, hs), 0, Split::transpose);
    EXPECT_EQ(d.NKV, NKV);
    EXPECT_EQ(d.hs, hs);
    EXPECT_EQ(d.rope_dims, hs);
    const std::vector<Dims> shapes = {{B, T, NH * hs},    {B, T, NH, hs},  {B, NH, T, hs}, {B, T, NKV * hs},
                                      {B, T, NKV, hs},    {B, NKV, T, hs}, {B, NH, T, hs}, {B, NKV, T, hs},
                                      {B, NKV, g, T, hs}, {B, NH, T, hs},  {B, NH, T, T},  {B, NH, T, hs},
                                      {B, T, NH, hs},     {B, T, NH, hs},  {B, T, NH * hs}};
    const std::vector<Dims> strides = {
        permuted_strides({B, T, NH * hs}, {0, 1, 2}),
        permuted_strides({B, T, NH, hs}, {0, 1, 2, 3}),
        permuted_strides({B, T, NH, hs}, {0, 2, 1, 3}),  // q transposed
        permuted_strides({B, T, NKV * hs}, {0, 1, 2}),
        permuted_strides({B, T, NKV, hs}, {0, 1, 2, 3}),
        permuted_strides({B, T, NKV, hs}, {0, 2, 1, 3}),  // k transposed
        permuted_strides({B, T, NH, hs}, {0, 2, 1, 3}),   // rotated q, written in q's memory order
        permuted_strides({B, T, NKV, hs}, {0, 2, 1, 3}),  // rotated k, likewise
        {T * NKV * hs, hs, 0, NKV * hs, 1},               // expanded: the group axis reads the same key head
        permuted_strides({B, NH, T, hs}, {0, 1, 2, 3}),   // repeated: a contiguous copy
        permuted_strides({B, NH, T, T}, {0, 1, 2, 3}),
        permuted_strides({B, NH, T, hs}, {0, 1, 2, 3}),
        permuted_strides({B, NH, T, hs}, {0, 2, 1, 3}),  // y transposed back
        permuted_strides({B, T, NH, hs}, {0, 1, 2, 3}),
        permuted_strides({B, T, NH * hs}, {0, 1, 2})};
    ASSERT_EQ(d.steps.size(), shapes.size());
    for (size_t s = 0; s < d.steps.size(); ++s) {
        EXPECT_EQ(d.steps[s].layout.shape, shapes[s]) << s;
        EXPECT_EQ(d.steps[s].layout.strides, strides[s]) << s;
        EXPECT_EQ(d.steps[s].dims.size(), shapes[s].size()) << s;
    }
    // New buffers where something is written: the projections, the rotations, the copy, att, y, the merge.
    for (size_t s : {3, 6, 7, 9, 10, 11, 13}) EXPECT_NE(d.steps[s].buffer, d.steps[s - 1].buffer) << s;
    for (size_t s : {1, 2, 4, 5, 8, 12, 14}) EXPECT_EQ(d.steps[s].buffer, d.steps[s - 1].buffer) << s;

    // The expand moves no float: every one of its B*NH*T*hs elements is one
    // of the rotated keys' B*T*NKV*hs floats, the same for each copy.
    const DanceStep& rotated = d.steps[7];
    const DanceStep& expanded = d.steps[8];
    EXPECT_EQ(d.buffers[expanded.buffer].name, "k_rotated");
    std::set<int64_t> read;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t kv = 0; kv < NKV; ++kv)
            for (int64_t c = 0; c < g; ++c)
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t i = 0; i < hs; ++i) {
                        const int64_t at = expanded.layout.storage_index(Dims{b, kv, c, t, i});
                        EXPECT_EQ(at, rotated.layout.storage_index(Dims{b, kv, t, i}));
                        read.insert(at);
                    }
    EXPECT_EQ(expanded.layout.numel(), B * NH * T * hs);
    EXPECT_EQ(static_cast<int64_t>(read.size()), B * T * NKV * hs);
    EXPECT_EQ(*read.rbegin(), B * T * NKV * hs - 1);

    // The reshape copies: a buffer g times the keys', where query head h's
    // rows are its key/value head h / g's, token by token.
    const DanceStep& repeated = d.steps[9];
    const DanceBuffer& copy = d.buffers[repeated.buffer];
    EXPECT_EQ(copy.name, "k_repeated");
    EXPECT_EQ(element_count(copy.shape), B * NH * T * hs);
    EXPECT_TRUE(repeated.layout.is_contiguous());
    for (int64_t n = 0; n < element_count(copy.shape); ++n) {
        const ElementOwner o = d.owner(repeated.buffer, n);
        EXPECT_EQ(o.b, n / (NH * T * hs));
        EXPECT_EQ(o.head, n / (T * hs) % NH / g);
        EXPECT_EQ(o.t, n / hs % T);
        EXPECT_TRUE(o.kv);
        EXPECT_EQ(d.heads(o), NKV);
    }
    EXPECT_FALSE(d.owner(d.steps[10].buffer, 0).kv);  // the weights: query heads'
    EXPECT_EQ(d.heads(d.owner(d.steps[10].buffer, 0)), NH);
    // In the rotated keys' memory (B, T, NKV, hs), channel c of a token is key/value head c / hs's.
    for (int64_t n = 0; n < B * T * NKV * hs; ++n) {
        EXPECT_EQ(d.owner(rotated.buffer, n).head, n % (NKV * hs) / hs);
        EXPECT_EQ(d.owner(rotated.buffer, n).t, n / (NKV * hs) % T);
    }
}

// Qwen 3's heads of 16 from C = 32: hs comes from the split, and each head's
// q and k are RMS-normed into a new buffer before the transpose. The naive
// split views Q and K straight to heads, so their rotations write contiguously.
TEST(Dance, HeadSizeComesFromTheSplitNotC) {
    Config qwen3 = llama(32, 4, 2, 16);
    qwen3.architecture = "qwen3";
    qwen3.qk_norm = true;
    const Dance d = reshape_dance(1, 5, qwen3, 0, Split::transpose);
    EXPECT_EQ(d.hs, 16);
    EXPECT_EQ(d.steps[0].layout.shape, (Dims{1, 5, 64}));
    EXPECT_EQ(d.steps[1].layout.shape, (Dims{1, 5, 4, 16}));
    EXPECT_EQ(d.buffers[d.steps[2].buffer].name, "q_normed");
    EXPECT_EQ(d.steps[3].layout.shape, (Dims{1, 4, 5, 16}));
    EXPECT_EQ(d.steps.back().layout.shape, (Dims{1, 5, 64}));

    const Dance naive = reshape_dance(1, 5, llama(32, 4, 2, 16), 0, Split::naive_view);
    ASSERT_EQ(naive.steps.size(), 11u);  // q, its view, k, its view, two rotations, expand, reshape, att, y, view
    EXPECT_EQ(naive.steps[1].layout.strides, permuted_strides({1, 4, 5, 16}, {0, 1, 2, 3}));
    EXPECT_TRUE(naive.steps[4].layout.is_contiguous());
    EXPECT_EQ(naive.steps[6].layout.strides, (Dims{2 * 5 * 16, 5 * 16, 0, 16, 1}));
    EXPECT_EQ(naive.steps.back().layout.shape, (Dims{1, 5, 64}));

    // A re-split into 8 heads keeps the groups of 2: 4 key/value heads of 8, rotating 8 dims.
    const Dance resplit = reshape_dance(1, 5, qwen3, 8, Split::transpose);
    EXPECT_EQ(resplit.NKV, 4);
    EXPECT_EQ(resplit.hs, 8);
    EXPECT_EQ(resplit.rope_dims, 8);
    EXPECT_THROW(reshape_dance(1, 5, qwen3, 3, Split::transpose), Error);
}

// A projection of its own (BERT's query): Q is a contiguous (B, T, C) buffer,
// and the naive split's view of it succeeds without a copy.
TEST(Dance, SeparateProjectionIsContiguous) {
    Config bert = gpt2(8, 2);
    bert.architecture = "bert";
    bert.qkv_layout = QkvLayout::separate;
    const Dance d = reshape_dance(2, 3, bert, 0, Split::transpose);
    EXPECT_EQ(d.buffers[d.steps[0].buffer].name, "q");
    EXPECT_EQ(d.steps[0].layout.strides, (Dims{3 * 8, 8, 1}));
    EXPECT_EQ(d.steps[2].layout.strides, (Dims{3 * 8, 4, 8, 1}));
    const Dance naive = reshape_dance(2, 3, bert, 0, Split::naive_view);
    EXPECT_EQ(naive.steps[1].buffer, naive.steps[0].buffer);
    EXPECT_EQ(naive.steps[1].layout.strides, (Dims{3 * 8, 3 * 4, 4, 1}));
}

// ModernBERT's Wqkv, fused [Q | K | V] and rotary: K is the split's second
// piece of the same buffer, NH * hs floats into each row; its owners are the
// key/value heads.
TEST(Dance, FusedRotaryWalkViewsKeysInTheSameBuffer) {
    const int64_t B = 1, T = 4, C = 16, NH = 2, hs = 8, W = 3 * C;
    Config modernbert = llama(C, NH, NH, hs);
    modernbert.architecture = "modernbert";
    modernbert.qkv_layout = QkvLayout::fused;
    const Dance d = reshape_dance(B, T, modernbert, 0, Split::transpose);
    const DanceStep &q = d.steps[0], &k = d.steps[3];
    ASSERT_EQ(q.buffer, k.buffer);
    EXPECT_EQ(d.buffers[q.buffer].q_width, C);
    EXPECT_EQ(q.layout.strides, (Dims{T * W, W, 1}));
    EXPECT_EQ(k.layout.offset, C);
    EXPECT_EQ(k.layout.shape, (Dims{B, T, C}));
    EXPECT_EQ(d.steps[5].layout.strides, (Dims{T * W, hs, W, 1}));  // k transposed
    for (int64_t c = 0; c < W; ++c) {
        const ElementOwner o = d.owner(q.buffer, W + c);  // token 1's row
        EXPECT_EQ(o.t, 1);
        EXPECT_EQ(o.head, c % C / hs);
        EXPECT_EQ(o.kv, c >= C);
        EXPECT_EQ(q.layout.reads(W + c), c < C);
        EXPECT_EQ(k.layout.reads(W + c), c >= C && c < 2 * C);
    }
    // The naive split takes reshape: a copy of Q's and of K's pieces.
    const Dance naive = reshape_dance(B, T, modernbert, 0, Split::naive_view);
    EXPECT_EQ(naive.buffers[naive.steps[1].buffer].name, "q_copied");
    EXPECT_EQ(naive.buffers[naive.steps[3].buffer].name, "k_copied");
    EXPECT_TRUE(naive.buffers[naive.steps[3].buffer].kv);
    // With T = NH the naive view succeeds, head-major in memory: RoPE writes
    // its result in that order, contiguous (B, NH, T, hs).
    const Dance square = reshape_dance(B, NH, modernbert, 0, Split::naive_view);
    EXPECT_EQ(square.steps[1].buffer, square.steps[0].buffer);
    EXPECT_EQ(square.steps[1].layout.strides, (Dims{NH * W, W, hs, 1}));
    const DanceStep& rotated = square.steps[4];
    EXPECT_EQ(square.buffers[rotated.buffer].name, "q_rotated");
    EXPECT_EQ(rotated.dims, (std::vector<std::string>{"B", "NH", "T", "hs"}));
    EXPECT_TRUE(rotated.layout.is_contiguous());
}

// Pythia: no grouping, so no expand or copy; a quarter of each head rotates,
// and torch.cat writes the rotated heads contiguously.
TEST(Dance, UngroupedRotaryWalkHasNoRepeat) {
    Config pythia = gpt2(48, 3);
    pythia.architecture = "gpt_neox";
    pythia.qkv_layout = QkvLayout::fused_per_head;
    pythia.weights_out_by_in = true;
    pythia.rope.joined_by_cat = true;
    pythia.positions = Positions::rotary;
    pythia.rope.fraction = 0.25f;
    const Dance d = reshape_dance(2, 4, pythia, 0, Split::transpose);
    EXPECT_EQ(d.rope_dims, 4);
    ASSERT_EQ(d.steps.size(), 13u);  // q 3, k 3, two rotations, att, y, transpose, copy, view
    for (const DanceStep& step : d.steps)
        for (int64_t stride : step.layout.strides) EXPECT_NE(stride, 0);
    EXPECT_EQ(d.buffers[d.steps[6].buffer].name, "q_rotated");
    EXPECT_TRUE(d.steps[6].layout.is_contiguous());
    EXPECT_EQ(d.steps[6].layout.shape, (Dims{2, 3, 4, 16}));
}

// The steps of a walk that name stored weights, and those weights' words.
std::vector<std::pair<size_t, std::vector<std::string>>> weighed_steps(const Dance& d) {
    std::vector<std::pair<size_t, std::vector<std::string>>> weighed;
    for (size_t s = 0; s < d.steps.size(); ++s)
        if (!d.steps[s].weights.empty()) weighed.emplace_back(s, d.steps[s].weights);
    return weighed;
}

// A GGUF llama file in Q4_K, its layer 1's v_proj in Q6_K as Q4_K_M mixes
// them: Q's, K's and the output projection's steps name each weight as the
// file stores it. The shapes are the spec's (C = 256, 8 query heads and 2
// key/value heads of 32); the blocks are ggml-common.h's: Q4_K packs 256
// values into 2 + 2 + 12 + 128 bytes, Q6_K into 128 + 64 + 16 + 2.
TEST(Dance, GgufProjectionsNameTheirStoredTypeAndBlocks) {
    test::TempDir dir;
    const std::filesystem::path file = dir.path / "model.gguf";
    const test::FamilySpec spec = test::gguf_family_spec(test::Family::llama);
    std::mt19937 rng(41);
    test::write_gguf_family(file, spec, DType::Q4_K, [&](test::GgufSpec& gguf) {
        for (test::GgufTensorSpec& t : gguf.tensors)
            if (t.name == "blk.1.attn_v.weight") {
                t.type = static_cast<uint32_t>(GgmlType::Q6_K);
                t.data.clear();
                for (uint64_t b = 0; b < t.ne[0] * t.ne[1] / 256; ++b) {
                    const test::Block block = test::block_of_spread(GgmlType::Q6_K, 0.05, rng);
                    t.data.append(block.begin(), block.end());
                }
            }
    });
    const Model model = load_model(file.string());
    const int C = spec.n_embd, Q = spec.n_head * spec.head_dim, KV = spec.n_kv_head * spec.head_dim;
    const int q4_k = 2 + 2 + 12 + 128, q6_k = 128 + 64 + 16 + 2;
    // "<module>'s weight, <out> outputs by <in> inputs, stored as <type>: each stored row of <in> inputs is ..."
    const auto weight = [](const std::string& module, int out, int in, const std::string& type, int block_bytes,
                           const std::string& bits) {
        return module + "'s weight, " + std::to_string(out) + " outputs by " + std::to_string(in) +
               " inputs, stored as " + type + ": each stored row of " + std::to_string(in) + " inputs is " +
               std::to_string(in / 256 * block_bytes) + " bytes, " + std::to_string(in / 256) +
               (in == 256 ? " block" : " blocks") + " of 256 values in " + std::to_string(block_bytes) +
               " bytes each (" + ggml_type_traits(type == "Q4_K" ? GgmlType::Q4_K : GgmlType::Q6_K).layout + "), " +
               bits + " bits a weight, widened to float32 block by block inside the product";
    };
    for (int layer : {0, 1}) {
        SCOPED_TRACE(layer);
        const Dance d = reshape_dance(1, 3, model.config, 0, Split::transpose, &model.layers[layer]);
        const auto weighed = weighed_steps(d);
        ASSERT_EQ(weighed.size(), 3u);
        EXPECT_EQ(weighed[0].first, 0u);  // Q's projection
        EXPECT_EQ(weighed[0].second, std::vector<std::string>{weight("q_proj", Q, C, "Q4_K", q4_k, "4.5")});
        EXPECT_EQ(d.steps[weighed[1].first].code.rfind("k = k_proj(x)", 0), 0u);
        const std::string v =
            layer == 1 ? weight("v_proj", KV, C, "Q6_K", q6_k, "6.5625") : weight("v_proj", KV, C, "Q4_K", q4_k, "4.5");
        EXPECT_EQ(weighed[1].second, (std::vector<std::string>{weight("k_proj", KV, C, "Q4_K", q4_k, "4.5"), v}));
        EXPECT_EQ(weighed[2].first, d.steps.size() - 1);  // the merge into o_proj
        EXPECT_EQ(weighed[2].second, std::vector<std::string>{weight("o_proj", C, Q, "Q4_K", q4_k, "4.5")});
    }
    // The naive walk names the same projections; a walk without a layer names none.
    EXPECT_EQ(weighed_steps(reshape_dance(1, 3, model.config, 0, Split::naive_view, &model.layers[1])).size(), 3u);
    EXPECT_TRUE(weighed_steps(reshape_dance(1, 3, model.config, 0, Split::transpose)).empty());
}

// A checkpoint of 16-bit floats stored (in, out), GPT-2's Conv1D: its fused
// c_attn's stored rows are of outputs, widened without blocks.
TEST(Dance, Bf16ConvWeightsStoredRowsAreOutputs) {
    test::TempDir dir;
    test::write_test_model(dir.path, {.n_layer = 1, .n_head = 4, .n_embd = 32, .dtype = test::FileDType::BF16});
    const Model model = load_model(dir.path.string());
    const auto weighed = weighed_steps(reshape_dance(1, 3, model.config, 0, Split::transpose, &model.layers.at(0)));
    ASSERT_EQ(weighed.size(), 2u);  // c_attn's [Q | K | V], then c_proj
    EXPECT_EQ(weighed[0].second,
              std::vector<std::string>{"c_attn's weight, 96 outputs by 32 inputs, stored as BF16: each stored row "
                                       "of 96 outputs is 192 bytes, 2 bytes of bfloat16 a value, widened to float32 "
                                       "inside the product"});
    EXPECT_EQ(weighed[1].second.at(0).rfind("c_proj's weight, 32 outputs by 32 inputs, stored as BF16", 0), 0u);
}

// The reference forward's two splits, compared here: the error core reports.
TEST(Dance, NaiveViewMaxDiffMatchesTheReferenceForward) {
    test::TempDir dir;
    test::write_test_model(dir.path, {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 16});
    const Model model = load_model(dir.path.string());
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    const std::vector<std::vector<int32_t>> texts = {{464, 3797, 3332, 319, 262, 2603}, {15496, 995}};
    const Batch batch{texts, model.config.eos_token_id};
    for (int heads : {0, 2})
        for (int layer : {0, 1}) {
            AttentionOptions options;
            options.n_head = heads;
            options.layers = {layer};
            options.split = Split::transpose;
            const test::Reference correct = test::reference_attention(model, texts, options);
            options.split = Split::naive_view;
            const test::Reference naive = test::reference_attention(model, texts, options);
            double want = 0;
            for (size_t n = 0; n < correct.outputs.size(); ++n)
                want = std::max(want, std::abs(naive.outputs[n] - correct.outputs[n]));
            ASSERT_GT(want, 1e-2);
            // Whatever split and layers the options ask for, both splits at `layer` are compared.
            options.layers = {};
            EXPECT_NEAR(naive_view_max_diff(*backend, batch, options, layer), want, 1e-5 * (1 + want))
                << "heads " << heads << " layer " << layer;
        }
    // One token: every naive "head" is that token's own slice.
    EXPECT_EQ(naive_view_max_diff(*backend, Batch{{{464}}, model.config.eos_token_id}, {}, 1), 0.0);
    EXPECT_THROW(naive_view_max_diff(*backend, batch, {}, 2), Error);
}

}  // namespace
