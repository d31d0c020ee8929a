// headscope-cli run as a user runs it: its JSON and .npy outputs against the
// engine and an independent .npy reader, and every bad input answered by one
// line "headscope-cli: error: ..." on stderr, nothing on stdout, exit 2.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "family_models.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cuda_backend.h"
#include "headscope/inspect/probes.h"
#include "model_writer.h"
#include "process.h"

using namespace headscope;
using nlohmann::json;

namespace {

// Runs the CLI with exactly these arguments (no shell), capturing both streams.
test::ProcessRun run_cli(const std::vector<std::string>& args, const std::filesystem::path& scratch) {
    std::vector<std::string> command = {test::cli_program()};
    command.insert(command.end(), args.begin(), args.end());
    return test::run_program(command, scratch);
}

class CliTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(
            dir_->path / "model",
            {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 16, .transformer_prefix = false});
    }
    static void TearDownTestSuite() { delete dir_; }

    test::ProcessRun run(const std::vector<std::string>& args) { return run_cli(args, dir_->path); }
    std::string model() const { return (dir_->path / "model").string(); }

    // A bad input: exit 2, one line naming the problem, nothing on stdout.
    void expect_error(const std::vector<std::string>& args, const std::string& names) {
        test::expect_one_line_error(run(args), "headscope-cli", names);
    }

    static test::TempDir* dir_;
};
test::TempDir* CliTest::dir_ = nullptr;

TEST_F(CliTest, InfoPrintsConfigParamsAndShapes) {
    const test::ProcessRun r = run({"info", "--model", model()});
    ASSERT_EQ(r.status, 0) << r.err;
    const json info = json::parse(r.out);
    EXPECT_EQ(info["n_layer"], 2);
    EXPECT_EQ(info["n_head"], 4);
    EXPECT_EQ(info["n_embd"], 32);
    EXPECT_EQ(info["n_positions"], 16);
    EXPECT_EQ(info["vocab_size"], 50257);
    EXPECT_EQ(info["params"], 50257 * 32 + 16 * 32 + 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32);
    bool found = false;
    for (const json& t : info["tensors"])
        if (t["name"] == "h.1.attn.c_attn.weight") found = t["shape"] == json::array({32, 96});
    EXPECT_TRUE(found);
}

TEST_F(CliTest, TokenizeGivesGpt2Ids) {
    const test::ProcessRun r = run({"tokenize", "--model", model(), "--text", "Hello world"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["token_ids"], json::array({15496, 995}));
    EXPECT_EQ(j["tokens"], json::array({"Hello", " world"}));
    // GPT-2's tokenizer adds no special tokens, so off changes nothing.
    const test::ProcessRun off = run({"tokenize", "--model", model(), "--text", "Hello world", "--special", "off"});
    ASSERT_EQ(off.status, 0) << off.err;
    EXPECT_EQ(json::parse(off.out)["token_ids"], json::array({15496, 995}));
}

TEST_F(CliTest, AttentionJsonMatchesTheEngineAndNpy) {
    const std::string npy = (dir_->path / "att.npy").string();
    const std::vector<std::string> common = {"attention", "--model",     model(),   "--text", "The cat sat on the mat",
                                             "--text",    "It was soft", "--heads", "8",      "--causal",
                                             "off",       "--layers",    "1"};
    std::vector<std::string> as_json = common, as_npy = common;
    as_npy.insert(as_npy.end(), {"--format", "npy", "--out", npy});
    const test::ProcessRun rj = run(as_json), rn = run(as_npy);
    ASSERT_EQ(rj.status, 0) << rj.err;
    ASSERT_EQ(rn.status, 0) << rn.err;
    const json j = json::parse(rj.out), jn = json::parse(rn.out);
    EXPECT_FALSE(jn.contains("attention"));
    EXPECT_EQ(j["backend"], "cpu");
    EXPECT_EQ(j["n_head"], 8);
    EXPECT_EQ(j["d_head"], 4);
    EXPECT_EQ(j["seq_len"], 6);
    EXPECT_EQ(j["layers"], json::array({1}));
    EXPECT_EQ(j["lengths"], json::array({6, 3}));
    EXPECT_EQ(j["fully_masked"][1], json::array({false, false, false, true, true, true}));
    for (const char* key : {"load", "tokenize", "forward"}) EXPECT_TRUE(j["timing_ms"][key].is_number());

    // The same run in-process.
    const Model m = load_model(model());
    auto backend = make_cpu_backend();
    backend->load_weights(m);
    AttentionOptions opt;
    opt.causal = false;
    opt.n_head = 8;
    opt.layers = {1};
    AttentionResult want;
    backend->forward(Batch{j["token_ids"].get<std::vector<std::vector<int32_t>>>(), 50256}, opt, want);

    // .npy: magic, version 1.0, header with dtype and shape, then float32 data.
    const std::string bytes = test::read_file(npy);
    ASSERT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t header_len = uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8;
    EXPECT_EQ((10 + header_len) % 64, 0u);
    const std::string header = bytes.substr(10, header_len);
    EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos);
    EXPECT_NE(header.find("'shape': (1, 2, 8, 6, 6)"), std::string::npos) << header;
    ASSERT_EQ(bytes.size(), 10 + header_len + want.weights.size() * 4);

    const json& att = j["attention"];
    ASSERT_EQ(att.size(), 1u);
    size_t n = 0;
    for (int b = 0; b < 2; ++b)
        for (int h = 0; h < 8; ++h)
            for (int i = 0; i < 6; ++i)
                for (int k = 0; k < 6; ++k, ++n) {
                    float from_npy;
                    std::memcpy(&from_npy, bytes.data() + 10 + header_len + 4 * n, 4);
                    EXPECT_EQ(att[0][b][h][i][k].get<float>(), want.weights[n]);
                    EXPECT_EQ(from_npy, want.weights[n]);
                }
}

TEST_F(CliTest, BuiltinIsTheDefaultModel) {
    setenv("HEADSCOPE_BUILTIN_MODEL", model().c_str(), 1);
    const test::ProcessRun by_default = run({"info"}), by_name = run({"info", "--model", "builtin"});
    unsetenv("HEADSCOPE_BUILTIN_MODEL");
    ASSERT_EQ(by_default.status, 0) << by_default.err;
    EXPECT_EQ(json::parse(by_default.out)["path"], model());
    EXPECT_EQ(by_name.out, by_default.out);
}

TEST_F(CliTest, HeadsPrintsTheProbeScoresOfEveryHead) {
    const std::string text = "The cat sat on the mat because it was soft";
    const test::ProcessRun r = run({"heads", "--model", model(), "--text", text});
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["source"], "text");

    const Model m = load_model(model());
    auto backend = make_cpu_backend();
    backend->load_weights(m);
    const ProbeReport want = probe_heads(*backend, m, {m.tokenizer.encode(text)});
    EXPECT_EQ(j["rows"], want.rows);
    ASSERT_EQ(j["heads"].size(), 8u);
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 4; ++h) {
            const json& got = j["heads"][l * 4 + h];
            const HeadScores& s = want.heads[l * 4 + h];
            EXPECT_EQ(got["layer"], l);
            EXPECT_EQ(got["head"], h);
            EXPECT_DOUBLE_EQ(got["previous_token"].get<double>(), s.previous_token);
            EXPECT_DOUBLE_EQ(got["first_token"].get<double>(), s.first_token);
            EXPECT_DOUBLE_EQ(got["current_token"].get<double>(), s.current_token);
            EXPECT_DOUBLE_EQ(got["induction"].get<double>(), s.induction);
            EXPECT_DOUBLE_EQ(got["entropy"].get<double>(), s.entropy);
        }
}

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

TEST_F(CliTest, DancePrintsStepsAndTheNaiveSplitsError) {
    const test::ProcessRun r =
        run({"dance", "--model", model(), "--text", "The cat sat on the mat", "--text", "It was"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    const int B = 2, T = 6, C = 32, NH = 4, hs = 8;
    EXPECT_EQ(j["T"], T);
    EXPECT_EQ(j["d_head"], hs);
    ASSERT_EQ(j["steps"].size(), 8u);
    EXPECT_EQ(j["steps"][2]["shape"], json::array({B, NH, T, hs}));
    EXPECT_EQ(j["steps"][0]["buffer"], "qkv");  // GPT-2's c_attn output, split: Q's rows are 3C apart
    EXPECT_EQ(j["steps"][2]["strides"], json::array({T * 3 * C, hs, 3 * C, 1}));
    EXPECT_EQ(j["steps"][2]["contiguous"], false);
    EXPECT_EQ(j["steps"][6]["strides"], json::array({T * C, C, hs, 1}));
    EXPECT_EQ(j["steps"][6]["contiguous"], true);

    // The naive split's error: the same two runs in-process.
    const Model m = load_model(model());
    auto backend = make_cpu_backend();
    backend->load_weights(m);
    AttentionOptions opt;
    opt.layers = {0};
    opt.capture_outputs = true;
    AttentionResult correct, naive;
    const Batch batch{{m.tokenizer.encode("The cat sat on the mat"), m.tokenizer.encode("It was")}, 50256};
    backend->forward(batch, opt, correct);
    opt.split = Split::naive_view;
    backend->forward(batch, opt, naive);
    double want = 0;
    for (size_t n = 0; n < correct.outputs.size(); ++n)
        want = std::max(want, double(std::abs(naive.outputs[n] - correct.outputs[n])));
    EXPECT_GT(want, 1e-3);
    EXPECT_NEAR(j["naive_view_max_diff"].get<double>(), want, 1e-6 * want);  // float vs double subtraction

    // One token: every "head" of the naive view is that token's own slice, so nothing differs.
    const test::ProcessRun one = run({"dance", "--model", model(), "--text", "Hello", "--split", "naive-view"});
    ASSERT_EQ(one.status, 0) << one.err;
    const json jo = json::parse(one.out);
    EXPECT_EQ(jo["steps"].size(), 5u);
    EXPECT_EQ(jo["naive_view_max_diff"], 0.0);
}

// auto runs on CUDA when the build has it and a device is usable, else on the
// CPU, and every JSON output says which and why; --backend cuda without a
// usable device is an error naming the reason.
TEST_F(CliTest, BackendChoiceIsReportedWithItsReason) {
    const CudaStatus cuda = cuda_status();
    if (cuda_built_in()) {
        if (!cuda.usable) {
            EXPECT_TRUE(cuda.reason == "no CUDA device" || cuda.reason == "driver too old for this build" ||
                        cuda.reason.ends_with("older than this build's sm_75"))
                << cuda.reason;
        }
    } else {
        EXPECT_FALSE(cuda.usable);
        EXPECT_EQ(cuda.reason, "built without CUDA");
    }
    const std::string m = model();
    const std::vector<std::vector<std::string>> commands = {
        {"info", "--model", m},
        {"attention", "--model", m, "--text", "The cat sat", "--format", "none"},
        {"heads", "--model", m, "--text", "The cat sat on the mat"},
        {"dance", "--model", m, "--text", "The cat sat"},
    };
    for (std::vector<std::string> command : commands) {
        command.insert(command.end(), {"--backend", "auto"});
        test::ProcessRun r = run(command);
        ASSERT_EQ(r.status, 0) << command[0] << ": " << r.err;
        json j = json::parse(r.out);
        EXPECT_EQ(j["backend"], cuda.usable ? "cuda" : "cpu") << command[0];
        EXPECT_EQ(j["backend_reason"], cuda.reason) << command[0];

        command.back() = "cpu";
        r = run(command);
        ASSERT_EQ(r.status, 0) << command[0] << ": " << r.err;
        j = json::parse(r.out);
        EXPECT_EQ(j["backend"], "cpu") << command[0];
        EXPECT_EQ(j["backend_reason"], "cpu chosen") << command[0];

        command.back() = "cuda";
        if (cuda.usable) {
            r = run(command);
            ASSERT_EQ(r.status, 0) << command[0] << ": " << r.err;
            EXPECT_EQ(json::parse(r.out)["backend"], "cuda") << command[0];
        } else {
            expect_error(command, "the CUDA backend is not usable: " + cuda.reason);
        }
    }
}

TEST_F(CliTest, BadAblationsAreOneLine) {
    const std::string m = model();
    expect_error({"attention", "--model", m, "--text", "hi", "--ablate", "9.0"},
                 "--ablate: head 9.0 to knock out is not one of the model's (layers 0..1, heads 0..3)");
    expect_error({"attention", "--model", m, "--text", "hi", "--ablate", "1.x"}, "--ablate: '1.x' is not a head");
    expect_error({"attention", "--model", m, "--text", "hi", "--ablate", "1"}, "--ablate: '1' is not a head");
    expect_error({"attention", "--model", m, "--text", "hi", "--ablate-mode", "half"},
                 "--ablate-mode: ablation 'half' is not one of zero, mean");
}

// --ablate knocks heads out of the forward (in any order, repeated heads
// once); the JSON names them, and its maps, predictions and loss are the
// engine's with those heads knocked out.
TEST_F(CliTest, AblateKnocksHeadsOutAndTheJsonNamesThem) {
    for (const char* mode : {"zero", "mean"}) {
        const test::ProcessRun r = run({"attention", "--model", model(), "--text", "The cat sat on the mat", "--ablate",
                                        "1.1,0.0,1.1", "--ablate-mode", mode, "--top-k", "2"});
        ASSERT_EQ(r.status, 0) << r.err;
        const json j = json::parse(r.out);
        EXPECT_EQ(j["ablated"], json::parse("[[0, 0], [1, 1]]"));
        EXPECT_EQ(j["ablation"], mode);

        const Model m = load_model(model());
        auto backend = make_cpu_backend();
        backend->load_weights(m);
        AttentionOptions opt;
        opt.ablate = {{0, 0}, {1, 1}};
        opt.ablation = parse_ablation(mode);
        opt.top_k = 2;
        AttentionResult want;
        backend->forward(Batch{j["token_ids"].get<std::vector<std::vector<int32_t>>>(), 50256}, opt, want);
        const auto got = j["attention"].get<std::vector<std::vector<std::vector<std::vector<std::vector<float>>>>>>();
        EXPECT_EQ(got[1][0][1][5][0], want.map(1, 0, 1)[5 * want.T]) << mode;
        EXPECT_NEAR(j["loss"][0].get<double>(), want.loss(0), 1e-6) << mode;
    }
    const json intact = json::parse(run({"attention", "--model", model(), "--text", "The cat sat on the mat"}).out);
    EXPECT_FALSE(intact.contains("ablated"));
}

TEST_F(CliTest, BadInputIsOneLineAndExitTwo) {
    const std::string m = model();
    expect_error({"attention", "--model", m, "--text", "hi", "--bogus"}, "--bogus");
    expect_error({"frobnicate"}, "frobnicate");
    setenv("HEADSCOPE_BUILTIN_MODEL", (dir_->path / "no-builtin").c_str(), 1);
    expect_error({"attention", "--text", "hi"}, "built-in model is missing");
    unsetenv("HEADSCOPE_BUILTIN_MODEL");
    expect_error({"heads", "--model", m, "--text", "hi"}, "at least 2 tokens");
    expect_error({"dance", "--model", m, "--text", "hi", "--layer", "2"}, "layer 2 out of range");
    expect_error({"dance", "--model", m, "--text", "hi", "--heads", "3"},
                 "--heads: head count 3 does not divide C = 32");
    expect_error({"attention", "--model", m}, "--text");
    expect_error({"attention", "--model", m, "--text", "hi", "--causal", "maybe"},
                 "--causal: causal mask 'maybe' is not one of off, on");
    expect_error({"attention", "--model", m, "--text", "hi", "--padding-mask", "1"},
                 "--padding-mask: padding mask '1' is not one of off, on");
    expect_error({"attention", "--model", m, "--text", "hi", "--heads", "0"}, "--heads must be at least 1");
    expect_error({"attention", "--model", m, "--text", "hi", "--heads", "5"},
                 "--heads: head count 5 does not divide C = 32");
    expect_error({"attention", "--model", m, "--text", "hi", "--heads", "two"}, "--heads");
    expect_error({"attention", "--model", m, "--text", "hi", "--scale", "sqrt"},
                 "--scale: scale 'sqrt' is not one of head, model, none");
    expect_error({"attention", "--model", m, "--text", "hi", "--split", "view"},
                 "--split: split 'view' is not one of transpose, naive-view");
    expect_error({"attention", "--model", m, "--text", "hi", "--layers", "2"}, "layer 2 out of range");
    expect_error({"attention", "--model", m, "--text", "hi", "--layers", "0,x"}, "'x' is not a layer index");
    expect_error({"attention", "--model", m, "--text", "hi", "--format", "csv"}, "--format");
    expect_error({"attention", "--model", m, "--text", "hi", "--format", "npy"}, "--format npy needs --out");
    expect_error({"attention", "--model", m, "--text", "hi", "--contributions", "--format", "npy", "--out", "c.npy"},
                 "--format npy: the contributions are arrays of their own");
    expect_error({"attention", "--model", m, "--text", "hi", "--special", "no"},
                 "--special: special tokens 'no' is not one of off, on");
    expect_error({"tokenize", "--model", m, "--text", "hi", "--special", "yes"},
                 "--special: special tokens 'yes' is not one of off, on");
    expect_error({"attention", "--model", m, "--text", "hi", "--backend", "gpu"},
                 "--backend: backend 'gpu' is not one of auto, cpu, cuda");
    expect_error({"attention", "--model", m, "--text", "hi", "--text", ""}, "text 2 is empty");
    expect_error({"attention", "--model", m, "--text", "caf\xc3"}, "invalid UTF-8");
    expect_error({"tokenize", "--model", m, "--text", "\xff"}, "invalid UTF-8");
    expect_error({"attention", "--model", m, "--text",
                  "one two three four five six seven eight nine ten eleven twelve "
                  "thirteen fourteen fifteen sixteen seventeen"},
                 "17 tokens, more than the model's limit of 16");
    expect_error({"info", "--model", (dir_->path / "no-such-model").string()}, "no-such-model");

    const auto torch_only = dir_->path / "torch-only";
    std::filesystem::create_directories(torch_only);
    for (const char* f : {"config.json", "vocab.json", "merges.txt"})
        std::filesystem::copy_file(dir_->path / "model" / f, torch_only / f,
                                   std::filesystem::copy_options::overwrite_existing);
    std::ofstream(torch_only / "pytorch_model.bin") << "not read";
    expect_error({"info", "--model", torch_only.string()}, "safetensors");
}

TEST_F(CliTest, AttentionTopKGivesPredictionsLogprobsAndLoss) {
    const test::ProcessRun r =
        run({"attention", "--model", model(), "--text", "The cat sat on the mat", "--text", "It was soft", "--top-k",
             "3", "--logit-lens", "--layers", "0", "--format", "none"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    const Model m = load_model(model());
    auto backend = make_cpu_backend();
    backend->load_weights(m);
    AttentionOptions opt;
    opt.top_k = 3;
    opt.lens_k = 1;
    opt.layers = {0};
    AttentionResult want;
    const auto ids = j["token_ids"].get<std::vector<std::vector<int32_t>>>();
    backend->forward(Batch{ids, 50256}, opt, want);

    ASSERT_EQ(j["predictions"].size(), 2u);
    ASSERT_EQ(j["lens"].size(), 1u);  // the returned layer
    for (int b = 0; b < 2; ++b) {
        const size_t length = ids[b].size();
        ASSERT_EQ(j["predictions"][b].size(), length);
        ASSERT_EQ(j["logprob_next"][b].size(), length);
        ASSERT_EQ(j["lens"][0][b].size(), length);
        double loss = 0;
        for (size_t t = 0; t < length; ++t) {
            const json& top = j["predictions"][b][t];
            ASSERT_EQ(top.size(), 3u);
            for (int k = 0; k < 3; ++k) {
                const Prediction& p = want.predictions_at(b, static_cast<int>(t))[k];
                EXPECT_EQ(top[k]["id"], p.id);
                EXPECT_EQ(top[k]["token"], m.tokenizer.token_bytes(p.id));
                EXPECT_FLOAT_EQ(top[k]["p"].get<float>(), p.p);
                if (k > 0) {
                    EXPECT_GE(top[k - 1]["p"].get<float>(), top[k]["p"].get<float>());
                }
            }
            const Prediction& lens = *want.lens_at(0, b, static_cast<int>(t));
            EXPECT_EQ(j["lens"][0][b][t]["id"], lens.id);
            EXPECT_FLOAT_EQ(j["lens"][0][b][t]["p"].get<float>(), lens.p);
            const json& logprob = j["logprob_next"][b][t];
            if (t + 1 == length) {
                EXPECT_TRUE(logprob.is_null());
            } else {
                EXPECT_FLOAT_EQ(logprob.get<float>(), want.logprob_next[b * want.T + t]);
                loss -= logprob.get<double>();
            }
        }
        EXPECT_NEAR(j["loss"][b].get<double>(), loss / (length - 1), 1e-5);
    }
    // Without the flags, none of it.
    const test::ProcessRun plain = run({"attention", "--model", model(), "--text", "hi", "--format", "none"});
    ASSERT_EQ(plain.status, 0) << plain.err;
    for (const char* key : {"predictions", "logprob_next", "loss", "lens"})
        EXPECT_FALSE(json::parse(plain.out).contains(key)) << key;
}

TEST_F(CliTest, TokenIdsStandInForTheText) {
    const test::ProcessRun text = run({"attention", "--model", model(), "--text", "Hello world", "--top-k", "2"});
    const test::ProcessRun ids = run({"attention", "--model", model(), "--token-ids", "15496,995", "--top-k", "2"});
    ASSERT_EQ(text.status, 0) << text.err;
    ASSERT_EQ(ids.status, 0) << ids.err;
    json a = json::parse(text.out), b = json::parse(ids.out);
    EXPECT_EQ(b["texts"], json::array({"Hello world"}));
    for (const char* key : {"token_ids", "tokens", "attention", "predictions", "logprob_next", "loss"})
        EXPECT_EQ(a[key], b[key]) << key;
    const test::ProcessRun gen_text = run({"generate", "--model", model(), "--text", "Hello world", "--tokens", "2"});
    const test::ProcessRun gen_ids = run({"generate", "--model", model(), "--token-ids", "15496,995", "--tokens", "2"});
    ASSERT_EQ(gen_text.status, 0) << gen_text.err;
    ASSERT_EQ(gen_ids.status, 0) << gen_ids.err;
    EXPECT_EQ(json::parse(gen_text.out)["token_ids"], json::parse(gen_ids.out)["token_ids"]);
}

// A text past the model's positions is refused, one line and exit 2; with
// --truncate it is cut to its first n_positions tokens, stderr says so in one
// line, and the output is that of those tokens given alone.
TEST_F(CliTest, TruncateCutsALongTextToTheModelsPositions) {
    const std::string text =
        "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen";
    expect_error({"attention", "--model", model(), "--text", text}, "17 tokens, more than the model's limit of 16");
    const test::ProcessRun cut = run({"attention", "--model", model(), "--text", text, "--top-k", "2", "--truncate"});
    ASSERT_EQ(cut.status, 0) << cut.err;
    EXPECT_EQ(cut.err, "headscope-cli: text 1 has 17 tokens; cut to the first 16, the model's limit\n");
    const std::vector<int32_t> ids =
        json::parse(run({"tokenize", "--model", model(), "--text", text}).out)["token_ids"];
    ASSERT_EQ(ids.size(), 17u);
    std::string first;
    for (size_t i = 0; i < 16; ++i) first += (i ? "," : "") + std::to_string(ids[i]);
    const test::ProcessRun alone = run({"attention", "--model", model(), "--token-ids", first, "--top-k", "2"});
    ASSERT_EQ(alone.status, 0) << alone.err;
    const json a = json::parse(cut.out), b = json::parse(alone.out);
    for (const char* key : {"token_ids", "tokens", "attention", "predictions", "logprob_next"})
        EXPECT_EQ(a[key], b[key]) << key;
}

TEST_F(CliTest, GenerateGreedyPrintsEveryStep) {
    const test::ProcessRun r = run({"generate", "--model", model(), "--text", "Hello world", "--tokens", "4"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["backend"], "cpu");
    EXPECT_EQ(j["prompt_ids"], json::array({15496, 995}));
    EXPECT_EQ(j["stop"], "tokens");
    const json& steps = j["steps"];
    ASSERT_EQ(steps.size(), 4u);
    ASSERT_EQ(j["token_ids"].size(), 6u);
    const Model m = load_model(model());
    std::string text = "Hello world";
    for (size_t s = 0; s < 4; ++s) {
        const json& step = steps[s];
        EXPECT_EQ(j["token_ids"][2 + s], step["id"]);
        EXPECT_EQ(step["token"], m.tokenizer.token_bytes(step["id"].get<int32_t>()));
        text += step["token"].get<std::string>();
        ASSERT_EQ(step["top"].size(), 10u);
        EXPECT_EQ(step["top"][0]["id"], step["id"]);  // greedy: the most likely
        EXPECT_NEAR(step["p"].get<double>(), step["top"][0]["p"].get<double>(), 1e-5);
        for (const char* key : {"id", "token", "p"}) EXPECT_TRUE(step["top"][9].contains(key)) << key;
        const json& attention = step["attention"];  // [layer][head][key]
        ASSERT_EQ(attention.size(), 2u);
        ASSERT_EQ(attention[1].size(), 4u);
        ASSERT_EQ(attention[1][3].size(), 3 + s);
        double sum = 0;
        for (const json& w : attention[1][3]) sum += w.get<double>();
        EXPECT_NEAR(sum, 1, 1e-5);
        EXPECT_TRUE(step["timing_ms"].is_number());
    }
    EXPECT_EQ(j["text"], text);
    for (const char* key : {"prompt", "step_median", "step_max"}) EXPECT_TRUE(j["timing_ms"][key].is_number());

    // Seeded sampling repeats itself; the context limit (16) stops a long run.
    const std::vector<std::string> sampled = {"generate", "--model", model(),         "--text", "Hello world",
                                              "--tokens", "5",       "--temperature", "1.5",    "--top-k",
                                              "40",       "--top-p", "0.9",           "--seed", "3"};
    const test::ProcessRun s1 = run(sampled), s2 = run(sampled);
    ASSERT_EQ(s1.status, 0) << s1.err;
    EXPECT_EQ(json::parse(s1.out)["token_ids"], json::parse(s2.out)["token_ids"]);
    const test::ProcessRun full = run({"generate", "--model", model(), "--text", "Hello world", "--tokens", "50"});
    ASSERT_EQ(full.status, 0) << full.err;
    const json jf = json::parse(full.out);
    EXPECT_EQ(jf["stop"], "context");
    EXPECT_EQ(jf["token_ids"].size(), 16u);
    EXPECT_EQ(jf["steps"].size(), 14u);
}

TEST_F(CliTest, GenerateAndTokenIdsRefuseBadInput) {
    const std::string m = model();
    const std::vector<std::string> gen = {"generate", "--model", m, "--text", "Hello"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = gen;
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    };
    expect_error(gen, "--tokens");
    expect_error(with({"--tokens", "0"}), "tokens to generate must be at least 1");
    expect_error(with({"--tokens", "3", "--temperature", "-1"}), "temperature must be at least 0");
    expect_error(with({"--tokens", "3", "--top-p", "0"}), "top-p must be in (0, 1]");
    expect_error(with({"--tokens", "3", "--top-p", "1.5"}), "top-p must be in (0, 1]");
    expect_error(with({"--tokens", "3", "--top-k", "-2"}), "top-k must be at least 0");
    expect_error(with({"--tokens", "3", "--causal", "off"}), "generation needs the causal model: with the causal");
    expect_error(with({"--tokens", "3", "--split", "naive-view"}), "generation needs the causal model: the naive");
    expect_error(with({"--tokens", "3", "--format", "npy"}), "--format");
    expect_error({"generate", "--model", m, "--tokens", "3"}, "--text or --token-ids");
    expect_error({"attention", "--model", m, "--text", "hi", "--token-ids", "1,2"}, "--text or --token-ids");
    expect_error({"attention", "--model", m, "--token-ids", "1,50257"},
                 "--token-ids: 50257 is outside the vocabulary (0..50256)");
    expect_error({"attention", "--model", m, "--token-ids", "-1"}, "--token-ids: -1 is outside the vocabulary");
    expect_error({"attention", "--model", m, "--token-ids", "1,x"}, "--token-ids: 'x' is not a token id");
    expect_error({"attention", "--model", m, "--token-ids", ""}, "--token-ids");
    expect_error({"attention", "--model", m, "--text", "hi", "--top-k", "-1"}, "--top-k must be at least 0");
}

// The families' checkpoints: what info says of each, the key/value heads of
// the attention JSON, and the sliding window, on by default.
class CliFamilyTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        for (const char* name : {"llama", "qwen3", "mistral", "gpt_neox_parallel"})
            test::write_family_model(dir_->path / name, test::family_variant(name));
        test::FamilySpec bf16 = test::family_variant("llama");
        bf16.dtype = test::FileDType::BF16;
        test::write_family_model(dir_->path / "llama_bf16", bf16);
        test::write_test_model(dir_->path / "gpt2", {.n_layer = 1, .n_head = 4, .n_embd = 32, .n_positions = 16});
    }
    static void TearDownTestSuite() { delete dir_; }

    static json cli_json(const std::vector<std::string>& args) {
        const test::ProcessRun r = run_cli(args, dir_->path);
        EXPECT_EQ(r.status, 0) << r.err;
        return r.status == 0 ? json::parse(r.out) : json();
    }
    static std::string model(const char* name) { return (dir_->path / name).string(); }
    static json info(const char* name) { return cli_json({"info", "--model", model(name)}); }

    static test::TempDir* dir_;
    const std::string text_ = "The cat sat on the mat because it was soft.";  // 11 tokens
};
test::TempDir* CliFamilyTest::dir_ = nullptr;

TEST_F(CliFamilyTest, InfoNamesEachFamilysArchitecture) {
    const json gpt2 = info("gpt2"), llama = info("llama"), qwen3 = info("qwen3"), mistral = info("mistral"),
               pythia = info("gpt_neox_parallel");
    // What every model says, as before the families, and what they differ in.
    for (const json* j : {&gpt2, &llama, &qwen3, &mistral, &pythia})
        for (const char* key : {"n_layer", "n_head", "n_embd", "n_positions", "vocab_size", "params", "tensors"})
            EXPECT_TRUE(j->contains(key)) << key;
    EXPECT_EQ(gpt2["architecture"], "gpt2");
    EXPECT_EQ(gpt2["n_kv_head"], 4);
    EXPECT_EQ(gpt2["d_head"], 8);
    EXPECT_EQ(gpt2["positions"], "learned");
    EXPECT_EQ(gpt2["norm"], "layernorm");
    EXPECT_EQ(gpt2["mlp"], "gelu");
    EXPECT_EQ(gpt2["dtype"], "F32");
    EXPECT_FALSE(gpt2.contains("rope_theta"));
    EXPECT_FALSE(gpt2.contains("sliding_window"));

    EXPECT_EQ(llama["architecture"], "llama");
    EXPECT_EQ(llama["n_head"], 4);
    EXPECT_EQ(llama["n_kv_head"], 2);
    EXPECT_EQ(llama["d_head"], 8);
    EXPECT_EQ(llama["positions"], "rotary");
    EXPECT_EQ(llama["norm"], "rmsnorm");
    EXPECT_EQ(llama["mlp"], "swiglu");
    EXPECT_EQ(llama["rope_theta"], 500000);
    EXPECT_FALSE(llama.contains("sliding_window"));
    EXPECT_EQ(info("llama_bf16")["dtype"], "BF16");

    EXPECT_EQ(qwen3["architecture"], "qwen3");
    EXPECT_EQ(qwen3["n_embd"], 32);
    EXPECT_EQ(qwen3["d_head"], 16);  // not C / NH
    EXPECT_EQ(qwen3["rope_theta"], 1000000);

    EXPECT_EQ(mistral["architecture"], "mistral");
    EXPECT_EQ(mistral["n_kv_head"], 1);
    EXPECT_EQ(mistral["sliding_window"], 4);

    EXPECT_EQ(pythia["architecture"], "gpt_neox");
    EXPECT_EQ(pythia["n_kv_head"], 3);
    EXPECT_EQ(pythia["d_head"], 16);
    EXPECT_EQ(pythia["positions"], "rotary");
    EXPECT_EQ(pythia["norm"], "layernorm");
    EXPECT_EQ(pythia["mlp"], "gelu");
}

TEST_F(CliFamilyTest, AttentionNamesTheKeyValueHeadsOfTheSplit) {
    const json own = cli_json({"attention", "--model", model("llama"), "--text", text_, "--format", "none"});
    EXPECT_EQ(own["n_head"], 4);
    EXPECT_EQ(own["n_kv_head"], 2);
    EXPECT_EQ(own["d_head"], 8);
    // Two query heads of 16, still sharing one key/value head in pairs.
    const json resplit =
        cli_json({"attention", "--model", model("llama"), "--text", text_, "--heads", "2", "--format", "none"});
    EXPECT_EQ(resplit["n_head"], 2);
    EXPECT_EQ(resplit["n_kv_head"], 1);
    EXPECT_EQ(resplit["d_head"], 16);
    EXPECT_EQ(cli_json({"attention", "--model", model("gpt2"), "--text", text_, "--format", "none"})["n_kv_head"], 4);
    test::expect_one_line_error(
        run_cli({"attention", "--model", model("llama"), "--text", text_, "--heads", "1"}, dir_->path), "headscope-cli",
        "--heads: head count 1 is not a multiple of 2");
}

// Llama's dance: K split into its 2 key/value heads, rotated, expanded to the
// 4 query heads with stride 0 (the same memory), then copied by reshape.
TEST_F(CliFamilyTest, DanceWalksTheKeysThroughExpandAndReshape) {
    const json j = cli_json({"dance", "--model", model("llama"), "--text", "The cat sat", "--text", "It"});
    const int B = 2, T = 3, NKV = 2, g = 2, hs = 8;
    EXPECT_EQ(j["n_head"], 4);
    EXPECT_EQ(j["n_kv_head"], NKV);
    EXPECT_EQ(j["d_head"], hs);
    EXPECT_EQ(j["rotary_dims"], hs);
    EXPECT_TRUE(j["naive_view_max_diff"].is_number());
    const json& steps = j["steps"];
    size_t expand = 0;
    while (expand < steps.size() && steps[expand]["code"].get<std::string>().find("expand") == std::string::npos)
        ++expand;
    ASSERT_LT(expand + 1, steps.size());
    EXPECT_EQ(steps[expand]["shape"], json::array({B, NKV, g, T, hs}));
    EXPECT_EQ(steps[expand]["strides"], json::array({T * NKV * hs, hs, 0, NKV * hs, 1}));
    EXPECT_EQ(steps[expand]["buffer"], steps[expand - 1]["buffer"]);
    EXPECT_EQ(steps[expand - 1]["buffer"], "k_rotated");
    EXPECT_EQ(steps[expand + 1]["buffer"], "k_repeated");
    EXPECT_EQ(steps[expand + 1]["strides"], json::array({4 * T * hs, T * hs, hs, 1}));
    EXPECT_EQ(steps[expand + 1]["contiguous"], true);
}

// Mistral's window of 4: on by default, query i sees keys i-3..i; off, every earlier key.
TEST_F(CliFamilyTest, SlidingWindowIsTheModelsUnlessTurnedOff) {
    const std::vector<std::string> args = {"attention", "--model", model("mistral"), "--text", text_};
    std::vector<std::string> on = args, off = args;
    on.insert(on.end(), {"--sliding-window", "on"});
    off.insert(off.end(), {"--sliding-window", "off"});
    const json by_default = cli_json(args), windowed = cli_json(on), unwindowed = cli_json(off);
    EXPECT_EQ(by_default["attention"], windowed["attention"]);
    const int T = windowed["seq_len"];
    ASSERT_EQ(T, 12);  // Llama 2's tokenizer (Mistral's) puts <s> before the text's 11 tokens
    int far_keys = 0;
    for (size_t l = 0; l < windowed["attention"].size(); ++l)
        for (int h = 0; h < 4; ++h)
            for (int i = 0; i < T; ++i) {
                double row = 0;
                for (int j = 0; j <= i; ++j) {
                    const double w = windowed["attention"][l][0][h][i][j],
                                 w_off = unwindowed["attention"][l][0][h][i][j];
                    if (j <= i - 4) {
                        EXPECT_EQ(w, 0.0) << "layer " << l << " head " << h << " query " << i << " key " << j;
                        EXPECT_GT(w_off, 0.0);
                        ++far_keys;
                    }
                    row += w;
                }
                EXPECT_NEAR(row, 1.0, 1e-5);
            }
    EXPECT_EQ(far_keys, 3 * 4 * ((T - 4) * (T - 3) / 2));  // query i has i - 3 keys beyond the window
    // A model without a window: the option changes nothing.
    const std::vector<std::string> gpt2 = {"attention", "--model", model("gpt2"), "--text", text_};
    std::vector<std::string> gpt2_off = gpt2;
    gpt2_off.insert(gpt2_off.end(), {"--sliding-window", "off"});
    EXPECT_EQ(cli_json(gpt2)["attention"], cli_json(gpt2_off)["attention"]);
    test::expect_one_line_error(
        run_cli({"attention", "--model", model("mistral"), "--text", text_, "--sliding-window", "maybe"}, dir_->path),
        "headscope-cli", "--sliding-window: sliding window 'maybe' is not one of off, on");
}

}  // namespace
