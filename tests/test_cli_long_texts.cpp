// headscope-cli attention's long-text flags on test_cli's GPT-2 model:
// --text-file, --summaries, --maps none, --rows/--cols and --pool/--pool-mode,
// each output against the full maps of the same command (the summaries and
// pooled cells summed here from them), the .npy files, and each flag's bad
// values (one line, exit 2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test.h"

using namespace headscope;
using nlohmann::json;
using test::CliTest;

namespace {

const std::string text = "The cat sat on the mat. It was soft";  // 10 tokens of GPT-2's

class CliLongTexts : public CliTest {
protected:
    // attention on `text` and a shorter second text, with `flags`.
    json attention(const std::vector<std::string>& flags) {
        std::vector<std::string> args = {"attention", "--model", model(), "--text", text, "--text", "It was soft"};
        args.insert(args.end(), flags.begin(), flags.end());
        const test::ProcessRun r = run(args);
        EXPECT_EQ(r.status, 0) << r.err;
        return json::parse(r.out);
    }
};

TEST_F(CliLongTexts, TextFileIsTheSameAsText) {
    const std::string path = (dir_->path / "document.txt").string();
    std::ofstream(path) << text;
    const test::ProcessRun from_file = run({"attention", "--model", model(), "--text-file", path});
    const test::ProcessRun given = run({"attention", "--model", model(), "--text", text});
    ASSERT_EQ(from_file.status, 0) << from_file.err;
    const json a = json::parse(from_file.out), b = json::parse(given.out);
    EXPECT_EQ(a["token_ids"], b["token_ids"]);
    EXPECT_EQ(a["texts"], b["texts"]);
    EXPECT_EQ(a["attention"], b["attention"]);
}

TEST_F(CliLongTexts, TextFilePastTheContextIsRefusedUnlessTruncated) {
    const std::string path = (dir_->path / "long.txt").string();
    std::ofstream(path) << "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                           "sixteen seventeen eighteen";
    expect_error({"attention", "--model", model(), "--text-file", path}, "limit of 16");
    const test::ProcessRun cut = run({"attention", "--model", model(), "--text-file", path, "--truncate"});
    ASSERT_EQ(cut.status, 0) << cut.err;
    EXPECT_NE(cut.err.find("cut to the first 16"), std::string::npos) << cut.err;
    EXPECT_EQ(json::parse(cut.out)["seq_len"], 16);
    expect_error({"attention", "--model", model(), "--text-file", (dir_->path / "absent.txt").string()}, "--text-file");
}

// Each summary of each row, summed here from the full maps.
TEST_F(CliLongTexts, SummariesAreThoseOfTheMapsWithOrWithoutThem) {
    const json full = attention({"--summaries"}), none = attention({"--summaries", "--maps", "none"});
    EXPECT_FALSE(none.contains("attention"));
    EXPECT_EQ(none["maps"], "none");
    EXPECT_FALSE(attention({}).contains("summaries"));
    const json& maps = full["attention"];
    const int T = full["seq_len"];
    for (const json* got : {&full["summaries"], &none["summaries"]})
        for (size_t l = 0; l < maps.size(); ++l)
            for (size_t b = 0; b < maps[l].size(); ++b)
                for (size_t h = 0; h < maps[l][b].size(); ++h)
                    for (int q = 0; q < T; ++q) {
                        const std::vector<double> w = maps[l][b][h][q];
                        double entropy = 0, largest = 0, distance = 0;
                        for (int k = 0; k < T; ++k) {
                            if (w[k] > 0) entropy -= w[k] * std::log(w[k]);
                            largest = std::max(largest, w[k]), distance += w[k] * (q - k);
                        }
                        const json& s = *got;
                        EXPECT_NEAR(s["entropy"][l][b][h][q].get<double>(), entropy, 1e-5);
                        EXPECT_NEAR(s["first_key"][l][b][h][q].get<double>(), w[0], 1e-6);
                        EXPECT_NEAR(s["previous_key"][l][b][h][q].get<double>(), q ? w[q - 1] : 0, 1e-6);
                        EXPECT_NEAR(s["max"][l][b][h][q].get<double>(), largest, 1e-6);
                        EXPECT_NEAR(s["distance"][l][b][h][q].get<double>(), distance, 1e-5);
                    }
}

TEST_F(CliLongTexts, RowsAndColsGiveThatRegionOfEveryMap) {
    const json full = attention({}), region = attention({"--rows", "2:7", "--cols", "1:4"});
    EXPECT_EQ(region["maps"], "region");
    EXPECT_EQ(region["rows"], json::array({2, 7}));
    EXPECT_EQ(region["cols"], json::array({1, 4}));
    const json rows_only = attention({"--rows", "9:10"});
    EXPECT_EQ(rows_only["cols"], json::array({0, 10}));
    const json& maps = full["attention"];
    for (size_t l = 0; l < maps.size(); ++l)
        for (size_t b = 0; b < maps[l].size(); ++b)
            for (size_t h = 0; h < maps[l][b].size(); ++h) {
                ASSERT_EQ(region["attention"][l][b][h].size(), 5u);
                for (int i = 0; i < 5; ++i) {
                    ASSERT_EQ(region["attention"][l][b][h][i].size(), 3u);
                    for (int j = 0; j < 3; ++j)
                        EXPECT_NEAR(region["attention"][l][b][h][i][j].get<double>(),
                                    maps[l][b][h][2 + i][1 + j].get<double>(), 1e-6);
                }
                for (int j = 0; j < 10; ++j)
                    EXPECT_NEAR(rows_only["attention"][l][b][h][0][j].get<double>(), maps[l][b][h][9][j].get<double>(),
                                1e-6);
            }
}

// 10 positions pooled to at most 4 x 4: cells of 3, the last of 1.
TEST_F(CliLongTexts, PoolGivesEveryMapPooled) {
    const json full = attention({});
    const json& maps = full["attention"];
    for (const char* mode : {"mean", "max"}) {
        const json pooled = attention({"--pool", "4", "--pool-mode", mode});
        EXPECT_EQ(pooled["maps"], "pooled");
        EXPECT_EQ(pooled["pool"], json({{"cells", 4}, {"step", 3}, {"mode", mode}}));
        for (size_t l = 0; l < maps.size(); ++l)
            for (size_t b = 0; b < maps[l].size(); ++b)
                for (size_t h = 0; h < maps[l][b].size(); ++h)
                    for (int r = 0; r < 4; ++r)
                        for (int c = 0; c < 4; ++c) {
                            double sum = 0, largest = 0;
                            int count = 0;
                            for (int i = 3 * r; i < std::min(10, 3 * r + 3); ++i)
                                for (int j = 3 * c; j < std::min(10, 3 * c + 3); ++j, ++count) {
                                    sum += maps[l][b][h][i][j].get<double>();
                                    largest = std::max(largest, maps[l][b][h][i][j].get<double>());
                                }
                            EXPECT_NEAR(pooled["attention"][l][b][h][r][c].get<double>(),
                                        std::string(mode) == "max" ? largest : sum / count, 1e-6);
                        }
    }
    EXPECT_EQ(attention({"--pool", "4"})["pool"]["mode"], "mean");
}

// The .npy header's shape, as test_cli reads it.
std::string npy_shape(const std::string& path) {
    const std::string bytes = test::read_file(path);
    const size_t header_len = uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8;
    const std::string header = bytes.substr(10, header_len);
    const size_t at = header.find("'shape': (");
    return header.substr(at + 10, header.find(')', at) - at - 10);
}

TEST_F(CliLongTexts, NpyWritesTheSameArrays) {
    const std::string out = (dir_->path / "long.npy").string();
    const test::ProcessRun r = run({"attention", "--model", model(), "--text", text, "--summaries", "--rows", "1:3",
                                    "--format", "npy", "--out", out});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(npy_shape(out), "2, 1, 4, 2, 10");
    const json j = attention({"--summaries"});
    for (const char* name : {"entropy", "first_key", "previous_key", "max", "distance"}) {
        const std::string path = (dir_->path / ("long." + std::string(name) + ".npy")).string();
        ASSERT_EQ(npy_shape(path), "2, 1, 4, 10") << name;
        const std::string bytes = test::read_file(path);
        const size_t data = 10 + (uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8);
        float first;
        std::memcpy(&first, bytes.data() + data + 4 * 3, 4);  // layer 0, text 0, head 0, row 3
        EXPECT_NEAR(first, j["summaries"][name][0][0][0][3].get<double>(), 1e-6) << name;
    }
    const std::string only = (dir_->path / "only.npy").string();
    ASSERT_EQ(run({"attention", "--model", model(), "--text", text, "--summaries", "--maps", "none", "--format", "npy",
                   "--out", only})
                  .status,
              0);
    EXPECT_FALSE(std::filesystem::exists(only));
    EXPECT_TRUE(std::filesystem::exists(dir_->path / "only.entropy.npy"));
}

TEST_F(CliLongTexts, BadValuesAreOneLine) {
    const std::vector<std::string> base = {"attention", "--model", model(), "--text", text};
    const auto bad = [&](std::vector<std::string> flags, const std::string& names) {
        flags.insert(flags.begin(), base.begin(), base.end());
        expect_error(flags, names);
    };
    bad({"--maps", "some"}, "--maps");
    bad({"--maps", "queries-and-keys"}, "--maps");
    for (const char* range : {"3", "5:2", "4:4", "a:b", "-1:2", "1:", ":3", "1:2:3"}) {
        bad({"--rows", range}, "--rows");
        bad({"--cols", range}, "--cols");
    }
    bad({"--rows", "0:11"}, "--rows");
    bad({"--cols", "5:99"}, "--cols");
    bad({"--pool", "0"}, "--pool");
    bad({"--pool", "-2"}, "--pool");
    bad({"--pool", "two"}, "--pool");
    bad({"--pool", "4", "--pool-mode", "median"}, "--pool-mode");
    bad({"--pool-mode", "max"}, "--pool-mode");
    bad({"--pool", "4", "--rows", "0:2"}, "--pool");
    bad({"--maps", "none", "--pool", "4"}, "--maps none");
    bad({"--maps", "none", "--cols", "0:2"}, "--maps none");
    bad({"--contributions", "--maps", "none"}, "--contributions");
    bad({"--contributions", "--pool", "3"}, "--contributions");
    bad({"--text-file"}, "--text-file");
}

}  // namespace
