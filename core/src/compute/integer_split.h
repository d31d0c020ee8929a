// The activations of the integer products (integer_products.cpp): each row
// split into 8-bit parts per group of the weight's block, as that file's
// comment says, with sums of the parts where a type's kernel needs them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "headscope/base/aligned.h"

namespace headscope {

// The rows' parts, in the thread's buffers, kept between calls.
struct SplitRows {
    AlignedVector<int8_t> hi, lo, rest;  // rows x in (rest: MXFP4's third part)
    AlignedVector<int16_t> joined;       // rows x in: 254 hi + lo, where the plan joins them (its order)
    AlignedVector<float> scale, fine;    // rows x groups: s and T's unit, s / 254 (MXFP4: s / 254^2)
    AlignedVector<int32_t> sums;         // rows x in / sum_group: T's parts summed (MXFP4: times -12)
};

// How a type's products split x: in groups of `group`, into two parts or
// three (and the two joined into one 16-bit part too, where `joined`), with
// sums of T's parts every `sum_group` values (none where it is 0) times
// `sum_factor`. With `nibble_order`, the joined part of each 128 values is
// in the order of Q4_K's codes read as words (integer_k_quants.cpp): 4 runs
// of 32, run v's value k the value 64 (k / 16) + 32 (v / 2) + 2 (k % 16) + v % 2.
struct SplitPlan {
    int64_t group, sum_group;
    int32_t sum_factor;
    bool three_parts, joined, nibble_order;
};

// Rows r0 on of a SplitRows, as the kernels read them, block by block.
struct RowParts {
    const SplitRows& split;
    int r0;
    int64_t in, row_blocks, block_sums;  // blocks of a row, sums of a block
    const int8_t* hi_at(int r, int64_t at) const { return split.hi.data() + (r0 + r) * in + at; }
    const int8_t* lo_at(int r, int64_t at) const { return split.lo.data() + (r0 + r) * in + at; }
    const int8_t* rest_at(int r, int64_t at) const { return split.rest.data() + (r0 + r) * in + at; }
    const int16_t* joined_at(int r, int64_t at) const { return split.joined.data() + (r0 + r) * in + at; }
    const int32_t* block_sums_at(int r, int64_t block) const {
        return split.sums.data() + ((r0 + r) * row_blocks + block) * block_sums;
    }
    float scale_of(int r, int64_t block) const {
        return split.scale[static_cast<size_t>((r0 + r) * row_blocks + block)];
    }
    float fine_of(int r, int64_t block) const { return split.fine[static_cast<size_t>((r0 + r) * row_blocks + block)]; }
};

// Rows of x split as `plan` says, into the thread's buffers (kept between calls).
const SplitRows& split_rows(const float* x, int rows, int64_t in, const SplitPlan& plan);

}  // namespace headscope
