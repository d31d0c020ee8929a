// libFuzzer harness for the window's settings.json (app/state/settings.cpp,
// which needs no GL): the input is the file. Reading never
// throws (a file that is not settings is one warning and the defaults), and
// whatever was read writes and reads back the same.
#include <cstdio>
#include <tuple>

#include "fuzz_support.h"
#include "state/settings.h"

using namespace headscope;
namespace fs = std::filesystem;

namespace {

auto fields(const Settings& s) {
    const AttentionOptions& o = s.options;
    return std::tie(s.model, s.texts, s.colormap, o.causal, o.padding_mask, o.n_head, o.scale, o.split,
                    s.sliding_window, s.export_dir, s.window.width, s.window.height, s.window.position,
                    s.window.maximized);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const fs::path file = fuzz::scratch_dir() / "settings.json", copy = fuzz::scratch_dir() / "copy.json";
    fuzz::write_file(file, fuzz::as_bytes(data, size));
    const Settings read = read_settings(file);
    write_settings(copy, read);
    if (fields(read_settings(copy)) != fields(read)) fuzz::fail("the settings read do not read back as written");
    return 0;
}
