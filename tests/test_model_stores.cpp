// Finding GGUF models where other programs keep them: fake stores of Ollama,
// LM Studio and llama.cpp under a temporary HOME, with small GGUF files from
// the tests' writer. Each name form resolves to its file, a name found
// nowhere says where it looked, a hostile manifest is one line naming it, and
// the listing reads each model's size and quantization.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf_writer.h"
#include "headscope/base/error.h"
#include "headscope/base/ggml_types.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"

using namespace headscope;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* weights_type = "application/vnd.ollama.image.model";

// A small GGUF model named `title` (general.name), of file type `file_type` when given.
void write_model(const fs::path& path, const std::string& title, std::optional<uint32_t> file_type = std::nullopt) {
    test::GgufSpec spec;
    spec.metadata = {{"general.architecture", test::gguf_string("llama")}, {"general.name", test::gguf_string(title)}};
    if (file_type) spec.metadata.push_back({"general.file_type", test::gguf_uint32(*file_type)});
    spec.tensors = {{"token_embd.weight", {4}, 0, std::string(16, '\0')}};
    fs::create_directories(path.parent_path());
    test::write_gguf(path, spec);
}

// A digest of 64 hex digits made of `digit`: the store's name for a blob (never checked against its bytes).
std::string digest(char digit) { return "sha256:" + std::string(64, digit); }

// An Ollama manifest of these (media type, digest) layers, as `ollama pull` writes one.
std::string manifest(const std::vector<std::pair<std::string, std::string>>& layers) {
    json doc = {
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.docker.distribution.manifest.v2+json"},
        {"config",
         {{"mediaType", "application/vnd.docker.container.image.v1+json"}, {"digest", digest('c')}, {"size", 485}}},
        {"layers", json::array()}};
    for (const auto& [type, layer_digest] : layers)
        doc["layers"].push_back({{"mediaType", type}, {"digest", layer_digest}, {"size", 1000}});
    return doc.dump();
}

class ModelStores : public ::testing::Test {
protected:
    fs::path ollama() const { return home.path / ".ollama" / "models"; }
    fs::path lmstudio() const { return home.path / ".lmstudio" / "models"; }
    fs::path old_lmstudio() const { return home.path / ".cache" / "lm-studio" / "models"; }
    fs::path llama_cache() const { return home.path / ".cache" / "llama.cpp"; }

    // The blob of `hex_digit`'s digest, a GGUF model named `title`.
    fs::path blob(char hex_digit, const std::string& title, std::optional<uint32_t> file_type = std::nullopt) {
        const fs::path path = ollama() / "blobs" / ("sha256-" + std::string(64, hex_digit));
        write_model(path, title, file_type);
        return path;
    }
    // The manifest of registry/space/model:tag holding `text`.
    fs::path write_manifest(const std::string& registry, const std::string& space, const std::string& model,
                            const std::string& tag, const std::string& text) {
        const fs::path path = ollama() / "manifests" / registry / space / model / tag;
        fs::create_directories(path.parent_path());
        std::ofstream(path) << text;
        return path;
    }
    fs::path library_manifest(const std::string& model, const std::string& tag, const std::string& text) {
        return write_manifest("registry.ollama.ai", "library", model, tag, text);
    }

    test::TempDir home;
    test::ScopedEnv home_env{"HOME", home.path.string()};
    test::ScopedEnv hub_env{"HF_HUB_CACHE", (home.path / "hf-hub").string()};
    test::ScopedEnv ollama_env{"OLLAMA_MODELS", std::nullopt};
    test::ScopedEnv llama_env{"LLAMA_CACHE", std::nullopt};
    test::ScopedEnv xdg_env{"XDG_CACHE_HOME", std::nullopt};
};

TEST_F(ModelStores, OllamaNamesResolveToTheirBlobs) {
    const fs::path one_b = blob('1', "one b"), latest = blob('2', "latest"), user = blob('3', "user's");
    const fs::path hf = blob('4', "from hf.co");
    // The weights' layer among the others a manifest lists.
    library_manifest("llama3.2", "1b",
                     manifest({{"application/vnd.ollama.image.template", digest('9')},
                               {weights_type, digest('1')},
                               {"application/vnd.ollama.image.license", digest('8')}}));
    library_manifest("llama3.2", "latest", manifest({{weights_type, digest('2')}}));
    write_manifest("registry.ollama.ai", "someone", "model", "tag", manifest({{weights_type, digest('3')}}));
    write_manifest("hf.co", "bartowski", "Tiny-GGUF", "Q4_K_M", manifest({{weights_type, digest('4')}}));

    EXPECT_EQ(resolve_model_path("llama3.2:1b"), one_b);
    EXPECT_EQ(resolve_model_path("llama3.2"), latest);
    EXPECT_EQ(resolve_model_path("library/llama3.2:1b"), one_b);
    EXPECT_EQ(resolve_model_path("registry.ollama.ai/library/llama3.2:1b"), one_b);
    EXPECT_EQ(resolve_model_path("someone/model:tag"), user);
    EXPECT_EQ(resolve_model_path("hf.co/bartowski/Tiny-GGUF:Q4_K_M"), hf);
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("llama3.2:3b"); }, {"llama3.2:3b", "not found"}));

    // $OLLAMA_MODELS moves the store.
    test::TempDir elsewhere;
    test::ScopedEnv moved("OLLAMA_MODELS", elsewhere.path.string());
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("llama3.2:1b"); }, {elsewhere.path.string()}));
    fs::rename(ollama() / "manifests", elsewhere.path / "manifests");
    fs::rename(ollama() / "blobs", elsewhere.path / "blobs");
    EXPECT_EQ(resolve_model_path("llama3.2:1b"), elsewhere.path / "blobs" / one_b.filename());
}

// A name's parts never leave the store: "..", an empty part and more than
// three parts are not Ollama names, even where a manifest lies at the path they would make.
TEST_F(ModelStores, OllamaNamesStayInTheStore) {
    blob('5', "secret");
    write_manifest("registry.ollama.ai", "secret", "m", "latest", manifest({{weights_type, digest('5')}}));
    ASSERT_NO_THROW(resolve_model_path("secret/m"));
    for (const std::string name : {"../secret/m", "library/../secret/m:latest", "a/registry.ollama.ai/secret/m",
                                   "secret//m", "secret/m:../latest", "secret/m:", ".hidden:latest"})
        EXPECT_TRUE(test::throws_naming([&] { resolve_model_path(name); }, {"not found"})) << name;
}

TEST_F(ModelStores, LmStudioFoldersByPublisherAndModel) {
    const fs::path one = lmstudio() / "pub" / "one-GGUF" / "one-Q4_K_M.gguf";
    write_model(one, "one");
    const fs::path a = lmstudio() / "pub" / "many-GGUF" / "many-Q4_K_M.gguf";
    const fs::path b = lmstudio() / "pub" / "many-GGUF" / "many-Q8_0.gguf";
    write_model(a, "a");
    write_model(b, "b");
    std::ofstream(lmstudio() / "pub" / "many-GGUF" / "README.md") << "not a model";
    const fs::path old = old_lmstudio() / "olden" / "model" / "model.gguf";
    write_model(old, "old");
    // A split model answers to its first part.
    fs::create_directories(lmstudio() / "pub" / "split-GGUF");
    const std::vector<fs::path> parts = test::write_gguf_split(
        lmstudio() / "pub" / "split-GGUF", "split", {{"general.architecture", test::gguf_string("llama")}},
        {{{"a", {4}, 0, std::string(16, '\0')}}, {{"b", {4}, 0, std::string(16, '\0')}}});

    EXPECT_EQ(resolve_model_path("pub/one-GGUF"), one);
    EXPECT_EQ(resolve_model_path("pub/many-GGUF:many-Q8_0"), b);
    EXPECT_EQ(resolve_model_path("pub/many-GGUF/many-Q4_K_M.gguf"), a);
    EXPECT_EQ(resolve_model_path("olden/model"), old);
    EXPECT_EQ(resolve_model_path("pub/split-GGUF"), parts[0]);
    EXPECT_TRUE(
        test::throws_naming([] { resolve_model_path("pub/many-GGUF"); },
                            {"pub/many-GGUF", "2 GGUF models", "many-Q4_K_M, many-Q8_0", "pub/many-GGUF:many-Q4_K_M"}));
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("pub/many-GGUF:Q2"); }, {"no Q2.gguf", "many-Q4_K_M"}));
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("pub/one-GGUF/other.gguf"); }, {"not found"}));
}

TEST_F(ModelStores, LlamaCppCacheByFileName) {
    const fs::path file = llama_cache() / "org_Tiny-GGUF_tiny-Q8_0.gguf";
    write_model(file, "tiny");
    EXPECT_EQ(resolve_model_path("org_Tiny-GGUF_tiny-Q8_0"), file);
    EXPECT_EQ(resolve_model_path("org_Tiny-GGUF_tiny-Q8_0.gguf"), file);

    test::TempDir elsewhere;
    test::ScopedEnv moved("LLAMA_CACHE", elsewhere.path.string());
    write_model(elsewhere.path / "other.gguf", "other");
    EXPECT_EQ(resolve_model_path("other"), elsewhere.path / "other.gguf");
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("org_Tiny-GGUF_tiny-Q8_0"); }, {elsewhere.path.string()}));
}

TEST_F(ModelStores, GgufFilesByPath) {
    const fs::path named = home.path / "model.gguf", magic = home.path / "weights.bin";
    write_model(named, "named");
    write_model(magic, "by its magic");
    std::ofstream(home.path / "notes.txt") << "GGUX, not a model";
    EXPECT_EQ(resolve_model_path(named.string()), named);
    EXPECT_EQ(resolve_model_path(magic.string()), magic);
    EXPECT_TRUE(test::throws_naming([&] { resolve_model_path((home.path / "notes.txt").string()); },
                                    {"notes.txt", "not a directory or a GGUF file"}));
}

// The stores are asked after the Hugging Face cache, Ollama's first.
TEST_F(ModelStores, TheOrderOfTheStores) {
    const fs::path ollama_blob = blob('6', "ollama's");
    library_manifest("tiny", "latest", manifest({{weights_type, digest('6')}}));
    write_model(llama_cache() / "tiny.gguf", "llama.cpp's");
    EXPECT_EQ(resolve_model_path("tiny"), ollama_blob);
    fs::remove(ollama() / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest");
    EXPECT_EQ(resolve_model_path("tiny"), llama_cache() / "tiny.gguf");

    const fs::path snapshot = home.path / "hf-hub" / "models--tiny" / "snapshots" / "abc";
    fs::create_directories(snapshot);
    EXPECT_EQ(resolve_model_path("tiny"), snapshot);
}

TEST_F(ModelStores, NotFoundSaysWhereItLooked) {
    for (const std::string name : {"llama3.2:1b", "someone/model"})
        EXPECT_TRUE(test::throws_naming([&] { resolve_model_path(name); },
                                        {"model '" + name + "' not found", (home.path / "hf-hub").string(),
                                         "Ollama's store (" + ollama().string() + ")",
                                         "LM Studio's (" + lmstudio().string() + " or " + old_lmstudio().string() + ")",
                                         "llama.cpp's cache (" + llama_cache().string() + ")", "never downloads"}))
            << name;
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("someone/model"); }, {"no models--someone--model"}));
}

// Each a one-line Error naming the manifest (or the blob it names); none escapes blobs/.
TEST_F(ModelStores, HostileManifests) {
    blob('7', "good");
    std::ofstream(ollama() / "blobs" / ("sha256-" + std::string(64, 'e'))) << "not GGUF";
    const std::string passwd_digest = "sha256:../../../../../../../../etc/passwd";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"not json {", "not valid JSON"},
        {"[1, 2]", "expected an object"},
        {R"({"layers": {}})", "layers: expected an array"},
        {R"({"layers": [3]})", "layers[0]"},
        {R"({"layers": [{"mediaType": 3}]})", "layers[0].mediaType"},
        {manifest({}), "no layer of the model's weights"},
        {manifest({{"application/vnd.ollama.image.template", digest('7')}}), "no layer of the model's weights"},
        {manifest({{weights_type, digest('7')}, {weights_type, digest('7')}}), "two layers"},
        {manifest({{weights_type, passwd_digest}}), "layers[0].digest"},
        {manifest({{weights_type, "sha256:" + std::string(63, '7')}}), "layers[0].digest"},
        {manifest({{weights_type, "sha256:" + std::string(65, '7')}}), "layers[0].digest"},
        {manifest({{weights_type, "sha256:" + std::string(64, 'A')}}), "layers[0].digest"},
        {manifest({{weights_type, "sha256:" + std::string(63, '7') + "g"}}), "layers[0].digest"},
        {manifest({{weights_type, "sha512:" + std::string(64, '7')}}), "layers[0].digest"},
        {manifest({{weights_type, "sha256:" + std::string(62, '7') + "/7"}}), "layers[0].digest"},
        {manifest({{weights_type, digest('d')}}), "missing"},
        {manifest({{weights_type, digest('e')}}), "not a GGUF file"},
        {manifest({{weights_type, digest('7')}}) + std::string(70000, ' '), "more than"},
    };
    for (const auto& [text, problem] : cases) {
        const fs::path path = library_manifest("bad", "latest", text);
        EXPECT_TRUE(test::throws_naming([] { resolve_model_path("bad"); }, {path.string(), problem}))
            << text.substr(0, 80);
    }
    library_manifest("bad", "latest", manifest({{weights_type, digest('7')}}));
    EXPECT_EQ(resolve_model_path("bad").filename(), "sha256-" + std::string(64, '7'));  // the cases' one good form

    const fs::path folder = ollama() / "manifests" / "registry.ollama.ai" / "library" / "folder" / "latest";
    fs::create_directories(folder);
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("folder"); }, {folder.string(), "a directory"}));
    const fs::path fifo = ollama() / "manifests" / "registry.ollama.ai" / "library" / "fifo" / "latest";
    fs::create_directories(fifo.parent_path());
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("fifo"); }, {fifo.string(), "a FIFO"}));
}

TEST_F(ModelStores, ListsEveryStoresModelsWithSizeAndQuantization) {
    EXPECT_TRUE(list_gguf_models().empty());
    blob('1', "Llama 3.2 1B", 15);
    library_manifest("llama3.2", "1b", manifest({{weights_type, digest('1')}}));
    blob('2', "User's", 7);
    write_manifest("registry.ollama.ai", "someone", "model", "tag", manifest({{weights_type, digest('2')}}));
    blob('3', "From hf.co", 32);
    write_manifest("hf.co", "org", "Tiny-GGUF", "BF16", manifest({{weights_type, digest('3')}}));
    write_model(lmstudio() / "pub" / "one-GGUF" / "one-F16.gguf", "One", 1);
    write_model(lmstudio() / "pub" / "many-GGUF" / "many-Q4_0.gguf", "Many", 2);
    write_model(lmstudio() / "pub" / "many-GGUF" / "many-Q6_K.gguf", "Many", 18);
    write_model(llama_cache() / "tiny.gguf", "Tiny", 99);
    write_model(llama_cache() / "plain.gguf", "Plain");
    // Not offered: a manifest naming a missing blob, a file that is not GGUF, a download's side files.
    library_manifest("gone", "latest", manifest({{weights_type, digest('d')}}));
    std::ofstream(llama_cache() / "broken.gguf") << "GGUF but no more";
    std::ofstream(llama_cache() / "tiny.gguf.json") << "{}";

    struct Expected {
        std::string name, quantization, title;
    };
    const std::vector<Expected> expected = {{"hf.co/org/Tiny-GGUF:BF16", "BF16", "From hf.co"},
                                            {"llama3.2:1b", "Q4_K_M", "Llama 3.2 1B"},
                                            {"plain.gguf", "", "Plain"},
                                            {"pub/many-GGUF:many-Q4_0", "Q4_0", "Many"},
                                            {"pub/many-GGUF:many-Q6_K", "Q6_K", "Many"},
                                            {"pub/one-GGUF", "F16", "One"},
                                            {"someone/model:tag", "Q8_0", "User's"},
                                            {"tiny.gguf", "file type 99", "Tiny"}};
    const std::vector<GgufModel> models = list_gguf_models();
    ASSERT_EQ(models.size(), expected.size());
    for (size_t i = 0; i < models.size(); ++i) {
        EXPECT_EQ(models[i].name, expected[i].name);
        EXPECT_EQ(models[i].quantization, expected[i].quantization) << models[i].name;
        EXPECT_EQ(models[i].title, expected[i].title) << models[i].name;
        EXPECT_EQ(models[i].architecture, "llama") << models[i].name;
        EXPECT_EQ(models[i].bytes, fs::file_size(models[i].path)) << models[i].name;
        EXPECT_GT(models[i].bytes, 0u);
        // Each listed name opens that file.
        EXPECT_EQ(resolve_model_path(models[i].name), models[i].path) << models[i].name;
    }
}

// A split model is listed once, its size that of every part.
TEST_F(ModelStores, ListsASplitModelOnce) {
    fs::create_directories(llama_cache());
    const std::vector<fs::path> parts =
        test::write_gguf_split(llama_cache(), "big", {{"general.architecture", test::gguf_string("llama")}},
                               {{{"a", {4}, 0, std::string(16, '\0')}}, {{"b", {4}, 0, std::string(16, '\0')}}});
    const std::vector<GgufModel> models = list_gguf_models();
    ASSERT_EQ(models.size(), 1u);
    EXPECT_EQ(models[0].name, "big-00001-of-00002.gguf");
    EXPECT_EQ(models[0].path, parts[0]);
    EXPECT_EQ(models[0].bytes, fs::file_size(parts[0]) + fs::file_size(parts[1]));
}

// llama.cpp's file types by the names of its llama.h's llama_ftype.
TEST(GgufFileTypes, NamesOfLlamaCppsNumbering) {
    const std::vector<std::pair<uint64_t, std::string>> names = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},      {7, "Q8_0"},     {8, "Q5_0"},
        {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},   {13, "Q3_K_L"},  {14, "Q4_K_S"},
        {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},     {19, "IQ2_XXS"}, {21, "Q2_K_S"},
        {30, "IQ4_XS"}, {32, "BF16"},   {36, "TQ1_0"},  {38, "MXFP4_MOE"}};
    for (const auto& [id, name] : names) EXPECT_EQ(gguf_file_type_name(id), name) << id;
    for (uint64_t retired : {4, 5, 6, 33, 34, 35, 1024})
        EXPECT_EQ(gguf_file_type_name(retired), "file type " + std::to_string(retired));
}

}  // namespace
