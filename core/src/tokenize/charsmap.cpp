// SentencePiece's precompiled charsmap: its blob checked, and applied as
// llama.cpp applies a GGUF file's; see charsmap.h.
#include "charsmap.h"

#include "headscope/base/error.h"
#include "unicode.h"

#include <cstdint>
#include <cstring>
#include <functional>

namespace headscope {

namespace {

// A blob's parts: <trie bytes, 4 bytes><32-bit units><NUL-terminated replacements>.
struct CharsmapParts {
    std::string_view trie, replacements;
};

// The parts, or false when the blob is too short for its trie-size word, or
// its trie leaves no byte after it.
bool split_blob(std::string_view blob, CharsmapParts& parts) {
    uint32_t trie_bytes = 0;
    if (blob.size() <= sizeof trie_bytes) return false;
    std::memcpy(&trie_bytes, blob.data(), sizeof trie_bytes);
    if (trie_bytes >= blob.size() - sizeof trie_bytes) return false;
    parts = {blob.substr(sizeof trie_bytes, trie_bytes), blob.substr(sizeof trie_bytes + trie_bytes)};
    return true;
}

uint32_t unit_at(std::string_view trie, size_t i) {
    uint32_t u = 0;
    std::memcpy(&u, trie.data() + 4 * i, 4);
    return u;
}

// A unit's offset to its children (darts-clone's: bits 10-30, shifted 8 more with bit 9).
uint32_t offset_of(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

// The replacement a leaf's value unit starts, up to its NUL.
std::string_view replacement_at(std::string_view replacements, uint32_t value_unit) {
    const size_t start = value_unit & 0x7FFFFFFFu;
    return replacements.substr(start, replacements.find('\0', start) - start);
}

// Whether every walk stays inside the parts (from the root and from every
// unit a byte can reach, a value unit, bit 31 set, never matching one), each
// leaf's replacement ending inside them and passing `replacement_ok`.
bool walks_stay_inside(const CharsmapParts& parts, const std::function<bool(std::string_view)>& replacement_ok) {
    const size_t units = parts.trie.size() / 4, last_nul = parts.replacements.rfind('\0');
    for (size_t i = 0; i < units; ++i) {
        const uint32_t u = unit_at(parts.trie, i);
        if (i > 0 && (u >> 31)) continue;
        const size_t base = i ^ offset_of(u);
        if ((base | 0xFF) >= units) return false;
        if (i == 0 || !((u >> 8) & 1)) continue;
        const uint32_t value = unit_at(parts.trie, base);
        if (last_nul == std::string_view::npos || (value & 0x7FFFFFFFu) > last_nul) return false;
        if (!replacement_ok(replacement_at(parts.replacements, value))) return false;
    }
    return units > 0;
}

bool is_utf8(std::string_view text) {
    for (size_t at = 0; at < text.size();) {
        const size_t length = code_point_at(text, at).length;
        if (length == 0) return false;
        at += length;
    }
    return true;
}

}  // namespace

bool charsmap_is_safe(std::string_view blob) {
    CharsmapParts parts;
    if (!split_blob(blob, parts)) return true;  // libsentencepiece refuses it
    return walks_stay_inside(parts, [](std::string_view) { return true; });
}

Charsmap::Charsmap(std::string blob) : blob_(std::move(blob)) {
    CharsmapParts parts;
    if (!split_blob(blob_, parts))
        throw Error(std::to_string(blob_.size()) + " bytes, too few for its trie's size, the trie and replacements");
    if (!walks_stay_inside(parts, is_utf8))
        throw Error("its trie is malformed (a walk leaves it, or a replacement is not UTF-8)");
    trie_ = parts.trie;
    replacements_ = parts.replacements;
}

std::string Charsmap::normalized(std::string_view text, size_t max_size) const {
    std::string out;
    out.reserve(text.size());
    for (size_t at = 0; at < text.size() && out.size() <= max_size;) {
        // The longest match from `at`: each byte's child is the node's offset xor the byte.
        size_t longest = 0;
        uint32_t value = 0;
        size_t node = offset_of(unit_at(trie_, 0));
        for (size_t end = at; end < text.size() && text[end] != '\0'; ++end) {
            const auto byte = static_cast<unsigned char>(text[end]);
            node ^= byte;
            const uint32_t u = unit_at(trie_, node);
            if ((u & ((1u << 31) | 0xFF)) != byte) break;
            node ^= offset_of(u);
            if ((u >> 8) & 1) {
                longest = end - at + 1;
                value = unit_at(trie_, node);
            }
        }
        if (longest > 0) {
            out += replacement_at(replacements_, value);
            at += longest;
        } else if (const size_t length = code_point_at(text, at).length; length > 0) {
            out.append(text.substr(at, length));
            at += length;
        } else {  // inside a character a match ended in: U+FFFD for the byte, as llama.cpp
            out += "\xEF\xBF\xBD";
            at += 1;
        }
    }
    return out;
}

}  // namespace headscope
