// Strided views against their definition (a view's n-th element is the same
// memory as the original's n-th; a view exists exactly when some strides say
// so, found here by brute force), PyTorch's figures for the tutorials' cases.
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "headscope/base/error.h"
#include "headscope/inspect/strided.h"

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

// Grouped-query attention's repeat_kv: x[:, :, None].expand(...) of a
// (2, 3, 4) buffer reads element (b, c, t, i) from the buffer's (b, t, i)
// whatever the copy c: stride 0, and no view can merge that axis.
TEST(Strided, ExpandRepeatsMemoryThroughStrideZero) {
    const StridedLayout x = StridedLayout::contiguous({2, 3, 4});
    const StridedLayout unsqueezed = x.unsqueeze(1);
    EXPECT_EQ(unsqueezed.shape, (Dims{2, 1, 3, 4}));
    EXPECT_EQ(unsqueezed.strides, (Dims{12, 12, 4, 1}));  // torch: the stride that steps over the next dimension
    EXPECT_EQ(x.unsqueeze(3).strides, (Dims{12, 4, 1, 1}));
    const StridedLayout expanded = unsqueezed.expand({2, 5, 3, 4});
    EXPECT_EQ(expanded.strides, (Dims{12, 0, 4, 1}));
    EXPECT_EQ(expanded.numel(), 120);
    EXPECT_FALSE(expanded.is_contiguous());
    for (int64_t b = 0; b < 2; ++b)
        for (int64_t c = 0; c < 5; ++c)
            for (int64_t t = 0; t < 3; ++t)
                for (int64_t i = 0; i < 4; ++i) {
                    EXPECT_EQ(expanded.storage_index(Dims{b, c, t, i}), b * 12 + t * 4 + i);
                    EXPECT_EQ(expanded.index_of(b * 12 + t * 4 + i), (Dims{b, 0, t, i}));  // the first copy
                }
    EXPECT_FALSE(expanded.try_view({10, 3, 4}).has_value());
    EXPECT_THROW(expanded.view({10, 3, 4}), Error);
    EXPECT_TRUE(expanded.try_view({2, 5, 12}).has_value());  // t and i still one run of memory
    EXPECT_THROW(x.expand({2, 6, 4}), Error);                // only a size-1 dimension grows
    EXPECT_THROW(x.expand({2, 3}), Error);
    EXPECT_THROW(x.unsqueeze(4), Error);
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

// GPT-2's Q is the first piece of c_attn's (B, T, 3C) output split three
// ways (q, k, v = c_attn(x).split(C, dim=2)): its rows are 3C floats apart,
// as PyTorch's q.stride() is (3TC, 3C, 1).
// x = torch.empty(2, 3, 24); q, k, v = x.split(8, dim=2): k.stride() is
// (72, 24, 1) and k.storage_offset() 8; k.view(2, 3, 2, 4) has strides
// (72, 24, 4, 1); k.view(2, 2, 3, 4) raises; k reads floats 8..15 of each row.
TEST(Strided, NarrowIsAPieceOfASplit) {
    const StridedLayout k = StridedLayout::contiguous({2, 3, 24}).narrow(2, 8, 8);
    EXPECT_EQ(k.shape, (Dims{2, 3, 8}));
    EXPECT_EQ(k.strides, (Dims{72, 24, 1}));
    EXPECT_EQ(k.offset, 8);
    EXPECT_FALSE(k.is_contiguous());
    EXPECT_EQ(k.view({2, 3, 2, 4}).strides, (Dims{72, 24, 4, 1}));
    EXPECT_EQ(k.view({2, 3, 2, 4}).offset, 8);
    EXPECT_FALSE(k.try_view({2, 2, 3, 4}));
    for (int64_t n = 0; n < 2 * 3 * 24; ++n) {
        EXPECT_EQ(k.reads(n), n % 24 >= 8 && n % 24 < 16) << n;
        if (k.reads(n)) {
            EXPECT_EQ(k.storage_index(k.index_of(n)), n);
        }
    }
    EXPECT_EQ(k.index_of(24 + 9), (Dims{0, 1, 1}));
    EXPECT_THROW(k.narrow(2, 4, 5), Error);
    EXPECT_THROW(k.narrow(3, 0, 1), Error);
}

}  // namespace
