// Running the project's programs for the tests: see process.h.
#include "process.h"

#include "headscope/base/error.h"

#include <pty.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace headscope::test {

namespace {

// Forks and runs args; the child first reads from and sends its output to the given files, if any.
pid_t start(const std::vector<std::string>& args, const std::filesystem::path* out_path,
            const std::filesystem::path* err_path, const std::filesystem::path* in_path = nullptr) {
    // Else the child would write out what this process still buffers.
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        if (in_path && !freopen(in_path->c_str(), "r", stdin)) _exit(127);
        if (out_path && !freopen(out_path->c_str(), "w", stdout)) _exit(127);
        if (err_path && !freopen(err_path->c_str(), "w", stderr)) _exit(127);
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        _exit(127);
    }
    return pid;
}

int exit_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

}  // namespace

::testing::AssertionResult throws_naming(const std::function<void()>& f, std::initializer_list<std::string> parts) {
    try {
        f();
    } catch (const Error& e) {
        const std::string message = e.what();
        if (message.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "multi-line: " << message;
        for (const std::string& part : parts)
            if (message.find(part) == std::string::npos)
                return ::testing::AssertionFailure() << "'" << part << "' not in: " << message;
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "no Error thrown";
}

const char* cli_program() {
    const char* sanitized = std::getenv("HEADSCOPE_TEST_CLI");
    return sanitized && *sanitized ? sanitized : HEADSCOPE_CLI;
}

ProcessRun run_program(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                       const std::filesystem::path& input, double limit_seconds) {
    const auto out_path = scratch / "stdout", err_path = scratch / "stderr";
    const auto started = std::chrono::steady_clock::now();
    const pid_t pid = start(args, &out_path, &err_path, input.empty() ? nullptr : &input);
    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    };
    int status = 0;
    rusage usage{};
    bool timed_out = false;
    while (wait4(pid, &status, limit_seconds > 0 ? WNOHANG : 0, &usage) == 0) {
        if (elapsed() > limit_seconds) {
            kill(pid, SIGKILL);
            timed_out = true;
            wait4(pid, &status, 0, &usage);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double cpu_seconds =
        usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
    return {exit_status(status),
            read_file(out_path),
            read_file(err_path),
            elapsed(),
            cpu_seconds,
            usage.ru_maxrss,
            timed_out};
}

ProcessRun run_on_terminal(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                           Stream on_terminal) {
    int terminal = -1, program_side = -1;
    if (openpty(&terminal, &program_side, nullptr, nullptr, nullptr) != 0) {
        ADD_FAILURE() << "openpty: " << std::strerror(errno);
        return {-1, "", ""};
    }
    termios mode;
    tcgetattr(program_side, &mode);
    cfmakeraw(&mode);
    tcsetattr(program_side, TCSANOW, &mode);
    const bool out_on_terminal = on_terminal == Stream::out;
    const auto file_path = scratch / (out_on_terminal ? "stderr" : "stdout");
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(terminal);
        if (!freopen(file_path.c_str(), "w", out_on_terminal ? stderr : stdout)) _exit(127);
        if (dup2(program_side, out_on_terminal ? STDOUT_FILENO : STDERR_FILENO) < 0) _exit(127);
        close(program_side);
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        _exit(127);
    }
    close(program_side);
    // Read until the program's side is closed (EIO).
    std::string seen;
    char buffer[4096];
    for (;;) {
        const ssize_t n = read(terminal, buffer, sizeof buffer);
        if (n > 0)
            seen.append(buffer, static_cast<size_t>(n));
        else if (n < 0 && errno == EINTR)
            continue;
        else
            break;
    }
    close(terminal);
    int status = 0;
    waitpid(pid, &status, 0);
    std::string other = read_file(file_path);
    return out_on_terminal ? ProcessRun{exit_status(status), seen, other}
                           : ProcessRun{exit_status(status), other, seen};
}

Child::Child(const std::vector<std::string>& args) : pid_(start(args, nullptr, nullptr)) {}

Child::~Child() {
    if (ended()) return;
    kill(pid_, SIGTERM);
    wait();
}

int Child::wait() {
    if (!reaped_) {
        int status = 0;
        waitpid(pid_, &status, 0);
        status_ = exit_status(status);
        reaped_ = true;
    }
    return status_;
}

bool Child::ended() {
    int status = 0;
    if (!reaped_ && waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = exit_status(status);
        reaped_ = true;
    }
    return reaped_;
}

}  // namespace headscope::test
