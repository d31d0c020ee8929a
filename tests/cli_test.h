// The fixture of test_cli's GPT-2 tests (test_cli.cpp, test_cli_tables.cpp,
// test_cli_generate.cpp): headscope-cli run as a user runs it on a small
// GPT-2 model in a scratch folder, bad input checked to be one line and exit 2.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/compute/attention.h"
#include "model_writer.h"
#include "process.h"

namespace headscope::test {

// Runs the CLI with exactly these arguments (no shell), capturing both streams.
inline ProcessRun run_cli(const std::vector<std::string>& args, const std::filesystem::path& scratch) {
    std::vector<std::string> command = {cli_program()};
    command.insert(command.end(), args.begin(), args.end());
    return run_program(command, scratch);
}

// The predictions of the CLI's attention JSON (`predictions` [b][t][k] of
// {id, p}) as an AttentionResult holds them, for prediction_checks.h's
// comparisons: T the longest text, K the first position's count.
inline AttentionResult cli_predictions(const nlohmann::json& cli) {
    AttentionResult got;
    const nlohmann::json& texts = cli.at("predictions");
    got.B = static_cast<int>(texts.size());
    for (const nlohmann::json& text : texts) got.T = std::max(got.T, static_cast<int>(text.size()));
    got.top_k = static_cast<int>(texts.at(0).at(0).size());
    got.predictions.resize(static_cast<size_t>(got.B) * got.T * got.top_k);
    for (int b = 0; b < got.B; ++b)
        for (size_t t = 0; t < texts[b].size(); ++t)
            for (int k = 0; k < got.top_k; ++k) {
                const nlohmann::json& p = texts[b][t][k];
                got.predictions[(b * size_t(got.T) + t) * got.top_k + k] = {p.at("id").get<int32_t>(), p.at("p")};
            }
    return got;
}

class CliTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir;
        write_test_model(dir_->path / "model",
                         {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 16, .transformer_prefix = false});
    }
    static void TearDownTestSuite() { delete dir_; }

    ProcessRun run(const std::vector<std::string>& args) { return run_cli(args, dir_->path); }
    std::string model() const { return (dir_->path / "model").string(); }

    // A bad input: exit 2, one line naming the problem, nothing on stdout.
    void expect_error(const std::vector<std::string>& args, const std::string& names) {
        expect_one_line_error(run(args), "headscope-cli", names);
    }

    static inline TempDir* dir_ = nullptr;
};

}  // namespace headscope::test
