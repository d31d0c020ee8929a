// The window's settings file: what is written reads back the same, where it
// lives, and a file that is not valid settings gives the defaults and one
// warning line instead of failing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "model_writer.h"
#include "process.h"
#include "state/settings.h"

using namespace headscope;
namespace fs = std::filesystem;

namespace {

TEST(Settings, WhatIsWrittenReadsBack) {
    test::TempDir dir;
    Settings s;
    s.model = "/models/gpt2 small";
    s.texts = {"The cat sat", "Ünïcödé \"quoted\"\nsecond line"};
    s.colormap = Colormap::grey;
    s.options.causal = false;
    s.options.padding_mask = false;
    s.sliding_window = false;
    s.options.n_head = 8;
    s.options.scale = Scale::none;
    s.options.split = Split::naive_view;
    s.effects_of = EffectsOf::experts;
    s.effects_all_exact = true;
    s.export_dir = "/tmp/exports";
    s.compare_text = "The dog sat";
    s.compare_target = "Der Hund";
    s.compare_pair = "It was sad.";
    s.diff = true;
    s.patch_metric = PatchMetric::loss;
    s.patch_direction = PatchDirection::noise;
    s.patch_stack = PatchStack::cross;
    s.window = {1600, 900, std::array{-20, 40}, true};
    const fs::path file = dir.path / "headscope" / "settings.json";  // the folder is made
    write_settings(file, s);
    const std::string text = test::read_file(file);  // the enums as their command-line words
    EXPECT_NE(text.find("\"colormap\": \"grey\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"scale\": \"none\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"split\": \"naive-view\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"effects_of\": \"experts\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"patch_stack\": \"cross\""), std::string::npos) << text;

    testing::internal::CaptureStderr();
    const Settings back = read_settings(file);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_EQ(back.model, s.model);
    EXPECT_EQ(back.texts, s.texts);
    EXPECT_EQ(back.colormap, Colormap::grey);
    EXPECT_FALSE(back.options.causal);
    EXPECT_FALSE(back.options.padding_mask);
    EXPECT_FALSE(back.sliding_window);
    EXPECT_EQ(back.options.n_head, 8);
    EXPECT_EQ(back.options.scale, Scale::none);
    EXPECT_EQ(back.options.split, Split::naive_view);
    EXPECT_EQ(back.effects_of, EffectsOf::experts);
    EXPECT_TRUE(back.effects_all_exact);
    EXPECT_EQ(back.export_dir, "/tmp/exports");
    EXPECT_EQ(back.compare_text, "The dog sat");
    EXPECT_EQ(back.compare_target, "Der Hund");
    EXPECT_EQ(back.compare_pair, "It was sad.");
    EXPECT_TRUE(back.diff);
    EXPECT_EQ(back.patch_metric, PatchMetric::loss);
    EXPECT_EQ(back.patch_direction, PatchDirection::noise);
    EXPECT_EQ(back.patch_stack, PatchStack::cross);
    EXPECT_EQ(back.window.width, 1600);
    EXPECT_EQ(back.window.height, 900);
    EXPECT_EQ(back.window.position, (std::array{-20, 40}));
    EXPECT_TRUE(back.window.maximized);
}

TEST(Settings, MissingFileIsTheDefaultsSilently) {
    test::TempDir dir;
    testing::internal::CaptureStderr();
    const Settings s = read_settings(dir.path / "settings.json");
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_EQ(s.model, builtin_model);
    EXPECT_TRUE(s.texts.empty());
    EXPECT_EQ(s.colormap, Colormap::viridis);
    EXPECT_TRUE(s.options.causal);
    EXPECT_EQ(s.options.n_head, 0);
    EXPECT_EQ(s.effects_of, EffectsOf::heads);
    EXPECT_FALSE(s.effects_all_exact);  // the hybrid grid
    EXPECT_TRUE(s.compare_text.empty());
    EXPECT_TRUE(s.compare_target.empty());
    EXPECT_TRUE(s.compare_pair.empty());
    EXPECT_FALSE(s.diff);
    EXPECT_EQ(s.patch_stack, PatchStack::decoder);
    EXPECT_EQ(s.window.width, 0);  // a first start: the window takes most of the screen
    EXPECT_FALSE(s.window.position);
}

TEST(Settings, CorruptFilesAreIgnoredWithOneWarningLine) {
    test::TempDir dir;
    Settings good;
    good.texts = {"hello"};
    good.window.width = 1280;
    good.window.height = 800;
    const fs::path file = dir.path / "settings.json";
    write_settings(file, good);
    std::string valid = test::read_file(file);
    const auto with = [&](const std::string& from, const std::string& to) {
        std::string text = valid;
        text.replace(text.find(from), from.size(), to);
        return text;
    };
    for (const std::string& bad :
         {std::string("{\"model\": "), std::string("[1, 2]"), std::string(""), with("\"viridis\"", "\"rainbow\""),
          with("\"transpose\"", "\"sideways\""), with("\"heads\": 0", "\"heads\": -3"),
          with("\"heads\": 0", "\"heads\": \"four\""), with("\"texts\"", "\"textz\""), with("1280", "0"),
          with("\"effects_of\": \"heads\"", "\"effects_of\": \"neurons\""),
          with("\"effects_of\": \"heads\"", "\"effects_of\": true"),
          with("\"patch_stack\": \"decoder\"", "\"patch_stack\": \"own\""),
          with("\"window_maximized\": false", "\"window_maximized\": 3"),
          with("\"window_maximized\": false", "\"window_position\": [5]")}) {
        std::ofstream(file, std::ios::binary) << bad;
        testing::internal::CaptureStderr();
        const Settings s = read_settings(file);
        const std::string warning = testing::internal::GetCapturedStderr();
        EXPECT_TRUE(s.texts.empty()) << bad;  // the defaults, not part of the file
        EXPECT_EQ(warning.rfind("headscope: warning: ignoring " + file.string() + ": ", 0), 0u) << warning;
        EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1) << warning;
    }
}

// Hostile settings files (docs/testing.md): a file linked to itself, one of
// 60 MB, one of a million values. Each is one warning naming the file and the
// defaults, at once; the link is replaced when the settings are saved.
TEST(Settings, HostileFilesAreOneWarningAndTheDefaults) {
    test::TempDir dir;
    const fs::path file = dir.path / "settings.json";
    const auto expect_warned = [&](const std::string& names) {
        testing::internal::CaptureStderr();
        const auto start = std::chrono::steady_clock::now();
        const Settings s = read_settings(file);
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << names;
        const std::string warning = testing::internal::GetCapturedStderr();
        EXPECT_TRUE(s.texts.empty()) << names;
        EXPECT_EQ(warning.rfind("headscope: warning: ignoring " + file.string() + ": ", 0), 0u) << warning;
        EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1) << warning;
        EXPECT_NE(warning.find(names), std::string::npos) << warning;
    };
    fs::create_symlink("settings.json", file);
    expect_warned("Too many levels of symbolic links");
    Settings saved;
    saved.texts = {"kept"};
    write_settings(file, saved);
    EXPECT_EQ(read_settings(file).texts, saved.texts);

    std::ofstream(file, std::ios::trunc) << "{\"texts\": [\"" << std::string(60 << 20, 'x') << "\"]}";
    expect_warned("more than the 16777216 bytes it may have");
    std::string values = "{\"texts\": [\"\"";
    for (int i = 0; i < 1'000'000; ++i) values += ",\"\"";
    std::ofstream(file, std::ios::trunc) << values << "]}";
    expect_warned("JSON values, more than this file may have");
}

// Settings written before the sliding window have no word for it: the model's own window, on.
TEST(Settings, AFileWithoutTheSlidingWindowKeepsItOn) {
    test::TempDir dir;
    Settings off;
    off.sliding_window = false;
    off.texts = {"kept"};
    const fs::path file = dir.path / "settings.json";
    write_settings(file, off);
    std::string text = test::read_file(file);
    const std::string key = "\"sliding_window\": false,";
    ASSERT_NE(text.find(key), std::string::npos) << text;
    text.erase(text.find(key), key.size());
    std::ofstream(file, std::ios::binary) << text;
    testing::internal::CaptureStderr();
    const Settings back = read_settings(file);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_TRUE(back.sliding_window);
    EXPECT_EQ(back.texts, off.texts);
}

// Settings written before the grid of experts have no switch: the grid of
// heads; before the estimate, no toggle: the hybrid grid.
TEST(Settings, AFileWithoutTheEffectsSwitchIsTheGridOfHeads) {
    test::TempDir dir;
    Settings experts;
    experts.effects_of = EffectsOf::experts;
    experts.effects_all_exact = true;
    experts.texts = {"kept"};
    const fs::path file = dir.path / "settings.json";
    write_settings(file, experts);
    std::string text = test::read_file(file);
    for (const std::string key : {"\"effects_of\": \"experts\",", "\"effects_all_exact\": true,"}) {
        ASSERT_NE(text.find(key), std::string::npos) << text;
        text.erase(text.find(key), key.size());
    }
    std::ofstream(file, std::ios::binary) << text;
    testing::internal::CaptureStderr();
    const Settings back = read_settings(file);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_EQ(back.effects_of, EffectsOf::heads);
    EXPECT_FALSE(back.effects_all_exact);
    EXPECT_EQ(back.texts, experts.texts);
}

TEST(Settings, LiveUnderXdgConfigHomeElseDotConfig) {
    test::ScopedEnv xdg("XDG_CONFIG_HOME", "/somewhere/config");
    EXPECT_EQ(config_dir(), fs::path("/somewhere/config/headscope"));
    test::ScopedEnv no_xdg("XDG_CONFIG_HOME", std::nullopt);
    test::ScopedEnv home("HOME", "/home/user");
    EXPECT_EQ(config_dir(), fs::path("/home/user/.config/headscope"));
}

}  // namespace
