// Reader for GGUF files (ggml's docs/gguf.md), memory-mapped.
//
// Layout, little endian, no padding unless said:
//   "GGUF", version (u32: 2 or 3), tensor count (u64), metadata count (u64)
//   metadata: key (string), value type (u32), value
//   tensor infos: name (string), n_dims (u32), ne[n_dims] (u64 each, ne[0]
//                 the contiguous one), ggml type (u32), offset (u64)
//   padding to general.alignment (default 32), then the tensor data; each
//   offset is relative to it and a multiple of the alignment
// A string is a u64 byte count and that many bytes of UTF-8; an array is its
// element type (u32), a u64 count and the elements. Every count and length is
// checked against the bytes left before anything is read or allocated;
// strings and arrays stay views into the mapping.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headscope {

enum class GgufValueType : uint32_t {
    uint8 = 0,
    int8 = 1,
    uint16 = 2,
    int16 = 3,
    uint32 = 4,
    int32 = 5,
    float32 = 6,
    boolean = 7,
    string = 8,
    array = 9,
    uint64 = 10,
    int64 = 11,
    float64 = 12,
};

// "uint32", "string", "array", ...
const char* to_string(GgufValueType type);

class GgufCursor;  // the parser's reading position (core/src/io/gguf_cursor.h)

// An array of metadata, viewing the mapped file: its elements are read one
// at a time. Each accessor throws Error naming the key when the elements are
// of another type.
class GgufArray {
public:
    GgufValueType element_type() const { return element_type_; }
    uint64_t size() const { return size_; }

    // Element i (< size()) of an array of integers (any width, not negative),
    // of numbers (integers or floats), of strings, of booleans, or of arrays.
    uint64_t integer(uint64_t i) const;
    double number(uint64_t i) const;
    std::string_view string(uint64_t i) const;
    bool boolean(uint64_t i) const;
    GgufArray array(uint64_t i) const;

private:
    friend class GgufFile;
    GgufArray(std::string where, const std::byte* header, std::span<const uint64_t> checkpoints);
    const std::byte* element(uint64_t i, const char* wanted, bool is_wanted) const;

    std::string where_;  // "<file>: key '<key>'" and, nested, "[i]"
    GgufValueType element_type_;
    uint64_t size_;
    const std::byte* first_;
    // Where every 64th element of variable size starts, from first_, so that
    // element i is found without walking the ones before it; empty for nested arrays.
    std::span<const uint64_t> checkpoints_;
};

struct GgufTensor {
    std::string_view name;
    uint32_t n_dims;
    std::array<uint64_t, 4> ne;        // ne[0] is contiguous; 1 past n_dims
    uint32_t type;                     // a ggml type id (base/ggml_types.h), possibly one Headscope does not know
    uint64_t offset;                   // from the start of the data section
    std::span<const std::byte> bytes;  // inside the mapped file; empty for a type Headscope does not know

    uint64_t element_count() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
public:
    // Maps and validates the whole file; throws Error "<file>: <what is wrong>".
    explicit GgufFile(const std::filesystem::path& path);
    ~GgufFile();
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    const std::string& file() const { return file_; }
    uint32_t version() const { return version_; }

    // The metadata keys in file order, and the type of a key's value.
    const std::vector<std::string_view>& keys() const { return keys_; }
    std::optional<GgufValueType> type(std::string_view key) const;

    // A key's value; nullopt when the key is absent, Error naming the key,
    // the type found and the type wanted when it is of another type.
    // integer: any integer type, not negative; number: any integer or float.
    std::optional<uint64_t> integer(std::string_view key) const;
    std::optional<double> number(std::string_view key) const;
    std::optional<std::string_view> string(std::string_view key) const;
    std::optional<bool> boolean(std::string_view key) const;
    std::optional<GgufArray> array(std::string_view key) const;

    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // where the data section starts in the file
    // The tensors in file order, and one by name (nullptr when absent).
    const std::vector<GgufTensor>& tensors() const { return tensors_; }
    const GgufTensor* tensor(std::string_view name) const;

private:
    struct Value {
        GgufValueType type;
        const std::byte* data;              // the value's first byte
        std::vector<uint64_t> checkpoints;  // an array's (GgufArray)
    };
    const Value* find(std::string_view key, const char* wanted, bool (*accepts)(GgufValueType)) const;
    void parse();
    void parse_metadata(GgufCursor& cursor, uint64_t count);
    void parse_tensor_infos(GgufCursor& cursor, uint64_t count);
    void place_tensors();

    std::string file_;
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
    uint32_t version_ = 0;
    std::vector<std::string_view> keys_;
    std::map<std::string_view, Value> values_;
    uint32_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<GgufTensor> tensors_;
    std::map<std::string_view, size_t> tensor_index_;
};

// A GGUF model: one file, or all the parts of a split one
// ("<name>-00001-of-00003.gguf", any part named), with one table of the
// tensors of all parts. Each part's split.no, split.count and
// split.tensors.count are checked against its name and the others.
struct GgufModelFiles {
    std::vector<std::unique_ptr<GgufFile>> parts;  // in order; the first holds the model's metadata
    std::map<std::string_view, const GgufTensor*> tensors;

    const GgufFile& metadata() const { return *parts.front(); }
};

// Opens `path` and, when its name is that of a part of a split model, every
// part; throws Error naming the file for a part missing or disagreeing.
GgufModelFiles open_gguf(const std::filesystem::path& path);

}  // namespace headscope
