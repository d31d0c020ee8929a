// The GGUF parser's reading position in the mapped file (io/gguf.h): every
// read is checked against the bytes left first, and a read past the end is
// an Error naming the file, what was being read and where.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "headscope/base/error.h"
#include "headscope/io/gguf.h"

namespace headscope {

class GgufCursor {
public:
    GgufCursor(const std::string& file, const std::byte* data, size_t size) : file_(file), data_(data), size_(size) {}

    size_t position() const { return position_; }
    size_t left() const { return size_ - position_; }
    const std::byte* here() const { return data_ + position_; }

    [[noreturn]] void fail(const std::string& what) const { throw Error(file_ + ": " + what); }

    // The next n bytes; `what()` names them in the error when fewer are left.
    template <typename What>
    const std::byte* take(uint64_t n, What&& what) {
        if (n > left()) {
            fail(what() + " runs past the end of the file (" + std::to_string(n) + " bytes at byte " +
                 std::to_string(position_) + " of " + std::to_string(size_) + ")");
        }
        const std::byte* at = here();
        position_ += n;
        return at;
    }

    template <typename T, typename What>
    T read(What&& what) {
        T value;
        std::memcpy(&value, take(sizeof value, what), sizeof value);
        return value;
    }

    // A GGUF string: a u64 byte count, then the bytes.
    template <typename What>
    std::string_view string(What&& what) {
        const auto length = read<uint64_t>(what);
        if (length > left()) {
            fail(what() + ": its length " + std::to_string(length) + " runs past the end of the file (" +
                 std::to_string(left()) + " bytes left)");
        }
        return {reinterpret_cast<const char*>(take(length, what)), length};
    }

private:
    const std::string& file_;
    const std::byte* data_;
    size_t size_;
    size_t position_ = 0;
};

// The bytes a value of `type` takes: its size for a number or a boolean, 0
// for a string or an array (their size is in the file).
uint64_t gguf_fixed_bytes(GgufValueType type);

}  // namespace headscope
