// The weight products (linear(), matmul.h) on the shapes of GPT-2-small
// (with one and two rows and the output embedding: a keystroke's and a
// generated token's products, figures for Zen 3 in docs/benchmarks.md),
// SmolLM2-135M and Llama-3.2-1B, for each library through the same column
// split, blocking and widening (matmul_detail::linear_with): median ms,
// GFLOP/s, the fraction of this machine's FMA peak and, for up to 8 rows,
// where the weight's bytes decide, GB/s of weight read. On a machine that
// others share, those wall-clock figures carry their load: "busy" is the
// fraction of the peak while the product ran on a core (flops over process
// CPU time, against one core's peak each), which their load disturbs far
// less (exactly so with OMP_NUM_THREADS=1; with more threads, set
// OMP_WAIT_POLICY=passive so that a waiting thread does not count).
//   headscope  what linear() runs (the choices in core/src/compute/matmul.cpp)
//   openblas   OpenBLAS's sgemm for every row count (the kernels it chose for this CPU:
//              OPENBLAS_VERBOSE=2 names them; linear() takes Eigen's where they use no FMA)
//   blis       BLIS's sgemm (dlopen'ed libblis.so.4, when installed)
//   eigen      Eigen's GEMM, single-threaded in each thread's columns
//   eigen-omp  F32 only: Eigen's product on the whole matrix, its own OpenMP threads
// Candidates take turns, repetition by repetition, so that load from other
// processes falls on all of them alike.
// Run: build/tests/bench-matmul [--reps N] [--filter TEXT]  (TEXT in the row's model, shape or dtype)
//
// Figures on this project's VM (2 Zen 4 cores, AVX-512; FMA peak 114 GFLOP/s
// a core, 233 both), OMP_NUM_THREADS=1, --reps 9, others' builds running:
// "busy", lowest-highest over each group's shapes (and GPT-2's two layouts).
//                          headscope openblas  blis   eigen  eigen-omp
//   gpt2     T=128  F32      68-79   69-80   53-81   48-65   48-68
//   gpt2     T=128  BF16     59-77   59-81   56-86   46-68
//   gpt2     T=1024 F32      75-87   75-88   63-89   54-69   55-69
//   gpt2     T=1024 BF16     68-77   68-78   59-82   50-65
//   smollm2  T=128  F32      72-76   73-84   61-81   61-69   59-68
//   smollm2  T=128  BF16     70-81   68-80   70-79   61-67
//   llama    T=128  F32      67-70   67-71   47-61   50-59   49-55
//   llama    T=128  BF16     68-72   69-72   65-72   60-66
//   smollm2  T=8    F32      60-68   38-41   68-79   40-49   39-51
//   smollm2  T=8    BF16     61-74   33-35   50-55   38-39
//   llama    T=8    F32      27-66   15-18   26-59   10-28   10-29
//   llama    T=8    BF16     44-73   21-33   28-56   23-39
//   T=1, weight GB/s: smollm2 (in L3) F32 71-83 (libraries 84-97; OpenBLAS
//   16 on gate/up), BF16 32-38 (libraries 18-20); llama q and k/v F32 45-72
//   (OpenBLAS 6), BF16 35-37 (18-19); llama gate/up and down, from memory,
//   F32 19-21 (BLIS 23-24, OpenBLAS 4-5), BF16 14 (3-6).
// With both threads (OMP_WAIT_POLICY=passive) the wall-clock figures carry
// the others' load (gpt2 fc T=1024 F32: 85 GFLOP/s, 36% of the peak); busy
// stays within a few points of the above from T=128 up, while products of a
// few rows, 12-500 us, lose more to OpenMP's fork and join (smollm2 T=8 F32
// 23-28%), and eigen-omp, whose threads wait on each other, falls to 2-59%.
#include <dlfcn.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fma_peak.h"
#include "headscope/base/aligned.h"
#include "headscope/compute/matmul.h"
#include "headscope/compute/matmul_detail.h"

using namespace headscope;
using matmul_detail::Gemm;

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using OutMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

// BLIS's cblas_sgemm, bound within libblis alone (RTLD_DEEPBIND) so that
// neither library's symbols stand in for the other's.
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
CblasSgemm blis_sgemm = nullptr;

void blis_gemm(bool b_transposed, int rows, int cols, int in, const float* x, int ldx, const float* b, int ldb,
               float beta, float* out, int ldo) {
    enum { row_major = 101, no_trans = 111, trans = 112 };  // cblas.h's values
    blis_sgemm(row_major, no_trans, b_transposed ? trans : no_trans, rows, cols, in, 1.f, x, ldx, b, ldb, beta, out,
               ldo);
}

bool load_blis() {
    void* blis = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!blis) return false;
    blis_sgemm = reinterpret_cast<CblasSgemm>(dlsym(blis, "cblas_sgemm"));
    const auto set_threads = reinterpret_cast<void (*)(long)>(dlsym(blis, "bli_thread_set_num_threads"));
    if (!blis_sgemm || !set_threads) return false;
    set_threads(1);  // each of our threads calls it on its own columns
    return true;
}

struct Shape {
    const char* model;
    const char* name;
    int rows;
    int64_t in, out;
    bool out_by_in;
};

std::vector<Shape> shapes() {
    std::vector<Shape> all;
    for (int T : {128, 1024, 2, 1})
        for (bool out_by_in : {false, true})
            for (auto [name, in, out] :
                 {std::tuple{"qkv", 768, 2304}, {"attn proj", 768, 768}, {"fc", 768, 3072}, {"fc proj", 3072, 768}})
                all.push_back({"gpt2", name, T, in, out, out_by_in});
    for (int T : {2, 1}) all.push_back({"gpt2", "lm head", T, 768, 50257, true});
    for (int T : {128, 8, 1}) {
        for (auto [name, in, out] :
             {std::tuple{"q", 576, 576}, {"k/v", 576, 192}, {"gate/up", 576, 1536}, {"down", 1536, 576}})
            all.push_back({"smollm2", name, T, in, out, true});
        for (auto [name, in, out] :
             {std::tuple{"q", 2048, 2048}, {"k/v", 2048, 512}, {"gate/up", 2048, 8192}, {"down", 8192, 2048}})
            all.push_back({"llama", name, T, in, out, true});
    }
    return all;
}

// A random weight stored as `dtype` (BF16: the high halves of float32 values).
AlignedVector<std::byte> random_weight(DType dtype, size_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> uniform(-1, 1);
    const size_t size = dtype == DType::F32 ? 4 : 2;
    AlignedVector<std::byte> bytes(n * size);
    for (size_t i = 0; i < n; ++i) {
        const float v = uniform(rng);
        std::memcpy(bytes.data() + i * size, reinterpret_cast<const std::byte*>(&v) + (4 - size), size);
    }
    return bytes;
}

double cpu_seconds() {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 9;
    std::string filter;
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!std::strcmp(argv[a], "--reps"))
            reps = std::max(1, std::atoi(argv[a + 1]));
        else if (!std::strcmp(argv[a], "--filter"))
            filter = argv[a + 1];
    }
    const bool blis = load_blis();
    const double peak = test::fma_peak_gflops();
    std::printf("%d OpenMP threads, FMA peak %.1f GFLOP/s%s\n", omp_get_max_threads(), peak,
                blis ? "" : "; libblis.so.4 not found: no blis rows");
    std::printf("%-8s %-9s %5s %11s %-8s %-5s %-10s %9s %8s %6s %6s %7s\n", "model", "shape", "T", "in x out", "layout",
                "dtype", "library", "ms", "GFLOP/s", "peak", "busy", "GB/s");

    std::mt19937 rng(1);
    for (const Shape& s : shapes())
        for (DType dtype : {DType::F32, DType::BF16}) {
            const char* dtype_name = dtype == DType::F32 ? "F32" : "BF16";
            const std::string row_name = std::string(s.model) + " " + s.name + " " + dtype_name;
            if (!filter.empty() && row_name.find(filter) == std::string::npos) continue;
            const AlignedVector<std::byte> bytes = random_weight(dtype, static_cast<size_t>(s.in * s.out), rng);
            const Matrix w{bytes.data(), dtype, s.in, s.out, s.out_by_in};
            std::uniform_real_distribution<float> uniform(-1, 1);
            AlignedVector<float> x(static_cast<size_t>(s.rows * s.in)), y(static_cast<size_t>(s.rows * s.out));
            for (float& v : x) v = uniform(rng);

            std::vector<std::pair<const char*, std::function<void()>>> candidates;
            candidates.push_back({"headscope", [&] { linear(x.data(), s.rows, w, nullptr, y.data(), s.out); }});
            const auto through = [&](const char* name, Gemm gemm) {
                candidates.push_back({name, [&, gemm] {
                                          matmul_detail::linear_with(gemm, 0, x.data(), s.rows, w, nullptr, y.data(),
                                                                     s.out, false);
                                      }});
            };
            through("openblas", matmul_detail::openblas_gemm);
            if (blis) through("blis", blis_gemm);
            through("eigen", matmul_detail::eigen_gemm);
            if (dtype == DType::F32)
                candidates.push_back(
                    {"eigen-omp", [&] {
                         const auto* s_data = reinterpret_cast<const float*>(bytes.data());
                         OutMap out(y.data(), s.rows, s.out, Eigen::OuterStride<>(s.out));
                         const ConstMap X(x.data(), s.rows, s.in, Eigen::OuterStride<>(s.in));
                         if (s.out_by_in)
                             out.noalias() = X * ConstMap(s_data, s.out, s.in, Eigen::OuterStride<>(s.in)).transpose();
                         else
                             out.noalias() = X * ConstMap(s_data, s.in, s.out, Eigen::OuterStride<>(s.out));
                     }});

            std::vector<std::vector<double>> seconds(candidates.size()), cpu(candidates.size());
            for (auto& c : candidates) c.second();  // warm-up: scratch, pages, libraries' buffers
            for (int r = 0; r < reps; ++r)
                for (size_t c = 0; c < candidates.size(); ++c) {
                    const double cpu_start = cpu_seconds();
                    const auto start = std::chrono::steady_clock::now();
                    candidates[c].second();
                    seconds[c].push_back(
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
                    cpu[c].push_back(cpu_seconds() - cpu_start);
                }
            const double flops = 2.0 * s.rows * s.in * s.out, weight_bytes = static_cast<double>(bytes.size());
            const double core_peak = peak / omp_get_max_threads();
            const std::string dims = std::to_string(s.in) + "x" + std::to_string(s.out);
            for (size_t c = 0; c < candidates.size(); ++c) {
                const double t = median(seconds[c]), busy = flops / median(cpu[c]) / 1e9 / core_peak;
                std::printf("%-8s %-9s %5d %11s %-8s %-5s %-10s %9.3f %8.1f %5.0f%% %5.0f%%", s.model, s.name, s.rows,
                            dims.c_str(), s.out_by_in ? "(out,in)" : "(in,out)", dtype_name, candidates[c].first,
                            t * 1e3, flops / t / 1e9, 100 * flops / t / 1e9 / peak, 100 * busy);
                if (s.rows <= matmul_detail::small_rows) std::printf(" %7.1f", weight_bytes / t / 1e9);
                std::printf("\n");
            }
            std::fflush(stdout);
        }
}
