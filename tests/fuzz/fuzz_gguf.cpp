// libFuzzer harness for the GGUF reader: the input is a whole .gguf file.
// Every metadata value the reader accepts is read back (arrays element by
// element, nested ones too), every tensor it places must view exactly the
// bytes its type and shape need, the first row of each tensor of a type
// Headscope reads is dequantized, and the tokenizer its metadata describes
// (its charsmap too) encodes a text.
#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "headscope/base/ggml_types.h"
#include "headscope/io/gguf.h"
#include "headscope/tokenize/tokenizer.h"

using namespace headscope;

namespace {

// Reads elements 0..999 and the last one of `array`: a nested array has no
// checkpoints, so reading all of a long one would take quadratic time.
void walk(const GgufArray& array) {
    const uint64_t n = array.size();
    for (uint64_t i = 0; i < n; i = i < 999 ? i + 1 : std::max(i + 1, n - 1)) {
        fuzz::expect_success_or_error([&] {
            switch (array.element_type()) {
                case GgufValueType::string: array.string(i); break;
                case GgufValueType::boolean: array.boolean(i); break;
                case GgufValueType::array: walk(array.array(i)); break;
                default: array.number(i); fuzz::expect_success_or_error([&] { array.integer(i); });
            }
        });
    }
}

void walk_metadata(const GgufFile& file) {
    for (std::string_view key : file.keys()) {
        const GgufValueType type = *file.type(key);
        fuzz::expect_success_or_error([&] {
            switch (type) {
                case GgufValueType::string: file.string(key); break;
                case GgufValueType::boolean: file.boolean(key); break;
                case GgufValueType::array: walk(*file.array(key)); break;
                default: file.number(key); fuzz::expect_success_or_error([&] { file.integer(key); });
            }
        });
    }
}

void read_first_rows(const GgufFile& file) {
    for (const GgufTensor& tensor : file.tensors()) {
        const GgmlTypeTraits* traits = ggml_type_traits(tensor.type);
        if (!traits) {
            if (!tensor.bytes.empty())
                fuzz::fail("tensor '" + std::string(tensor.name) + "' of an unknown type has bytes");
            continue;
        }
        const uint64_t rows = tensor.element_count() / tensor.ne[0];
        const uint64_t row_bytes = tensor.ne[0] / traits->block_elements * traits->block_bytes;
        if (tensor.ne[0] % traits->block_elements != 0 || tensor.bytes.size() != row_bytes * rows)
            fuzz::fail("tensor '" + std::string(tensor.name) + "' views " + std::to_string(tensor.bytes.size()) +
                       " bytes for " + std::to_string(rows) + " rows of " + std::to_string(row_bytes));
        if (!traits->dequantized) continue;
        std::vector<float> row(tensor.ne[0]);
        dequantize_row(traits->type, tensor.bytes.data(), row.size(), row.data());
    }
}

// The tokenizer the metadata describes, if any, on letters with accents and
// case, CJK, a ligature, spaces and a tab, and an emoji.
void encode_with_its_tokenizer(const GgufFile& file) {
    if (!file.type("tokenizer.ggml.model")) return;
    fuzz::expect_success_or_error([&] {
        Tokenizer::load_gguf(file).encode(
            "Hello, W\xC3\xB6rld! \xE4\xBD\xA0\xE5\xA5\xBD \xEF\xAC\x81\t  x \xF0\x9F\x98\x80");
    });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::filesystem::path path = fuzz::scratch_dir() / "model.gguf";
    fuzz::write_file(path, fuzz::as_bytes(data, size));
    fuzz::expect_success_or_error([&] {
        const GgufFile file(path);
        walk_metadata(file);
        read_first_rows(file);
        encode_with_its_tokenizer(file);
    });
    return 0;
}
