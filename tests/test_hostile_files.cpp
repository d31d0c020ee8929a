// Files a hostile user could hand Headscope, through the CLI as a user runs
// it: every one is one line "headscope-cli: error: ..." naming the problem
// and exit 2, never a crash, a second line or a hang. The cases a
// sanitizer and fuzzing run found: numbers too large for a double, JSON
// nested past any stack, directories and FIFOs where files belong, control
// characters in names, a vocabulary without its byte tokens, no merges.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "model_writer.h"
#include "process.h"

using namespace headscope;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

class HostileFiles : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path / "good", {.n_layer = 1, .n_head = 2, .n_embd = 8, .n_positions = 8});
    }
    static void TearDownTestSuite() { delete dir_; }

    // A copy of the good model, named `name` (which may hold any character).
    static fs::path copy_of_good(const std::string& name) {
        const fs::path copy = dir_->path / name;
        fs::copy(dir_->path / "good", copy);
        return copy;
    }
    static void write(const fs::path& path, const std::string& bytes) {
        fs::remove_all(path);
        std::ofstream(path, std::ios::binary) << bytes;
    }
    // A safetensors file: the header's length, the header, no data.
    static std::string safetensors_bytes(const std::string& header) {
        std::string bytes;
        for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i)));
        return bytes + header;
    }
    static std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

    // `headscope-cli info --model dir` answers with one line naming `names`.
    static void expect_refused(const fs::path& model, const std::string& names) {
        test::expect_one_line_error(
            test::run_program({test::cli_program(), "info", "--model", model.string()}, dir_->path), "headscope-cli",
            names);
    }

    static test::TempDir* dir_;
};
test::TempDir* HostileFiles::dir_ = nullptr;

TEST_F(HostileFiles, NumbersTooLargeForADoubleAreAParseErrorNamingTheFile) {
    const fs::path header = copy_of_good("huge-header");
    write(header / "model.safetensors",
          safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}})"));
    expect_refused(header, "model.safetensors: header: not valid JSON");

    const fs::path config = copy_of_good("huge-config");
    json c = json::parse(test::read_file(config / "config.json"));
    std::string text = c.dump();
    text.insert(1, "\"n_layer_big\": 1e999, ");
    write(config / "config.json", text);
    expect_refused(config, "config.json: not valid JSON");

    const fs::path vocab = copy_of_good("huge-vocab");
    write(vocab / "vocab.json", R"({"a": 1e999})");
    expect_refused(vocab, "vocab.json: not valid JSON");
}

TEST_F(HostileFiles, DeepNestingStopsAtTheDepthLimit) {
    const fs::path header = copy_of_good("deep-header");
    write(header / "model.safetensors", safetensors_bytes(nested(100'000)));
    expect_refused(header, "nested deeper than 64 levels");

    const fs::path config = copy_of_good("deep-config");
    std::string text = test::read_file(config / "config.json");
    text.insert(1, "\"headscope_training\": " + nested(1'000'000) + ", ");
    write(config / "config.json", text);
    expect_refused(config, "config.json: JSON nested deeper than 64 levels");
}

TEST_F(HostileFiles, DirectoriesAndFifosWhereFilesBelongAreNamed) {
    for (const char* name : {"vocab.json", "merges.txt", "model.safetensors", "config.json"}) {
        const fs::path copy = copy_of_good(std::string("dir-") + name);
        fs::remove(copy / name);
        fs::create_directory(copy / name);
        expect_refused(copy, (copy / name).string() + ": not a regular file but a directory");
    }
    for (const char* name : {"model.safetensors", "vocab.json", "merges.txt"}) {
        const fs::path copy = copy_of_good(std::string("fifo-") + name);
        fs::remove(copy / name);
        ASSERT_EQ(mkfifo((copy / name).c_str(), 0600), 0);
        // Run in the background: reading a FIFO with no writer would wait forever.
        const fs::path out = dir_->path / (std::string("fifo-") + name + ".err");
        test::Child child({"/bin/sh", "-c",
                           std::string(test::cli_program()) + " info --model '" + copy.string() + "' 2>'" +
                               out.string() + "' >/dev/null"});
        for (int i = 0; i < 400 && !child.ended(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ASSERT_TRUE(child.ended()) << name << " as a FIFO: the CLI still waits after 20 s";
        EXPECT_EQ(child.wait(), 2);
        const std::string err = test::read_file(out);
        EXPECT_NE(err.find((copy / name).string() + ": not a regular file but a FIFO"), std::string::npos) << err;
        EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    }
}

TEST_F(HostileFiles, ControlCharactersInNamesStayOnOneLine) {
    // A model folder whose name holds a newline and an escape character.
    const fs::path odd = copy_of_good("odd\nname\x1b[31m");
    write(odd / "config.json", "{");
    expect_refused(odd, "odd\\nname\\x1b[31m/config.json: not valid JSON");

    // A tensor name with a newline in it.
    const fs::path tensor = copy_of_good("tensor-name");
    write(tensor / "model.safetensors",
          safetensors_bytes(R"({"bad\nname": {"dtype": "X8", "shape": [1], "data_offsets": [0, 1]}})") + "x");
    expect_refused(tensor, "tensor 'bad\\nname'");
}

TEST_F(HostileFiles, VocabularyWithoutByteTokensAndEmptyMergesSayWhatIsMissing) {
    const fs::path vocab = copy_of_good("no-byte-tokens");
    json v = json::parse(test::read_file(vocab / "vocab.json"));
    // Drop "h" and renumber the ids densely, as a hand-made vocabulary would be.
    v.erase("h");
    std::vector<std::string> tokens(v.size());
    for (const auto& [token, id] : v.items()) tokens[id.get<size_t>() - (id.get<size_t>() > 71 ? 1 : 0)] = token;
    json renumbered = json::object();
    for (size_t id = 0; id < tokens.size(); ++id) renumbered[tokens[id]] = id;
    write(vocab / "vocab.json", renumbered.dump());
    expect_refused(vocab, "vocab.json: no token for 1 of the 256 bytes (the first is 0x68, 'h')");

    for (const std::string merges : {"", "#version: 0.2\n", "#version: 0.2\n\n\n"}) {
        const fs::path copy = copy_of_good("no-merges-" + std::to_string(merges.size()));
        write(copy / "merges.txt", merges);
        expect_refused(copy, "merges.txt: no merges");
    }
}

}  // namespace
