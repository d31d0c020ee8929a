// The forward's products (see matmul.h). Each OpenMP thread takes an even
// share of the output columns, so no sum is ever split between threads and
// the same inputs give the same bits on every run.
// Above own_kernel_rows rows, OpenBLAS's sgemm on each thread's columns
// (16-bit weights widened block by block into the thread's scratch first),
// or Eigen's where OpenBLAS runs kernels older than the CPU (float_gemm);
// at most small_rows rows (a keystroke, a generated token), our kernel,
// which widens each stored value in registers as it uses it: there the
// bytes read decide; between them (a short text), our kernels reading W
// once for all the rows, where OpenBLAS packs W for every product (a
// block-quantized weight's own kernels are in quantized_products.cpp).
// docs/benchmarks.md has the figures that chose these.
#include "headscope/compute/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <string>
#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "../base/vector_lanes.h"
#include "headscope/base/aligned.h"
#include "headscope/compute/matmul_detail.h"
#include "panel_products.h"
#include "quantized_products.h"
#include "tile_products.h"

namespace headscope {
namespace {

using matmul_detail::Gemm;

// One call's product; each thread computes its columns [first, last).
struct Product {
    const float* x;
    int rows;
    const Matrix& w;
    float* out;
    int64_t ldo;
    bool accumulate;
};

void store(float& y, float value, bool accumulate) { y = accumulate ? y + value : value; }

// ---- At most small_rows rows: our kernel ----

// v = `lanes` consecutive stored elements of dtype D at p (any alignment) as
// float32. (Lanes go by reference: by value, GCC warns that their ABI
// depends on the vector extensions the build may use.)
template <DType D>
void load(const std::byte* p, Lanes& v) {
    if constexpr (D == DType::F32) {
        std::memcpy(&v, p, sizeof v);
    } else if constexpr (D == DType::BF16) {  // the high half of a float32
        // Widened by one instruction where the build may use it (GCC's own
        // conversion of the vector type takes four on AVX2); the masked form
        // on AVX-512, whose unmasked one trips GCC 12's -Wmaybe-uninitialized.
        using Words = uint32_t __attribute__((vector_size(lanes * 4)));
        Words words;
#if defined(__AVX512F__)
        const __m512i wide =
            _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        std::memcpy(&words, &wide, sizeof words);
#elif defined(__AVX2__)
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        std::memcpy(&words, &wide, sizeof words);
#else
        using Halves = uint16_t __attribute__((vector_size(lanes * 2)));
        Halves halves;
        std::memcpy(&halves, p, sizeof halves);
        words = __builtin_convertvector(halves, Words);
#endif
        words <<= 16;
        std::memcpy(&v, &words, sizeof v);
    } else {  // F16: the CPU's conversion where the build may use it, else safetensors' (both exact)
#if defined(__F16C__)
        static_assert(lanes % 8 == 0, "F16C implies AVX: lanes of 8 or 16");
        const auto* halves = reinterpret_cast<const __m128i*>(p);
        for (int part = 0; part < lanes / 8; ++part) {
            const __m256 eight = _mm256_cvtph_ps(_mm_loadu_si128(halves + part));
            std::memcpy(reinterpret_cast<std::byte*>(&v) + part * sizeof eight, &eight, sizeof eight);
        }
#else
        float f[lanes];
        widen_to_f32(D, p, lanes, f);
        std::memcpy(&v, f, sizeof v);
#endif
    }
}

// The first n < lanes elements, the other lanes zero.
void load_partial(DType dtype, const std::byte* p, int64_t n, Lanes& v) {
    float f[lanes] = {};
    widen_to_f32(dtype, p, static_cast<size_t>(n), f);
    std::memcpy(&v, f, sizeof v);
}

// How many groups of stored rows ahead the kernels ask for the weights: the
// hardware's prefetchers miss the start of each short stretch a thread reads,
// and measured on the Zen 3 one step of generation took 40% longer without
// this, 2 groups ahead within noise of 1, 4 and 8.
constexpr int prefetch_groups = 2;

const std::byte* bytes_of(const float* p) { return reinterpret_cast<const std::byte*>(p); }

// out rows [0, R) (+)= x rows [0, R) W on columns [first, last), W stored
// (out, in): each value the dot product of an x row with a stored row, held
// in the lanes that are added up, in order, at the end; G stored rows at a
// time, so that each x load serves G of them.
template <DType D, int R, int G>
void dot_rows(const Product& p, const float* x, float* out, int64_t first, int64_t last) {
    const int64_t in = p.w.in, full = in - in % lanes;
    constexpr size_t bytes = D == DType::F32 ? 4 : 2;
    for (int64_t o = first; o < last; o += G) {
        const std::byte* rows = p.w.data + o * in * bytes;
        Lanes acc[R][G] = {};
        for (int64_t i = 0; i < full; i += lanes) {
            Lanes w[G];
#pragma GCC unroll 8
            for (int g = 0; g < G; ++g) {
                load<D>(rows + (g * in + i) * bytes, w[g]);
                if (i * bytes % 64 == 0) __builtin_prefetch(rows + ((prefetch_groups * G + g) * in + i) * bytes);
            }
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                Lanes xr;
                load<DType::F32>(bytes_of(x + r * in + i), xr);
#pragma GCC unroll 8
                for (int g = 0; g < G; ++g) acc[r][g] += xr * w[g];
            }
        }
        if (full < in) {
            for (int g = 0; g < G; ++g) {
                Lanes w, xr;
                load_partial(D, rows + (g * in + full) * bytes, in - full, w);
                for (int r = 0; r < R; ++r) {
                    load_partial(DType::F32, bytes_of(x + r * in + full), in - full, xr);
                    acc[r][g] += xr * w;
                }
            }
        }
        for (int r = 0; r < R; ++r)
            for (int g = 0; g < G; ++g) {
                float sum = 0;
                for (int l = 0; l < lanes; ++l) sum += acc[r][g][l];
                store(out[r * p.ldo + o + g], sum, p.accumulate);
            }
    }
}

// The same for W stored (in, out), whose columns are the outputs: out's
// columns in tiles whose sums stay in L1, each tile walking W's rows in
// order, rows_at_once of them together so that every row is read as a
// sequential stretch and each pass over the sums serves several rows. Every
// output is its inputs' sum in order, as in dot_rows.
template <DType D, int R>
void axpy_rows(const Product& p, const float* x, float* out, int64_t first, int64_t last) {
    constexpr int64_t tile_cols = 512;
    constexpr int rows_at_once = 8;
    const int64_t in = p.w.in;
    constexpr size_t bytes = D == DType::F32 ? 4 : 2;
    alignas(64) float sums[R][tile_cols];
    for (int64_t t = first; t < last; t += tile_cols) {
        const int64_t cols = std::min(tile_cols, last - t);
        // Whole lanes: a tile's partial last chunk reads and writes them all.
        const int64_t lanes_used = (cols + lanes - 1) / lanes * lanes;
        for (int r = 0; r < R; ++r) std::fill(sums[r], sums[r] + lanes_used, 0.f);
        for (int64_t i0 = 0; i0 < in; i0 += rows_at_once) {
            const int64_t rows = std::min<int64_t>(rows_at_once, in - i0);
            for (int64_t c = 0; c < cols; c += lanes) {
                const int64_t n = std::min<int64_t>(lanes, cols - c);
                Lanes acc[R];
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) std::memcpy(&acc[r], &sums[r][c], sizeof(Lanes));
                for (int64_t i = i0; i < i0 + rows; ++i) {
                    const std::byte* at = p.w.data + (i * p.w.out + t + c) * bytes;
                    Lanes w;
                    if (c * bytes % 64 == 0) __builtin_prefetch(at + prefetch_groups * rows_at_once * p.w.out * bytes);
                    if (n == lanes)
                        load<D>(at, w);
                    else
                        load_partial(D, at, n, w);
#pragma GCC unroll 8
                    for (int r = 0; r < R; ++r) acc[r] += x[r * in + i] * w;
                }
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) std::memcpy(&sums[r][c], &acc[r], sizeof(Lanes));
            }
        }
        for (int r = 0; r < R; ++r)
            for (int64_t c = 0; c < cols; ++c) store(out[r * p.ldo + t + c], sums[r][c], p.accumulate);
    }
}

template <DType D, int R>
void product_rows(const Product& p, const float* x, float* out, int64_t first, int64_t last) {
    if (p.w.out_by_in) {
        constexpr int G = R <= 2 ? 4 : 2 * R <= sum_registers ? 2 : 1;
        const int64_t whole = last - (last - first) % G;
        dot_rows<D, R, G>(p, x, out, first, whole);
        dot_rows<D, R, 1>(p, x, out, whole, last);
    } else {
        axpy_rows<D, R>(p, x, out, first, last);
    }
}

// dot_rows on stored rows [first, whole) G at a time, [whole, last) one at a time.
template <DType D, int R, int G>
void chunk_dots(const Product& p, const float* x, float* out, int64_t first, int64_t whole, int64_t last) {
    dot_rows<D, R, G>(p, x, out, first, whole);
    dot_rows<D, R, 1>(p, x, out, whole, last);
}

// W stored (out, in): each chunk of stored_chunk stored rows (in L2 after
// the first rows read it) for every `rows_at_once` rows in turn, so that W
// is read from memory once.
template <DType D>
void chunked_dots(const Product& p, int64_t first, int64_t last) {
    constexpr int64_t stored_chunk = 16;
    constexpr int rows_at_once = lanes == 16 ? 6 : 4, sums = lanes == 16 ? 4 : 2;
    for (int64_t o = first; o < last; o += stored_chunk)
        for (int r0 = 0; r0 < p.rows; r0 += rows_at_once) {
            const float* x = p.x + static_cast<int64_t>(r0) * p.w.in;
            float* out = p.out + r0 * p.ldo;
            const int64_t end = std::min(last, o + stored_chunk), whole = end - (end - o) % sums;
            switch (std::min(rows_at_once, p.rows - r0)) {
                case 1: chunk_dots<D, 1, sums>(p, x, out, o, whole, end); break;
                case 2: chunk_dots<D, 2, sums>(p, x, out, o, whole, end); break;
                case 3: chunk_dots<D, 3, sums>(p, x, out, o, whole, end); break;
                case 4: chunk_dots<D, 4, sums>(p, x, out, o, whole, end); break;
                case 5: chunk_dots<D, 5, sums>(p, x, out, o, whole, end); break;
                default: chunk_dots<D, rows_at_once, sums>(p, x, out, o, whole, end); break;
            }
        }
}

// Up to 8 rows (a keystroke, a generated token): one group, reading the
// thread's part of W once. More (a short text's products) read W once for
// them all: stored (in, out), panel_rows_product; stored (out, in), up to
// 16 rows chunked_dots, and up to turned_rows_max() turned_rows_product.
// Each output's sum is the same whatever the rows.
template <DType D>
void small_product(const Product& p, int64_t first, int64_t last) {
    constexpr int group = 8;
    if (p.rows > group && !p.w.out_by_in)
        return panel_rows_product(p.x, p.rows, p.w, p.out, p.ldo, p.accumulate, first, last);
    if (p.rows > 2 * group && p.rows <= turned_rows_max())
        return turned_rows_product(p.x, p.rows, p.w, p.out, p.ldo, p.accumulate, first, last);
    if (p.rows > group) return chunked_dots<D>(p, first, last);
    switch (p.rows) {
        case 1: product_rows<D, 1>(p, p.x, p.out, first, last); break;
        case 2: product_rows<D, 2>(p, p.x, p.out, first, last); break;
        case 3: product_rows<D, 3>(p, p.x, p.out, first, last); break;
        case 4: product_rows<D, 4>(p, p.x, p.out, first, last); break;
        case 5: product_rows<D, 5>(p, p.x, p.out, first, last); break;
        case 6: product_rows<D, 6>(p, p.x, p.out, first, last); break;
        case 7: product_rows<D, 7>(p, p.x, p.out, first, last); break;
        default: product_rows<D, 8>(p, p.x, p.out, first, last); break;
    }
}

// ---- More rows: a Gemm ----

// 16-bit blocks widened for the Gemm: 256 columns by 512 inputs, 512 KiB of
// float32 per thread, half a core's L2 here, the rest left to the sgemm's
// packed panels. Measured against 128-512 columns by 512-8192 inputs: 61-64%
// of the peak became 69% on Llama's shapes, the others within noise.
constexpr int64_t block_cols = 256, block_inputs = 512;

void gemm_product(Gemm gemm, const Product& p, int64_t first, int64_t last) {
    const Matrix& w = p.w;
    const int rows = p.rows, in = static_cast<int>(w.in), ldo = static_cast<int>(p.ldo);
    if (w.dtype == DType::F32) {  // straight from the mapped file
        const auto* s = reinterpret_cast<const float*>(w.data);
        const int cols = static_cast<int>(last - first);
        const float beta = p.accumulate ? 1.f : 0.f;
        if (w.out_by_in)
            gemm(true, rows, cols, in, p.x, in, s + first * in, in, beta, p.out + first, ldo);
        else
            gemm(false, rows, cols, in, p.x, in, s + first, static_cast<int>(w.out), beta, p.out + first, ldo);
        return;
    }
    thread_local AlignedVector<float> scratch(block_cols * block_inputs);
    // Offsets as bytes; a quantized W here is stored (out, in), and
    // block_inputs is a whole number of its blocks.
    const auto at = [&](int64_t value) { return w.data + dtype_row_bytes(w.dtype, value); };
    for (int64_t c = first; c < last; c += block_cols) {
        const int64_t cols = std::min(block_cols, last - c);
        for (int64_t k = 0; k < in; k += block_inputs) {
            const int64_t n = std::min(block_inputs, in - k);
            if (w.out_by_in) {  // (cols, n): a stretch of each stored row
                for (int64_t j = 0; j < cols; ++j)
                    widen_to_f32(w.dtype, at((c + j) * in + k), n, scratch.data() + j * n);
            } else {  // (n, cols)
                for (int64_t i = 0; i < n; ++i)
                    widen_to_f32(w.dtype, at((k + i) * w.out + c), cols, scratch.data() + i * cols);
            }
            const float beta = p.accumulate || k > 0 ? 1.f : 0.f;  // later inputs add to the earlier ones
            gemm(w.out_by_in, rows, static_cast<int>(cols), static_cast<int>(n), p.x + k, in, scratch.data(),
                 static_cast<int>(w.out_by_in ? n : cols), beta, p.out + c, ldo);
        }
    }
}

// Columns [first, last) of the product, then the bias.
void product_columns(Gemm gemm, int small_rows_max, const Product& p, const float* bias, int64_t first, int64_t last) {
    if (p.w.in == 0) {  // an empty sum
        if (!p.accumulate)
            for (int r = 0; r < p.rows; ++r) std::fill(p.out + r * p.ldo + first, p.out + r * p.ldo + last, 0.f);
    } else if (quantized(p.w.dtype) && !p.w.out_by_in) {
        quantized_columns_product(p.x, p.rows, p.w, p.out, p.ldo, p.accumulate, first, last);
    } else if (p.rows > small_rows_max && tile_products(p.w.dtype)) {
        tile_rows_product(p.x, p.rows, p.w, p.out, p.ldo, p.accumulate, first, last);
    } else if (p.rows > small_rows_max) {
        gemm_product(gemm, p, first, last);
    } else {
        switch (p.w.dtype) {
            case DType::F32: small_product<DType::F32>(p, first, last); break;
            case DType::F16: small_product<DType::F16>(p, first, last); break;
            case DType::BF16: small_product<DType::BF16>(p, first, last); break;
            default: quantized_rows_product(p.x, p.rows, p.w, p.out, p.ldo, p.accumulate, first, last); break;
        }
    }
    if (bias)
        for (int r = 0; r < p.rows; ++r)
            for (int64_t c = first; c < last; ++c) p.out[r * p.ldo + c] += bias[c];
}

// OpenBLAS picks its kernels by the CPU's model number, and on a model it
// does not know falls back to old ones: 0.3.21 (Debian 12's) runs its
// Prescott kernels (SSE3, no FMA) on Intel's family 6 model 207 (Emerald
// Rapids). There Eigen's products, compiled for the CPU, take their place
// (docs/benchmarks.md has the figures).
struct FloatProducts {
    bool eigen = false;
    std::string status;  // float_products_status()
};
const FloatProducts& float_products() {
    static const FloatProducts products = [] {
        const std::string core = openblas_get_corename();
        bool old_core = false;  // kernels without FMA
        for (const char* name : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge",
                                 "Katmai", "Coppermine", "Northwood", "Banias", "Opteron", "Barcelona"})
            old_core = old_core || core == name;
#if defined(__x86_64__)
        const bool fma_cpu = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
        const bool fma_cpu = false;
#endif
        if (old_core && fma_cpu)
            return FloatProducts{true, "Eigen's: OpenBLAS chose its " + core +
                                           " kernels, without FMA, for this CPU, which has AVX2 and FMA"};
        return FloatProducts{false, "OpenBLAS's " + core + " kernels"};
    }();
    return products;
}

}  // namespace

namespace matmul_detail {

void openblas_gemm(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
                   float beta, float* out, int ldo) {
    // Each of the engine's OpenMP threads calls this on its own columns.
    [[maybe_unused]] static const bool single_threaded = (openblas_set_num_threads(1), true);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, rows, cols, in, 1.f, x, ldx, b,
                ldb, beta, out, ldo);
}

void eigen_gemm(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
                float beta, float* out, int ldo) {
    using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using ConstMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
    Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>> y(out, rows, cols, Eigen::OuterStride<>(ldo));
    const ConstMap X(x, rows, in, Eigen::OuterStride<>(ldx));
    if (beta == 0) y.setZero();
    if (b_transposed)
        y.noalias() += X * ConstMap(b, cols, in, Eigen::OuterStride<>(ldb)).transpose();
    else
        y.noalias() += X * ConstMap(b, in, cols, Eigen::OuterStride<>(ldb));
}

void float_gemm(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
                float beta, float* out, int ldo) {
    static const bool eigen = float_products().eigen;
    (eigen ? eigen_gemm : openblas_gemm)(b_transposed, rows, cols, in, x, ldx, b, ldb, beta, out, ldo);
}

void linear_with(Gemm gemm, int small_rows_max, const float* x, int rows, const Matrix& w, const float* bias,
                 float* out, int64_t ldo, bool accumulate) {
    const Product p{x, rows, w, out, ldo, accumulate};
#pragma omp parallel
    {
        // Shares rounded to whole lanes; a thread past the end has none.
        const int64_t threads = omp_get_num_threads(), share = (w.out + threads - 1) / threads;
        const int64_t per = (share + lanes - 1) / lanes * lanes;
        const int64_t first = std::min(w.out, omp_get_thread_num() * per), last = std::min(w.out, first + per);
        if (rows > 0 && first < last) product_columns(gemm, small_rows_max, p, bias, first, last);
    }
}

}  // namespace matmul_detail

const std::string& float_products_status() { return float_products().status; }

int matmul_detail::own_kernel_rows(const Matrix& w) { return quantized(w.dtype) || w.out_by_in ? small_rows : 256; }

void linear(const float* x, int rows, const Matrix& w, const float* bias, float* out, int64_t ldo, bool accumulate) {
    matmul_detail::linear_with(matmul_detail::float_gemm, matmul_detail::own_kernel_rows(w), x, rows, w, bias, out, ldo,
                               accumulate);
}

void stored_row(const Matrix& m, int64_t row, float* out) {
    const int64_t width = m.out_by_in ? m.in : m.out;
    widen_to_f32(m.dtype, m.data + dtype_row_bytes(m.dtype, row * width), static_cast<size_t>(width), out);
}

void input_rows(const Matrix& m, int64_t first, int64_t count, float* out) {
    if (!m.out_by_in) {
        widen_to_f32(m.dtype, m.data + dtype_row_bytes(m.dtype, first * m.out), static_cast<size_t>(count * m.out),
                     out);
        return;
    }
    // The stored row o holds W's column o: its part [first, first + count),
    // or all of it for a quantized row, whose blocks widen together.
    const int64_t from = quantized(m.dtype) ? 0 : first, width = quantized(m.dtype) ? m.in : count;
    std::vector<float> part(static_cast<size_t>(width));
    for (int64_t o = 0; o < m.out; ++o) {
        widen_to_f32(m.dtype, m.data + dtype_row_bytes(m.dtype, o * m.in + from), part.size(), part.data());
        for (int64_t i = 0; i < count; ++i) out[i * m.out + o] = part[static_cast<size_t>(first - from + i)];
    }
}

std::vector<float> to_floats(const Matrix& m) {
    std::vector<float> stored(static_cast<size_t>(m.in * m.out));
    widen_to_f32(m.dtype, m.data, stored.size(), stored.data());
    if (!m.out_by_in) return stored;
    std::vector<float> math(stored.size());  // (in, out) from the stored (out, in)
    for (int64_t o = 0; o < m.out; ++o)
        for (int64_t i = 0; i < m.in; ++i) math[i * m.out + o] = stored[o * m.in + i];
    return math;
}

}  // namespace headscope
