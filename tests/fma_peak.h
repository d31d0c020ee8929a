// The float32 FMA peak of this machine's OpenMP threads, measured by FMA
// chains in registers, that the benchmarks report their rates against.
#pragma once
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <ctime>

namespace headscope::test {

namespace fma_detail {

// The widest FMA this build targets.
#if defined(__AVX512F__)
using Vec = __m512;
constexpr int lanes = 16;
inline Vec splat(float v) { return _mm512_set1_ps(v); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
#elif defined(__FMA__)
using Vec = __m256;
constexpr int lanes = 8;
inline Vec splat(float v) { return _mm256_set1_ps(v); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
#else  // a portable build (HEADSCOPE_NATIVE=OFF): SSE, multiply then add
using Vec = __m128;
constexpr int lanes = 4;
inline Vec splat(float v) { return _mm_set1_ps(v); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
#endif
inline float lane_sum(Vec v) {
    float out[lanes];
    std::memcpy(out, &v, sizeof v);
    float sum = 0;
    for (float x : out) sum += x;
    return sum;
}

inline double thread_seconds() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

// Best of three: independent FMA chains on every thread, each timed by its
// own CPU time, so that other processes' load on a shared machine lowers
// the rates measured against this peak but not the peak itself.
inline double measure_gflops() {
    constexpr int chains = 12;
    constexpr long iterations = 50'000'000;
    double best = 0;
    for (int trial = 0; trial < 3; ++trial) {
        double gflops = 0;
#pragma omp parallel reduction(+ : gflops)
        {
            const double start = thread_seconds();
            Vec acc[chains];  // distinct chains, none after the clock read (`start` feeds them)
            for (int c = 0; c < chains; ++c) acc[c] = splat(1.f + 1e-3f * c + 0 * static_cast<float>(start));
            const Vec m = splat(0.9999999f), add = splat(1e-7f);
            for (long i = 0; i < iterations; ++i)
                for (auto& a : acc) a = fmadd(a, m, add);
            float sum = 0;
            for (auto& a : acc) sum += lane_sum(a);
            asm volatile("" : : "x"(sum) : "memory");  // the chains are used, before the clock is read again
            gflops += 2.0 * chains * lanes * iterations / (thread_seconds() - start) / 1e9;
        }
        best = std::max(best, gflops);
    }
    return best;
}

}  // namespace fma_detail

// GFLOP/s of all OpenMP threads together, measured once.
inline double fma_peak_gflops() {
    static const double peak = fma_detail::measure_gflops();
    return peak;
}

}  // namespace headscope::test
