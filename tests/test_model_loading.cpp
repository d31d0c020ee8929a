// Model loading: models in every dtype and naming load with the weights that
// were written (decoded here independently of the loader) and the conversion
// of half floats. Hub names (test_model_loading_hub.cpp) and malformed input
// (test_model_loading_bad_input.cpp) are this program's too.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "headscope/compute/matmul.h"
#include "headscope/io/safetensors.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"
#include "raw_safetensors.h"

using namespace headscope;
using test::raw_tensor;
using test::read_raw_tensors;

namespace {

constexpr int64_t V = 50257;

// IEEE half from its definition: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m.
double decode_f16(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double magnitude = e == 0    ? std::ldexp(m, -24)
                             : e == 31 ? (m ? NAN : INFINITY)
                                       : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
}

double decode(const std::string& dtype, const uint8_t* p) {
    if (dtype == "F32") {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    const uint16_t h = static_cast<uint16_t>(p[0] | p[1] << 8);
    if (dtype == "F16") return decode_f16(h);
    return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

std::vector<double> decode_all(const test::RawTensor& t) {
    const size_t size = t.dtype == "F32" ? 4 : 2;
    std::vector<double> values;
    for (size_t i = 0; i < t.bytes.size(); i += size) values.push_back(decode(t.dtype, &t.bytes[i]));
    return values;
}

// The nearest value of a sorted grid to x, ties to the one with an even index.
double round_to_grid(const std::vector<double>& grid, size_t even_parity, double x) {
    const size_t hi = std::lower_bound(grid.begin(), grid.end(), x) - grid.begin();
    if (hi < grid.size() && grid[hi] == x) return x;
    const size_t lo = hi - 1;
    const double below = x - grid[lo], above = grid[hi] - x;
    if (below != above) return below < above ? grid[lo] : grid[hi];
    return (lo % 2 == even_parity) ? grid[lo] : grid[hi];
}

// Every finite non-negative F16 value, ascending; index = bit pattern.
const std::vector<double>& f16_grid() {
    static const std::vector<double> grid = [] {
        std::vector<double> g;
        for (uint32_t h = 0; h < 0x7c00; ++h) g.push_back(decode_f16(static_cast<uint16_t>(h)));
        return g;
    }();
    return grid;
}

double round_to_f16(double x) {
    const double r = round_to_grid(f16_grid(), 0, std::abs(x));
    return x < 0 ? -r : r;
}

double round_to_bf16(float x) {
    const uint32_t abs = std::bit_cast<uint32_t>(x) & 0x7fffffff;
    const uint32_t lo = abs >> 16;
    const std::vector<double> grid = {std::bit_cast<float>(lo << 16), std::bit_cast<float>((lo + 1) << 16)};
    const double r = round_to_grid(grid, lo % 2, std::bit_cast<float>(abs));
    return x < 0 ? -r : r;
}

// The Model field for each tensor name (without prefix), to compare against the file.
struct ModelField {
    std::string name;
    const float* vector = nullptr;   // a vector's float32 values, or
    const Matrix* matrix = nullptr;  // a matrix as mapped
};
std::vector<ModelField> model_fields(const Model& m) {
    std::vector<ModelField> f = {{"wte.weight", nullptr, &m.wte},
                                 {"wpe.weight", nullptr, &m.wpe},
                                 {"ln_f.weight", m.ln_f_w},
                                 {"ln_f.bias", m.ln_f_b}};
    for (size_t i = 0; i < m.layers.size(); ++i) {
        const LayerWeights& l = m.layers[i];
        const std::string h = "h." + std::to_string(i) + ".";
        f.insert(f.end(), {{h + "ln_1.weight", l.ln_1_w},
                           {h + "ln_1.bias", l.ln_1_b},
                           {h + "attn.c_attn.weight", nullptr, &l.attn},
                           {h + "attn.c_attn.bias", l.attn_b},
                           {h + "attn.c_proj.weight", nullptr, &l.attn_proj},
                           {h + "attn.c_proj.bias", l.attn_proj_b},
                           {h + "ln_2.weight", l.ln_2_w},
                           {h + "ln_2.bias", l.ln_2_b},
                           {h + "mlp.c_fc.weight", nullptr, &l.fc},
                           {h + "mlp.c_fc.bias", l.fc_b},
                           {h + "mlp.c_proj.weight", nullptr, &l.fc_proj},
                           {h + "mlp.c_proj.bias", l.fc_proj_b}});
    }
    return f;
}

TEST(ModelLoading, EveryDtypeAndPrefixLoadsWhatWasWritten) {
    for (test::FileDType dtype : {test::FileDType::F32, test::FileDType::F16, test::FileDType::BF16})
        for (bool prefix : {true, false}) {
            SCOPED_TRACE(std::string(test::dtype_name(dtype)) + (prefix ? " with prefix" : " without prefix"));
            test::TempDir dir;
            test::TestModelSpec spec;
            spec.n_layer = 2;
            spec.n_head = 4;
            spec.n_embd = 16;
            spec.n_positions = 24;
            spec.dtype = dtype;
            spec.transformer_prefix = prefix;
            spec.seed = 7;
            test::write_test_model(dir.path, spec);
            const Model m = load_model(dir.path.string());

            EXPECT_EQ(m.path, dir.path);
            EXPECT_EQ(m.config.n_layer, 2);
            EXPECT_EQ(m.config.n_head, 4);
            EXPECT_EQ(m.config.n_embd, 16);
            EXPECT_EQ(m.config.n_positions, 24);
            EXPECT_EQ(m.config.vocab_size, V);
            EXPECT_EQ(m.config.eos_token_id, 50256);
            EXPECT_FLOAT_EQ(m.config.layer_norm_epsilon, 1e-5f);
            EXPECT_EQ(m.tokenizer.vocab_size(), V);
            const int64_t C = 16, P = 24, L = 2;
            EXPECT_EQ(m.params, V * C + P * C + L * (12 * C * C + 13 * C) + 2 * C);

            const std::string p = prefix ? "transformer." : "";
            ASSERT_EQ(m.tensors.size(), 4u + 12 * L);
            EXPECT_TRUE(std::is_sorted(m.tensors.begin(), m.tensors.end(),
                                       [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; }));
            int64_t counted = 0;
            for (const TensorInfo& t : m.tensors) {
                EXPECT_EQ(t.name.starts_with("transformer."), prefix) << t.name;
                int64_t n = 1;
                for (int64_t d : t.shape) n *= d;
                counted += n;
            }
            EXPECT_EQ(counted, m.params);
            const auto info = std::find_if(m.tensors.begin(), m.tensors.end(),
                                           [&](const TensorInfo& t) { return t.name == p + "h.1.mlp.c_proj.weight"; });
            ASSERT_NE(info, m.tensors.end());
            EXPECT_EQ(info->shape, (std::vector<int64_t>{4 * C, C}));

            std::vector<test::RawTensor> raw = read_raw_tensors(dir.path / "model.safetensors");
            for (const ModelField& field : model_fields(m)) {
                const std::string& name = field.name;
                ASSERT_TRUE(field.vector || (field.matrix && *field.matrix)) << name;
                const std::vector<double> want = decode_all(raw_tensor(raw, p + name));
                const std::vector<float> matrix = field.matrix ? to_floats(*field.matrix) : std::vector<float>();
                const float* got = field.matrix ? matrix.data() : field.vector;
                size_t mismatches = 0;
                for (size_t i = 0; i < want.size(); ++i) mismatches += got[i] != want[i];
                EXPECT_EQ(mismatches, 0u) << name;
            }
        }
}

TEST(ModelLoading, HalfWeightsAreTheF32WeightsRoundedToNearestEven) {
    test::TempDir dir;
    test::TestModelSpec spec;
    spec.n_layer = 1;
    spec.n_embd = 8;
    spec.n_head = 2;
    spec.n_positions = 8;
    for (test::FileDType d : {test::FileDType::F32, test::FileDType::F16, test::FileDType::BF16}) {
        spec.dtype = d;
        test::write_test_model(dir.path / test::dtype_name(d), spec);
    }
    std::vector<test::RawTensor> f32 = read_raw_tensors(dir.path / "F32" / "model.safetensors");
    std::vector<test::RawTensor> f16 = read_raw_tensors(dir.path / "F16" / "model.safetensors");
    std::vector<test::RawTensor> bf16 = read_raw_tensors(dir.path / "BF16" / "model.safetensors");
    for (const test::RawTensor& t : f32) {
        const std::vector<double> exact = decode_all(t);
        const std::vector<double> half = decode_all(raw_tensor(f16, t.name));
        const std::vector<double> brain = decode_all(raw_tensor(bf16, t.name));
        size_t f16_wrong = 0, bf16_wrong = 0;
        for (size_t i = 0; i < exact.size(); ++i) {
            f16_wrong += half[i] != round_to_f16(exact[i]);
            bf16_wrong += brain[i] != round_to_bf16(static_cast<float>(exact[i]));
        }
        EXPECT_EQ(f16_wrong, 0u) << t.name;
        EXPECT_EQ(bf16_wrong, 0u) << t.name;
    }
    // Loading an F16 model gives those rounded values exactly.
    const Model m = load_model((dir.path / "F16").string());
    const std::vector<double> wte = decode_all(raw_tensor(f32, "transformer.wte.weight"));
    const std::vector<float> loaded = to_floats(m.wte);
    for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(loaded[i], round_to_f16(wte[i])) << i;
}

// Converts the given 16-bit patterns (stored one byte off alignment).
std::vector<float> convert_bits(DType dtype, const std::vector<uint16_t>& bits) {
    std::vector<std::byte> buffer(1 + 2 * bits.size());
    for (size_t i = 0; i < bits.size(); ++i) {
        buffer[1 + 2 * i] = std::byte(bits[i] & 0xff);
        buffer[2 + 2 * i] = std::byte(bits[i] >> 8);
    }
    const TensorView view{dtype, {static_cast<int64_t>(bits.size())}, std::span(buffer).subspan(1)};
    std::vector<float> out(bits.size());
    convert_to_f32("t", view, out.data());
    return out;
}

TEST(ModelLoading, ProgressCountsTheBytesOfEveryTensorReadUpToTheTotal) {
    test::TempDir dir;
    test::write_test_model(dir.path, {.n_layer = 3, .n_head = 2, .n_embd = 8, .n_positions = 8});
    std::vector<ProgressReport> reports;
    const Model m = load_model(dir.path.string(), [&](const ProgressReport& r) { reports.push_back(r); });
    ASSERT_EQ(reports.size(), 1 + 3u * 12 + 4);  // the start, then every layer's 12 tensors, wte, wpe, ln_f's two
    // GPT-2's weights in float32: wte (V, C), wpe (P, C), per layer 12 C^2 + 13 C, ln_f 2 C.
    const int64_t V = 50257, C = 8, P = 8, L = 3;
    const int64_t total = 4 * (V * C + P * C + L * (12 * C * C + 13 * C) + 2 * C);
    EXPECT_EQ(reports.front().done, 0);
    EXPECT_EQ(reports.back().done, total);
    int64_t largest_step = 0;
    for (size_t i = 0; i < reports.size(); ++i) {
        EXPECT_EQ(reports[i].what, "reading the weights");
        EXPECT_EQ(reports[i].unit, ProgressUnit::bytes);
        EXPECT_EQ(reports[i].total, total);
        EXPECT_LE(reports[i].done, total);
        if (i == 0) continue;
        EXPECT_GT(reports[i].done, reports[i - 1].done);
        largest_step = std::max(largest_step, reports[i].done - reports[i - 1].done);
    }
    EXPECT_EQ(largest_step, 4 * V * C);  // wte's bytes: a step is a tensor read, not a count of tensors
    EXPECT_EQ(progress_text(reports.back()), "reading the weights: 1.6 of 1.6 MB");
}

TEST(ModelLoading, CancelledFromItsProgressItStopsThereAndReturnsNothing) {
    test::TempDir dir;
    test::write_test_model(dir.path, {.n_layer = 3, .n_head = 2, .n_embd = 8, .n_positions = 8});
    int reports = 0;
    EXPECT_THROW(load_model(dir.path.string(),
                            [&](const ProgressReport&) {
                                if (++reports == 5) throw Cancelled();
                            }),
                 Cancelled);
    EXPECT_EQ(reports, 5);                                                 // no tensor read after the cancel
    EXPECT_EQ(load_model(dir.path.string()).tensors.size(), 3u * 12 + 4);  // and nothing of it in the way
}

TEST(Conversion, KnownF16Patterns) {
    const std::vector<float> f = convert_bits(
        DType::F16, {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xc000, 0x3555, 0x7bff, 0xfbff, 0x8001});
    EXPECT_EQ(f[0], 0.0f);
    EXPECT_FALSE(std::signbit(f[0]));
    EXPECT_EQ(f[1], 0.0f);
    EXPECT_TRUE(std::signbit(f[1]));
    EXPECT_EQ(f[2], std::ldexp(1.0f, -24));     // smallest subnormal
    EXPECT_EQ(f[3], std::ldexp(1023.0f, -24));  // largest subnormal
    EXPECT_EQ(f[4], std::ldexp(1.0f, -14));     // smallest normal
    EXPECT_EQ(f[5], 1.0f);
    EXPECT_EQ(f[6], -2.0f);
    EXPECT_EQ(f[7], 0.333251953125f);
    EXPECT_EQ(f[8], 65504.0f);
    EXPECT_EQ(f[9], -65504.0f);
    EXPECT_EQ(f[10], -std::ldexp(1.0f, -24));
}

TEST(Conversion, KnownBf16Patterns) {
    const std::vector<float> f =
        convert_bits(DType::BF16, {0x0000, 0x8000, 0x0001, 0x0080, 0x3f80, 0xc000, 0x4049, 0x7f7f, 0xff7f});
    EXPECT_FALSE(std::signbit(f[0]));
    EXPECT_EQ(f[1], 0.0f);
    EXPECT_TRUE(std::signbit(f[1]));
    EXPECT_EQ(f[2], std::ldexp(1.0f, -133));  // smallest subnormal, kept as a float subnormal
    EXPECT_EQ(f[3], std::numeric_limits<float>::min());
    EXPECT_EQ(f[4], 1.0f);
    EXPECT_EQ(f[5], -2.0f);
    EXPECT_EQ(f[6], 3.140625f);
    EXPECT_EQ(f[7], std::ldexp(255.0f, 120));  // largest finite: 1.1111111b * 2^127
    EXPECT_EQ(f[8], -std::ldexp(255.0f, 120));
}

TEST(Conversion, UnalignedF32IsCopied) {
    const std::vector<float> values = {1.5f, -0.0f, 1e-42f, 3.4e38f};
    std::vector<std::byte> buffer(1 + 4 * values.size());
    std::memcpy(buffer.data() + 1, values.data(), 4 * values.size());
    const TensorView view{DType::F32, {4}, std::span(buffer).subspan(1)};
    std::vector<float> out(4);
    convert_to_f32("t", view, out.data());
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(values[i]));
}

TEST(Conversion, NonFiniteValuesNameTheTensorAndElement) {
    std::vector<float> out(4);
    for (auto [dtype, bits, kind] :
         std::vector<std::tuple<DType, uint16_t, std::string>>{{DType::F16, 0x7c00, "Inf"},
                                                               {DType::F16, 0xfc00, "-Inf"},
                                                               {DType::F16, 0x7e00, "NaN"},
                                                               {DType::F16, 0x7c01, "NaN"},
                                                               {DType::BF16, 0x7f80, "Inf"},
                                                               {DType::BF16, 0x7fc0, "NaN"}}) {
        const std::vector<uint16_t> input = {0x3c00, 0x3c00, bits, bits};
        EXPECT_TRUE(test::throws_naming([&] { convert_bits(dtype, input); }, {"tensor 't'", "element 2 is " + kind}));
    }
    const float f32[] = {1.0f, std::numeric_limits<float>::quiet_NaN()};
    const TensorView view{DType::F32, {2}, std::as_bytes(std::span(f32))};
    EXPECT_TRUE(
        test::throws_naming([&] { convert_to_f32("w", view, out.data()); }, {"tensor 'w'", "element 1 is NaN"}));
}

}  // namespace
