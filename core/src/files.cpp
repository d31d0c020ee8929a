// Whole-file reading: see files.h.
#include "headscope/files.h"

#include <fstream>

#include "headscope/error.h"

namespace headscope {

std::string read_file(const std::filesystem::path& path, const std::string& what) {
    const std::string about = what.empty() ? "" : " " + what;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path.string() + ": cannot open" + about);
    // istream::read turns a failing read (a directory, say) into badbit;
    // istreambuf_iterator would let the filebuf's own exception escape.
    std::string bytes;
    char chunk[1 << 16];
    while (in.read(chunk, sizeof chunk) || in.gcount() > 0) bytes.append(chunk, static_cast<size_t>(in.gcount()));
    if (in.bad()) throw Error(path.string() + ": cannot read" + about);
    return bytes;
}

}  // namespace headscope
