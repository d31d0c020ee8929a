// Every malformed model input is an Error naming it: missing files, a
// safetensors file whose header, fields or offsets are wrong, tensors missing,
// doubled or of the wrong shape, non-finite weights, and bad configs; a tied
// lm_head and old mask buffers are skipped.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "headscope/io/safetensors.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"
#include "raw_safetensors.h"

using namespace headscope;
namespace fs = std::filesystem;
using json = nlohmann::json;
using test::raw_tensor;
using test::read_raw_tensors;

namespace {

constexpr int64_t gpt2_vocab = 50257;  // GPT-2's vocabulary, as write_test_model writes it

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
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
    EXPECT_EQ(m.params, gpt2_vocab * C + 8 * C + 2 * (12 * C * C + 13 * C) + 2 * C);
    EXPECT_EQ(m.tensors.size(), 4u + 2 * 12);
    for (const TensorInfo& t : m.tensors)
        for (const char* skipped : {"lm_head.weight", "h.0.attn.bias", "h.0.attn.masked_bias"})
            EXPECT_NE(t.name, skipped);

    const fs::path wrong = with_tensors([](std::vector<test::RawTensor>& t) {
        t.push_back({"lm_head.weight", "F32", {gpt2_vocab, 4}, std::vector<uint8_t>(gpt2_vocab * 4 * 4)});
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
