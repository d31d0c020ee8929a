#include "settings.h"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <ostream>

#include "headscope/error.h"
#include "headscope/files.h"
#include "headscope/json_input.h"

namespace headscope {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

fs::path config_dir() {
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return fs::path(xdg) / "headscope";
    const char* home = std::getenv("HOME");
    return fs::path(home ? home : ".") / ".config" / "headscope";
}

Colormap parse_colormap(const std::string& word) { return parse_choice(colormap_choices, word); }

Settings read_settings(const fs::path& file) {
    if (!fs::exists(file)) return {};
    try {
        const nlohmann::json json = parse_json(read_file(file), file.string());
        Settings s;
        s.model = json.at("model").get<std::string>();
        s.texts = json.at("texts").get<std::vector<std::string>>();
        s.colormap = parse_colormap(json.at("colormap").get<std::string>());
        s.options.causal = json.at("causal").get<bool>();
        s.options.padding_mask = json.at("padding_mask").get<bool>();
        s.sliding_window = json.value("sliding_window", true);  // files from before the families have none
        s.options.n_head = json.at("heads").get<int>();
        if (s.options.n_head < 0) throw Error("heads is negative");
        s.options.scale = parse_scale(json.at("scale").get<std::string>());
        s.options.split = parse_split(json.at("split").get<std::string>());
        s.export_dir = json.at("export_dir").get<std::string>();
        if (json.contains("window")) {  // no size: no window has been placed yet
            s.window.width = json.at("window").at(0).get<int>();
            s.window.height = json.at("window").at(1).get<int>();
            if (s.window.width < 1 || s.window.height < 1) throw Error("window size is not positive");
        }
        // Files from before the window was placed have neither.
        if (json.contains("window_position")) s.window.position = json.at("window_position").get<std::array<int, 2>>();
        s.window.maximized = json.value("window_maximized", false);
        return s;
    } catch (const std::exception& e) {  // json's parse, type and missing-key errors, and ours
        std::fprintf(stderr, "headscope: warning: ignoring %s: %s\n", one_line(file.string()).c_str(),
                     one_line(e.what()).c_str());
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
                 {"export_dir", s.export_dir},
                 {"window_maximized", s.window.maximized}};
    if (s.window.width > 0) json["window"] = {s.window.width, s.window.height};
    if (s.window.position) json["window_position"] = *s.window.position;
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    const std::string text = json.dump(2, ' ', false, Json::error_handler_t::replace) + '\n';
    write_file_atomically(file, "the settings", [&](std::ostream& out) { out << text; });
}

}  // namespace headscope
