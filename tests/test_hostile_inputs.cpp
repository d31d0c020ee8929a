// Hostile input, round two: what an attacker or an unlucky user hands the
// CLI in the files, options and outputs added since the first round
// (test_hostile_files.cpp). Each case is answered with one line and exit 2
// (or, for odd but valid input, succeeds), within 20 s and 1 GB: filesystem
// errors, patterns and loops that would hang, JSON that would blow up
// memory, values that vanish in float32 or overflow it, options that would
// be clamped. docs/testing.md's bad-input table lists them.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "headscope/base/shape.h"
#include "headscope/io/safetensors.h"
#include "headscope/model/model_description.h"
#include "hostile_inputs.h"
#include "model_writer.h"
#include "process.h"

using namespace headscope;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using test::HostileInputs;

TEST_F(HostileInputs, FilesLinkedToThemselvesAreNamed) {
    const std::string loop = "Too many levels of symbolic links";
    for (const char* name : {"config.json", "model.safetensors", "vocab.json"}) {
        const fs::path copy = copy_of_good(std::string("loop-") + name);
        link_to_itself(copy / name);
        expect_refused(cli({"info", "--model", copy.string()}), (copy / name).string() + ": " + loop);
    }
    const fs::path index = copy_of_good("loop-index");
    fs::remove(index / "model.safetensors");
    link_to_itself(index / "model.safetensors.index.json");
    expect_refused(cli({"info", "--model", index.string()}),
                   (index / "model.safetensors.index.json").string() + ": " + loop);
    const fs::path validation = copy_of_good("loop-validation");
    link_to_itself(validation / "validation.txt");
    expect_refused(cli({"heads", "--model", validation.string()}),
                   (validation / "validation.txt").string() + ": " + loop);
}

TEST_F(HostileInputs, NamesTooLongAreNamed) {
    expect_refused(cli({"info", "--model", (dir_->path / std::string(300, 'a')).string()}), "File name too long");
    // A cache whose refs/main names a revision of 300 characters.
    const fs::path repo = dir_->path / "cache" / "models--someone--model";
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "snapshots");
    write(repo / "refs" / "main", std::string(300, 'f'));
    const test::ScopedEnv cache("HF_HUB_CACHE", (dir_->path / "cache").string());
    expect_refused(cli({"info", "--model", "someone/model"}), "File name too long");
}

// The model's files may not be read (the CLI run as an unprivileged user
// where the tests run as root, who may read anything).
TEST_F(HostileInputs, AFolderThatMayNotBeReadIsNamed) {
    std::vector<std::string> as_user;
    if (geteuid() == 0) {
        as_user = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
        std::vector<std::string> version = as_user;
        version.insert(version.end(), {test::cli_program(), "--version"});
        if (test::run_program(version, dir_->path).status != 0)
            GTEST_SKIP() << "the build's headscope-cli cannot be run as an unprivileged user here";
    }
    const fs::path locked = copy_of_good("locked");
    fs::permissions(locked, fs::perms::owner_all);
    std::vector<std::string> args = as_user;
    args.insert(args.end(), {test::cli_program(), "info", "--model", locked.string()});
    const test::ProcessRun r = test::run_program(args, dir_->path, {}, 2 * max_seconds);
    fs::permissions(locked, fs::perms::owner_all | fs::perms::group_all | fs::perms::others_all);
    test::expect_one_line_error(r, "headscope-cli", "Permission denied");
}

// A tokenizer.json of the good model's GPT-2 vocabulary whose pre-tokenizer
// splits on `pattern` first.
void write_split_tokenizer(const fs::path& model, const std::string& pattern) {
    json merges = json::array();
    std::istringstream lines(test::read_file(model / "merges.txt"));
    for (std::string line; std::getline(lines, line);)
        if (!line.empty() && !line.starts_with("#version")) merges.push_back(line);
    const json tokenizer = {
        {"model", {{"type", "BPE"}, {"vocab", json::parse(test::read_file(model / "vocab.json"))}, {"merges", merges}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}}};
    std::ofstream(model / "tokenizer.json") << tokenizer.dump();
}

TEST_F(HostileInputs, APatternThatBacktracksStopsAtTheEncodesBudget) {
    const fs::path model = copy_of_good("cubic-pattern");
    write_split_tokenizer(model, "a{0,65535}a{0,65535}c|a");
    expect_refused(cli({"tokenize", "--model", model.string(), "--text", std::string(20'000, 'a')}),
                   "s of work on this text (it backtracks too much)");
    // The same pattern on a short text is an ordinary tokenizer.
    const test::ProcessRun short_text = cli({"tokenize", "--model", model.string(), "--text", "aaa"});
    EXPECT_EQ(short_text.status, 0) << short_text.err;
}

// A model of one token: the induction probe has no token but EOS to draw.
TEST_F(HostileInputs, AVocabularyOfOneTokenIsRefusedByTheProbes) {
    const fs::path model = dir_->path / "one-token";
    fs::create_directories(model);
    const json config_json = {{"model_type", "gpt2"}, {"n_layer", 1},    {"n_head", 1},      {"n_embd", 4},
                              {"n_positions", 8},     {"vocab_size", 1}, {"eos_token_id", 0}};
    std::ofstream(model / "config.json") << config_json.dump();
    const Config config = config_from_json(config_json, "config.json");
    std::vector<std::vector<float>> values;
    std::vector<SafetensorsEntry> tensors;
    for (const TensorSpec& t : model_tensors(config)) {
        values.emplace_back(static_cast<size_t>(element_count(t.shape)), 0.5f);
        tensors.push_back({t.name, t.shape, values.back()});
    }
    write_safetensors(model / "model.safetensors", tensors);
    std::ofstream(model / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
    expect_refused(cli({"heads", "--model", model.string(), "--text", "aaaa"}), "this model has 1 tokens");
}

TEST_F(HostileInputs, AnIndexOfAMillionNamesIsAnsweredAtOnce) {
    const fs::path model = copy_of_good("huge-index");
    fs::remove(model / "model.safetensors");
    std::string index = R"({"weight_map": {)";
    for (int i = 0; i < 1'000'000; ++i)
        index += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":\"s" + std::to_string(i % 100'000) + "\"";
    write(model / "model.safetensors.index.json", index + "}}");
    expect_refused(cli({"info", "--model", model.string()}), "model.safetensors.index.json");
}

TEST_F(HostileInputs, GenerationPastItsCapIsRefused) {
    const fs::path model = dir_->path / "good";
    expect_refused(cli({"generate", "--model", model.string(), "--text", "Hello", "--tokens", "1000000000"}),
                   "at most 65536 tokens are generated in one run, not 1000000000");
}

TEST_F(HostileInputs, JsonThatWouldBlowUpMemoryIsRefused) {
    const fs::path config = copy_of_good("big-config");
    write(config / "config.json", "[" + std::string(64 << 20, ' ') + "]");
    expect_refused(cli({"info", "--model", config.string()}), "bytes, more than the 4194304 bytes it may have");

    const fs::path tokenizer = copy_of_good("big-tokenizer");
    std::string zeros = "[0";
    while (zeros.size() < (60 << 20)) zeros += ",0";
    write(tokenizer / "tokenizer.json", zeros + "]");
    expect_refused(cli({"info", "--model", tokenizer.string()}), "JSON values, more than this file may have");

    // 96 MB of metadata in a safetensors header: in many keys, then in one string.
    const fs::path header = copy_of_good("big-metadata");
    std::string keys = R"({"__metadata__": {"k0": "")";
    for (int i = 1; keys.size() < 96'000'000; ++i) keys += ",\"k" + std::to_string(i) + "\":\"\"";
    const auto safetensors = [](const std::string& text) {
        std::string bytes;
        for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i)));
        return bytes + text;
    };
    write(header / "model.safetensors", safetensors(keys + "}}"));
    expect_refused(cli({"info", "--model", header.string()}), "JSON values, more than this file may have");
    write(header / "model.safetensors",
          safetensors(R"({"__metadata__": {"note": ")" + std::string(96'000'000, 'x') + "\"}}"));
    expect_refused(cli({"info", "--model", header.string()}), "missing");

    // A 100 MB validation.txt is read only as far as the probes need: heads succeeds.
    const fs::path validation = copy_of_good("big-validation");
    std::string text;
    while (text.size() < (100 << 20)) text += "The cat sat on the mat because it was soft. ";
    write(validation / "validation.txt", text);
    const test::ProcessRun r = cli({"heads", "--model", validation.string(), "--format", "json"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_LT(r.cpu_seconds, max_seconds);
    EXPECT_LT(r.max_rss_kb, max_rss_kb);
}

TEST_F(HostileInputs, ValuesThatVanishInFloat32AreNamed) {
    const fs::path epsilon = copy_of_good("tiny-epsilon");
    json c = config_of(epsilon);
    c["layer_norm_epsilon"] = 1e-50;
    write(epsilon / "config.json", c.dump());
    expect_refused(cli({"info", "--model", epsilon.string()}), "layer_norm_epsilon 1e-50 is 0 in float32");

    const fs::path llama = dir_->path / "tiny-theta";
    fs::create_directories(llama);
    write(llama / "config.json", json{{"model_type", "llama"},
                                      {"num_hidden_layers", 1},
                                      {"num_attention_heads", 2},
                                      {"hidden_size", 8},
                                      {"intermediate_size", 16},
                                      {"max_position_embeddings", 16},
                                      {"vocab_size", 10},
                                      {"rope_theta", 1e-300}}
                                     .dump());
    expect_refused(cli({"info", "--model", llama.string()}), "rope_theta 1e-300 is 0 in float32");
}

// Finite weights near float32's largest overflow in the first product: the
// forward stops there, naming the layer and head, and writes nothing.
TEST_F(HostileInputs, AForwardThatOverflowsStopsAtTheFirstNonFiniteValue) {
    const fs::path model = copy_of_good("huge-weights");
    const Config config = config_from_json(config_of(model), "config.json");
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0, 0.02f);
    std::vector<std::vector<float>> values;
    std::vector<SafetensorsEntry> tensors;
    for (const TensorSpec& t : model_tensors(config)) {
        std::vector<float> v(static_cast<size_t>(element_count(t.shape)));
        for (float& x : v) x = t.weight == Weight::attn_w ? 3e38f : t.weight == Weight::ln_1_w ? 1.f : normal(rng);
        values.push_back(std::move(v));
        tensors.push_back({t.name, t.shape, values.back()});
    }
    write_safetensors(model / "model.safetensors", tensors);
    expect_refused(cli({"attention", "--model", model.string(), "--text", "Hello world"}),
                   "layer 0, head 0: the attention is not finite");
}

TEST_F(HostileInputs, SeedsOutsideSixtyFourBitsAreRefused) {
    const std::string model = (dir_->path / "good").string();
    for (const char* seed : {"-1", "18446744073709551616", "1e3", ""})
        expect_refused(
            cli({"generate", "--model", model, "--text", "Hi", "--tokens", "2", "--temperature", "1", "--seed", seed}),
            "is not a whole number from 0 to 18446744073709551615");
    const test::ProcessRun largest = cli({"generate", "--model", model, "--text", "Hi", "--tokens", "2",
                                          "--temperature", "1", "--seed", "18446744073709551615"});
    EXPECT_EQ(largest.status, 0) << largest.err;
}

}  // namespace
