// Writes GGUF files for the tests: a header, metadata of every value type,
// tensor infos and raw tensor bytes laid out at the alignment, split parts;
// and, on request, written wrong (the hostile files of test_gguf).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace headscope::test {

// A metadata value, encoded: its GGUF type id and its bytes after the type.
struct GgufMetaValue {
    uint32_t type;
    std::string bytes;
};

GgufMetaValue gguf_uint8(uint8_t value);
GgufMetaValue gguf_int8(int8_t value);
GgufMetaValue gguf_uint16(uint16_t value);
GgufMetaValue gguf_int16(int16_t value);
GgufMetaValue gguf_uint32(uint32_t value);
GgufMetaValue gguf_int32(int32_t value);
GgufMetaValue gguf_float32(float value);
GgufMetaValue gguf_bool(bool value);
GgufMetaValue gguf_string(const std::string& value);
GgufMetaValue gguf_uint64(uint64_t value);
GgufMetaValue gguf_int64(int64_t value);
GgufMetaValue gguf_float64(double value);
// An array of `elements`, each of type `element_type` (written as given, so
// that a test can make them disagree), with `count` in place of their number.
GgufMetaValue gguf_array(uint32_t element_type, const std::vector<GgufMetaValue>& elements,
                         std::optional<uint64_t> count = std::nullopt);
GgufMetaValue gguf_strings(const std::vector<std::string>& values);

struct GgufTensorSpec {
    std::string name;
    std::vector<uint64_t> ne;  // ne[0] contiguous
    uint32_t type;             // a ggml type id
    std::string data;          // its bytes, written at its offset
    // From the data section's start; by default the next multiple of the
    // alignment after the previous tensor's bytes.
    std::optional<uint64_t> offset = std::nullopt;
};

struct GgufSpec {
    std::vector<std::pair<std::string, GgufMetaValue>> metadata;
    std::vector<GgufTensorSpec> tensors;
    // How the file is laid out; general.alignment is written only when a test puts it in metadata.
    uint64_t alignment = 32;
    // Written wrong on request:
    std::string magic = "GGUF";
    uint32_t version = 3;
    std::optional<uint64_t> tensor_count = std::nullopt;    // instead of tensors.size()
    std::optional<uint64_t> metadata_count = std::nullopt;  // instead of metadata.size()
};

// Where each region of a written file starts.
struct GgufLayout {
    size_t metadata, tensor_infos, data, end;
};

// The whole file's bytes; its regions in `layout` when given.
std::string gguf_bytes(const GgufSpec& spec, GgufLayout* layout = nullptr);
void write_gguf(const std::filesystem::path& path, const GgufSpec& spec);
void write_bytes(const std::filesystem::path& path, const std::string& bytes);

// Writes `parts.size()` files <dir>/<name>-0000k-of-0000n.gguf, part k with
// the tensors parts[k - 1] and the split keys (split.no k - 1, split.count n,
// split.tensors.count the total); the first also with `metadata`. Returns their paths.
std::vector<std::filesystem::path> write_gguf_split(const std::filesystem::path& dir, const std::string& name,
                                                    const std::vector<std::pair<std::string, GgufMetaValue>>& metadata,
                                                    const std::vector<std::vector<GgufTensorSpec>>& parts);

}  // namespace headscope::test
