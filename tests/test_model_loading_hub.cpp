// Hub names resolve through the local Hugging Face cache (refs/main, else the
// newest snapshot; HF_HUB_CACHE, HF_HOME or ~/.cache), a name not found says
// where it looked, and the cached GPT-2 and family models are listed by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "family_models.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"

using namespace headscope;
namespace fs = std::filesystem;

namespace {

// A small model at `dir` whose n_layer tells the snapshots apart.
void write_snapshot(const fs::path& dir, int n_layer) {
    test::write_test_model(dir, {.n_layer = n_layer, .n_head = 2, .n_embd = 8, .n_positions = 8});
}

TEST(HubResolution, RefsMainPicksTheSnapshot) {
    test::TempDir cache;
    test::ScopedEnv hub("HF_HUB_CACHE", cache.path.string());
    const fs::path repo = cache.path / "models--gpt2";
    write_snapshot(repo / "snapshots" / "aaa111", 1);
    write_snapshot(repo / "snapshots" / "bbb222", 2);
    fs::create_directories(repo / "refs");
    std::ofstream(repo / "refs" / "main") << "aaa111\n";
    fs::last_write_time(repo / "snapshots" / "bbb222",
                        fs::last_write_time(repo / "snapshots" / "aaa111") + std::chrono::hours(1));

    EXPECT_EQ(resolve_model_path("gpt2"), repo / "snapshots" / "aaa111");
    const Model m = load_model("gpt2");
    EXPECT_EQ(m.config.n_layer, 1);

    std::ofstream(repo / "refs" / "main") << "ccc333";
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("gpt2"); }, {"refs/main", "ccc333"}));
}

TEST(HubResolution, WithoutRefsTheNewestSnapshotUnderHfHome) {
    test::TempDir home;
    test::ScopedEnv hub("HF_HUB_CACHE", std::nullopt);
    test::ScopedEnv hf_home("HF_HOME", home.path.string());
    const fs::path snapshots = home.path / "hub" / "models--openai-community--gpt2-medium" / "snapshots";
    write_snapshot(snapshots / "old", 1);
    write_snapshot(snapshots / "new", 2);
    fs::last_write_time(snapshots / "old", fs::last_write_time(snapshots / "new") - std::chrono::hours(1));

    EXPECT_EQ(resolve_model_path("openai-community/gpt2-medium"), snapshots / "new");
    EXPECT_EQ(load_model("openai-community/gpt2-medium").config.n_layer, 2);
}

TEST(HubResolution, DefaultCacheUnderHome) {
    test::TempDir home;
    test::ScopedEnv hub("HF_HUB_CACHE", std::nullopt);
    test::ScopedEnv hf_home("HF_HOME", std::nullopt);
    test::ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    test::ScopedEnv home_env("HOME", home.path.string());
    const fs::path snapshot = home.path / ".cache" / "huggingface" / "hub" / "models--distilgpt2" / "snapshots" / "x";
    fs::create_directories(snapshot);
    EXPECT_EQ(resolve_model_path("distilgpt2"), snapshot);
}

TEST(HubResolution, NotFoundSaysWhereItLooked) {
    test::TempDir cache;
    test::ScopedEnv hub("HF_HUB_CACHE", cache.path.string());
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("gpt2"); }, {"model 'gpt2' not found", "models--gpt2",
                                                                         cache.path.string(), "never downloads"}));
    fs::create_directories(cache.path / "models--gpt2" / "snapshots");
    EXPECT_TRUE(test::throws_naming([] { resolve_model_path("gpt2"); }, {"models--gpt2", "no snapshot"}));
    EXPECT_TRUE(test::throws_naming([&] { load_model((cache.path / "no-such-model").string()); },
                                    {"no-such-model", "not found"}));
}

TEST(HubResolution, ListsTheCachedGpt2ModelsByName) {
    test::TempDir cache;
    test::ScopedEnv hub("HF_HUB_CACHE", cache.path.string());
    EXPECT_TRUE(list_cached_models().empty());

    write_snapshot(cache.path / "models--gpt2" / "snapshots" / "abc", 1);
    const fs::path medium = cache.path / "models--openai-community--gpt2-medium" / "snapshots" / "def";
    write_snapshot(medium, 2);
    // Not offered: another architecture, a download with no snapshot, broken JSON, a dataset.
    fs::create_directories(cache.path / "models--bert-base-uncased" / "snapshots" / "x");
    std::ofstream(cache.path / "models--bert-base-uncased" / "snapshots" / "x" / "config.json")
        << R"({"model_type": "bert"})";
    fs::create_directories(cache.path / "models--distilgpt2" / "snapshots");
    fs::create_directories(cache.path / "models--broken" / "snapshots" / "y");
    std::ofstream(cache.path / "models--broken" / "snapshots" / "y" / "config.json") << "{\"model_type\": ";
    write_snapshot(cache.path / "datasets--gpt2-data" / "snapshots" / "z", 1);

    const std::vector<CachedModel> models = list_cached_models();
    ASSERT_EQ(models.size(), 2u);
    EXPECT_EQ(models[0].name, "gpt2");
    EXPECT_EQ(models[0].path, cache.path / "models--gpt2" / "snapshots" / "abc");
    EXPECT_EQ(models[1].name, "openai-community/gpt2-medium");
    EXPECT_EQ(models[1].path, medium);
    // Each listed name loads as that model.
    EXPECT_EQ(load_model(models[1].name).config.n_layer, 2);
}

// Today's families resolve from the cache by their hub names, as GPT-2 does,
// and are offered in the model list; each loads as its family.
TEST(HubResolution, FamiliesByTheirHubNames) {
    test::TempDir cache;
    test::ScopedEnv hub("HF_HUB_CACHE", cache.path.string());
    const std::vector<std::pair<std::string, std::string>> repos = {{"HuggingFaceTB/SmolLM2-135M", "llama"},
                                                                    {"Qwen/Qwen2.5-0.5B", "qwen2"},
                                                                    {"EleutherAI/pythia-160m", "gpt_neox_parallel"}};
    for (const auto& [name, family] : repos) {
        std::string repo = "models--" + name;
        repo.replace(repo.find('/'), 1, "--");
        test::write_family_model(cache.path / repo / "snapshots" / "rev1", test::family_variant(family));
    }
    const std::vector<CachedModel> models = list_cached_models();
    ASSERT_EQ(models.size(), repos.size());
    for (const auto& [name, family] : repos) {
        const auto listed =
            std::find_if(models.begin(), models.end(), [&](const CachedModel& m) { return m.name == name; });
        ASSERT_NE(listed, models.end()) << name;
        EXPECT_TRUE(family.starts_with(load_model(name).config.architecture)) << name;  // gpt_neox_parallel: gpt_neox
    }
}
}  // namespace
