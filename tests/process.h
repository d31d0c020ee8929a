// Test support: running the project's programs as a user would (no shell)
// and reading what they wrote.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace headscope::test {

struct ProcessRun {
    int status;  // exit status; -1 if it did not exit normally
    std::string out, err;
};

// Runs args[0] with args (found on PATH when it has no slash), capturing
// stdout and stderr through files in `scratch`.
ProcessRun run_program(const std::vector<std::string>& args, const std::filesystem::path& scratch);

std::string read_file(const std::filesystem::path& path);

}  // namespace headscope::test
