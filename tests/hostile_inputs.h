// The fixture of test_hostile_inputs (test_hostile_inputs.cpp, round two;
// hostile_inputs_encoders.cpp, round three): headscope-cli run on hostile
// files and options in a scratch folder holding a small GPT-2 model, each
// answer checked to come within 20 s of CPU time and 1 GB (its wall time
// depends on what else the machine runs: the sanitized tests run beside the
// plain ones), and a program still running after a minute killed as hung.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model_writer.h"
#include "process.h"

namespace headscope::test {

class HostileInputs : public ::testing::Test {
protected:
    static constexpr double max_seconds = 20;
    static constexpr long max_rss_kb = 1 << 20;  // 1 GiB

    static void SetUpTestSuite() {
        dir_ = new TempDir;
        namespace fs = std::filesystem;
        // Searchable by anyone: some cases run the CLI as an unprivileged user.
        fs::permissions(dir_->path, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec |
                                        fs::perms::group_read | fs::perms::others_read);
        write_test_model(dir_->path / "good", {.n_layer = 1, .n_head = 2, .n_embd = 8, .n_positions = 16});
    }
    static void TearDownTestSuite() { delete dir_; }

    // A copy of the model folder `model` (in the scratch folder) as `name`.
    static std::filesystem::path copy_of(const std::string& model, const std::string& name) {
        const std::filesystem::path copy = dir_->path / name;
        std::filesystem::copy(dir_->path / model, copy);
        return copy;
    }
    static std::filesystem::path copy_of_good(const std::string& name) { return copy_of("good", name); }
    static void write(const std::filesystem::path& path, const std::string& bytes) {
        std::filesystem::remove_all(path);
        std::ofstream(path, std::ios::binary) << bytes;
    }
    static void link_to_itself(const std::filesystem::path& path) {
        std::filesystem::remove(path);
        std::filesystem::create_symlink(path.filename(), path);
    }
    static nlohmann::json config_of(const std::filesystem::path& model) {
        return nlohmann::json::parse(read_file(model / "config.json"));
    }

    // headscope-cli with `args`, killed if it runs past three times the limit.
    static ProcessRun cli(std::vector<std::string> args) {
        args.insert(args.begin(), cli_program());
        return run_program(args, dir_->path, {}, 3 * max_seconds);
    }
    // Answered with one line naming `names`, exit 2, in time and memory.
    static void expect_refused(const ProcessRun& r, const std::string& names) {
        EXPECT_FALSE(r.timed_out) << "still running after " << r.seconds << " s";
        expect_one_line_error(r, "headscope-cli", names);
        EXPECT_LT(r.cpu_seconds, max_seconds) << names;
        EXPECT_LT(r.max_rss_kb, max_rss_kb) << names;
    }

    static inline TempDir* dir_ = nullptr;
};

}  // namespace headscope::test
