// Finding the data beside the program, and the version line: see installation.h.
#include "headscope/io/installation.h"

#include <cstdlib>

#include "headscope/base/error.h"

namespace headscope {

namespace fs = std::filesystem;

namespace {

bool holds_data(const fs::path& dir) {
    std::error_code ec;
    return fs::is_directory(dir / "builtin", ec);
}

}  // namespace

fs::path data_dir() {
    if (const char* set = std::getenv("HEADSCOPE_DATA"); set && *set) {
        if (!holds_data(set))
            throw Error(std::string("HEADSCOPE_DATA=") + set + " holds no Headscope data (no builtin/ folder in it)");
        return set;
    }
    std::error_code ec;
    const fs::path program = fs::read_symlink("/proc/self/exe", ec);
    if (ec) throw Error("cannot find Headscope's data: /proc/self/exe: " + ec.message() + " (set HEADSCOPE_DATA)");
    const fs::path installed = program.parent_path().parent_path() / "share" / "headscope",
                   build_tree = program.parent_path() / "share" / "headscope";
    if (holds_data(installed)) return installed;
    if (holds_data(build_tree)) return build_tree;
    throw Error("Headscope's data (the built-in model, examples, font) is missing: neither " + installed.string() +
                " nor " + build_tree.string() + " holds it (reinstall, or set HEADSCOPE_DATA to its folder)");
}

std::string version_line(const std::string& program) {
#ifdef HEADSCOPE_HAS_CUDA
    const char* cuda = "built in";
#else
    const char* cuda = "not built in";
#endif
    return program + " " HEADSCOPE_VERSION " (CUDA backend: " + cuda + ")";
}

}  // namespace headscope
