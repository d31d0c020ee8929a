// The libFuzzer harnesses' shared support: see fuzz_support.h.
#include "fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "headscope/tokenize/tokenizer.h"

namespace headscope::fuzz {

namespace fs = std::filesystem;

namespace {

struct ScratchDir {
    ScratchDir() {
        std::string pattern = (fs::temp_directory_path() / "headscope-fuzz-XXXXXX").string();
        if (!mkdtemp(pattern.data())) fail("cannot make a scratch directory from " + pattern);
        path = pattern;
    }
    ~ScratchDir() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
    fs::path path;
};

}  // namespace

const fs::path& scratch_dir() {
    static const ScratchDir dir;
    return dir.path;
}

void write_file(const fs::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) fail("cannot write " + path.string());
}

// vocab.json gives each byte's stand-in code point as a \u escape, so no
// UTF-8 encoding is needed here.
void write_byte_vocab(const fs::path& dir) {
    std::string vocab = "{";
    for (int b = 0; b < 256; ++b) {
        char entry[24];
        std::snprintf(entry, sizeof entry, "%s\"\\u%04x\": %d", b ? ", " : "",
                      static_cast<unsigned>(byte_to_unicode()[b]), b);
        vocab += entry;
    }
    write_file(dir / "vocab.json", vocab + "}\n");
    write_file(dir / "merges.txt", "#version: 0.2\n\xc4\xa0 t\n");  // one merge ("Ġ t"), as a tokenizer needs
}

void fail(const std::string& what) {
    std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
    std::abort();
}

void check_error_message(std::string_view message) {
    if (message.find('\n') != std::string_view::npos)
        fail("an Error message spans lines: " + std::string(message.substr(0, 200)));
}

}  // namespace headscope::fuzz
