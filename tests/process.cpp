#include "process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

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

ProcessRun run_program(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                       const std::filesystem::path& input) {
    const auto out_path = scratch / "stdout", err_path = scratch / "stderr";
    const pid_t pid = start(args, &out_path, &err_path, input.empty() ? nullptr : &input);
    int status = 0;
    waitpid(pid, &status, 0);
    return {exit_status(status), read_file(out_path), read_file(err_path)};
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
