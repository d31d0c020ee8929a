// A prompt's products over Q8_0, Q4_K and Q6_K weights on AMX-BF16 tiles.
//
// The weights' codes are exact in BF16 (Q8_0's -128 to 127, Q4_K's 0 to 15,
// Q6_K's code - 32), and each activation is split into two BF16 parts,
// hi = bf16(x) and lo = bf16(x - hi), which hold x within 2^-16 of itself
// (BF16 keeps 8 significant bits: each part's rounding is within 2^-8). A tile product C = codes x (hi + lo)^T over one
// scale's group of inputs (32 values; Q6_K's 16) sums the exact products in float32; each output then adds C times its
// weight row's scale d s, and for Q4_K the minima's term -dmin m times x summed over the group (a rank-1 term, the sums
// computed once per row), in float32, group by group in input order. Those sums are of hi + lo, the x the tiles
// multiply: a weight d s q - dmin m near 0 then has its two terms' errors cancel as its value's do (with x's own sums,
// a Llama of random Q4_K blocks moved its maps by 5e-5).
//
// Layout: the weights are the tiles' A side (rows of W, a group's codes in
// a row: W as stored, widened to BF16 32 rows at a time and reused by
// every 16 rows of x), the activations the B side (pairs of inputs by 16
// rows of x: split and transposed once per call). C is then (rows of W,
// rows of x), added into float32 sums that are transposed into the output.
// x goes 128 rows by 2048 inputs at a time, so that its split parts (1 MiB)
// stay in the core's L2 while every 32 rows of W read them; an output's
// later inputs add to its earlier ones.
// Measured on a 2-core Xeon with AMX (docs/benchmarks.md): 128 rows over
// 2048 x 2048 Q8_0 took 3.5 ms of a thread's CPU where the float32 Gemm on
// blocks widened to float32 took 10.5.
#include "tile_products.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "../base/ggml_block_lanes.h"
#include "headscope/base/aligned.h"
#include "headscope/compute/matmul.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__) && defined(__AVX512BW__)
#define HEADSCOPE_TILES 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace headscope {
namespace {

#if HEADSCOPE_TILES

bool tile_type(DType dtype) { return dtype == DType::Q8_0 || dtype == DType::Q4_K || dtype == DType::Q6_K; }

// Whether the CPU has AMX-BF16 (cpuid leaf 7: AMX-BF16 EDX bit 22, AMX-TILE
// bit 24) and Linux lets this process use the tiles' 8 KiB of state
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, which Linux asks
// for before the first tile instruction); else why not.
std::string tile_refusal() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return "this CPU has no AMX-BF16 tiles";
    constexpr long req_xcomp_perm = 0x1023, xtiledata = 18;
    if (syscall(SYS_arch_prctl, req_xcomp_perm, xtiledata) != 0) return "Linux refused this process the AMX tiles";
    return "";
}

struct Availability {
    bool usable;
    std::string status;
};

const Availability& availability() {
    static const Availability a = [] {
        const std::string refusal = tile_refusal();
        if (!refusal.empty()) return Availability{false, "float32 products for quantized prompts: " + refusal};
        return Availability{true, "Q8_0, Q4_K and Q6_K prompts on AMX-BF16 tiles"};
    }();
    return a;
}

// The tiles: C for W's rows 0-15 and 16-31 (0 and 1, or 2 and 3: two pairs
// in turn), those rows' codes (4, 5) and x's two parts (6, 7); a group of g
// inputs in A's rows, g / 2 pairs of them in B's.
struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

TileConfig tile_config(int group) {
    TileConfig config;
    for (int t = 0; t < 8; ++t) {
        config.rows[t] = static_cast<uint8_t>(t >= 6 ? group / 2 : 16);
        config.colsb[t] = static_cast<uint16_t>(t == 4 || t == 5 ? 2 * group : 64);
    }
    return config;
}

int group_of(DType dtype) { return dtype == DType::Q6_K ? 16 : 32; }

constexpr int tile_rows = 16, w_rows = 32, x_rows = 128;
// Inputs at a time: x's split parts of 128 rows then take 1 MiB, half an L2
// here (with all of Llama's 8192, 4 MiB from L3 took 1.2 times the time).
constexpr int64_t x_inputs = 2048;

// 32 codes (signed bytes) as BF16 at `to`: exact, as every code is an
// integer of at most 8 bits.
void codes_to_bf16(const int8_t* codes, uint16_t* to) {
    const __m512 low =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes))));
    const __m512 high =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 16))));
    const __m512bh both = _mm512_cvtne2ps_pbh(high, low);
    std::memcpy(to, &both, 64);
}

// One stored row of W (`in` values) as BF16 codes, and each group's scale
// (and, for Q4_K, its minimum's factor dmin m, else 0), by the block
// layouts of ggml_block_lanes.h.
void decode_row(DType dtype, const uint8_t* b, int64_t in, uint16_t* codes, float* scales, float* mins) {
    using Bytes = uint8_t __attribute__((vector_size(32)));
    alignas(32) int8_t signed_codes[32];
    if (dtype == DType::Q8_0) {
        for (int64_t i = 0; i < in / 32; ++i, b += 34) {
            scales[i] = ggml_lanes::half_at(b);
            mins[i] = 0;
            codes_to_bf16(reinterpret_cast<const int8_t*>(b + 2), codes + 32 * i);
        }
    } else if (dtype == DType::Q4_K) {
        for (int64_t i = 0; i < in / 256; ++i, b += 144) {
            const float d = ggml_lanes::half_at(b), dmin = ggml_lanes::half_at(b + 2);
            const ggml_lanes::K4Scales k = ggml_lanes::k4_scales(b + 4);
            for (int pair = 0; pair < 4; ++pair) {
                Bytes two[2];
                ggml_lanes::q4_k_pair_codes(b, pair, 0, two);
                for (int side = 0; side < 2; ++side) {
                    const int g = 2 * pair + side;
                    scales[8 * i + g] = d * ggml_lanes::k4_field(k, g);
                    mins[8 * i + g] = dmin * ggml_lanes::k4_field(k, 8 + g);
                    std::memcpy(signed_codes, &two[side], 32);
                    codes_to_bf16(signed_codes, codes + 256 * i + 32 * g);
                }
            }
        }
    } else {  // Q6_K: 16 groups of 16, signed 8-bit scales
        for (int64_t i = 0; i < in / 256; ++i, b += 210) {
            const float d = ggml_lanes::half_at(b + 208);
            const auto* s = reinterpret_cast<const int8_t*>(b + 192);
            for (int g = 0; g < 16; ++g) scales[16 * i + g] = d * static_cast<float>(s[g]), mins[16 * i + g] = 0;
            for (int half = 0; half < 2; ++half) {
                Bytes runs[4];
                ggml_lanes::q6_k_run_codes(b, half, 0, runs);
                for (int run = 0; run < 4; ++run) {
                    const Bytes centred = runs[run] - 32;  // (code - 32) as a signed byte
                    std::memcpy(signed_codes, &centred, 32);
                    codes_to_bf16(signed_codes, codes + 256 * i + 128 * half + 32 * run);
                }
            }
        }
    }
}

// 16 BF16 values as float32: their bits the high half of a float32's.
__m512 widened(__m256i halves) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16)); }

// Rows [0, n) of x (n <= x_rows), `in` inputs, as the B tiles of its two
// parts: tile (g, t) holds group g of rows 16t to 16t + 15, pair p of row j
// at dword p * 16 + j; rows from n to the tile's end are zeros. And, for
// Q4_K, each group's sum of x, sums[g * padded + j].
struct SplitX {
    AlignedVector<uint32_t> hi, lo;
    AlignedVector<float> sums;
    int64_t padded = 0;  // rows, a whole number of tiles

    void split(const float* x, int n, int64_t ldx, int64_t in, int group, bool with_sums) {
        padded = (n + tile_rows - 1) / tile_rows * tile_rows;
        const int64_t tiles = padded / tile_rows, pairs = group / 2;
        hi.assign(static_cast<size_t>(padded * in / 2), 0);
        lo.assign(hi.size(), 0);
        if (with_sums) sums.assign(static_cast<size_t>(padded * (in / group)), 0.f);
        for (int j = 0; j < n; ++j) {
            const float* row = x + j * ldx;
            for (int64_t k = 0; k < in; k += 32) {
                const __m512 a = _mm512_loadu_ps(row + k), b = _mm512_loadu_ps(row + k + 16);
                const __m512bh h = _mm512_cvtne2ps_pbh(b, a);
                const __m512i bits = reinterpret_cast<__m512i>(h);
                const __m512 ha = widened(_mm512_castsi512_si256(bits)),
                             hb = widened(_mm512_extracti64x4_epi64(bits, 1));
                const __m512bh l = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb), _mm512_sub_ps(a, ha));
                alignas(64) uint32_t hp[16], lp[16];
                std::memcpy(hp, &h, 64);
                std::memcpy(lp, &l, 64);
                for (int q = 0; q < 16; ++q) {  // pair q of these 32 inputs
                    const int64_t pair = k / 2 + q, g = pair / pairs;
                    const int64_t at = ((g * tiles + j / tile_rows) * pairs + pair % pairs) * tile_rows + j % tile_rows;
                    hi[static_cast<size_t>(at)] = hp[q];
                    lo[static_cast<size_t>(at)] = lp[q];
                }
                if (with_sums) {  // Q4_K: these 32 inputs are a group; its sum of x as the tiles hold it, hi + lo
                    const __m512i low = reinterpret_cast<__m512i>(l);
                    const __m512 la = widened(_mm512_castsi512_si256(low)),
                                 lb = widened(_mm512_extracti64x4_epi64(low, 1));
                    sums[static_cast<size_t>(k / 32 * padded + j)] =
                        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(ha, la), _mm512_add_ps(hb, lb)));
                }
            }
        }
    }
};

// Up to 32 rows of W from `o` (the rest zeros), widened for every group.
struct WideRows {
    AlignedVector<uint16_t> codes;      // (32, in)
    AlignedVector<float> scales, mins;  // (32, groups)

    void decode(const Matrix& w, int64_t o, int64_t count, int64_t k0, int64_t in, int group) {
        const int64_t groups = in / group;
        codes.resize(static_cast<size_t>(w_rows * in));
        scales.resize(static_cast<size_t>(w_rows * groups));
        mins.resize(scales.size());
        std::fill(codes.begin() + count * in, codes.end(), 0);  // rows past W's end: zeros
        std::fill(scales.begin() + count * groups, scales.end(), 0.f);
        std::fill(mins.begin() + count * groups, mins.end(), 0.f);
        for (int64_t r = 0; r < count; ++r)
            decode_row(w.dtype,
                       reinterpret_cast<const uint8_t*>(w.data + dtype_row_bytes(w.dtype, (o + r) * w.in + k0)), in,
                       codes.data() + r * in, scales.data() + r * groups, mins.data() + r * groups);
    }
};

// The tile products of one group g and rows 16t to 16t + 15 of x into C
// tiles c0 (W's rows 0-15) and c1 (16-31), stored to `c`: x's two parts
// into the same tiles, each group's codes in tiles 4 and 5, x's parts in 6
// and 7. (Tiles are named by literal numbers in the instructions: a macro.)
#define HEADSCOPE_TILE_GROUP(c0, c1)        \
    do {                                    \
        _tile_zero(c0);                     \
        _tile_zero(c1);                     \
        _tile_loadd(6, hi, 64);             \
        _tile_loadd(7, lo, 64);             \
        _tile_dpbf16ps(c0, 4, 6);           \
        _tile_dpbf16ps(c1, 5, 6);           \
        _tile_dpbf16ps(c0, 4, 7);           \
        _tile_dpbf16ps(c1, 5, 7);           \
        _tile_stored(c0, c[0], 64);         \
        _tile_stored(c1, c[tile_rows], 64); \
    } while (false)

// sums (32 rows of W, 16 rows of x) += c's sums times each row's scale,
// less (Q4_K) its minimum's factor times x's sums over the group, xsum.
template <bool with_min>
void add_group(const float (&c)[w_rows][tile_rows], const float* scale, const float* min, int64_t groups, __m512 xsum,
               float* sums, int64_t ld) {
    for (int r = 0; r < w_rows; ++r) {
        float* s = sums + r * ld;
        __m512 v = _mm512_fmadd_ps(_mm512_load_ps(c[r]), _mm512_set1_ps(scale[r * groups]), _mm512_loadu_ps(s));
        if constexpr (with_min) v = _mm512_fnmadd_ps(xsum, _mm512_set1_ps(min[r * groups]), v);
        _mm512_storeu_ps(s, v);
    }
}

// sums (32, x.padded) += W's 32 rows times x's rows, group by group. The
// tiles alternate between two pairs, and each 16 rows' sums are added
// while the next 16 rows' tile products run.
template <bool with_min>
void tile_sums(const WideRows& w, const SplitX& x, int64_t in, int group, float* sums) {
    const int64_t groups = in / group, padded = x.padded, tiles = padded / tile_rows;
    const int64_t tile_dwords = group / 2 * tile_rows, stride = in * 2;
    alignas(64) float pending[2][w_rows][tile_rows];
    for (int64_t g = 0; g < groups; ++g) {
        _tile_loadd(4, w.codes.data() + g * group, stride);
        _tile_loadd(5, w.codes.data() + tile_rows * in + g * group, stride);
        const float *scale = w.scales.data() + g, *min = w.mins.data() + g;
        const auto add = [&](int64_t t) {
            const __m512 xsum =
                with_min ? _mm512_loadu_ps(x.sums.data() + g * padded + t * tile_rows) : _mm512_setzero_ps();
            add_group<with_min>(pending[t % 2], scale, min, groups, xsum, sums + t * tile_rows, padded);
        };
        for (int64_t t = 0; t < tiles; ++t) {
            const uint32_t* hi = x.hi.data() + (g * tiles + t) * tile_dwords;
            const uint32_t* lo = x.lo.data() + (g * tiles + t) * tile_dwords;
            auto& c = pending[t % 2];
            if (t % 2 == 0)
                HEADSCOPE_TILE_GROUP(0, 1);
            else
                HEADSCOPE_TILE_GROUP(2, 3);
            if (t > 0) add(t - 1);
        }
        add(tiles - 1);
    }
}

#endif

}  // namespace

#if HEADSCOPE_TILES

bool tile_products(DType dtype) { return tile_type(dtype) && availability().usable; }

const std::string& prompt_products_status() { return availability().status; }

void tile_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                       int64_t first, int64_t last) {
    const int group = group_of(w.dtype);
    const TileConfig config = tile_config(group);
    _tile_loadconfig(&config);
    thread_local SplitX split;
    thread_local WideRows wide;
    thread_local AlignedVector<float> sums;
    for (int r0 = 0; r0 < rows; r0 += x_rows) {
        const int n = std::min(x_rows, rows - r0);
        for (int64_t k0 = 0; k0 < w.in; k0 += x_inputs) {
            const int64_t in = std::min(x_inputs, w.in - k0);
            split.split(x + r0 * w.in + k0, n, w.in, in, group, w.dtype == DType::Q4_K);
            for (int64_t o = first; o < last; o += w_rows) {
                const int64_t count = std::min<int64_t>(w_rows, last - o);
                wide.decode(w, o, count, k0, in, group);
                sums.assign(static_cast<size_t>(w_rows * split.padded), 0.f);
                if (w.dtype == DType::Q4_K)
                    tile_sums<true>(wide, split, in, group, sums.data());
                else
                    tile_sums<false>(wide, split, in, group, sums.data());
                const bool add = accumulate || k0 > 0;  // later inputs add to the earlier ones
                for (int j = 0; j < n; ++j)
                    for (int64_t r = 0; r < count; ++r) {
                        float& y = out[(r0 + j) * ldo + o + r];
                        const float v = sums[static_cast<size_t>(r * split.padded + j)];
                        y = add ? y + v : v;
                    }
            }
        }
    }
    _tile_release();
}

#else

bool tile_products(DType) { return false; }

const std::string& prompt_products_status() {
    static const std::string status = "float32 products for quantized prompts: built without AMX-BF16 and AVX-512 BF16";
    return status;
}

void tile_rows_product(const float*, int, const Matrix&, float*, int64_t, bool, int64_t, int64_t) {}

#endif

}  // namespace headscope
