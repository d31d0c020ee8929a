// The safetensors reader: maps the file read-only, validates the whole header
// against the file before any tensor data is read, and converts F32, F16 and
// BF16 tensors to float32 with hand-written bit conversions.
#include "headscope/io/safetensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "../base/half_float.h"
#include "headscope/base/error.h"
#include "headscope/base/shape.h"
#include "headscope/io/files.h"
#include "headscope/io/json_input.h"

namespace headscope {

namespace {

using nlohmann::json;

// A header larger than this is certainly not a model's tensor table, and
// parsing it would cost more memory than the weights it describes.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
// A tensor's entry is 8 nodes; shards hold a few thousand tensors. A header
// at the limit parses into at most about 100 MB (json_input.h).
constexpr size_t max_header_nodes = 1 << 20;

std::optional<DType> parse_dtype(const std::string& name) {
    for (DType d : {DType::F32, DType::F16, DType::BF16})  // safetensors has no block-quantized types
        if (name == to_string(d)) return d;
    return std::nullopt;
}

// The element size of each dtype of the safetensors format; 0 for a name it lacks.
uint64_t format_dtype_size(const std::string& name) {
    static const std::map<std::string, uint64_t> sizes = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
    const auto it = sizes.find(name);
    return it == sizes.end() ? 0 : it->second;
}

// The non-negative integers of a JSON array; a message on anything else.
std::optional<std::vector<uint64_t>> unsigned_list(const json& value) {
    if (!value.is_array()) return std::nullopt;
    std::vector<uint64_t> out;
    for (const json& v : value) {
        if (!v.is_number_unsigned()) return std::nullopt;
        out.push_back(v.get<uint64_t>());
    }
    return out;
}

struct Extent {
    uint64_t begin, end;
    const std::string* name;
};

// Validates the header of the mapped file `data` (`size` bytes, at least 8)
// and returns its float tensors, viewing into `data`; the names and dtypes of
// the others (validated the same way) go to `unread`.
std::map<std::string, TensorView> parse_header(const std::string& file, const std::byte* data, size_t size,
                                               std::map<std::string, RawTensor>& unread) {
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = header_len << 8 | std::to_integer<uint64_t>(data[i]);
    if (header_len > size - 8) {
        throw Error(file + ": header length " + std::to_string(header_len) + " runs past the end of the " +
                    std::to_string(size) + "-byte file");
    }
    if (header_len > kMaxHeaderBytes) {
        throw Error(file + ": header length " + std::to_string(header_len) + " exceeds the " +
                    std::to_string(kMaxHeaderBytes) + "-byte limit");
    }

    const json header = parse_json(std::string_view(reinterpret_cast<const char*>(data + 8), header_len),
                                   file + ": header", {kMaxHeaderBytes, max_header_nodes});
    if (!header.is_object()) throw Error(file + ": header is not a JSON object but " + describe_json(header));

    const std::byte* data_section = data + 8 + header_len;
    const uint64_t data_size = size - 8 - header_len;
    std::map<std::string, TensorView> tensors;
    std::vector<Extent> extents;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object()) throw Error(file + ": __metadata__ is not a JSON object");
            continue;
        }
        const std::string where = file + ": tensor '" + name + "': ";
        if (!entry.is_object()) throw Error(where + "entry is not a JSON object");

        const auto dtype_it = entry.find("dtype");
        if (dtype_it == entry.end() || !dtype_it->is_string()) throw Error(where + "dtype missing or not a string");
        const std::string dtype_name = dtype_it->get<std::string>();
        const std::optional<DType> dtype = parse_dtype(dtype_name);
        if (format_dtype_size(dtype_name) == 0)
            throw Error(where + "dtype " + dtype_name + " is not a safetensors dtype");

        const auto shape_it = entry.find("shape");
        if (shape_it == entry.end()) throw Error(where + "shape missing");
        const std::optional<std::vector<uint64_t>> shape = unsigned_list(*shape_it);
        if (!shape)
            throw Error(where + "shape " + describe_json(*shape_it) + " is not a list of non-negative integers");
        uint64_t bytes = format_dtype_size(dtype_name);
        for (uint64_t dim : *shape) {
            // Shapes are int64 in the engine; a zero elsewhere would keep the byte count from overflowing.
            if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                throw Error(where + "shape " + shape_string(*shape, Notation::json) + " has a dimension past 2^63 - 1");
            if (__builtin_mul_overflow(bytes, dim, &bytes))
                throw Error(where + "shape " + shape_string(*shape, Notation::json) + " overflows 64-bit byte size");
        }

        const auto offsets_it = entry.find("data_offsets");
        if (offsets_it == entry.end()) throw Error(where + "data_offsets missing");
        const std::optional<std::vector<uint64_t>> offsets = unsigned_list(*offsets_it);
        if (!offsets || offsets->size() != 2) {
            throw Error(where + "data_offsets " + describe_json(*offsets_it) +
                        " is not a list of two non-negative integers");
        }
        const uint64_t begin = (*offsets)[0], end = (*offsets)[1];
        if (begin > end)
            throw Error(where + "data_offsets " + shape_string(*offsets, Notation::json) + " end before they begin");
        if (end > data_size) {
            throw Error(where + "data_offsets " + shape_string(*offsets, Notation::json) + " outside the " +
                        std::to_string(data_size) + "-byte data section");
        }
        if (end - begin != bytes) {
            throw Error(where + "data_offsets " + shape_string(*offsets, Notation::json) + " hold " +
                        std::to_string(end - begin) + " bytes but " + dtype_name + " shape " +
                        shape_string(*shape, Notation::json) + " needs " + std::to_string(bytes));
        }

        // Empty tensors occupy no bytes, so they cannot overlap anything.
        const std::span<const std::byte> bytes_in_file(data_section + begin, end - begin);
        if (!dtype) {  // a mask or index buffer saved beside the weights, or blocks of another format
            const auto it = unread
                                .emplace(name, RawTensor{dtype_name, std::vector<int64_t>(shape->begin(), shape->end()),
                                                         bytes_in_file})
                                .first;
            if (begin != end) extents.push_back({begin, end, &it->first});
            continue;
        }
        TensorView view{*dtype, std::vector<int64_t>(shape->begin(), shape->end()), bytes_in_file};
        const auto [it, inserted] = tensors.emplace(name, std::move(view));
        if (begin != end) extents.push_back({begin, end, &it->first});
    }

    std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < extents.size(); ++i) {
        const Extent& prev = extents[i - 1];
        const Extent& cur = extents[i];
        if (cur.begin < prev.end) {
            throw Error(file + ": tensor '" + *cur.name + "': data_offsets " +
                        shape_string(std::vector{cur.begin, cur.end}, Notation::json) + " overlap tensor '" +
                        *prev.name + "' at " + shape_string(std::vector{prev.begin, prev.end}, Notation::json));
        }
    }
    return tensors;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
    const std::string file = path.string();
    const OpenFile opened(path);
    size_ = opened.size();
    if (size_ < 8)
        throw Error(file + ": " + std::to_string(size_) +
                    " bytes, shorter than the 8-byte header length of a safetensors file");
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, opened.fd(), 0);
    if (map == MAP_FAILED) throw Error(file + ": cannot map: " + std::strerror(errno));
    data_ = static_cast<const std::byte*>(map);

    try {
        tensors_ = parse_header(file, data_, size_, unread_);
    } catch (...) {
        ::munmap(const_cast<std::byte*>(data_), size_);
        throw;
    }
}

SafetensorsFile::~SafetensorsFile() { ::munmap(const_cast<std::byte*>(data_), size_); }

void SafetensorsFile::release(std::span<const std::byte> bytes) const {
    static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto map = reinterpret_cast<uintptr_t>(data_), at = reinterpret_cast<uintptr_t>(bytes.data());
    const uintptr_t begin = (std::max(at, map) + page - 1) / page * page;
    const uintptr_t end = std::min(at + bytes.size(), map + size_) / page * page;
    // Only advice: where the kernel declines, the pages stay as they were.
    if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

namespace {

// Values checked at a time: a whole number of any block type's blocks.
constexpr size_t chunk_elements = 16 * 1024;

const char* non_finite_kind(bool nan, bool negative) {
    if (nan) return "NaN";
    return negative ? "-Inf" : "Inf";
}

// Converts n elements and reports whether all were finite, in one pass so
// that each source byte is read once; the caller looks for the culprit only
// when there is one. The flag is an integer OR so the loop vectorises, and
// `convert` is a lambda, not a function pointer, so that it is inlined.
template <typename Bits, typename Convert>
bool convert_elements(const std::byte* src, size_t n, float* out, Convert convert, Bits exponent_mask) {
    Bits non_finite = 0;
    for (size_t i = 0; i < n; ++i) {
        const Bits bits = load_bits<Bits>(src + i * sizeof(Bits));
        out[i] = convert(bits);
        non_finite |= static_cast<Bits>((bits & exponent_mask) == exponent_mask);
    }
    return non_finite == 0;
}

template <typename Bits>
[[noreturn]] void throw_first_non_finite(const std::string& name, const std::byte* src, Bits exponent_mask,
                                         Bits sign_mask) {
    for (size_t i = 0;; ++i) {
        const Bits bits = load_bits<Bits>(src + i * sizeof(Bits));
        if ((bits & exponent_mask) != exponent_mask) continue;
        const bool nan = (bits & ~exponent_mask & ~sign_mask) != 0;
        throw Error("tensor '" + name + "': element " + std::to_string(i) + " is " +
                    non_finite_kind(nan, (bits & sign_mask) != 0));
    }
}

// Converts `n` elements of `tensor` from `src`; false if any was NaN or Inf.
bool convert_checked(DType dtype, const std::byte* src, size_t n, float* out) {
    switch (dtype) {
        case DType::F32: {
            const auto same = [](uint32_t bits) { return std::bit_cast<float>(bits); };
            return convert_elements<uint32_t>(src, n, out, same, 0x7f800000);
        }
        case DType::F16: {
            const auto widen = [](uint16_t bits) { return f16_to_f32(bits); };
            return convert_elements<uint16_t>(src, n, out, widen, 0x7c00);
        }
        case DType::BF16: {
            const auto widen = [](uint16_t bits) { return bf16_to_f32(bits); };
            return convert_elements<uint16_t>(src, n, out, widen, 0x7f80);
        }
        default: {  // a GGUF file's blocks: their float32 values checked
            widen_to_f32(dtype, src, n, out);
            const auto same = [](uint32_t bits) { return std::bit_cast<float>(bits); };
            return convert_elements<uint32_t>(reinterpret_cast<const std::byte*>(out), n, out, same, 0x7f800000);
        }
    }
}

[[noreturn]] void throw_non_finite(const std::string& name, const TensorView& tensor) {
    const std::byte* src = tensor.bytes.data();
    switch (tensor.dtype) {
        case DType::F32: throw_first_non_finite<uint32_t>(name, src, 0x7f800000, 0x80000000);
        case DType::F16: throw_first_non_finite<uint16_t>(name, src, 0x7c00, 0x8000);
        case DType::BF16: throw_first_non_finite<uint16_t>(name, src, 0x7f80, 0x8000);
        default: {  // blocks, widened a chunk at a time (a whole embedding would take gigabytes)
            std::vector<float> values(chunk_elements);
            const auto n = static_cast<size_t>(element_count(tensor.shape));
            for (size_t begin = 0; begin < n; begin += chunk_elements) {
                const size_t count = std::min(chunk_elements, n - begin);
                widen_to_f32(tensor.dtype, src + dtype_row_bytes(tensor.dtype, static_cast<int64_t>(begin)), count,
                             values.data());
                for (size_t i = 0; i < count; ++i)
                    if (!std::isfinite(values[i]))
                        throw Error("tensor '" + name + "': element " + std::to_string(begin + i) + " is " +
                                    non_finite_kind(std::isnan(values[i]), std::signbit(values[i])));
            }
            std::abort();  // unreachable: the caller found a non-finite value
        }
    }
}

}  // namespace

void check_finite(const std::string& name, const TensorView& tensor) {
    // In chunks that stay in the cache: the check reads every byte once and keeps nothing.
    std::vector<float> scratch(chunk_elements);
    const auto n = static_cast<size_t>(element_count(tensor.shape));
    for (size_t begin = 0; begin < n; begin += chunk_elements) {  // a whole number of any type's blocks
        const size_t count = std::min(chunk_elements, n - begin);
        const std::byte* chunk = tensor.bytes.data() + dtype_row_bytes(tensor.dtype, static_cast<int64_t>(begin));
        if (!convert_checked(tensor.dtype, chunk, count, scratch.data())) throw_non_finite(name, tensor);
    }
}

void convert_to_f32(const std::string& name, const TensorView& tensor, float* out) {
    if (!convert_checked(tensor.dtype, tensor.bytes.data(), static_cast<size_t>(element_count(tensor.shape)), out))
        throw_non_finite(name, tensor);
}

}  // namespace headscope
