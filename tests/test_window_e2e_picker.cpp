// The model picker clicked open as a person opens it, over stores of GGUF
// models laid out as their programs lay them out under a temporary HOME:
// Ollama's (OLLAMA_MODELS: a manifest naming its blob), LM Studio's
// (~/.lmstudio/models/PUBLISHER/MODEL/) and llama.cpp's cache (LLAMA_CACHE).
// Each file, written by the tests (gguf_models.h), is a row named as its
// store's name opens it, with its quantization and its size on disk
// (core's listing itself: test_model_stores).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "driven_window.h"
#include "gguf_models.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// How the picker writes a size: whole megabytes below a gigabyte.
std::string megabytes(const fs::path& file) {
    char size[32];
    std::snprintf(size, sizeof size, "%.0f MB", static_cast<double>(fs::file_size(file)) / 1e6);
    return size;
}

TEST(WindowEndToEnd, ThePickerListsTheGgufStoresModels) {
    test::TempDir home;
    const fs::path ollama = home.path / "ollama-store", llama_cache = home.path / "llama-cache",
                   lmstudio = home.path / ".lmstudio" / "models";
    const test::ScopedEnv home_env{"HOME", home.path.string()}, hub_env{"HF_HUB_CACHE", (home.path / "hub").string()},
        ollama_env{"OLLAMA_MODELS", ollama.string()}, llama_env{"LLAMA_CACHE", llama_cache.string()},
        xdg_env{"XDG_CACHE_HOME", std::nullopt};
    const test::FamilySpec spec = test::gguf_family_spec(test::Family::llama);
    const std::string hex(64, 'a');
    const fs::path blob = ollama / "blobs" / ("sha256-" + hex), lm = lmstudio / "pub" / "tiny-GGUF" / "tiny-Q8_0.gguf",
                   cached = llama_cache / "tiny-Q6_K.gguf";
    for (const fs::path& dir : {blob.parent_path(), lm.parent_path(), llama_cache}) fs::create_directories(dir);
    test::write_gguf_family(blob, spec, DType::Q4_K);
    test::write_gguf_family(lm, spec, DType::Q8_0);
    test::write_gguf_family(cached, spec, DType::Q6_K);
    const fs::path manifest = ollama / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "q4";
    fs::create_directories(manifest.parent_path());
    std::ofstream(manifest) << json{{"schemaVersion", 2},
                                    {"layers",
                                     {{{"mediaType", "application/vnd.ollama.image.model"},
                                       {"digest", "sha256:" + hex},
                                       {"size", fs::file_size(blob)}}}}}
                                   .dump();
    // llama.cpp's names of the file types the writer gives each (a K type's _S).
    const std::map<std::string, std::string> expected = {{"tiny:q4", "Q4_K_S, " + megabytes(blob)},
                                                         {"pub/tiny-GGUF", "Q8_0, " + megabytes(lm)},
                                                         {"tiny-Q6_K.gguf", "Q6_K, " + megabytes(cached)}};

    const std::vector<std::string> args = {"--model", cached.string(), "--text", "It was soft."};
    const test::WindowShot first = test::shoot_window(args, home.path, "picker-first");
    ASSERT_EQ(first.run.status, 0) << first.run.err;
    const test::Centres controls = test::control_centres(first.layout);
    ASSERT_TRUE(controls.contains("open model"));

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const fs::path layout = home.path / "picker.json";
    std::vector<std::string> driven = args;
    driven.insert(driven.end(), {"--layout", layout.string()});
    test::DrivenWindow window(screen.name(), driven, home.path);
    window.settled_screen();
    window.click(controls.at("open model"));
    window.settled_screen();
    ASSERT_EQ(window.quit(), 0);

    std::map<std::string, std::string> listed;
    for (const json& row : test::entries(test::read_layout(layout), "picker"))
        if (row.contains("details")) listed[row["name"]] = row["details"];
    EXPECT_EQ(listed, expected);
}

}  // namespace
