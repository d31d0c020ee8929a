// Model loading: models in every dtype and naming load with the weights that
// were written (decoded here independently of the loader), hub names resolve
// through the local cache, and every malformed input is an Error naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "family_models.h"
#include "headscope/base/error.h"
#include "headscope/compute/matmul.h"
#include "headscope/io/files.h"
#include "headscope/io/safetensors.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"

using namespace headscope;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr int64_t V = 50257;

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file's tensors in data order, read without the library.
std::vector<test::RawTensor> read_raw_tensors(const fs::path& path) {
    const std::string file = read_file(path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(file[i]);
    const json header = json::parse(file.begin() + 8, file.begin() + 8 + static_cast<int64_t>(n));
    std::vector<std::pair<uint64_t, test::RawTensor>> by_offset;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") continue;
        const auto begin = entry.at("data_offsets").at(0).get<int64_t>(),
                   end = entry.at("data_offsets").at(1).get<int64_t>();
        const auto data = file.begin() + 8 + static_cast<int64_t>(n);
        by_offset.push_back({static_cast<uint64_t>(begin),
                             {name, entry.at("dtype").get<std::string>(), entry.at("shape").get<std::vector<int64_t>>(),
                              std::vector<uint8_t>(data + begin, data + end)}});
    }
    std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<test::RawTensor> tensors;
    for (auto& [offset, t] : by_offset) tensors.push_back(std::move(t));
    return tensors;
}

test::RawTensor& raw_tensor(std::vector<test::RawTensor>& tensors, const std::string& name) {
    for (test::RawTensor& t : tensors)
        if (t.name == name) return t;
    throw std::runtime_error("test: no tensor " + name);
}

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

// A small model at `dir` whose n_layer tells the snapshots apart.
void write_snapshot(const fs::path& dir, int n_layer) {
    test::write_test_model(dir, {.n_layer = n_layer, .n_head = 2, .n_embd = 8, .n_positions = 8});
}

TEST(HubResolution, RefsMainPicksTheSnapshot) {
    test::TempDir cache;
    test::ScopedEnv hub("HF_HUB_CACHE", cache.path.string());
    const fs::path repo = cache.path / "models--gpt2";
    write_snapshot(repo / "snapshots" / "aaa111", 1);
    write_snapshot(repo / "snapshots" / "bbb222", 2);
    fs::create_directories(repo / "refs");
    std::ofstream(repo / "refs" / "main") << "aaa111\n";
    fs::last_write_time(repo / "snapshots" / "bbb222",
                        fs::last_write_time(repo / "snapshots" / "aaa111") + std::chrono::hours(1));

    EXPECT_EQ(resolve_model_path("gpt2"), repo / "snapshots" / "aaa111");
    const Model m = load_model("gpt2");
    EXPECT_EQ(m.config.n_layer, 1);

    std::ofstream(repo / "refs" / "main") << "ccc333";
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("gpt2"); }, {"refs/main", "ccc333"}));
}

TEST(HubResolution, WithoutRefsTheNewestSnapshotUnderHfHome) {
    test::TempDir home;
    test::ScopedEnv hub("HF_HUB_CACHE", std::nullopt);
    test::ScopedEnv hf_home("HF_HOME", home.path.string());
    const fs::path snapshots = home.path / "hub" / "models--openai-community--gpt2-medium" / "snapshots";
    write_snapshot(snapshots / "old", 1);
    write_snapshot(snapshots / "new", 2);
    fs::last_write_time(snapshots / "old", fs::last_write_time(snapshots / "new") - std::chrono::hours(1));

    EXPECT_EQ(resolve_model_path("openai-community/gpt2-medium"), snapshots / "new");
    EXPECT_EQ(load_model("openai-community/gpt2-medium").config.n_layer, 2);
}

TEST(HubResolution, DefaultCacheUnderHome) {
    test::TempDir home;
    test::ScopedEnv hub("HF_HUB_CACHE", std::nullopt);
    test::ScopedEnv hf_home("HF_HOME", std::nullopt);
    test::ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    test::ScopedEnv home_env("HOME", home.path.string());
    const fs::path snapshot = home.path / ".cache" / "huggingface" / "hub" / "models--distilgpt2" / "snapshots" / "x";
    fs::create_directories(snapshot);
    EXPECT_EQ(resolve_model_path("distilgpt2"), snapshot);
}

TEST(HubResolution, NotFoundSaysWhereItLooked) {
    test::TempDir cache;
    test::ScopedEnv hub("HF_HUB_CACHE", cache.path.string());
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("gpt2"); }, {"model 'gpt2' not found", "models--gpt2",
                                                                         cache.path.string(), "never downloads"}));
    fs::create_directories(cache.path / "models--gpt2" / "snapshots");
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("gpt2"); }, {"models--gpt2", "no snapshot"}));
    EXPECT_TRUE(test::throws_naming([&] { load_model((cache.path / "no-such-model").string()); },
                                    {"no-such-model", "not found"}));
}

TEST(HubResolution, ListsTheCachedGpt2ModelsByName) {
    test::TempDir cache;
    test::ScopedEnv hub("HF_HUB_CACHE", cache.path.string());
    EXPECT_TRUE(list_cached_models().empty());

    write_snapshot(cache.path / "models--gpt2" / "snapshots" / "abc", 1);
    const fs::path medium = cache.path / "models--openai-community--gpt2-medium" / "snapshots" / "def";
    write_snapshot(medium, 2);
    // Not offered: another architecture, a download with no snapshot, broken JSON, a dataset.
    fs::create_directories(cache.path / "models--bert-base-uncased" / "snapshots" / "x");
    std::ofstream(cache.path / "models--bert-base-uncased" / "snapshots" / "x" / "config.json")
        << R"({"model_type": "bert"})";
    fs::create_directories(cache.path / "models--distilgpt2" / "snapshots");
    fs::create_directories(cache.path / "models--broken" / "snapshots" / "y");
    std::ofstream(cache.path / "models--broken" / "snapshots" / "y" / "config.json") << "{\"model_type\": ";
    write_snapshot(cache.path / "datasets--gpt2-data" / "snapshots" / "z", 1);

    const std::vector<CachedModel> models = list_cached_models();
    ASSERT_EQ(models.size(), 2u);
    EXPECT_EQ(models[0].name, "gpt2");
    EXPECT_EQ(models[0].path, cache.path / "models--gpt2" / "snapshots" / "abc");
    EXPECT_EQ(models[1].name, "openai-community/gpt2-medium");
    EXPECT_EQ(models[1].path, medium);
    // Each listed name loads as that model.
    EXPECT_EQ(load_model(models[1].name).config.n_layer, 2);
}

// Today's families resolve from the cache by their hub names, as GPT-2 does,
// and are offered in the model list; each loads as its family.
TEST(HubResolution, FamiliesByTheirHubNames) {
    test::TempDir cache;
    test::ScopedEnv hub("HF_HUB_CACHE", cache.path.string());
    const std::vector<std::pair<std::string, std::string>> repos = {{"HuggingFaceTB/SmolLM2-135M", "llama"},
                                                                    {"Qwen/Qwen2.5-0.5B", "qwen2"},
                                                                    {"EleutherAI/pythia-160m", "gpt_neox_parallel"}};
    for (const auto& [name, family] : repos) {
        std::string repo = "models--" + name;
        repo.replace(repo.find('/'), 1, "--");
        test::write_family_model(cache.path / repo / "snapshots" / "rev1", test::family_variant(family));
    }
    const std::vector<CachedModel> models = list_cached_models();
    ASSERT_EQ(models.size(), repos.size());
    for (const auto& [name, family] : repos) {
        const auto listed =
            std::find_if(models.begin(), models.end(), [&](const CachedModel& m) { return m.name == name; });
        ASSERT_NE(listed, models.end()) << name;
        EXPECT_TRUE(family.starts_with(load_model(name).config.architecture)) << name;  // gpt_neox_parallel: gpt_neox
    }
}

// A good model written once; each bad-input test changes a fresh copy.
class BadInput : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::TestModelSpec spec;
        spec.n_layer = 2;
        spec.n_head = 4;
        spec.n_embd = 8;
        spec.n_positions = 8;
        spec.transformer_prefix = false;
        test::write_test_model(dir_->path / "good", spec);
        spec.dtype = test::FileDType::F16;
        test::write_test_model(dir_->path / "good-f16", spec);
    }
    static void TearDownTestSuite() { delete dir_; }

    fs::path copy_of(const std::string& good = "good") {
        const fs::path copy = dir_->path / ("copy" + std::to_string(copies_++));
        fs::copy(dir_->path / good, copy);
        return copy;
    }

    // Rewrites the copy's model.safetensors after `change` edits its tensors.
    fs::path with_tensors(const std::function<void(std::vector<test::RawTensor>&)>& change,
                          const std::string& good = "good") {
        const fs::path copy = copy_of(good);
        std::vector<test::RawTensor> tensors = read_raw_tensors(copy / "model.safetensors");
        change(tensors);
        test::write_safetensors(copy / "model.safetensors", tensors);
        return copy;
    }

    fs::path with_config(const std::function<void(json&)>& change) {
        const fs::path copy = copy_of();
        json config = json::parse(read_file(copy / "config.json"));
        change(config);
        std::ofstream(copy / "config.json") << config.dump();
        return copy;
    }

    // A safetensors file of a little-endian header length, `header` and `data_size` zero bytes.
    fs::path raw_file(const std::string& header, size_t data_size, std::optional<uint64_t> length = std::nullopt) {
        const fs::path path = dir_->path / ("raw" + std::to_string(copies_++) + ".safetensors");
        std::vector<uint8_t> bytes;
        const uint64_t n = length.value_or(header.size());
        for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(n >> (8 * i)));
        bytes.insert(bytes.end(), header.begin(), header.end());
        bytes.resize(bytes.size() + data_size);
        write_bytes(path, bytes);
        return path;
    }

    static ::testing::AssertionResult loading_throws(const fs::path& dir, std::initializer_list<std::string> parts) {
        return test::throws_naming([&] { load_model(dir.string()); }, parts);
    }
    static ::testing::AssertionResult opening_throws(const fs::path& file, std::initializer_list<std::string> parts) {
        return test::throws_naming([&] { SafetensorsFile st(file); }, parts);
    }

    static test::TempDir* dir_;
    inline static int copies_ = 0;
};
test::TempDir* BadInput::dir_ = nullptr;

TEST_F(BadInput, MissingFiles) {
    for (const char* name : {"config.json", "vocab.json", "merges.txt", "model.safetensors"}) {
        const fs::path copy = copy_of();
        fs::remove(copy / name);
        EXPECT_TRUE(loading_throws(copy, {name, "missing"}));
    }
}

TEST_F(BadInput, PytorchBinOnly) {
    const fs::path copy = copy_of();
    fs::remove(copy / "model.safetensors");
    std::ofstream(copy / "pytorch_model.bin") << "not read";
    EXPECT_TRUE(loading_throws(copy, {"only pytorch_model.bin", "safetensors only", "safe_serialization=True"}));
}

TEST_F(BadInput, FileShorterThanEightBytes) {
    const fs::path path = dir_->path / "short.safetensors";
    write_bytes(path, {1, 2, 3});
    EXPECT_TRUE(opening_throws(path, {path.string(), "3 bytes", "shorter than"}));
}

TEST_F(BadInput, HeaderLength) {
    EXPECT_TRUE(opening_throws(raw_file("{}", 0, 1000), {"header length 1000", "past the end"}));
    // Within a (sparse) file but past the cap.
    const fs::path big = raw_file("{}", 0, 150'000'000);
    fs::resize_file(big, 160'000'000);
    EXPECT_TRUE(opening_throws(big, {"header length 150000000", "limit"}));
}

TEST_F(BadInput, HeaderNotJsonOrNotAnObject) {
    EXPECT_TRUE(opening_throws(raw_file("{\"a\": ", 0), {"not valid JSON"}));
    EXPECT_TRUE(opening_throws(raw_file("[1, 2]  ", 0), {"not a JSON object"}));
    EXPECT_TRUE(opening_throws(raw_file(R"({"__metadata__": 3})", 0), {"__metadata__"}));
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": [1]})", 0), {"tensor 'w'", "not a JSON object"}));
}

TEST_F(BadInput, TensorFields) {
    const std::string w = "tensor 'w'";
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": {"dtype": "I65", "shape": [1], "data_offsets": [0, 8]}})", 8),
                               {w, "I65", "not a safetensors dtype"}));
    // A dtype of the format that Headscope does not read is validated, then set aside.
    const SafetensorsFile integers(raw_file(R"({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8));
    EXPECT_TRUE(integers.tensors().empty());
    EXPECT_EQ(integers.unread_tensors().at("w").dtype, "I64");
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": {"dtype": "U8", "shape": [3], "data_offsets": [0, 4]}})", 4),
                               {w, "hold 4 bytes", "needs 3"}));
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4), {w, "dtype"}));
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", 16),
                               {w, "shape 4", "not a list"}));
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": {"dtype": "F32", "shape": [2, -2], "data_offsets": [0, 16]}})", 16),
                               {w, "shape [2,-2]", "non-negative"}));
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})", 8),
                               {w, "shape [2.0]"}));
    EXPECT_TRUE(opening_throws(
        raw_file(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", 8),
        {w, "overflows"}));
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
                               {w, "data_offsets [0]", "two"}));
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8),
                               {w, "data_offsets [8, 4]", "end before"}));
}

TEST_F(BadInput, DataOffsetsOutsideTheFile) {
    const fs::path path = raw_file(R"({"w": {"dtype": "F32", "shape": [25], "data_offsets": [0, 100]}})", 64);
    EXPECT_TRUE(
        opening_throws(path, {path.string() + ": tensor 'w': data_offsets [0, 100] outside the 64-byte data section"}));
}

TEST_F(BadInput, SizeMismatch) {
    EXPECT_TRUE(opening_throws(raw_file(R"({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 12]}})", 12),
                               {"tensor 'w'", "hold 12 bytes", "BF16 shape [4] needs 8"}));
}

TEST_F(BadInput, OverlappingTensors) {
    const std::string header = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                               R"( "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},)"
                               R"( "c": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})";
    EXPECT_TRUE(opening_throws(raw_file(header, 24), {"'b'", "overlap tensor 'a'"}));
}

TEST_F(BadInput, MissingTensorIsNamed) {
    const fs::path copy = with_tensors([](std::vector<test::RawTensor>& t) {
        std::erase_if(t, [](const test::RawTensor& r) { return r.name == "h.1.mlp.c_fc.bias"; });
    });
    EXPECT_TRUE(loading_throws(copy, {"tensor 'h.1.mlp.c_fc.bias' missing"}));
}

TEST_F(BadInput, TensorPresentWithAndWithoutPrefix) {
    const fs::path copy = with_tensors([](std::vector<test::RawTensor>& t) {
        test::RawTensor copy = raw_tensor(t, "ln_f.bias");
        copy.name = "transformer.ln_f.bias";
        t.push_back(copy);
    });
    EXPECT_TRUE(loading_throws(copy, {"both 'ln_f.bias' and 'transformer.ln_f.bias'"}));
}

TEST_F(BadInput, TensorShapeDisagreesWithConfig) {
    const fs::path copy = with_tensors([](std::vector<test::RawTensor>& t) {
        test::RawTensor& w = raw_tensor(t, "h.0.attn.c_attn.weight");
        w.shape = {8, 16};
        w.bytes.resize(8 * 16 * 4);
    });
    EXPECT_TRUE(loading_throws(copy, {"tensor 'h.0.attn.c_attn.weight'", "shape [8, 16]", "expected [8, 24]"}));

    const fs::path fewer_rows = with_config([](json& c) {
        c["vocab_size"] = 50000;
        c["eos_token_id"] = 0;
    });
    EXPECT_TRUE(loading_throws(fewer_rows, {"tensor 'wte.weight'", "shape [50257, 8]", "expected [50000, 8]"}));
}

TEST_F(BadInput, TokenizerLargerThanTheVocabulary) {
    const fs::path copy = with_tensors([](std::vector<test::RawTensor>& t) {
        test::RawTensor& wte = raw_tensor(t, "wte.weight");
        wte.shape = {50000, 8};
        wte.bytes.resize(50000 * 8 * 4);
    });
    json config = json::parse(read_file(copy / "config.json"));
    config["vocab_size"] = 50000;
    config["eos_token_id"] = 0;
    std::ofstream(copy / "config.json") << config.dump();
    EXPECT_TRUE(loading_throws(copy, {"vocab.json", "50257 tokens", "vocab_size 50000"}));
}

TEST_F(BadInput, NonFiniteWeightsNameTheTensor) {
    const fs::path nan = with_tensors([](std::vector<test::RawTensor>& t) {
        const float value = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(raw_tensor(t, "h.1.ln_2.weight").bytes.data() + 12, &value, 4);
    });
    EXPECT_TRUE(loading_throws(nan, {"model.safetensors", "tensor 'h.1.ln_2.weight'", "element 3 is NaN"}));

    const fs::path inf = with_tensors(
        [](std::vector<test::RawTensor>& t) {
            std::vector<uint8_t>& bytes = raw_tensor(t, "h.0.mlp.c_proj.weight").bytes;
            bytes[10] = 0x00;
            bytes[11] = 0x7c;
        },
        "good-f16");
    EXPECT_TRUE(loading_throws(inf, {"tensor 'h.0.mlp.c_proj.weight'", "element 5 is Inf"}));
}

TEST_F(BadInput, TiedLmHeadAndMaskBuffersAreSkipped) {
    const fs::path copy = with_tensors([](std::vector<test::RawTensor>& t) {
        test::RawTensor lm_head = raw_tensor(t, "wte.weight");
        lm_head.name = "lm_head.weight";
        t.push_back(lm_head);
        // Old GPT-2 files carry the causal mask as (1, 1, P, P) buffers.
        t.push_back({"h.0.attn.bias", "F32", {1, 1, 8, 8}, std::vector<uint8_t>(8 * 8 * 4)});
        t.push_back({"h.0.attn.masked_bias", "F32", {}, {0, 0, 0x80, 0xbf}});
    });
    const Model m = load_model(copy.string());
    const int64_t C = 8;
    EXPECT_EQ(m.params, V * C + 8 * C + 2 * (12 * C * C + 13 * C) + 2 * C);
    EXPECT_EQ(m.tensors.size(), 4u + 2 * 12);
    for (const TensorInfo& t : m.tensors)
        for (const char* skipped : {"lm_head.weight", "h.0.attn.bias", "h.0.attn.masked_bias"})
            EXPECT_NE(t.name, skipped);

    const fs::path wrong = with_tensors([](std::vector<test::RawTensor>& t) {
        t.push_back({"lm_head.weight", "F32", {V, 4}, std::vector<uint8_t>(V * 4 * 4)});
    });
    EXPECT_TRUE(loading_throws(wrong, {"tensor 'lm_head.weight'", "shape [50257, 4]", "expected [50257, 8]"}));
}

TEST_F(BadInput, Config) {
    EXPECT_TRUE(loading_throws(with_config([](json& c) { c["n_head"] = 3; }),
                               {"config.json", "n_embd 8 is not divisible by n_head 3"}));
    EXPECT_TRUE(loading_throws(with_config([](json& c) { c["n_layer"] = 0; }), {"config.json", "n_layer is 0"}));
    EXPECT_TRUE(loading_throws(with_config([](json& c) { c["n_embd"] = "8"; }), {"n_embd is \"8\""}));
    EXPECT_TRUE(loading_throws(with_config([](json& c) { c.erase("vocab_size"); }), {"vocab_size missing"}));
    // More layers than the file holds: named by the first missing tensor, without sizing anything by n_layer.
    EXPECT_TRUE(
        loading_throws(with_config([](json& c) { c["n_layer"] = 2000000000; }), {"tensor 'h.2.ln_1.weight' missing"}));

    // Old configs have only n_ctx.
    const fs::path n_ctx = with_config([](json& c) { c.erase("n_positions"); });
    EXPECT_EQ(load_model(n_ctx.string()).config.n_positions, 8);

    const fs::path copy = copy_of();
    std::ofstream(copy / "config.json") << "{\"n_layer\": 2,";
    EXPECT_TRUE(loading_throws(copy, {"config.json", "not valid JSON"}));
}

}  // namespace
