// The forward's building blocks on the CPU, over flat row-major buffers,
// templated on the scalar: the engine runs them in float, the trainer's
// gradient check in double. Legend: T rows, C channels, hs head size.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <unsupported/Eigen/SpecialFunctions>  // erf, vectorised

namespace headscope::ops {

// Whether every one of n floats is finite (no NaN, no Inf).
inline bool all_finite(const float* data, size_t n) { return Eigen::Map<const Eigen::ArrayXf>(data, n).allFinite(); }

// The dot product of n pairs of floats in double (each product exact): 8 lanes of sums over
// the pairs, added in order at the end, where a scalar sum would wait on each addition (the backward's attention).
inline double dot_in_double(const float* a, const float* b, int n) {
    using Doubles = double __attribute__((vector_size(64)));
    using Floats = float __attribute__((vector_size(32)));
    Doubles sums{};
    int d = 0;
    for (; d + 8 <= n; d += 8) {
        Floats x, y;
        std::memcpy(&x, a + d, sizeof x), std::memcpy(&y, b + d, sizeof y);
        sums += __builtin_convertvector(x, Doubles) * __builtin_convertvector(y, Doubles);
    }
    double dot = 0;
    for (int lane = 0; lane < 8; ++lane) dot += sums[lane];
    for (; d < n; ++d) dot += static_cast<double>(a[d]) * b[d];
    return dot;
}

// log(sum(exp(logits))) over V, the max subtracted first.
inline float log_sum_exp(const float* logits, int V) {
    const Eigen::Map<const Eigen::ArrayXf> row(logits, V);
    const float max = row.maxCoeff();
    return max + std::log((row - max).exp().sum());
}

template <typename S>
using RowMatrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename S>
using MatrixMap = Eigen::Map<RowMatrix<S>>;
template <typename S>
using ConstMatrixMap = Eigen::Map<const RowMatrix<S>>;
template <typename S>
using StridedMap = Eigen::Map<RowMatrix<S>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename S>
using ConstStridedMap = Eigen::Map<const RowMatrix<S>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename S>
using ConstRowVectorMap = Eigen::Map<const Eigen::Matrix<S, 1, Eigen::Dynamic>>;

// out (rows, out_dim) = x (rows, in) W (in, out_dim) + b (out_dim): one batched product.
template <typename S>
void linear(const S* x, const S* w, const S* b, S* out, int rows, int in, int out_dim) {
    MatrixMap<S> y(out, rows, out_dim);
    y.noalias() = ConstMatrixMap<S>(x, rows, in) * ConstMatrixMap<S>(w, in, out_dim);
    y.rowwise() += ConstRowVectorMap<S>(b, out_dim);
}

// out = LayerNorm(x) per row of C, with GPT-2's biased variance.
template <typename S>
void layer_norm(const S* x, const S* w, const S* b, S* out, int rows, int C, S eps) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
        const S* xr = x + static_cast<size_t>(r) * C;
        S* yr = out + static_cast<size_t>(r) * C;
        S mean = 0;
        for (int c = 0; c < C; ++c) mean += xr[c];
        mean /= C;
        S var = 0;
        for (int c = 0; c < C; ++c) var += (xr[c] - mean) * (xr[c] - mean);
        const S inv_std = 1 / std::sqrt(var / C + eps);
        for (int c = 0; c < C; ++c) yr[c] = (xr[c] - mean) * inv_std * w[c] + (b ? b[c] : S(0));  // b null: no bias
    }
}

// out = RMSNorm(x) per row of C: x / sqrt(mean(x^2) + eps) * w (Llama's).
template <typename S>
void rms_norm(const S* x, const S* w, S* out, int rows, int C, S eps) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
        const S* xr = x + static_cast<size_t>(r) * C;
        S* yr = out + static_cast<size_t>(r) * C;
        S squares = 0;
        for (int c = 0; c < C; ++c) squares += xr[c] * xr[c];
        const S inv_rms = 1 / std::sqrt(squares / C + eps);
        for (int c = 0; c < C; ++c) yr[c] = w[c] * (xr[c] * inv_rms);
    }
}

// Applies `f` to Eigen array maps of x (n values) into out, in chunks across
// the OpenMP threads, so that Eigen vectorises the function (tanh, erf, exp)
// within each chunk. out may be x.
template <typename S, typename F>
void elementwise(const S* x, S* out, size_t n, F f) {
    using ConstArray = Eigen::Map<const Eigen::Array<S, Eigen::Dynamic, 1>>;
    using Array = Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>;
    constexpr size_t chunk = 4096;
    const long chunks = static_cast<long>((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; ++c) {
        const size_t begin = static_cast<size_t>(c) * chunk;
        const auto count = static_cast<Eigen::Index>(std::min(chunk, n - begin));
        Array(out + begin, count) = f(ConstArray(x + begin, count));
    }
}

// GELU, exact (erf): out may be x.
template <typename S>
void gelu_exact(const S* x, S* out, size_t n) {
    elementwise(x, out, n, [](const auto& v) { return S(0.5) * v * (1 + (v * S(M_SQRT1_2)).erf()); });
}

// SiLU (swish): out[i] = x[i] * sigmoid(x[i]); out may be x.
template <typename S>
void silu(const S* x, S* out, size_t n) {
    elementwise(x, out, n, [](const auto& v) { return v / (1 + (-v).exp()); });
}

// ReLU: out may be x.
template <typename S>
void relu(const S* x, S* out, size_t n) {
    elementwise(x, out, n, [](const auto& v) { return v.max(S(0)); });
}

// A gated MLP's product: gate[i] *= up[i], after its activation.
template <typename S>
void times(S* gate, const S* up, size_t n) {
    const auto size = static_cast<Eigen::Index>(n);
    Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>(gate, size) *=
        Eigen::Map<const Eigen::Array<S, Eigen::Dynamic, 1>>(up, size);
}

// A residual's sum: x[i] += y[i].
template <typename S>
void add(S* x, const S* y, size_t n) {
    const auto size = static_cast<Eigen::Index>(n);
    Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>(x, size) +=
        Eigen::Map<const Eigen::Array<S, Eigen::Dynamic, 1>>(y, size);
}

// GELU's tanh approximation's tanh, tanh(sqrt(2 / pi) (v + 0.044715 v^3)), of an array v: gelu() and
// gelu_slope() both read it.
template <typename S, typename Array>
auto gelu_tanh(const Array& v) {
    const S k = std::sqrt(S(2) / S(M_PI));
    return (k * (v + S(0.044715) * v * v * v)).tanh();
}

// GELU, tanh approximation: out[i] = gelu(x[i]); out may be x.
template <typename S>
void gelu(const S* x, S* out, size_t n) {
    elementwise(x, out, n, [](const auto& v) { return S(0.5) * v * (1 + gelu_tanh<S>(v)); });
}

// The derivatives of the MLPs' activations (the backward's): slope[i] = f'(x[i]); slope may not be x. (An
// array a lambda names is evaluated before it returns: its expression would refer to the lambda's local.)
template <typename S>
void gelu_slope(const S* x, S* slope, size_t n) {  // of gelu()
    const S k = std::sqrt(S(2) / S(M_PI));
    elementwise(x, slope, n, [k](const auto& v) {
        const auto th = gelu_tanh<S>(v).eval();
        return (S(0.5) * (1 + th) + S(0.5) * k * v * (1 - th * th) * (1 + S(3 * 0.044715) * v * v)).eval();
    });
}
template <typename S>
void gelu_exact_slope(const S* x, S* slope, size_t n) {  // of gelu_exact(): Phi(v) + v phi(v)
    const S density = S(1) / std::sqrt(S(2 * M_PI));
    elementwise(x, slope, n, [density](const auto& v) {
        return S(0.5) * (1 + (v * S(M_SQRT1_2)).erf()) + density * v * (S(-0.5) * v * v).exp();
    });
}
template <typename S>
void silu_slope(const S* x, S* slope, size_t n) {  // of silu(): s (1 + v (1 - s)), s the sigmoid
    elementwise(x, slope, n, [](const auto& v) {
        const auto s = (1 / (1 + (-v).exp())).eval();
        return (s * (1 + v * (1 - s))).eval();
    });
}
template <typename S>
void relu_slope(const S* x, S* slope, size_t n) {  // of relu(): 1 above 0, else 0
    elementwise(x, slope, n, [](const auto& v) { return (v > S(0)).template cast<S>(); });
}

// Scales a score row, soft-caps it where `softcap` is set (cap tanh(s /
// cap), Gemma 2's) and turns its entries [begin, end) into a softmax,
// zeroing the rest (masked keys). A finite `sink` (gpt-oss's learned logit of
// the head) joins the denominator, so the row sums to 1 less the sink's
// weight. An empty range leaves an all-zero row.
template <typename S>
void masked_softmax_row(S* row, int begin, int end, int T, S scale, S softcap = 0,
                        S sink = -std::numeric_limits<S>::infinity()) {
    if (begin < end) {
        Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>> kept(row + begin, end - begin);  // vectorised exp
        kept *= scale;
        if (softcap > 0) kept = (kept / softcap).tanh() * softcap;
        const S largest = std::max(kept.maxCoeff(), sink);
        kept = (kept - largest).exp();
        kept /= kept.sum() + std::exp(sink - largest);
    } else {
        end = begin = 0;
    }
    std::fill(row, row + begin, S(0));
    std::fill(row + end, row + T, S(0));
}

// Which keys query i sees: [begin, end).
struct KeyRange {
    int begin, end;
};

// One head's weights, `rows` queries (positions first_query on) over `keys`
// keys: att (rows, keys) = softmax(scale (Q K^T + bias)) with key j visible
// to query i for j in visible(i), a KeyRange. Q holds the queries' rows, K
// all the keys' rows, each with its own row stride, so the caller picks the
// split. `bias`, if not null, is T5's position bias centred on distance 0:
// bias[j - i] on key j's score for query i. `softcap` and `sink`:
// masked_softmax_row's. The one way a score row is built: the forward and
// the maps recomputed on demand (attention_maps.h) both call it.
template <typename S, typename Visible>
void attention_weights(const S* q, int q_stride, const S* k, int k_stride, S* att, int first_query, int rows, int keys,
                       int hs, S scale, Visible visible, const S* bias = nullptr, S softcap = 0,
                       S sink = -std::numeric_limits<S>::infinity()) {
    MatrixMap<S>(att, rows, keys).noalias() =
        ConstStridedMap<S>(q, rows, hs, Eigen::OuterStride<>(q_stride)) *
        ConstStridedMap<S>(k, keys, hs, Eigen::OuterStride<>(k_stride)).transpose();
    for (int r = 0; r < rows; ++r) {
        S* scores = att + static_cast<size_t>(r) * keys;
        const int i = first_query + r;
        if (bias)
            for (int j = 0; j < keys; ++j) scores[j] += bias[j - i];
        const KeyRange range = visible(i);
        masked_softmax_row(scores, range.begin, range.end, keys, scale, softcap, sink);
    }
}

// One head: attention_weights into att (rows, keys), then y (rows, hs) = att V,
// V holding all the keys' rows and y the queries', each with its row stride.
template <typename S, typename Visible>
void attention_head(const S* q, int q_stride, const S* k, int k_stride, const S* v, int v_stride, S* y, int y_stride,
                    S* att, int first_query, int rows, int keys, int hs, S scale, Visible visible,
                    const S* bias = nullptr, S softcap = 0, S sink = -std::numeric_limits<S>::infinity()) {
    attention_weights(q, q_stride, k, k_stride, att, first_query, rows, keys, hs, scale, visible, bias, softcap, sink);
    StridedMap<S>(y, rows, hs, Eigen::OuterStride<>(y_stride)).noalias() =
        MatrixMap<S>(att, rows, keys) * ConstStridedMap<S>(v, keys, hs, Eigen::OuterStride<>(v_stride));
}

}  // namespace headscope::ops
