// Reading files: the one way Headscope asks what is at a path and opens a
// file to read, so that every reader fails alike, with one line naming the
// file and the reason, and none can hang on a FIFO, read a directory or read
// more than it takes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>

namespace headscope {

// What is at a path, asked without throwing std::filesystem's exceptions.
enum class PathKind { missing, file, directory, other };
// `path`'s kind, links followed. Throws Error "<path>: <reason>" where it
// cannot be told (permission denied, a name too long, a link to itself).
PathKind path_kind(const std::filesystem::path& path);
// A regular file's size in bytes; throws Error as path_kind does, or when it cannot be had.
uint64_t file_bytes(const std::filesystem::path& path);

// A regular file open for reading; closed when it goes.
class OpenFile {
public:
    // Throws Error "<path>: cannot open[ what]: <reason>", or "<path>: not a
    // regular file but a directory" (a FIFO, a socket, a device), checked
    // before anything is read: opening never blocks. `what` says what the
    // file is to the reader, e.g. "the examples".
    explicit OpenFile(const std::filesystem::path& path, const std::string& what = "");
    ~OpenFile();
    OpenFile(const OpenFile&) = delete;
    OpenFile& operator=(const OpenFile&) = delete;

    int fd() const { return fd_; }
    size_t size() const { return size_; }

private:
    int fd_ = -1;
    size_t size_ = 0;
};

// The bytes of the file at `path`, opened as OpenFile does. Throws Error
// naming the file ("cannot read[ what]: <reason>") on a failing read, and
// ("<n> bytes, more than the <max_bytes>[ what] may have") on a file larger
// than `max_bytes`, before reading it (or, for a file that grows, once more
// than that has come).
std::string read_file(const std::filesystem::path& path, const std::string& what = "", size_t max_bytes = SIZE_MAX);
// At most the first `max_bytes` bytes of the file at `path`, for a reader
// that needs no more; otherwise as read_file.
std::string read_file_start(const std::filesystem::path& path, size_t max_bytes, const std::string& what = "");

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
