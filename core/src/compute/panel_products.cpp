// The products of panel_products.h. W is walked a block of its stored rows
// (inputs) at a time, each block left to right in panels of panel_width
// columns; a panel is widened into an L1-sized buffer once (its rows a few
// KiB apart in W would share L1's sets) and every group of panel_rows rows
// then adds its products into sums kept in registers. The sums of all rows
// live in a thread's buffer between blocks. The small-product kernel reads
// W once per 8 rows; at 27 rows (a 16-token text and an 11-token one) this
// reads it once.
#include "panel_products.h"

#include <algorithm>
#include <cstring>

#include "../base/vector_lanes.h"
#include "headscope/base/aligned.h"

namespace headscope {

namespace {

// A panel's columns: panel_vectors registers wide; panel_rows x panel_vectors sums (24 of AVX-512's 32 registers, 12
// of AVX's 16) beside the panel's row and the broadcast input.
constexpr int panel_vectors = lanes == 16 ? 4 : 2, panel_width = panel_vectors * lanes, panel_rows = 6;
// Inputs in a panel: 128 x 64 float32 is 32 KiB, in L1 for every group of rows.
constexpr int64_t panel_inputs = 128;

// sums rows [0, R) (width apart) (+)= rows [0, R) of a (stride apart) times the panel's k rows, its first NV
// vectors, from 0 where `start`: x's rows against a panel of W, or W's stored rows against a turned panel of x.
template <int R, int NV>
void broadcast_sums(const float* a, int64_t stride, const float* panel, int64_t k, float* sums, int64_t width,
                    bool start) {
    Lanes acc[R][NV];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v)
            if (start)
                acc[r][v] = Lanes{};
            else
                std::memcpy(&acc[r][v], sums + r * width + v * lanes, sizeof(Lanes));
    for (int64_t i = 0; i < k; ++i) {
        Lanes p[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) std::memcpy(&p[v], panel + i * panel_width + v * lanes, sizeof(Lanes));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const float ar = a[r * stride + i];
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[r][v] += ar * p[v];
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) std::memcpy(sums + r * width + v * lanes, &acc[r][v], sizeof(Lanes));
}

// x's R rows against a panel of W.
template <int R>
void panel_sums(const float* x, int64_t in, const float* panel, int64_t kc, float* sums, int64_t width, bool start) {
    broadcast_sums<R, panel_vectors>(x, in, panel, kc, sums, width, start);
}

// Stored rows [k0, k0 + kc) of W at columns [c, c + n) widened into `panel` (zeros past n), the next panel's
// bytes asked for ahead (the hardware's prefetchers follow a few of W's rows, not kc of them).
void widen_panel(const Matrix& w, int64_t k0, int64_t kc, int64_t c, int64_t n, bool more, float* panel) {
    const size_t value = w.dtype == DType::F32 ? 4 : 2;
    for (int64_t i = 0; i < kc; ++i) {
        const std::byte* row = w.data + ((k0 + i) * w.out + c) * value;
        float* to = panel + i * panel_width;
        widen_to_f32(w.dtype, row, static_cast<size_t>(n), to);
        std::fill(to + n, to + panel_width, 0.f);
        if (more)
            for (size_t b = 0; b < panel_width * value; b += 64) __builtin_prefetch(row + panel_width * value + b);
    }
}

// W's stored rows a turned panel takes at once: turned_stored x panel_vectors sums in registers.
constexpr int turned_stored = lanes == 16 ? 6 : 3;

// sums (turned_stored, panel_width) = the turned_stored stored rows (in apart, widened) times the panel's NV vectors.
template <int NV>
void turned_sums(const float* stored, int64_t in, const float* panel, float* sums) {
    broadcast_sums<turned_stored, NV>(stored, in, panel, in, sums, panel_width, true);
}

}  // namespace

int turned_rows_max() { return panel_width; }

void turned_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                         int64_t first, int64_t last) {
    const int64_t in = w.in;
    thread_local AlignedVector<float> panel, stored;
    panel.assign(static_cast<size_t>(in) * panel_width, 0.f);  // (in, panel_width): x's rows as its columns
    for (int r = 0; r < rows; ++r)
        for (int64_t i = 0; i < in; ++i) panel[i * panel_width + r] = x[r * in + i];
    stored.assign(static_cast<size_t>(turned_stored) * in, 0.f);
    alignas(64) float sums[turned_stored * panel_width];
    const size_t value = w.dtype == DType::F32 ? 4 : 2;
    for (int64_t o = first; o < last; o += turned_stored) {
        const int n = static_cast<int>(std::min<int64_t>(turned_stored, last - o));
        for (int j = 0; j < n; ++j)
            widen_to_f32(w.dtype, w.data + (o + j) * in * value, static_cast<size_t>(in), stored.data() + j * in);
        switch ((rows + lanes - 1) / lanes) {
            case 1: turned_sums<1>(stored.data(), in, panel.data(), sums); break;
            case 2: turned_sums<2>(stored.data(), in, panel.data(), sums); break;
            case 3: turned_sums<3>(stored.data(), in, panel.data(), sums); break;
            default: turned_sums<panel_vectors>(stored.data(), in, panel.data(), sums); break;
        }
        for (int j = 0; j < n; ++j)
            for (int r = 0; r < rows; ++r) {
                float& y = out[r * ldo + o + j];
                y = accumulate ? y + sums[j * panel_width + r] : sums[j * panel_width + r];
            }
    }
}

void panel_rows_product(const float* x, int rows, const Matrix& w, float* out, int64_t ldo, bool accumulate,
                        int64_t first, int64_t last) {
    const int64_t in = w.in, cols = last - first;
    const int64_t width = (cols + panel_width - 1) / panel_width * panel_width;
    thread_local AlignedVector<float> panel(panel_inputs * panel_width), sums;
    sums.resize(static_cast<size_t>(rows) * width);
    for (int64_t k0 = 0; k0 < in; k0 += panel_inputs) {
        const int64_t kc = std::min(panel_inputs, in - k0);
        for (int64_t c = 0; c < cols; c += panel_width) {
            widen_panel(w, k0, kc, first + c, std::min<int64_t>(panel_width, cols - c), c + panel_width < cols,
                        panel.data());
            for (int r0 = 0; r0 < rows; r0 += panel_rows) {
                const float* xr = x + r0 * in + k0;
                float* s = sums.data() + r0 * width + c;
                switch (std::min(panel_rows, rows - r0)) {
                    case 1: panel_sums<1>(xr, in, panel.data(), kc, s, width, k0 == 0); break;
                    case 2: panel_sums<2>(xr, in, panel.data(), kc, s, width, k0 == 0); break;
                    case 3: panel_sums<3>(xr, in, panel.data(), kc, s, width, k0 == 0); break;
                    case 4: panel_sums<4>(xr, in, panel.data(), kc, s, width, k0 == 0); break;
                    case 5: panel_sums<5>(xr, in, panel.data(), kc, s, width, k0 == 0); break;
                    default: panel_sums<panel_rows>(xr, in, panel.data(), kc, s, width, k0 == 0); break;
                }
            }
        }
    }
    for (int r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            float& y = out[r * ldo + first + c];
            y = accumulate ? y + sums[r * width + c] : sums[r * width + c];
        }
}

}  // namespace headscope
