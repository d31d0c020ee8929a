// Strided views against their definition (a view's n-th element is the same
// memory as the original's n-th; a view exists exactly when some strides say
// so, found here by brute force), PyTorch's figures for the tutorials' cases,
// the reshape dance's steps and element owners, and the naive split's output
// error against the tests' double-precision reference forward.
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "headscope/checks.h"
#include "headscope/dance.h"
#include "headscope/error.h"
#include "model_writer.h"
#include "reference_forward.h"

using namespace headscope;

namespace {

using Dims = std::vector<int64_t>;

// Strides that place the n-th row-major element of `shape` at `storage[n]`,
// if any do: each stride read off one step along its dimension, then every
// element checked.
std::optional<Dims> strides_for(const Dims& shape, const std::vector<int64_t>& storage) {
    Dims strides(shape.size(), 0), row_major(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) row_major[d - 1] = row_major[d] * shape[d];
    for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] > 1) strides[d] = storage[row_major[d]] - storage[0];
    for (size_t n = 0; n < storage.size(); ++n) {
        int64_t at = storage[0], rest = static_cast<int64_t>(n);
        for (size_t d = 0; d < shape.size(); ++d) {
            at += rest / row_major[d] * strides[d];
            rest %= row_major[d];
        }
        if (at != storage[n]) return std::nullopt;
    }
    return strides;
}

std::vector<int64_t> storage_order(const StridedLayout& layout) {
    std::vector<int64_t> at(layout.numel());
    for (int64_t n = 0; n < layout.numel(); ++n) at[n] = layout.storage_index(n);
    return at;
}

TEST(Strided, ContiguousStridesAreRowMajor) {
    const StridedLayout x = StridedLayout::contiguous({2, 10, 512});
    EXPECT_EQ(x.strides, (Dims{5120, 512, 1}));
    EXPECT_TRUE(x.is_contiguous());
    EXPECT_EQ(x.numel(), 10240);
    EXPECT_EQ(x.storage_index(Dims{1, 2, 3}), 5120 + 1024 + 3);
}

// The tutorial's demo: x (2, 3, 4) transposed cannot be viewed as (2, 12)
// until contiguous() copies it.
TEST(Strided, TransposedTensorRefusesViewUntilCopied) {
    const StridedLayout x = StridedLayout::contiguous({2, 3, 4});
    const StridedLayout t = x.transpose(1, 2);
    EXPECT_EQ(t.shape, (Dims{2, 4, 3}));
    EXPECT_EQ(t.strides, (Dims{12, 1, 4}));
    EXPECT_FALSE(t.is_contiguous());
    EXPECT_THROW(t.view({2, 12}), Error);
    EXPECT_EQ(StridedLayout::contiguous(t.shape).view({2, 12}).strides, (Dims{12, 1}));
}

// torch.arange(24).view(4, 6).t().view(6, 2, 2).stride() == (1, 12, 6)
TEST(Strided, ViewOfTransposeWhereTorchAllowsIt) {
    const StridedLayout t = StridedLayout::contiguous({4, 6}).transpose(0, 1);
    EXPECT_EQ(t.view({6, 2, 2}).strides, (Dims{1, 12, 6}));
}

TEST(Strided, SizeMismatchAndBadDimsAreErrors) {
    const StridedLayout x = StridedLayout::contiguous({2, 3});
    EXPECT_THROW(x.view({7}), Error);
    EXPECT_THROW(x.view({0, 6}), Error);
    EXPECT_THROW(x.transpose(0, 2), Error);
}

// Random chains of transposes and views: every view keeps the element order,
// and is refused exactly when no strides could express it.
TEST(Strided, ViewsKeepElementOrderAndAreRefusedOnlyWhenImpossible) {
    std::mt19937 rng(3);
    const std::vector<Dims> shapes = {{24}, {2, 12}, {4, 6}, {2, 3, 4}, {6, 1, 4}, {2, 2, 6}, {3, 8}, {1, 24}};
    int refused = 0, allowed = 0;
    for (int trial = 0; trial < 2000; ++trial) {
        StridedLayout layout = StridedLayout::contiguous(shapes[rng() % shapes.size()]);
        for (int op = 0; op < 4; ++op) {
            if (rng() % 2) {
                const int rank = static_cast<int>(layout.shape.size());
                layout = layout.transpose(static_cast<int>(rng() % rank), static_cast<int>(rng() % rank));
                continue;
            }
            const Dims& new_shape = shapes[rng() % shapes.size()];
            const std::vector<int64_t> before = storage_order(layout);
            const std::optional<Dims> possible = strides_for(new_shape, before);
            try {
                layout = layout.view(new_shape);
                ++allowed;
                EXPECT_TRUE(possible.has_value());
                EXPECT_EQ(storage_order(layout), before);
            } catch (const Error&) {
                ++refused;
                EXPECT_FALSE(possible.has_value()) << shape_string(new_shape);
            }
        }
    }
    EXPECT_GT(refused, 100);
    EXPECT_GT(allowed, 100);
}

// index_of against the row-major index each element was reached by, on
// random chains of transposes and views.
TEST(Strided, IndexOfInvertsStorageIndex) {
    std::mt19937 rng(5);
    const std::vector<Dims> shapes = {{24}, {2, 12}, {4, 6}, {2, 3, 4}, {6, 1, 4}, {2, 2, 6}, {3, 8}, {1, 24}};
    int checked = 0;
    for (int trial = 0; trial < 500; ++trial) {
        StridedLayout layout = StridedLayout::contiguous(shapes[rng() % shapes.size()]);
        for (int op = 0; op < 4; ++op) {
            const int rank = static_cast<int>(layout.shape.size());
            if (rng() % 2) {
                layout = layout.transpose(static_cast<int>(rng() % rank), static_cast<int>(rng() % rank));
            } else {
                try {
                    layout = layout.view(shapes[rng() % shapes.size()]);
                } catch (const Error&) {
                    continue;
                }
            }
            for (int64_t n = 0; n < layout.numel(); ++n) {
                Dims index(layout.shape.size());
                for (int64_t d = static_cast<int64_t>(index.size()) - 1, rest = n; d >= 0; --d) {
                    index[d] = rest % layout.shape[d];
                    rest /= layout.shape[d];
                }
                ASSERT_EQ(layout.index_of(layout.storage_index(n)), index)
                    << shape_string(layout.shape) << " strides " << shape_string(layout.strides) << " n " << n;
                ++checked;
            }
        }
    }
    EXPECT_GT(checked, 10000);
    // The dance's transposed Q (B, NH, T, hs) of a (1, 3, 8) buffer: storage 12 is token 1's channel 4, head 1.
    const StridedLayout q = StridedLayout::contiguous({1, 3, 8}).view({1, 3, 2, 4}).transpose(1, 2);
    EXPECT_EQ(q.index_of(12), (Dims{0, 1, 1, 0}));
}

TEST(Dance, TransposeWalkShapesStridesAndCopies) {
    const int B = 2, T = 3, C = 8, NH = 2, hs = 4;
    const Dance d = reshape_dance(B, T, C, NH, Split::transpose);
    ASSERT_EQ(d.steps.size(), 8u);
    const std::vector<Dims> shapes = {{B, T, C},      {B, T, NH, hs}, {B, NH, T, hs}, {B, NH, T, T},
                                      {B, NH, T, hs}, {B, T, NH, hs}, {B, T, NH, hs}, {B, T, C}};
    const std::vector<Dims> strides = {{T * C, C, 1},
                                       {T * C, C, hs, 1},
                                       {T * C, hs, C, 1},
                                       {NH * T * T, T * T, T, 1},
                                       {NH * T * hs, T * hs, hs, 1},
                                       {NH * T * hs, hs, T * hs, 1},
                                       {T * C, C, hs, 1},
                                       {T * C, C, 1}};
    const std::vector<bool> contiguous = {true, true, false, true, true, false, true, true};
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

TEST(Dance, NaiveViewMixesTokensIntoHeads) {
    const int B = 1, T = 3, C = 8, NH = 2, hs = 4;
    const Dance d = reshape_dance(B, T, C, NH, Split::naive_view);
    ASSERT_EQ(d.steps.size(), 5u);
    const DanceStep& split = d.steps[1];
    EXPECT_EQ(split.layout.shape, (Dims{B, NH, T, hs}));
    EXPECT_TRUE(split.layout.is_contiguous());
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
    EXPECT_THROW(reshape_dance(1, 3, 8, 3, Split::naive_view), Error);
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
