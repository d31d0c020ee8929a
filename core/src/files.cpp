// Reading files: see files.h.
#include "headscope/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "headscope/error.h"

namespace headscope {

namespace {

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    return "not a file";
}

}  // namespace

OpenFile::OpenFile(const std::filesystem::path& path, const std::string& what) {
    const std::string about = what.empty() ? "" : " " + what;
    // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) throw Error(path.string() + ": cannot open" + about + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        const int err = errno;
        ::close(fd_);
        throw Error(path.string() + ": cannot open" + about + ": " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd_);
        throw Error(path.string() + ": not a regular file but " + kind_of(st.st_mode) +
                    (what.empty() ? "" : " (" + what + ")"));
    }
    size_ = static_cast<size_t>(st.st_size);
}

OpenFile::~OpenFile() { ::close(fd_); }

std::string read_file(const std::filesystem::path& path, const std::string& what) {
    const OpenFile file(path, what);
    std::string bytes;
    bytes.reserve(file.size());
    char chunk[1 << 16];
    for (;;) {
        const ssize_t n = ::read(file.fd(), chunk, sizeof chunk);
        if (n == 0) return bytes;
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Error(path.string() + ": cannot read" + (what.empty() ? "" : " " + what) + ": " +
                        std::strerror(errno));
        }
        bytes.append(chunk, static_cast<size_t>(n));
    }
}

}  // namespace headscope
