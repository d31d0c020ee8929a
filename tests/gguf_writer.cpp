// The tests' GGUF writer (gguf_writer.h): little endian, byte by byte.
#include "gguf_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace headscope::test {

namespace {

template <typename T>
std::string little_endian(T value) {
    std::string out(sizeof value, '\0');
    std::memcpy(out.data(), &value, sizeof value);
    return out;
}

std::string length_prefixed(const std::string& text) { return little_endian<uint64_t>(text.size()) + text; }

}  // namespace

GgufMetaValue gguf_uint8(uint8_t value) { return {0, little_endian(value)}; }
GgufMetaValue gguf_int8(int8_t value) { return {1, little_endian(value)}; }
GgufMetaValue gguf_uint16(uint16_t value) { return {2, little_endian(value)}; }
GgufMetaValue gguf_int16(int16_t value) { return {3, little_endian(value)}; }
GgufMetaValue gguf_uint32(uint32_t value) { return {4, little_endian(value)}; }
GgufMetaValue gguf_int32(int32_t value) { return {5, little_endian(value)}; }
GgufMetaValue gguf_float32(float value) { return {6, little_endian(value)}; }
GgufMetaValue gguf_bool(bool value) { return {7, std::string(1, value ? '\1' : '\0')}; }
GgufMetaValue gguf_string(const std::string& value) { return {8, length_prefixed(value)}; }
GgufMetaValue gguf_uint64(uint64_t value) { return {10, little_endian(value)}; }
GgufMetaValue gguf_int64(int64_t value) { return {11, little_endian(value)}; }
GgufMetaValue gguf_float64(double value) { return {12, little_endian(value)}; }

GgufMetaValue gguf_array(uint32_t element_type, const std::vector<GgufMetaValue>& elements,
                         std::optional<uint64_t> count) {
    std::string bytes = little_endian(element_type) + little_endian<uint64_t>(count.value_or(elements.size()));
    for (const GgufMetaValue& element : elements) bytes += element.bytes;
    return {9, bytes};
}

GgufMetaValue gguf_strings(const std::vector<std::string>& values) {
    std::vector<GgufMetaValue> elements;
    for (const std::string& value : values) elements.push_back(gguf_string(value));
    return gguf_array(8, elements);
}

std::string gguf_bytes(const GgufSpec& spec, GgufLayout* layout) {
    std::string out = spec.magic + little_endian(spec.version) +
                      little_endian<uint64_t>(spec.tensor_count.value_or(spec.tensors.size())) +
                      little_endian<uint64_t>(spec.metadata_count.value_or(spec.metadata.size()));
    GgufLayout at{};
    at.metadata = out.size();
    for (const auto& [key, value] : spec.metadata)
        out += length_prefixed(key) + little_endian(value.type) + value.bytes;

    at.tensor_infos = out.size();
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const GgufTensorSpec& tensor : spec.tensors) {
        const uint64_t offset = tensor.offset.value_or(next);
        offsets.push_back(offset);
        next = (offset + tensor.data.size() + spec.alignment - 1) / spec.alignment * spec.alignment;
        out += length_prefixed(tensor.name) + little_endian<uint32_t>(tensor.ne.size());
        for (uint64_t n : tensor.ne) out += little_endian(n);
        out += little_endian(tensor.type) + little_endian(offset);
    }

    // The data section: each tensor's bytes at its offset, zeros between.
    if (!spec.tensors.empty()) out.resize((out.size() + spec.alignment - 1) / spec.alignment * spec.alignment, '\0');
    at.data = out.size();
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
        const std::string& data = spec.tensors[i].data;
        if (data.empty()) continue;  // a tensor whose offset alone is the test
        const size_t begin = at.data + offsets[i];
        if (out.size() < begin + data.size()) out.resize(begin + data.size(), '\0');
        std::copy(data.begin(), data.end(), out.begin() + static_cast<std::ptrdiff_t>(begin));
    }
    at.end = out.size();
    if (layout) *layout = at;
    return out;
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_gguf(const std::filesystem::path& path, const GgufSpec& spec) { write_bytes(path, gguf_bytes(spec)); }

std::vector<std::filesystem::path> write_gguf_split(const std::filesystem::path& dir, const std::string& name,
                                                    const std::vector<std::pair<std::string, GgufMetaValue>>& metadata,
                                                    const std::vector<std::vector<GgufTensorSpec>>& parts) {
    size_t total = 0;
    for (const auto& tensors : parts) total += tensors.size();
    std::vector<std::filesystem::path> paths;
    for (size_t k = 0; k < parts.size(); ++k) {
        GgufSpec spec;
        if (k == 0) spec.metadata = metadata;
        spec.metadata.emplace_back("split.no", gguf_uint16(static_cast<uint16_t>(k)));
        spec.metadata.emplace_back("split.count", gguf_uint16(static_cast<uint16_t>(parts.size())));
        spec.metadata.emplace_back("split.tensors.count", gguf_int32(static_cast<int32_t>(total)));
        spec.tensors = parts[k];
        char suffix[64];
        std::snprintf(suffix, sizeof suffix, "-%05zu-of-%05zu.gguf", k + 1, parts.size());
        paths.push_back(dir / (name + suffix));
        write_gguf(paths.back(), spec);
    }
    return paths;
}

}  // namespace headscope::test
