// Reading a whole file: the one way Headscope does it, so that every reader
// fails alike, with one line naming the file.
#pragma once
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>

namespace headscope {

// The bytes of the file at `path`. Throws Error "<path>: cannot open" or
// "<path>: cannot read", followed by `what` when given: what the file is to
// the reader, e.g. "the examples".
std::string read_file(const std::filesystem::path& path, const std::string& what = "");

// Writes the file at `path` whole or not at all: `write` streams the
// contents into a new file beside it, which is flushed to disk and then
// renamed over `path`, so that a reader, or a crash, sees the previous file
// or the complete new one. A link is followed: the file it names is
// replaced. A device or pipe (/dev/null, /dev/full) is written in place.
// On any failure the new file is removed, the previous one is untouched,
// and Error "<path>: cannot write <what>: <reason>" is thrown, e.g.
// "out.npy: cannot write the attention: No space left on device"; an
// exception from `write` is passed on after the same cleanup.
void write_file_atomically(const std::filesystem::path& path, const std::string& what,
                           const std::function<void(std::ostream&)>& write);

}  // namespace headscope
