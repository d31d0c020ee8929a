// headscope-cli's tables (info and heads on a terminal, JSON when piped or
// written) with the JSON's values in aligned columns, its progress bars on a
// terminal's stderr only, and heads of the shipped model (test_cli's fixture,
// cli_test.h).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_test.h"
#include "headscope/model/model.h"

using namespace headscope;
using nlohmann::json;
using test::CliTest;

namespace {

// A table's lines split into cells at the offsets its header's words start
// at; fails unless every line's cells start there (a space before, text at).
std::vector<std::vector<std::string>> cells_at_header_offsets(const std::vector<std::string>& lines) {
    std::vector<size_t> starts = {0};
    const std::string& header = lines.front();
    for (size_t i = 1; i < header.size(); ++i)
        if (header[i - 1] == ' ' && header[i] != ' ') starts.push_back(i);
    std::vector<std::vector<std::string>> rows;
    for (const std::string& line : lines) {
        std::vector<std::string> row;
        for (size_t c = 0; c < starts.size(); ++c) {
            EXPECT_GT(line.size(), starts[c]) << line;
            if (line.size() <= starts[c]) break;
            EXPECT_NE(line[starts[c]], ' ') << "column " << c << " of: " << line;
            if (c > 0) {
                EXPECT_EQ(line[starts[c] - 1], ' ') << "column " << c << " of: " << line;
            }
            const size_t end = c + 1 < starts.size() ? starts[c + 1] : line.size();
            std::string text = line.substr(starts[c], end - starts[c]);
            text.erase(text.find_last_not_of(' ') + 1);
            row.push_back(text);
        }
        rows.push_back(row);
    }
    return rows;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// "name  value" lines: the values all start at one offset; by name.
std::map<std::string, std::string> fields_of(const std::vector<std::string>& lines) {
    std::map<std::string, std::string> fields;
    size_t value_at = 0;
    for (const std::string& line : lines) {
        const size_t gap = line.find("  ");
        EXPECT_NE(gap, std::string::npos) << line;
        if (gap == std::string::npos) continue;
        const size_t value = line.find_first_not_of(' ', gap);
        if (value_at == 0) value_at = value;
        EXPECT_EQ(value, value_at) << "not aligned: " << line;
        fields[line.substr(0, gap)] = line.substr(value);
    }
    return fields;
}

TEST_F(CliTest, InfoTableHasTheJsonsValuesInAlignedColumns) {
    const test::ProcessRun as_json = run({"info", "--model", model(), "--format", "json"});
    const test::ProcessRun as_table = run({"info", "--model", model(), "--format", "table"});
    ASSERT_EQ(as_json.status, 0) << as_json.err;
    ASSERT_EQ(as_table.status, 0) << as_table.err;
    const json info = json::parse(as_json.out);
    const std::vector<std::string> lines = lines_of(as_table.out);
    const auto blank = std::find(lines.begin(), lines.end(), "");
    ASSERT_NE(blank, lines.end()) << as_table.out;

    // The configuration: every field of the JSON but the tensors, with its value.
    const std::map<std::string, std::string> fields = fields_of({lines.begin(), blank});
    EXPECT_EQ(fields.size(), info.size() - 1);
    for (const auto& [name, value] : info.items()) {
        if (name == "tensors") continue;
        ASSERT_TRUE(fields.count(name)) << name;
        EXPECT_EQ(value.is_string() ? json(fields.at(name)) : json::parse(fields.at(name)), value) << name;
    }

    // The tensors: name, shape, dtype and bytes, the test model's float32 (4 bytes a weight).
    const auto rows = cells_at_header_offsets({blank + 1, lines.end()});
    ASSERT_EQ(rows.front(), (std::vector<std::string>{"tensor", "shape", "dtype", "bytes"}));
    ASSERT_EQ(rows.size(), info["tensors"].size() + 1);
    for (size_t i = 1; i < rows.size(); ++i) {
        const json& t = info["tensors"][i - 1];
        ASSERT_EQ(rows[i].size(), 4u);
        EXPECT_EQ(rows[i][0], t["name"]);
        // As PyTorch prints sizes: "(128, 384)", "(384,)".
        std::string shape = rows[i][1];
        ASSERT_TRUE(shape.front() == '(' && shape.back() == ')') << shape;
        if (shape.ends_with(",)")) shape.erase(shape.size() - 2, 1);
        EXPECT_EQ(json::parse("[" + shape.substr(1, shape.size() - 2) + "]"), t["shape"]) << rows[i][1];
        EXPECT_EQ(rows[i][2], "F32");
        EXPECT_EQ(t["dtype"], "F32");
        int64_t count = 1;
        for (int64_t n : t["shape"]) count *= n;
        EXPECT_EQ(std::stoll(rows[i][3]), 4 * count) << rows[i][0];
        EXPECT_EQ(t["bytes"], 4 * count);
    }
}

TEST_F(CliTest, HeadsTableHasTheScoresAndMarksTheStrongestHeadOfEachProbe) {
    const test::ProcessRun as_json = run({"heads", "--model", model()});
    const test::ProcessRun as_table = run({"heads", "--model", model(), "--format", "table"});
    ASSERT_EQ(as_json.status, 0) << as_json.err;
    ASSERT_EQ(as_table.status, 0) << as_table.err;
    const json j = json::parse(as_json.out);
    const std::vector<std::string> lines = lines_of(as_table.out);
    const auto blank = std::find(lines.begin(), lines.end(), "");
    ASSERT_NE(blank, lines.end()) << as_table.out;
    const std::map<std::string, std::string> fields = fields_of({lines.begin(), blank});
    EXPECT_EQ(fields.at("path"), model());
    EXPECT_EQ(fields.at("n_head"), "4");
    EXPECT_EQ(fields.at("rows"), std::to_string(j["rows"].get<int>()));
    ASSERT_EQ(lines.back(), "* the strongest head of each probe");

    const std::vector<std::string> probes = {"previous_token", "first_token", "current_token", "induction", "entropy"};
    const auto rows = cells_at_header_offsets({blank + 1, lines.end() - 1});
    std::vector<std::string> header = {"layer", "head"};
    header.insert(header.end(), probes.begin(), probes.end());
    ASSERT_EQ(rows.front(), header);
    ASSERT_EQ(rows.size(), j["heads"].size() + 1);
    for (size_t p = 0; p < probes.size(); ++p) {
        // The strongest head by the JSON's scores: the first of the largest.
        size_t strongest = 0;
        for (size_t i = 1; i < j["heads"].size(); ++i)
            if (j["heads"][i][probes[p]] > j["heads"][strongest][probes[p]]) strongest = i;
        for (size_t i = 0; i < j["heads"].size(); ++i) {
            const std::vector<std::string>& row = rows[i + 1];
            ASSERT_EQ(row.size(), header.size());
            EXPECT_EQ(row[0], std::to_string(j["heads"][i]["layer"].get<int>()));
            EXPECT_EQ(row[1], std::to_string(j["heads"][i]["head"].get<int>()));
            std::string score = row[2 + p];
            const bool marked = score.back() == '*';
            if (marked) score.pop_back();
            EXPECT_NEAR(std::stod(score), j["heads"][i][probes[p]].get<double>(), 0.5e-4 + 1e-12) << row[2 + p];
            EXPECT_EQ(marked, probes[p] != "entropy" && i == strongest) << probes[p] << " head " << i;
        }
    }
}

TEST_F(CliTest, InfoAndHeadsAreJsonWhenPipedAndTablesOnATerminal) {
    for (const char* command : {"info", "heads"}) {
        const test::ProcessRun piped = run({command, "--model", model()});
        ASSERT_EQ(piped.status, 0) << piped.err;
        EXPECT_NO_THROW(json::parse(piped.out)) << command;
        const test::ProcessRun shown =
            test::run_on_terminal({test::cli_program(), command, "--model", model()}, dir_->path, test::Stream::out);
        ASSERT_EQ(shown.status, 0) << shown.err;
        EXPECT_EQ(shown.out, run({command, "--model", model(), "--format", "table"}).out) << command;
        // --out writes a file, never a terminal: JSON.
        const std::string file = (dir_->path / "out.json").string();
        ASSERT_EQ(test::run_on_terminal({test::cli_program(), command, "--model", model(), "--out", file}, dir_->path,
                                        test::Stream::out)
                      .status,
                  0);
        EXPECT_NO_THROW(json::parse(test::read_file(file))) << command;
    }
    expect_error({"info", "--model", model(), "--format", "yaml"}, "--format: expected table or json, got 'yaml'");
}

// The bar in a terminal's stderr: each drawing starts at the line's start
// and clears what is left of it; at the end the line is cleared, no newline.
TEST_F(CliTest, ProgressBarsGoToStderrOnlyWhenItIsATerminal) {
    const test::ProcessRun piped = run({"heads", "--model", model()});
    ASSERT_EQ(piped.status, 0) << piped.err;
    EXPECT_EQ(piped.err, "");

    const test::ProcessRun shown =
        test::run_on_terminal({test::cli_program(), "heads", "--model", model()}, dir_->path, test::Stream::err);
    ASSERT_EQ(shown.status, 0) << shown.err;
    EXPECT_EQ(shown.out, piped.out);
    EXPECT_EQ(shown.err.find('\n'), std::string::npos) << shown.err;
    ASSERT_GE(shown.err.size(), 4u);
    EXPECT_EQ(shown.err.substr(shown.err.size() - 4), "\r\033[K");
    // The load reads every tensor: the total is the float32 bytes of every shape info lists.
    int64_t bytes = 0;
    const json info = json::parse(run({"info", "--model", model()}).out);
    for (const json& t : info["tensors"]) {
        int64_t count = 4;
        for (int64_t n : t["shape"]) count *= n;
        bytes += count;
    }
    char total[32];
    std::snprintf(total, sizeof total, "%.1f MB", bytes / 1e6);
    const std::string empty_bar = "[" + std::string(30, '.') + "] ";
    EXPECT_NE(shown.err.find("\r" + empty_bar + "reading the weights: 0.0 of " + total + "\033[K"), std::string::npos)
        << shown.err;
    EXPECT_NE(shown.err.find("\r" + empty_bar + "scoring heads: 0 of "), std::string::npos) << shown.err;
}

// With no --model, `heads` scores the shipped model on its own validation text.
TEST_F(CliTest, HeadsWithoutAModelScoresTheShippedModel) {
    const test::ProcessRun r = run({"heads"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["source"], "validation");
    const Model m = load_model("builtin");
    EXPECT_EQ(j["path"], m.path.string());
    ASSERT_EQ(j["heads"].size(), static_cast<size_t>(m.config.n_layer * m.config.n_head));
    EXPECT_GE(j["rows"].get<int>(), 1000);
    for (const json& h : j["heads"]) {
        for (const char* score : {"previous_token", "first_token", "current_token", "induction"}) {
            EXPECT_GE(h[score].get<double>(), 0.0);
            EXPECT_LE(h[score].get<double>(), 1.0);
        }
        EXPECT_GT(h["entropy"].get<double>(), 0.0);
    }
}

}  // namespace
