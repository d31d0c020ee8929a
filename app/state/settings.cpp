// The saved settings, read through JsonFields and written whole: see settings.h.
#include "state/settings.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/json_fields.h"
#include "headscope/io/json_input.h"
#include "state/window_state.h"

namespace headscope {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

fs::path config_dir() {
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return fs::path(xdg) / "headscope";
    const char* home = std::getenv("HOME");
    return fs::path(home ? home : ".") / ".config" / "headscope";
}

Colormap parse_colormap(const std::string& word) { return parse_choice(colormap_choices, word); }

namespace {

// The texts make a settings file's size; 16 MiB holds a batch of long texts
// (a 128,000-token context is about 512 KB of text). The rest is a few dozen values.
constexpr JsonLimits settings_limits{16 << 20, 1 << 16};

// The integers of the array at `key`, which must hold `count` of them.
std::vector<int> integers(const JsonFields& f, const nlohmann::json& json, const std::string& key, size_t count) {
    const nlohmann::json& array = f.required(json, "", key, nlohmann::json::value_t::array, "an array");
    if (array.size() != count)
        f.fail(key, "expected " + std::to_string(count) + " integers, got " + describe_json(array));
    std::vector<int> values;
    for (size_t i = 0; i < count; ++i) {
        if (!array[i].is_number_integer() || array[i].get<int64_t>() != array[i].get<int>())
            f.fail(JsonFields::at(key, i), "expected an integer, got " + describe_json(array[i]));
        values.push_back(array[i].get<int>());
    }
    return values;
}

Settings settings_from(const JsonFields& f, const nlohmann::json& json) {
    Settings s;
    s.model = f.string(json, "", "model");
    s.texts.clear();
    const nlohmann::json& texts = f.required(json, "", "texts", nlohmann::json::value_t::array, "an array");
    for (size_t i = 0; i < texts.size(); ++i) {
        if (!texts[i].is_string())
            f.fail(JsonFields::at("texts", i), "expected a string, got " + describe_json(texts[i]));
        s.texts.push_back(texts[i].get<std::string>());
    }
    s.colormap = parse_colormap(f.string(json, "", "colormap"));
    s.options.causal = f.boolean(json, "", "causal");
    s.options.padding_mask = f.boolean(json, "", "padding_mask");
    s.sliding_window = f.boolean(json, "", "sliding_window", true);  // files from before the families have none
    s.options.n_head = static_cast<int>(f.integer(json, "", "heads", 0, std::numeric_limits<int>::max()));
    s.options.scale = parse_scale(f.string(json, "", "scale"));
    s.options.split = parse_split(f.string(json, "", "split"));
    // Files from before the grid of experts have no switch: the grid of heads.
    s.effects_of = parse_choice(effects_of_choices, f.string(json, "", "effects_of", "heads"));
    s.effects_all_exact = f.boolean(json, "", "effects_all_exact", false);  // files from before the estimate: hybrid
    s.export_dir = f.string(json, "", "export_dir");
    // Files from before the compare text have none of these.
    s.compare_text = f.string(json, "", "compare_text", "");
    s.compare_target = f.string(json, "", "compare_target", "");
    s.compare_pair = f.string(json, "", "compare_pair", "");
    s.diff = f.boolean(json, "", "diff", false);
    s.patch_metric = parse_patch_metric(f.string(json, "", "patch_metric", "logit-diff"));
    s.patch_direction = parse_patch_direction(f.string(json, "", "patch_direction", "denoise"));
    s.patch_stack = parse_shown_patch_stack(f.string(json, "", "patch_stack", "decoder"));  // none before the flag
    if (f.optional(json, "", "window")) {  // no size: no window has been placed yet
        const std::vector<int> size = integers(f, json, "window", 2);
        if (size[0] < 1 || size[1] < 1) f.fail("window", "the size is not positive");
        s.window.width = size[0];
        s.window.height = size[1];
    }
    // Files from before the window was placed have neither.
    if (f.optional(json, "", "window_position")) {
        const std::vector<int> position = integers(f, json, "window_position", 2);
        s.window.position = std::array{position[0], position[1]};
    }
    s.window.maximized = f.boolean(json, "", "window_maximized", false);
    return s;
}

}  // namespace

Settings read_settings(const fs::path& file) {
    const std::string where = file.string();
    try {
        if (path_kind(file) == PathKind::missing) return {};
        return settings_from(JsonFields(where), read_json_file(file, settings_limits));
    } catch (const Error& e) {  // the file's reader names the file; the warning does once
        std::string why = e.what();
        if (why.starts_with(where + ": ")) why.erase(0, where.size() + 2);
        std::fprintf(stderr, "headscope: warning: ignoring %s: %s\n", one_line(where).c_str(), one_line(why).c_str());
        return {};
    }
}

void write_settings(const fs::path& file, const Settings& s) {
    Json json = {{"model", s.model},
                 {"texts", s.texts},
                 {"colormap", word_of(colormap_choices, s.colormap)},
                 {"causal", s.options.causal},
                 {"padding_mask", s.options.padding_mask},
                 {"sliding_window", s.sliding_window},
                 {"heads", s.options.n_head},
                 {"scale", to_string(s.options.scale)},
                 {"split", to_string(s.options.split)},
                 {"effects_of", word_of(effects_of_choices, s.effects_of)},
                 {"effects_all_exact", s.effects_all_exact},
                 {"export_dir", s.export_dir},
                 {"compare_text", s.compare_text},
                 {"compare_target", s.compare_target},
                 {"compare_pair", s.compare_pair},
                 {"diff", s.diff},
                 {"patch_metric", to_string(s.patch_metric)},
                 {"patch_direction", to_string(s.patch_direction)},
                 {"patch_stack", word_of(patch_stack_choices, s.patch_stack)},
                 {"window_maximized", s.window.maximized}};
    if (s.window.width > 0) json["window"] = {s.window.width, s.window.height};
    if (s.window.position) json["window_position"] = *s.window.position;
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    const std::string text = json.dump(2, ' ', false, Json::error_handler_t::replace) + '\n';
    write_file_atomically(file, "the settings", [&](std::ostream& out) { out << text; });
}

}  // namespace headscope
