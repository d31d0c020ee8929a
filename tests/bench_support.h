// What the benchmark programs share: random token ids, the GFLOP/s and
// peak-fraction counters, this machine's read bandwidth and the floor of
// reading a model's weights once.
#pragma once
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
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

// floor_ms as the floor of a step, and the step's time over it (x_floor).
inline void report_floor_ms(benchmark::State& state, double floor_ms, double steps_per_iteration) {
    state.counters["floor_ms"] = floor_ms;
    // ms per step over the floor: the iteration's seconds * 1e3 / steps / floor_ms.
    state.counters["x_floor"] =
        benchmark::Counter(steps_per_iteration * floor_ms / 1e3,
                           benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// The floor of a step that reads every weight once: the checkpoint's bytes at
// the measured read bandwidth.
inline void report_floor(benchmark::State& state, double bytes, double steps_per_iteration) {
    state.counters["read_GB/s"] = read_bandwidth_gbs();
    report_floor_ms(state, bytes / (read_bandwidth_gbs() * 1e9) * 1e3, steps_per_iteration);
}

// This thread's CPU time in milliseconds.
inline double thread_cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// The milliseconds of reading a file once as a token's products read its
// weights: memory-mapped (the page cache's pages, not read_bandwidth_gbs's
// array), each OpenMP thread summing its share of the bytes in 64-byte
// registers, four chains of them; a pass's time the CPU time of its slowest
// thread (on an idle machine its wall time; on a loaded one, not the time
// the threads waited for a core), the best of five after one that maps the
// pages. 0 if the file cannot be mapped.
inline double mapped_read_ms(const std::string& path) {
    using Sums = uint64_t __attribute__((vector_size(64)));
    const int fd = open(path.c_str(), O_RDONLY);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) return 0;
    const auto bytes = static_cast<size_t>(st.st_size);
    void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return 0;
    const auto* data = static_cast<const uint8_t*>(map);
    const long chunks = static_cast<long>(bytes / 256);  // (the last few bytes are not worth a tail)
    double best = 1e30;
    for (int pass = 0; pass < 6; ++pass) {
        uint64_t total = 0;
        double slowest = 0;
#pragma omp parallel reduction(+ : total) reduction(max : slowest)
        {
            const double start = thread_cpu_ms();
            Sums sums[4] = {};
#pragma omp for schedule(static)
            for (long c = 0; c < chunks; ++c)
                for (int k = 0; k < 4; ++k) {
                    Sums v;
                    std::memcpy(&v, data + 256 * c + 64 * k, sizeof v);
                    sums[k] += v;
                }
            for (const Sums& s : sums)
                for (int l = 0; l < 8; ++l) total += s[l];
            slowest = thread_cpu_ms() - start;
        }
        benchmark::DoNotOptimize(total);
        if (pass > 0) best = std::min(best, slowest);
    }
    munmap(map, bytes);
    return best;
}

}  // namespace headscope::test
