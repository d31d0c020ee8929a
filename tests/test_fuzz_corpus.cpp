// Replays the fuzz corpora through the libFuzzer harnesses, built here
// without libFuzzer: tests/fuzz/corpus/<name>/ holds the seeds and every input
// that ever crashed harness <name>. A harness aborts on a violated property,
// which ends the test, and lets an exception other than headscope::Error
// escape, which fails it and goes on to the next input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "headscope/io/files.h"

// Each harness's LLVMFuzzerTestOneInput, renamed by tests/fuzz/CMakeLists.txt.
extern "C" {
int fuzz_safetensors(const uint8_t* data, size_t size);
int fuzz_gguf(const uint8_t* data, size_t size);
int fuzz_gguf_model(const uint8_t* data, size_t size);
int fuzz_config(const uint8_t* data, size_t size);
int fuzz_vocab_merges(const uint8_t* data, size_t size);
int fuzz_tokenizer(const uint8_t* data, size_t size);
int fuzz_shard_index(const uint8_t* data, size_t size);
int fuzz_settings(const uint8_t* data, size_t size);
int fuzz_tokenizer_json(const uint8_t* data, size_t size);
int fuzz_marian_tokenizer(const uint8_t* data, size_t size);
int fuzz_ollama_manifest(const uint8_t* data, size_t size);
}

namespace {

namespace fs = std::filesystem;

// Every file of corpus/<name> through `harness`, in name order, each named
// before it runs so that a crash's output says which.
void replay(const std::string& name, int (*harness)(const uint8_t*, size_t)) {
    const fs::path dir = fs::path(HEADSCOPE_TESTS_DIR) / "fuzz" / "corpus" / name;
    std::vector<fs::path> files;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    ASSERT_FALSE(files.empty()) << dir;
    for (const fs::path& file : files) {
        std::cout << "replaying " << file.string() << std::endl;
        const std::string bytes = headscope::read_file(file);
        try {
            harness(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        } catch (const std::exception& e) {  // not an Error: the harness lets it escape
            ADD_FAILURE() << file.string() << ": " << e.what();
        }
    }
}

TEST(FuzzCorpus, Safetensors) { replay("safetensors", fuzz_safetensors); }
TEST(FuzzCorpus, Gguf) { replay("gguf", fuzz_gguf); }
TEST(FuzzCorpus, GgufModel) { replay("gguf_model", fuzz_gguf_model); }
TEST(FuzzCorpus, Config) { replay("config", fuzz_config); }
TEST(FuzzCorpus, VocabMerges) { replay("vocab_merges", fuzz_vocab_merges); }
TEST(FuzzCorpus, Tokenizer) { replay("tokenizer", fuzz_tokenizer); }
TEST(FuzzCorpus, ShardIndex) { replay("shard_index", fuzz_shard_index); }
TEST(FuzzCorpus, TokenizerJson) { replay("tokenizer_json", fuzz_tokenizer_json); }
TEST(FuzzCorpus, Settings) { replay("settings", fuzz_settings); }
TEST(FuzzCorpus, MarianTokenizer) { replay("marian_tokenizer", fuzz_marian_tokenizer); }
TEST(FuzzCorpus, OllamaManifest) { replay("ollama_manifest", fuzz_ollama_manifest); }

}  // namespace
