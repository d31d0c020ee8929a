// headscope-cli run as a user runs it: its JSON and .npy outputs against the
// engine and an independent .npy reader, and every bad input answered by one
// line "headscope-cli: error: ..." on stderr, nothing on stdout, exit 2. Its
// tables (test_cli_tables.cpp), predictions and generation
// (test_cli_generate.cpp) and the families (test_cli_families.cpp) are this
// program's too.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cuda_backend.h"
#include "headscope/inspect/probes.h"

using namespace headscope;
using nlohmann::json;
using test::CliTest;

namespace {

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

}  // namespace
