// What the libFuzzer harnesses share: a scratch directory for the files a
// harness hands to a reader, and the rule every harness enforces: a reader
// returns, or throws headscope::Error with a one-line message. Any other
// exception escapes, and libFuzzer reports it as a crash. The ordinary test
// build renames each harness's LLVMFuzzerTestOneInput to fuzz_<name>
// (tests/fuzz/CMakeLists.txt) and replays its corpus (test_fuzz_corpus).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "headscope/base/error.h"

namespace headscope::fuzz {

// This process's own directory under the system temp dir ($TMPDIR; tools/fuzz
// points it at /dev/shm), removed at exit.
const std::filesystem::path& scratch_dir();

// The fuzzer's input as bytes.
inline std::string_view as_bytes(const uint8_t* data, size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// An input of two files: the bytes before the first line "---" (the first
// "\n---\n", which valid JSON, holding no raw newline in a string, never
// has) and those after it; nullopt after when there is no separator.
struct TwoParts {
    std::string_view first;
    std::optional<std::string_view> second;
};
inline TwoParts split_at_dashes(std::string_view input) {
    constexpr std::string_view separator = "\n---\n";
    const size_t at = input.find(separator);
    if (at == std::string_view::npos) return {input, std::nullopt};
    return {input.substr(0, at), input.substr(at + separator.size())};
}

// Replaces the file at `path` with `bytes`; aborts if it cannot.
void write_file(const std::filesystem::path& path, std::string_view bytes);

// vocab.json of the 256 byte tokens alone (V = 256) and merges.txt with one
// merge, as a tokenizer needs: the small models' vocabulary.
void write_byte_vocab(const std::filesystem::path& dir);

// Prints "fuzz property violated: <what>" and aborts: a crash to libFuzzer, a
// failed test to the replay.
[[noreturn]] void fail(const std::string& what);

// Aborts unless `message` is one line.
void check_error_message(std::string_view message);

// Runs `read`, accepting an Error with a one-line message.
template <typename Read>
void expect_success_or_error(Read&& read) {
    try {
        read();
    } catch (const Error& e) {
        check_error_message(e.what());
    }
}

}  // namespace headscope::fuzz
