// The kernels of the layer operations on the device (cuda_layer_ops.cuh;
// cuda_backend.cu includes it, once): each the CPU operation's rule
// (cpu_ops.h, forward.cpp) over device buffers, one thread per value or
// one block (or warp) per row.
// Legend: R rows computed, C channels, hs head size.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_kernels.cuh"

namespace headscope {
namespace {

// One block per group of `n` values: row r's group g starts at x + r *
// stride + g * n (`groups` a row). out = LayerNorm (with `layer_norm`, the
// biased variance; b may be null) or RMSNorm of it, times w[c] (+ b[c]),
// written at the same place in `out`, which may be x.
__global__ void norm_kernel(const float* x, float* out, const float* w, const float* b, int n, int groups,
                            size_t stride, float eps, bool layer_norm) {
    __shared__ float partial[32];
    const size_t at = blockIdx.x / groups * stride + static_cast<size_t>(blockIdx.x % groups) * n;
    const float* xr = x + at;
    float* yr = out + at;
    float mean = 0;
    if (layer_norm) {
        float sum = 0;
        for (int c = threadIdx.x; c < n; c += blockDim.x) sum += xr[c];
        mean = block_sum(sum, partial) / n;
    }
    float squares = 0;
    for (int c = threadIdx.x; c < n; c += blockDim.x) squares += (xr[c] - mean) * (xr[c] - mean);
    const float inv = 1.f / sqrtf(block_sum(squares, partial) / n + eps);
    __syncthreads();  // every thread has read its values before any is overwritten (out may be x)
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        const float v = (xr[c] - mean) * inv;
        yr[c] = layer_norm ? v * w[c] + (b ? b[c] : 0.f) : w[c] * v;
    }
}

// out (rows, ldo) += bias (n) on each row's first n columns.
__global__ void bias_rows_kernel(float* out, size_t ldo, const float* bias, int n, size_t count) {
    const size_t i = global_index();
    if (i < count) out[i / n * ldo + i % n] += bias[i % n];
}

// n 16-bit stored values as float32: BF16 the high half of a float, else IEEE half.
__global__ void widen_kernel(const uint16_t* in, float* out, size_t n, bool bf16) {
    const size_t i = global_index();
    if (i >= n) return;
    out[i] = bf16 ? __uint_as_float(static_cast<uint32_t>(in[i]) << 16) : __half2float(__ushort_as_half(in[i]));
}

// The MLP's activation in place, as activate() (forward.h): 0 tanh GELU, 1 exact GELU, 2 SiLU, 3 ReLU.
__global__ void activate_kernel(float* x, size_t n, int kind) {
    const size_t i = global_index();
    if (i >= n) return;
    const float v = x[i];
    if (kind == 0)
        x[i] = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    else if (kind == 1)
        x[i] = 0.5f * v * (1.f + erff(v * 0.7071067811865476f));
    else if (kind == 2)
        x[i] = v / (1.f + expf(-v));
    else
        x[i] = fmaxf(v, 0.f);
}

// a *= b, or a += b with `add`, over n values.
__global__ void combine_kernel(float* a, const float* b, size_t n, bool add) {
    const size_t i = global_index();
    if (i < n) a[i] = add ? a[i] + b[i] : a[i] * b[i];
}

// x *= s over n values (T5's output scale).
__global__ void scale_kernel(float* x, float s, size_t n) {
    const size_t i = global_index();
    if (i < n) x[i] *= s;
}

// cap tanh(x / cap) over n values (Gemma's final soft-cap).
__global__ void soft_cap_kernel(float* x, float cap, size_t n) {
    const size_t i = global_index();
    if (i < n) x[i] = cap * tanhf(x[i] / cap);
}

// GPT-NeoX's fused per-head [q k v] (NH, 3, hs) of each row into [Q | K | V].
__global__ void reorder_per_head_kernel(const float* in, float* out, int NH, int hs, size_t count) {
    const size_t i = global_index();
    if (i >= count) return;
    const int width = 3 * NH * hs, column = static_cast<int>(i % width);
    const int h = column / (3 * hs), part = column / hs % 3, d = column % hs;
    out[i / width * width + part * NH * hs + h * hs + d] = in[i];
}

// RoPE on `heads` heads of hs at columns h * hs of each of `rows` rows
// (row stride `stride`), as apply_rope: row r at position positions[r], or
// with none at r % T (the naive view's flat blocks of T rows); cos and sin
// (positions, half) from position 0. Pairs (d, d + half), or (2d, 2d + 1)
// with `adjacent`.
__global__ void rope_kernel(float* x, int rows, int heads, int hs, size_t stride, const int* positions, int T,
                            const float* cos, const float* sin, int half, bool adjacent) {
    const size_t i = global_index();
    if (i >= static_cast<size_t>(rows) * heads * half) return;
    const int d = static_cast<int>(i % half), h = static_cast<int>(i / half % heads);
    const size_t r = i / half / heads;
    const int t = positions ? positions[r] : static_cast<int>(r % T);
    float* a = x + r * stride + static_cast<size_t>(h) * hs + (adjacent ? 2 * d : d);
    const int partner = adjacent ? 1 : half;
    const float c = cos[static_cast<size_t>(t) * half + d], s = sin[static_cast<size_t>(t) * half + d];
    const float u = a[0], v = a[partner];
    a[0] = u * c - v * s;
    a[partner] = v * c + u * s;
}

// One warp per score row (b, h, i) of att (B, NH, T, T), in place, as
// masked_softmax_row: the keys [begin, end) of the row (begins and ends (B,
// T)) scaled, soft-capped where `softcap` > 0 and turned into a softmax
// whose denominator holds the head's sink where `sinks` (NH) is given; the
// rest 0. An empty range leaves an all-zero row.
__global__ void score_softmax_kernel(float* att, const int* begins, const int* ends, int T, int NH, float scale,
                                     float softcap, const float* sinks, size_t rows) {
    const size_t row = global_index() / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;  // the whole warp: blockDim is a multiple of 32
    const int i = static_cast<int>(row % T), h = static_cast<int>(row / T % NH);
    const size_t b = row / T / NH;
    const int begin = begins[b * T + i], end = ends[b * T + i];
    float* r = att + row * T;
    const auto score = [&](int j) {
        const float s = r[j] * scale;
        return softcap > 0 ? softcap * tanhf(s / softcap) : s;
    };
    const float sink = sinks ? sinks[h] : -INFINITY;
    float largest = -INFINITY;
    for (int j = begin + lane; j < end; j += 32) largest = fmaxf(largest, score(j));
    largest = fmaxf(warp_max(largest), sink);
    float sum = 0;
    for (int j = begin + lane; j < end; j += 32) sum += expf(score(j) - largest);
    sum = warp_sum(sum) + (sinks ? expf(sink - largest) : 0.f);
    __syncwarp();
    for (int j = lane; j < T; j += 32) r[j] = j >= begin && j < end ? expf(score(j) - largest) / sum : 0.f;
}

// The output of head `head` of text b (y's rows b * T + r, columns head *
// hs; or in the naive view its (T, hs) block from head * T * hs of the
// text's floats) set to zero, or with `mean` to its mean over the text's
// `length` real positions; one thread per (b, d).
__global__ void knock_out_kernel(float* y, int B, int T, int Qw, int hs, int head, const int* lengths, bool mean,
                                 bool naive) {
    const size_t i = global_index();
    if (i >= static_cast<size_t>(B) * hs) return;
    const int b = static_cast<int>(i / hs), d = static_cast<int>(i % hs);
    const auto at = [&](int r) -> float& {
        return naive ? y[static_cast<size_t>(b) * T * Qw + (static_cast<size_t>(head) * T + r) * hs + d]
                     : y[(static_cast<size_t>(b) * T + r) * Qw + static_cast<size_t>(head) * hs + d];
    };
    double sum = 0;
    for (int r = 0; r < lengths[b] && mean; ++r) sum += at(r);
    const float value = mean ? static_cast<float>(sum / lengths[b]) : 0.f;
    for (int r = 0; r < T; ++r) at(r) = value;
}

// *flag = 1 where any of the n values is not finite.
__global__ void not_finite_kernel(const float* x, size_t n, int* flag) {
    const size_t i = global_index();
    if (i < n && !isfinite(x[i])) *flag = 1;
}

}  // namespace
}  // namespace headscope
