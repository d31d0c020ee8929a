// The GGUF reader (io/gguf.h) on files the tests' writer makes: metadata of
// every type read back, tensor infos and their data, alignment, versions 2
// and 3, split models; and hostile files, each one line naming the problem.
#include <gtest/gtest.h>

#include <cstring>

#include "gguf_writer.h"
#include "headscope/base/error.h"
#include "headscope/base/ggml_types.h"
#include "headscope/io/gguf.h"
#include "model_writer.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

std::string f32_bytes(const std::vector<float>& values) {
    std::string out(values.size() * 4, '\0');
    std::memcpy(out.data(), values.data(), out.size());
    return out;
}

class Gguf : public ::testing::Test {
protected:
    fs::path write(const GgufSpec& spec, const std::string& name = "model.gguf") {
        const fs::path path = dir_.path / name;
        write_gguf(path, spec);
        return path;
    }
    // The one-line Error opening `path` throws ("" when it opens).
    static std::string error_of(const std::function<void()>& open) {
        try {
            open();
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_EQ(message.find('\n'), std::string::npos) << message;
            return message;
        }
        return "";
    }
    static std::string error_opening(const fs::path& path) {
        return error_of([&] { GgufFile file(path); });
    }
    void expect_refused(const GgufSpec& spec, const std::string& problem) {
        const fs::path path = write(spec);
        const std::string message = error_opening(path);
        EXPECT_EQ(message.rfind(path.string() + ": ", 0), 0u) << message;
        EXPECT_NE(message.find(problem), std::string::npos) << message;
    }

    TempDir dir_;
};

GgufSpec every_value_type() {
    GgufSpec spec;
    spec.metadata = {
        {"u8", gguf_uint8(200)},
        {"i8", gguf_int8(-100)},
        {"u16", gguf_uint16(60000)},
        {"i16", gguf_int16(-30000)},
        {"u32", gguf_uint32(4000000000u)},
        {"i32", gguf_int32(7)},
        {"f32", gguf_float32(0.25f)},
        {"yes", gguf_bool(true)},
        {"general.name", gguf_string("a model\xe2\x80\x94named")},
        {"u64", gguf_uint64(1ull << 63)},
        {"i64", gguf_int64(-5)},
        {"f64", gguf_float64(1e-300)},
        {"scores", gguf_array(6, {gguf_float32(-1.5f), gguf_float32(2.0f)})},
        {"types", gguf_array(5, {gguf_int32(1), gguf_int32(6)})},
        {"flags", gguf_array(7, {gguf_bool(false), gguf_bool(true)})},
        {"nested", gguf_array(9, {gguf_strings({"a", "bc"}), gguf_strings({}), gguf_strings({"def"})})},
    };
    std::vector<std::string> tokens;
    for (int i = 0; i < 1000; ++i) tokens.push_back("token" + std::to_string(i) + std::string(i % 7, 'x'));
    spec.metadata.emplace_back("tokenizer.ggml.tokens", gguf_strings(tokens));
    return spec;
}

TEST_F(Gguf, MetadataOfEveryTypeReadsBack) {
    const GgufFile file(write(every_value_type()));
    EXPECT_EQ(file.version(), 3u);
    ASSERT_EQ(file.keys().size(), 17u);
    EXPECT_EQ(file.keys()[8], "general.name");
    EXPECT_EQ(file.integer("u8"), 200u);
    EXPECT_EQ(file.integer("u16"), 60000u);
    EXPECT_EQ(file.integer("u32"), 4000000000u);
    EXPECT_EQ(file.integer("i32"), 7u);
    EXPECT_EQ(file.integer("u64"), 1ull << 63);
    EXPECT_EQ(file.number("i8"), -100.0);
    EXPECT_EQ(file.number("i16"), -30000.0);
    EXPECT_EQ(file.number("i64"), -5.0);
    EXPECT_EQ(file.number("f32"), 0.25);
    EXPECT_EQ(file.number("f64"), 1e-300);
    EXPECT_EQ(file.number("u32"), 4e9);
    EXPECT_EQ(file.boolean("yes"), true);
    EXPECT_EQ(file.string("general.name"), "a model\xe2\x80\x94named");
    EXPECT_EQ(file.type("f64"), GgufValueType::float64);
    EXPECT_EQ(file.integer("absent"), std::nullopt);
    EXPECT_EQ(file.array("absent"), std::nullopt);

    const GgufArray scores = *file.array("scores");
    EXPECT_EQ(scores.element_type(), GgufValueType::float32);
    ASSERT_EQ(scores.size(), 2u);
    EXPECT_EQ(scores.number(0), -1.5);
    EXPECT_EQ(scores.number(1), 2.0);
    EXPECT_EQ(file.array("types")->integer(1), 6u);
    EXPECT_EQ(file.array("flags")->boolean(0), false);
    EXPECT_EQ(file.array("flags")->boolean(1), true);
    const GgufArray nested = *file.array("nested");
    ASSERT_EQ(nested.size(), 3u);
    EXPECT_EQ(nested.array(0).string(1), "bc");
    EXPECT_EQ(nested.array(1).size(), 0u);
    EXPECT_EQ(nested.array(2).string(0), "def");
    // Element by element, from anywhere in a long array of strings.
    const GgufArray tokens = *file.array("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.size(), 1000u);
    for (uint64_t i : {999, 0, 63, 64, 65, 500, 128})
        EXPECT_EQ(tokens.string(i), "token" + std::to_string(i) + std::string(i % 7, 'x'));
}

TEST_F(Gguf, WrongTypesNameTheKeyTheTypeFoundAndTheTypeWanted) {
    const fs::path path = write(every_value_type());
    const GgufFile file(path);
    const std::string at = path.string() + ": key ";
    EXPECT_EQ(error_of([&] { file.integer("general.name"); }), at + "'general.name' is a string, not an integer");
    EXPECT_EQ(error_of([&] { file.integer("f32"); }), at + "'f32' is a float32, not an integer");
    EXPECT_EQ(error_of([&] { file.integer("i8"); }), at + "'i8' is -100, not a whole number from 0 up");
    EXPECT_EQ(error_of([&] { file.string("u8"); }), at + "'u8' is a uint8, not a string");
    EXPECT_EQ(error_of([&] { file.boolean("i32"); }), at + "'i32' is an int32, not a bool");
    EXPECT_EQ(error_of([&] { file.number("scores"); }), at + "'scores' is an array of float32, not a number");
    EXPECT_EQ(error_of([&] { file.array("yes"); }), at + "'yes' is a bool, not an array");
    EXPECT_EQ(error_of([&] { file.array("scores")->string(0); }),
              at + "'scores' is an array of float32, not of strings");
    EXPECT_EQ(error_of([&] { file.array("nested")->array(0).integer(0); }),
              at + "'nested'[0] is an array of string, not of integers");
    EXPECT_EQ(error_of([&] { file.array("scores")->number(2); }), at + "'scores': element 2 of an array of 2");
}

GgufSpec with_tensors() {
    GgufSpec spec;
    spec.metadata = {{"general.architecture", gguf_string("llama")}};
    std::string q8(2 * 34, '\0');
    for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<char>(i * 7 + 1);
    q8[0] = q8[34] = 0;  // d = 0 + ...: a finite half
    spec.tensors = {
        {"w", {4, 3}, 0, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})},
        {"q", {32, 2}, 8, q8},
        {"odd", {5, 1, 2}, 77, std::string(40, '\x5a')},  // a type id Headscope does not know
        {"norm", {3}, 0, f32_bytes({0.5f, -1, 2})},
    };
    return spec;
}

TEST_F(Gguf, TensorInfosAndTheirData) {
    const GgufSpec spec = with_tensors();
    GgufLayout layout{};
    const std::string bytes = gguf_bytes(spec, &layout);
    write_bytes(dir_.path / "model.gguf", bytes);
    const GgufFile file(dir_.path / "model.gguf");
    EXPECT_EQ(file.alignment(), 32u);
    EXPECT_EQ(file.data_offset(), layout.data);
    EXPECT_EQ(file.data_offset() % 32, 0u);
    ASSERT_EQ(file.tensors().size(), 4u);
    const GgufTensor& w = *file.tensor("w");
    EXPECT_EQ(w.n_dims, 2u);
    EXPECT_EQ(w.ne, (std::array<uint64_t, 4>{4, 3, 1, 1}));
    EXPECT_EQ(w.type, 0u);
    EXPECT_EQ(w.offset, 0u);
    EXPECT_EQ(w.element_count(), 12u);
    std::vector<float> row(4);
    dequantize_row(GgmlType::F32, w.bytes.data() + 16, 4, row.data());
    EXPECT_EQ(row, (std::vector<float>{5, 6, 7, 8}));

    const GgufTensor& q = *file.tensor("q");
    EXPECT_EQ(q.offset, 64u);  // after w's 48 bytes, at the next multiple of 32
    ASSERT_EQ(q.bytes.size(), 68u);
    EXPECT_EQ(std::memcmp(q.bytes.data(), bytes.data() + layout.data + 64, 68), 0);
    const GgufTensor& odd = *file.tensor("odd");
    EXPECT_EQ(odd.type, 77u);
    EXPECT_EQ(odd.n_dims, 3u);
    EXPECT_TRUE(odd.bytes.empty());  // its size is unknown
    EXPECT_EQ(ggml_type_name(odd.type), "type 77");
    EXPECT_EQ(file.tensors()[3].name, "norm");
    EXPECT_EQ(file.tensor("absent"), nullptr);
}

TEST_F(Gguf, CustomAlignmentAndVersionTwo) {
    GgufSpec spec = with_tensors();
    spec.alignment = 256;
    spec.version = 2;
    spec.metadata.emplace_back("general.alignment", gguf_uint32(256));
    const GgufFile file(write(spec));
    EXPECT_EQ(file.version(), 2u);
    EXPECT_EQ(file.alignment(), 256u);
    EXPECT_EQ(file.data_offset() % 256, 0u);
    EXPECT_EQ(file.tensor("q")->offset, 256u);
    EXPECT_EQ(file.tensor("norm")->offset, 768u);
}

TEST_F(Gguf, SplitModelReadsAsOne) {
    const std::vector<std::vector<GgufTensorSpec>> parts = {
        {{"a", {4}, 0, f32_bytes({1, 2, 3, 4})}},
        {{"b", {2}, 0, f32_bytes({5, 6})}, {"c", {1}, 0, f32_bytes({7})}},
        {{"d", {32}, 8, std::string(34, '\0')}},
    };
    const auto paths = write_gguf_split(dir_.path, "m", {{"general.architecture", gguf_string("llama")}}, parts);
    ASSERT_EQ(paths[1].filename(), "m-00002-of-00003.gguf");
    for (const fs::path& path : paths) {
        const GgufModelFiles model = open_gguf(path);
        ASSERT_EQ(model.parts.size(), 3u);
        EXPECT_EQ(model.metadata().string("general.architecture"), "llama");
        ASSERT_EQ(model.tensors.size(), 4u);
        std::vector<float> c(1);
        dequantize_row(GgmlType::F32, model.tensors.at("c")->bytes.data(), 1, c.data());
        EXPECT_EQ(c[0], 7.0f);
        EXPECT_EQ(model.tensors.at("d")->type, 8u);
    }
    EXPECT_EQ(open_gguf(write(with_tensors())).tensors.size(), 4u);  // a single file
}

TEST_F(Gguf, SplitPartsMissingOrDisagreeingAreNamed) {
    const std::vector<std::vector<GgufTensorSpec>> parts = {
        {{"a", {1}, 0, f32_bytes({1})}}, {{"b", {1}, 0, f32_bytes({2})}}, {{"c", {1}, 0, f32_bytes({3})}}};
    auto paths = write_gguf_split(dir_.path, "m", {}, parts);
    fs::remove(paths[1]);
    EXPECT_EQ(error_of([&] { open_gguf(paths[0]); }),
              paths[1].string() + ": missing (part 2 of the 3 of a split GGUF model)");

    paths = write_gguf_split(dir_.path, "m", {}, parts);
    GgufSpec wrong;  // part 2 says it is one of 2
    wrong.metadata = {{"split.no", gguf_uint16(1)}, {"split.count", gguf_uint16(2)}};
    wrong.tensors = parts[1];
    write_gguf(paths[1], wrong);
    EXPECT_EQ(error_of([&] { open_gguf(paths[2]); }),
              paths[1].string() + ": split.count is 2, but the file is named as one of 3 parts");

    wrong.metadata = {{"split.no", gguf_uint16(0)}, {"split.count", gguf_uint16(3)}};
    write_gguf(paths[1], wrong);
    EXPECT_EQ(error_of([&] { open_gguf(paths[0]); }),
              paths[1].string() + ": split.no is 0, but the file is named as part 2 (split.no counts from 0)");

    wrong.metadata = {
        {"split.no", gguf_uint16(1)}, {"split.count", gguf_uint16(3)}, {"split.tensors.count", gguf_int32(4)}};
    write_gguf(paths[1], wrong);
    EXPECT_EQ(error_of([&] { open_gguf(paths[0]); }),
              paths[1].string() + ": split.tensors.count is 4, but the 3 parts hold 3 tensors");
}

// Every cut of a valid file is refused with one line; a cut in each region
// names what it cut.
TEST_F(Gguf, TruncatedFilesNameTheRegionCut) {
    GgufSpec spec;
    spec.metadata = {{"general.name", gguf_string("truncated")},
                     {"arr", gguf_array(4, {gguf_uint32(1), gguf_uint32(2)})}};
    spec.tensors = {{"w", {8}, 0, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8})}};
    GgufLayout at{};
    const std::string bytes = gguf_bytes(spec, &at);
    const fs::path path = dir_.path / "cut.gguf";
    for (size_t size = 0; size < bytes.size(); ++size) {
        write_bytes(path, bytes.substr(0, size));
        ASSERT_NE(error_opening(path), "") << "cut at " << size;
    }
    const size_t second_key = at.metadata + 8 + 12 + 4 + 8 + 9;
    const std::vector<std::pair<size_t, std::string>> cuts = {
        {2, "the magic runs past the end of the file"},
        {12, "the header runs past the end of the file"},
        {second_key + 3, "the name of key 1 runs past the end of the file"},
        {at.metadata + 8 + 12 + 4 + 8 + 3, "key 'general.name': its length 9 runs past the end of the file"},
        {second_key + 8 + 3 + 4 + 2, "key 'arr' runs past the end of the file"},
        {second_key + 8 + 3 + 4 + 4 + 8 + 5,
         "key 'arr': an array of 2 uint32 runs past the end of the file (5 bytes left)"},
        {at.tensor_infos + 5, "the name of tensor 0 runs past the end of the file"},
        {at.tensor_infos + 8 + 1 + 4 + 3, "tensor 'w''s info runs past the end of the file"},
        {at.data + 10, "tensor 'w': F32 [8] at offset 0 runs past the end of the 10-byte data section"},
    };
    for (const auto& [size, problem] : cuts) {
        write_bytes(path, bytes.substr(0, size));
        const std::string message = error_opening(path);
        EXPECT_NE(message.find(path.string() + ": " + problem), std::string::npos) << size << ": " << message;
    }
}

TEST_F(Gguf, HostileHeadersAndMetadata) {
    GgufSpec spec;
    spec.magic = "GGML";
    expect_refused(spec, "not a GGUF file: it starts with bytes 47 47 4d 4c, not \"GGUF\"");
    for (uint32_t version : {1u, 4u}) {
        spec = {};
        spec.version = version;
        expect_refused(
            spec, "GGUF version " + std::to_string(version) + ", which Headscope does not read (it reads 2 and 3)");
    }
    spec = {};
    spec.tensor_count = 1ull << 60;
    expect_refused(spec, "the header counts 1152921504606846976 tensors, more than the rest of the file holds");
    spec = {};
    spec.metadata_count = 1ull << 60;
    expect_refused(spec, "the header counts 1152921504606846976 metadata keys, more than the rest of the file holds");

    const auto refused_value = [&](const GgufMetaValue& value, const std::string& problem) {
        GgufSpec one;
        one.metadata = {{"k", value}};
        expect_refused(one, problem);
    };
    refused_value({8, std::string("\0\0\0\0\0\1\0\0abc", 11)},
                  "key 'k': its length 1099511627776 runs past the end of the file (3 bytes left)");
    refused_value(gguf_array(4, {}, 1ull << 62), "key 'k': an array of 4611686018427387904 uint32 runs past the end");
    refused_value(gguf_array(8, {gguf_string("a")}, 1ull << 62), "key 'k': an array of 4611686018427387904 string");
    GgufMetaValue deep = gguf_array(4, {gguf_uint32(1)});
    for (int level = 0; level < 4; ++level) deep = gguf_array(9, {deep});
    refused_value(deep, "key 'k'[0][0][0][0]: arrays nested deeper than 4 levels");
    refused_value({7, "\x02"}, "key 'k': bool value 2 is neither 0 nor 1");
    refused_value({13, ""}, "key 'k': value type 13 is not a GGUF type");
    refused_value(gguf_array(20, {}), "key 'k': array element type 20 is not a GGUF type");

    spec = {};
    spec.metadata = {{"a", gguf_uint8(1)}, {"b", gguf_uint8(2)}, {"a", gguf_uint8(3)}};
    expect_refused(spec, "key 'a' appears twice");
    for (uint32_t alignment : {0u, 3u}) {
        spec.metadata = {{"general.alignment", gguf_uint32(alignment)}};
        expect_refused(spec, "general.alignment " + std::to_string(alignment) + " is not a power of two");
    }
    spec.metadata = {{"general.alignment", gguf_uint64(32)}};
    expect_refused(spec, "general.alignment is a uint64, not a uint32");
}

TEST_F(Gguf, HostileTensorInfos) {
    const auto refused = [&](std::vector<GgufTensorSpec> tensors, const std::string& problem) {
        GgufSpec spec;
        spec.tensors = std::move(tensors);
        expect_refused(spec, problem);
    };
    const std::string eight_floats = f32_bytes({1, 2, 3, 4, 5, 6, 7, 8});
    refused({{"w", {}, 0, eight_floats}}, "tensor 'w': 0 dimensions; GGUF tensors have 1 to 4");
    refused({{"w", {1, 1, 1, 1, 8}, 0, eight_floats}}, "tensor 'w': 5 dimensions; GGUF tensors have 1 to 4");
    refused({{"w", {8, 0}, 0, eight_floats}}, "tensor 'w': dimension 1 is 0");
    refused({{"w", {1ull << 32, 1ull << 31}, 0, eight_floats}}, "tensor 'w': its dimensions make more than 2^63 - 1");
    refused({{"w", {100}, 12, eight_floats}},
            "tensor 'w': its first dimension 100 is not a multiple of Q4_K's block of 256 values");
    refused({{"w", {8}, 0, eight_floats, 8}}, "tensor 'w': offset 8 is not a multiple of the alignment 32");
    refused({{"w", {16}, 0, eight_floats}},
            "tensor 'w': F32 [16] at offset 0 runs past the end of the 32-byte data section");
    refused({{"w", {8}, 0, eight_floats}, {"v", {8}, 0, "", 1ull << 40}},
            "tensor 'v': offset 1099511627776 is past the end of the 32-byte data section");
    refused({{"w", {8}, 0, eight_floats, 32}, {"v", {16}, 0, eight_floats + eight_floats, 0}},
            "tensor 'w' at offset 32 overlaps tensor 'v' (offset 0, 64 bytes)");
    refused({{"w", {8}, 0, eight_floats}, {"w", {8}, 0, eight_floats}}, "tensor 'w' appears twice");
    refused({{std::string(65, 'n'), {8}, 0, eight_floats}}, "its name is 65 bytes long, longer than GGUF's 64");
}

}  // namespace
