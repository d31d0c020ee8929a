// The GGUF reader (io/gguf.h): maps the file read-only, checks the header,
// the metadata (gguf_metadata.cpp) and every tensor info against the file,
// then places each tensor in the data section; and opens split models.
#include "headscope/io/gguf.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "gguf_cursor.h"
#include "headscope/base/error.h"
#include "headscope/base/ggml_types.h"
#include "headscope/io/files.h"

namespace headscope {

namespace {

// The least bytes a metadata entry takes (key length, type, a one-byte
// value) and a tensor info (name length, n_dims, one dimension, type, offset).
constexpr uint64_t min_entry_bytes = 8 + 4 + 1;
constexpr uint64_t min_tensor_info_bytes = 8 + 4 + 8 + 4 + 8;
// The spec's longest tensor name.
constexpr uint64_t max_name_bytes = 64;

std::string hex_bytes(const std::byte* p, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%02x", std::to_integer<unsigned>(p[i]));
        if (i) out += ' ';
        out += hex;
    }
    return out;
}

std::string shape_text(const GgufTensor& tensor) {
    std::string out = "[";
    for (uint32_t d = 0; d < tensor.n_dims; ++d) {
        if (d) out += ", ";
        out += std::to_string(tensor.ne[d]);
    }
    return out + "]";
}

}  // namespace

GgufFile::GgufFile(const std::filesystem::path& path) : file_(path.string()) {
    const OpenFile opened(path);
    size_ = opened.size();
    if (size_ == 0) throw Error(file_ + ": empty, not a GGUF file");
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, opened.fd(), 0);
    if (map == MAP_FAILED) throw Error(file_ + ": cannot map: " + std::strerror(errno));
    data_ = static_cast<const std::byte*>(map);
    try {
        parse();
    } catch (...) {
        ::munmap(const_cast<std::byte*>(data_), size_);
        throw;
    }
}

GgufFile::~GgufFile() { ::munmap(const_cast<std::byte*>(data_), size_); }

void GgufFile::parse() {
    GgufCursor cursor(file_, data_, size_);
    const std::byte* magic = cursor.take(4, [] { return std::string("the magic"); });
    if (std::memcmp(magic, "GGUF", 4) != 0)
        cursor.fail("not a GGUF file: it starts with bytes " + hex_bytes(magic, 4) + ", not \"GGUF\"");
    const auto header = [] { return std::string("the header"); };
    version_ = cursor.read<uint32_t>(header);
    if (version_ != 2 && version_ != 3)
        cursor.fail("GGUF version " + std::to_string(version_) + ", which Headscope does not read (it reads 2 and 3)");
    const auto tensor_count = cursor.read<uint64_t>(header);
    const auto metadata_count = cursor.read<uint64_t>(header);
    if (metadata_count > cursor.left() / min_entry_bytes)
        cursor.fail("the header counts " + std::to_string(metadata_count) +
                    " metadata keys, more than the rest of the file holds (" + std::to_string(cursor.left()) +
                    " bytes; each takes at least " + std::to_string(min_entry_bytes) + ")");
    if (tensor_count > cursor.left() / min_tensor_info_bytes)
        cursor.fail("the header counts " + std::to_string(tensor_count) +
                    " tensors, more than the rest of the file holds (" + std::to_string(cursor.left()) +
                    " bytes; each takes at least " + std::to_string(min_tensor_info_bytes) + ")");

    keys_.reserve(metadata_count);
    parse_metadata(cursor, metadata_count);
    if (const std::optional<GgufValueType> type = this->type("general.alignment")) {
        if (*type != GgufValueType::uint32)
            cursor.fail("general.alignment is a " + std::string(to_string(*type)) + ", not a uint32");
        alignment_ = static_cast<uint32_t>(*integer("general.alignment"));
        if (!std::has_single_bit(alignment_))
            cursor.fail("general.alignment " + std::to_string(alignment_) + " is not a power of two");
    }
    tensors_.reserve(tensor_count);
    parse_tensor_infos(cursor, tensor_count);
    data_offset_ = (cursor.position() + alignment_ - 1) / alignment_ * alignment_;
    place_tensors();
}

void GgufFile::parse_tensor_infos(GgufCursor& cursor, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) {
        GgufTensor tensor{};
        tensor.name = cursor.string([&] { return "the name of tensor " + std::to_string(i); });
        const std::string where = "tensor '" + std::string(tensor.name) + "'";
        const auto what = [&] { return where + "'s info"; };
        if (tensor.name.size() > max_name_bytes)
            cursor.fail(where + ": its name is " + std::to_string(tensor.name.size()) +
                        " bytes long, longer than GGUF's 64");
        tensor.n_dims = cursor.read<uint32_t>(what);
        if (tensor.n_dims < 1 || tensor.n_dims > 4)
            cursor.fail(where + ": " + std::to_string(tensor.n_dims) + " dimensions; GGUF tensors have 1 to 4");
        tensor.ne = {1, 1, 1, 1};
        uint64_t elements = 1;
        for (uint32_t d = 0; d < tensor.n_dims; ++d) {
            tensor.ne[d] = cursor.read<uint64_t>(what);
            if (tensor.ne[d] == 0) cursor.fail(where + ": dimension " + std::to_string(d) + " is 0");
            if (__builtin_mul_overflow(elements, tensor.ne[d], &elements) ||
                elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                cursor.fail(where + ": its dimensions make more than 2^63 - 1 elements");
        }
        tensor.type = cursor.read<uint32_t>(what);
        tensor.offset = cursor.read<uint64_t>(what);
        if (const GgmlTypeTraits* traits = ggml_type_traits(tensor.type);
            traits && tensor.ne[0] % traits->block_elements)
            cursor.fail(where + ": its first dimension " + std::to_string(tensor.ne[0]) + " is not a multiple of " +
                        traits->name + "'s block of " + std::to_string(traits->block_elements) + " values");
        if (!tensor_index_.emplace(tensor.name, tensors_.size()).second) cursor.fail(where + " appears twice");
        tensors_.push_back(tensor);
    }
}

// Each tensor's bytes, inside the data section and apart from the others'.
void GgufFile::place_tensors() {
    if (tensors_.empty()) return;
    if (data_offset_ > size_)
        throw Error(file_ + ": the tensor data would start at byte " + std::to_string(data_offset_) +
                    ", past the end of the " + std::to_string(size_) + "-byte file");
    const uint64_t data_size = size_ - data_offset_;
    std::vector<const GgufTensor*> placed;
    for (GgufTensor& tensor : tensors_) {
        const std::string where = file_ + ": tensor '" + std::string(tensor.name) + "'";
        if (tensor.offset % alignment_ != 0)
            throw Error(where + ": offset " + std::to_string(tensor.offset) + " is not a multiple of the alignment " +
                        std::to_string(alignment_));
        if (tensor.offset > data_size)
            throw Error(where + ": offset " + std::to_string(tensor.offset) + " is past the end of the " +
                        std::to_string(data_size) + "-byte data section");
        const GgmlTypeTraits* traits = ggml_type_traits(tensor.type);
        if (!traits) continue;  // its size is unknown: a later step says Headscope does not read it
        uint64_t bytes = tensor.ne[0] / traits->block_elements * traits->block_bytes;
        const bool overflows = __builtin_mul_overflow(bytes, tensor.ne[1] * tensor.ne[2] * tensor.ne[3], &bytes);
        if (overflows || bytes > data_size - tensor.offset)
            throw Error(where + ": " + std::string(traits->name) + " " + shape_text(tensor) + " at offset " +
                        std::to_string(tensor.offset) + " runs past the end of the " + std::to_string(data_size) +
                        "-byte data section");
        tensor.bytes = {data_ + data_offset_ + tensor.offset, bytes};
        placed.push_back(&tensor);
    }
    std::sort(placed.begin(), placed.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < placed.size(); ++i) {
        const GgufTensor& before = *placed[i - 1];
        const GgufTensor& tensor = *placed[i];
        if (tensor.offset < before.offset + before.bytes.size())
            throw Error(file_ + ": tensor '" + std::string(tensor.name) + "' at offset " +
                        std::to_string(tensor.offset) + " overlaps tensor '" + std::string(before.name) + "' (offset " +
                        std::to_string(before.offset) + ", " + std::to_string(before.bytes.size()) + " bytes)");
    }
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
    const auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// A split key of `part`, which every part of a split model has.
uint64_t split_key(const GgufFile& part, const char* key) {
    const std::optional<uint64_t> value = part.integer(key);
    if (!value) throw Error(part.file() + ": " + key + " missing, though the file is named as a part of a split model");
    return *value;
}

void check_split_part(const GgufFile& part, uint64_t number, uint64_t count) {
    if (const uint64_t no = split_key(part, "split.no"); no != number - 1)
        throw Error(part.file() + ": split.no is " + std::to_string(no) + ", but the file is named as part " +
                    std::to_string(number) + " (split.no counts from 0)");
    if (const uint64_t parts = split_key(part, "split.count"); parts != count)
        throw Error(part.file() + ": split.count is " + std::to_string(parts) + ", but the file is named as one of " +
                    std::to_string(count) + " parts");
}

// A split part's name, <stem>-00001-of-00003.gguf (5 digits each), taken apart.
struct PartName {
    std::string stem;
    uint64_t number, count;
};
std::optional<PartName> split_part_name(const std::string& name) {
    constexpr std::string_view tail = "-00000-of-00000.gguf";
    if (name.size() < tail.size() || !name.ends_with(".gguf")) return std::nullopt;
    const std::string_view end = std::string_view(name).substr(name.size() - tail.size());
    const auto digits = [&](size_t at) {
        uint64_t value = 0;
        for (size_t i = at; i < at + 5; ++i) {
            if (end[i] < '0' || end[i] > '9') return std::optional<uint64_t>();
            value = value * 10 + static_cast<uint64_t>(end[i] - '0');
        }
        return std::optional<uint64_t>(value);
    };
    const std::optional<uint64_t> number = digits(1), count = digits(10);
    if (end[0] != '-' || end.substr(6, 4) != "-of-" || !number || !count) return std::nullopt;
    return PartName{name.substr(0, name.size() - tail.size()), *number, *count};
}

}  // namespace

GgufModelFiles open_gguf(const std::filesystem::path& path) {
    GgufModelFiles model;
    const std::optional<PartName> part_name = split_part_name(path.filename().string());
    const bool split = part_name.has_value();
    if (!split) {
        model.parts.push_back(std::make_unique<GgufFile>(path));
        if (const std::optional<uint64_t> count = model.parts[0]->integer("split.count"); count && *count > 1)
            throw Error(path.string() + ": split.count says it is one of " + std::to_string(*count) +
                        " parts, but its name is not that of a part (<name>-00001-of-<count>.gguf, 5 digits each)");
    } else {
        const uint64_t count = part_name->count;
        if (count == 0 || part_name->number > count || part_name->number == 0)
            throw Error(path.string() + ": its name says part " + std::to_string(part_name->number) + " of " +
                        std::to_string(count));
        for (uint64_t number = 1; number <= count; ++number) {
            char suffix[64];
            std::snprintf(suffix, sizeof suffix, "-%05llu-of-%05llu.gguf", static_cast<unsigned long long>(number),
                          static_cast<unsigned long long>(count));
            const std::filesystem::path part_path = path.parent_path() / (part_name->stem + suffix);
            if (path_kind(part_path) == PathKind::missing)
                throw Error(part_path.string() + ": missing (part " + std::to_string(number) + " of the " +
                            std::to_string(count) + " of a split GGUF model)");
            model.parts.push_back(std::make_unique<GgufFile>(part_path));
            check_split_part(*model.parts.back(), number, count);
        }
    }
    uint64_t total = 0;
    for (const auto& part : model.parts) {
        total += part->tensors().size();
        for (const GgufTensor& tensor : part->tensors()) {
            const auto [it, added] = model.tensors.emplace(tensor.name, &tensor);
            if (!added)
                throw Error(part->file() + ": tensor '" + std::string(tensor.name) + "' is in an earlier part too");
        }
    }
    if (split) {
        for (const auto& part : model.parts)
            if (const uint64_t expected = split_key(*part, "split.tensors.count"); expected != total)
                throw Error(part->file() + ": split.tensors.count is " + std::to_string(expected) + ", but the " +
                            std::to_string(model.parts.size()) + " parts hold " + std::to_string(total) + " tensors");
    }
    return model;
}

}  // namespace headscope
