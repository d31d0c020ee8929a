// What the benchmark programs share: random token ids, the GFLOP/s and
// peak-fraction counters, this machine's read bandwidth and the floor of
// reading a model's weights once.
#pragma once
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fma_peak.h"

namespace headscope::test {

// n token ids drawn uniformly from a vocabulary of V.
inline std::vector<int32_t> random_ids(int n, int V, std::mt19937& rng) {
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % V);
    return ids;
}

// The resident set now, from /proc (ru_maxrss would count a file writer's
// and earlier models' peaks too).
inline double resident_mib() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.starts_with("VmRSS:")) return std::stod(line.substr(6)) / 1024.0;
    return 0;
}

inline double peak_rss_mib() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024.0;
}

inline void report(benchmark::State& state, double flops) {
    state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["peak_fraction"] =
        benchmark::Counter(flops / 1e9 / fma_peak_gflops(), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["peak_rss_MiB"] = peak_rss_mib();
    state.counters["fma_peak_GFLOP/s"] = fma_peak_gflops();
}

// This machine's memory read bandwidth in GB/s: the best of five sums of a
// 512 MiB array, far larger than any cache, on every core. Each thread keeps
// 64 independent partial sums (four vector registers) so that memory, not the
// latency of one chain of additions, bounds the loop.
inline double read_bandwidth_gbs() {
    static const double gbs = [] {
        constexpr long width = 64;
        std::vector<float> data(size_t(128) << 20, 1.f);
        const long blocks = static_cast<long>(data.size()) / width;
        double best = 0;
        for (int pass = 0; pass < 5; ++pass) {
            const auto start = std::chrono::steady_clock::now();
            double total = 0;
#pragma omp parallel reduction(+ : total)
            {
                float partial[width] = {};
#pragma omp for schedule(static)
                for (long b = 0; b < blocks; ++b)
#pragma omp simd
                    for (long l = 0; l < width; ++l) partial[l] += data[b * width + l];
                for (float p : partial) total += p;
            }
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            benchmark::DoNotOptimize(total);
            best = std::max(best, data.size() * sizeof(float) / seconds / 1e9);
        }
        return best;
    }();
    return gbs;
}

// The floor of a step that reads every weight once: the checkpoint's bytes at
// the measured read bandwidth.
inline void report_floor(benchmark::State& state, double bytes, double steps_per_iteration) {
    const double floor_ms = bytes / (read_bandwidth_gbs() * 1e9) * 1e3;
    state.counters["read_GB/s"] = read_bandwidth_gbs();
    state.counters["floor_ms"] = floor_ms;
    // ms per step over the floor: the iteration's seconds * 1e3 / steps / floor_ms.
    state.counters["x_floor"] =
        benchmark::Counter(steps_per_iteration * floor_ms / 1e3,
                           benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace headscope::test
