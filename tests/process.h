// Test support: running the project's programs as a user would (no shell)
// and reading what they wrote.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "headscope/io/files.h"

namespace headscope::test {

// The headscope-cli the tests run: this build's, or the one named by
// HEADSCOPE_TEST_CLI (the sanitized twin, for the tests' second pass).
const char* cli_program();

struct ProcessRun {
    int status;  // exit status; -1 if it did not exit normally
    std::string out, err;
    double seconds = 0;      // wall time (run_program only)
    double cpu_seconds = 0;  // its user and system time (run_program only)
    long max_rss_kb = 0;     // its largest resident memory (run_program only)
    bool timed_out = false;  // killed at run_program's limit
};

// Runs args[0] with args (found on PATH when it has no slash), capturing
// stdout and stderr through files in `scratch`; its stdin is the file
// `input` when one is given. Status 127 when args[0] cannot be run. With
// `limit_seconds` > 0 a program still running then is killed (timed_out).
ProcessRun run_program(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                       const std::filesystem::path& input = {}, double limit_seconds = 0);

// Which of a program's output streams run_on_terminal puts on a terminal.
enum class Stream { out, err };

// Runs args as run_program does, but with `on_terminal` on a pseudo-terminal
// (passing bytes as written: no newline translation) and the other stream on
// a file: what the terminal received comes back as that stream's text.
ProcessRun run_on_terminal(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                           Stream on_terminal);

// A program started in the background (args as for run_program; its output
// goes where the test's goes). Terminated if still running when this goes.
class Child {
public:
    explicit Child(const std::vector<std::string>& args);
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    // Waits for it to end: its exit status, -1 if it did not exit normally.
    int wait();
    // Whether it has ended (without waiting).
    bool ended();
    int pid() const { return pid_; }

private:
    int pid_;
    bool reaped_ = false;
    int status_ = -1;
};

using headscope::read_file;

// How the project's programs answer bad input: exit 2, nothing on stdout, one
// line "<program>: error: ..." on stderr that contains `names`.
// Passes when `f` throws a one-line Error containing every one of `parts`.
::testing::AssertionResult throws_naming(const std::function<void()>& f, std::initializer_list<std::string> parts);

inline void expect_one_line_error(const ProcessRun& r, const std::string& program, const std::string& names) {
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind(program + ": error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(names), std::string::npos) << "expected '" << names << "' in: " << r.err;
}

// Sets an environment variable (or unsets it, given nullopt) for one scope;
// programs run meanwhile inherit it.
class ScopedEnv {
public:
    ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        value ? setenv(name, value->c_str(), 1) : unsetenv(name);
    }
    ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

}  // namespace headscope::test
