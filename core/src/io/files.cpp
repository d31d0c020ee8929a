// Reading files: see files.h.
#include "headscope/io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include "headscope/base/error.h"

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

PathKind path_kind(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    // A missing file, or a missing folder on its way, is an answer, not a failure.
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
        throw Error(path.string() + ": " + ec.message());
    if (!fs::exists(status)) return PathKind::missing;
    if (fs::is_regular_file(status)) return PathKind::file;
    return fs::is_directory(status) ? PathKind::directory : PathKind::other;
}

uint64_t file_bytes(const std::filesystem::path& path) {
    std::error_code ec;
    const uintmax_t bytes = std::filesystem::file_size(path, ec);
    if (ec) throw Error(path.string() + ": cannot tell its size: " + ec.message());
    return bytes;
}

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

namespace {

// Up to `max_bytes` of the open file; `more` says whether a byte lay beyond them.
std::string read_up_to(const OpenFile& file, const std::filesystem::path& path, const std::string& what,
                       size_t max_bytes, bool& more) {
    std::string bytes;
    bytes.reserve(std::min(file.size(), max_bytes));
    char chunk[1 << 16];
    for (;;) {
        const size_t room = max_bytes - bytes.size();
        const size_t want = room < sizeof chunk ? room + 1 : sizeof chunk;  // one past the room: is there more?
        const ssize_t n = ::read(file.fd(), chunk, want);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Error(path.string() + ": cannot read" + (what.empty() ? "" : " " + what) + ": " +
                        std::strerror(errno));
        }
        bytes.append(chunk, std::min(static_cast<size_t>(n), room));
        if (static_cast<size_t>(n) > room) {
            more = true;
            return bytes;
        }
    }
    more = false;
    return bytes;
}

// `bytes`: the size the file says it has, 0 for one that grew past the limit as it was read.
std::string too_large(const std::filesystem::path& path, const std::string& what, uint64_t bytes, size_t max_bytes) {
    return path.string() + ": " + (bytes ? std::to_string(bytes) + " bytes, more" : std::string("more")) +
           " than the " + std::to_string(max_bytes) + " bytes" + (what.empty() ? " it" : " " + what) + " may have";
}

}  // namespace

std::string read_file(const std::filesystem::path& path, const std::string& what, size_t max_bytes) {
    const OpenFile file(path, what);
    if (file.size() > max_bytes) throw Error(too_large(path, what, file.size(), max_bytes));
    bool more = false;
    std::string bytes = read_up_to(file, path, what, max_bytes, more);
    if (more) throw Error(too_large(path, what, 0, max_bytes));
    return bytes;
}

std::string read_file_start(const std::filesystem::path& path, size_t max_bytes, const std::string& what) {
    const OpenFile file(path, what);
    bool more = false;
    return read_up_to(file, path, what, max_bytes, more);
}

namespace {

// An output buffer over a file descriptor that keeps the errno of a failed
// write, which an ofstream would reduce to a flag.
class DescriptorBuffer : public std::streambuf {
public:
    explicit DescriptorBuffer(int fd) : fd_(fd), buffer_(1 << 16) {
        setp(buffer_.data(), buffer_.data() + buffer_.size());
    }
    int error() const { return error_; }

protected:
    int_type overflow(int_type c) override {
        if (sync() != 0) return traits_type::eof();
        if (!traits_type::eq_int_type(c, traits_type::eof())) sputc(traits_type::to_char_type(c));
        return traits_type::not_eof(c);
    }
    int sync() override {
        for (const char* p = pbase(); p < pptr();) {
            const ssize_t n = ::write(fd_, p, static_cast<size_t>(pptr() - p));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                error_ = errno;
                return -1;
            }
            p += n;
        }
        setp(buffer_.data(), buffer_.data() + buffer_.size());
        return 0;
    }

private:
    int fd_;
    std::vector<char> buffer_;
    int error_ = 0;
};

// The file being written: closed, and removed unless it has been renamed
// over the target, however the write ends.
struct NewFile {
    int fd = -1;
    std::string temporary;  // empty when the target is written in place
    ~NewFile() {
        if (fd >= 0) close(fd);
        if (!temporary.empty()) unlink(temporary.c_str());
    }
};

}  // namespace

void write_file_atomically(const std::filesystem::path& path, const std::string& what,
                           const std::function<void(std::ostream&)>& write) {
    namespace fs = std::filesystem;
    auto failure = [&](int error) {
        return Error(path.string() + ": cannot write " + what + ": " + std::strerror(error));
    };
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);  // of the file a link names
    // Before any byte is written, and with this reason rather than the rename's.
    if (fs::is_directory(status)) throw failure(EISDIR);
    NewFile file;
    fs::path target = path;
    if (fs::exists(status) && !fs::is_regular_file(status)) {
        // A device or pipe has no contents to keep, and a rename would replace the node itself.
        file.fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (file.fd < 0) throw failure(errno);
    } else {
        if (fs::exists(status)) {
            target = fs::canonical(path, ec);
            if (ec) throw failure(ec.value());
        }
        // Beside the target, so that the rename stays within one file system.
        static std::atomic<unsigned> serial = 0;
        std::string name;
        do {
            name = target.string() + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
            file.fd = open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        } while (file.fd < 0 && errno == EEXIST);
        if (file.fd < 0) throw failure(errno);
        file.temporary = name;
        // The new file keeps the permissions of the one it replaces.
        if (fs::exists(status)) fchmod(file.fd, static_cast<mode_t>(status.permissions()));
    }

    DescriptorBuffer buffer(file.fd);
    std::ostream out(&buffer);
    write(out);
    out.flush();
    if (!out) throw failure(buffer.error() ? buffer.error() : EIO);
    // On the disk before the rename: a crash must not leave the name on an empty file.
    if (!file.temporary.empty() && fsync(file.fd) != 0) throw failure(errno);
    if (close(std::exchange(file.fd, -1)) != 0) throw failure(errno);
    if (file.temporary.empty()) return;
    if (std::rename(file.temporary.c_str(), target.c_str()) != 0) throw failure(errno);
    file.temporary.clear();
}

}  // namespace headscope
