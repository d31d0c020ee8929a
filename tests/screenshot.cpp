#include "screenshot.h"

#include <stb/stb_image.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>

#include "headscope/inspect/strided.h"
#include "virtual_screen.h"

namespace headscope::test {

std::array<int, 3> Image::at(int x, int y) const {
    const unsigned char* p = rgba.data() + (static_cast<size_t>(y) * width + x) * 4;
    return {p[0], p[1], p[2]};
}

Image load_png(const std::filesystem::path& path) {
    Image image;
    int channels = 0;
    unsigned char* data = stbi_load(path.c_str(), &image.width, &image.height, &channels, 4);
    if (!data) return image;
    image.rgba.assign(data, data + static_cast<size_t>(image.width) * image.height * 4);
    stbi_image_free(data);
    return image;
}

std::array<double, 3> viridis(double t) {
    static const int stops[9][3] = {{68, 1, 84},    {71, 45, 123}, {59, 82, 139},  {44, 114, 142}, {33, 145, 140},
                                    {40, 174, 128}, {94, 201, 98}, {173, 220, 48}, {253, 231, 37}};
    t = std::clamp(t, 0.0, 1.0) * 8;
    const int i = std::min(static_cast<int>(t), 7);
    const double f = t - i;
    return {stops[i][0] + f * (stops[i + 1][0] - stops[i][0]), stops[i][1] + f * (stops[i + 1][1] - stops[i][1]),
            stops[i][2] + f * (stops[i + 1][2] - stops[i][2])};
}

std::array<double, 3> hsv_to_rgb(double h, double s, double v) {
    const double sector = std::fmod(h, 1.0) * 6, f = sector - std::floor(sector);
    const double p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    std::array<double, 3> rgb;
    switch (static_cast<int>(sector)) {
        case 0: rgb = {v, t, p}; break;
        case 1: rgb = {q, v, p}; break;
        case 2: rgb = {p, v, t}; break;
        case 3: rgb = {p, q, v}; break;
        case 4: rgb = {t, p, v}; break;
        default: rgb = {v, p, q}; break;
    }
    for (double& c : rgb) c *= 255;
    return rgb;
}

std::array<double, 3> expert_rgb(int expert, double weight) {
    return hsv_to_rgb(std::fmod(expert * 0.618034, 1.0), 0.65, 0.3 + 0.7 * weight);
}

ProcessRun run_window(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                      const std::vector<std::string>& under, const std::filesystem::path& window) {
    const VirtualScreen screen("1920x1080");
    const ScopedEnv display("DISPLAY", screen.name());
    std::vector<std::string> command = under;
    command.push_back(window.string());
    command.insert(command.end(), args.begin(), args.end());
    return run_program(command, scratch);
}

namespace {

using nlohmann::json;

// Cell (r, c) of `entry`'s grid as one or more entries of their own.
void expand_cell(const json& entry, int64_t r, int64_t c, json& out) {
    const json& g = entry["grid"];
    json cell = entry;
    for (const char* key :
         {"grid", "row", "col", "first_row", "first_col", "floats_per_row", "floats_per_cell", "storage"})
        cell.erase(key);
    cell["x"] = g["x"].get<double>() + c * g["step_x"].get<double>();
    cell["y"] = g["y"].get<double>() + r * g["step_y"].get<double>();
    cell["w"] = g["w"];
    cell["h"] = g["h"];
    const int64_t row = entry.value("first_row", int64_t{0}) + r;
    if (!entry.contains("floats_per_cell")) {  // a map or mask: rows and columns name queries and keys
        cell[entry["row"].get<std::string>()] = row;
        cell[entry["col"].get<std::string>()] = entry.value("first_col", int64_t{0}) + c;
        out.push_back(std::move(cell));
        return;
    }
    const int64_t per_cell = entry["floats_per_cell"];
    const json& storage = entry["storage"];
    StridedLayout order{storage["shape"].get<std::vector<int64_t>>(), storage["strides"].get<std::vector<int64_t>>(),
                        storage["offset"].get<int64_t>()};
    for (int64_t k = 0; k < per_cell; ++k) {
        const int64_t position = row * entry["floats_per_row"].get<int64_t>() + c * per_cell + k;
        cell["position"] = position;
        cell["index"] = order.storage_index(position);
        out.push_back(cell);
    }
}

}  // namespace

json read_layout(const std::filesystem::path& path) {
    json entries = json::array();
    std::ifstream in(path);
    if (!in) return entries;
    for (const json& entry : json::parse(in)) {
        if (!entry.contains("grid")) {
            entries.push_back(entry);
            continue;
        }
        for (int64_t r = 0; r < entry["grid"]["rows"].get<int64_t>(); ++r)
            for (int64_t c = 0; c < entry["grid"]["cols"].get<int64_t>(); ++c) expand_cell(entry, r, c, entries);
    }
    return entries;
}

json entries(const json& layout, const std::string& view) {
    json out = json::array();
    for (const json& entry : layout)
        if (entry["view"] == view) out.push_back(entry);
    return out;
}

std::array<int, 3> centre(const Image& image, const json& entry) {
    return image.at(static_cast<int>(entry["x"].get<double>() + entry["w"].get<double>() / 2),
                    static_cast<int>(entry["y"].get<double>() + entry["h"].get<double>() / 2));
}

bool near(const std::array<int, 3>& got, const std::array<double, 3>& want, double tolerance) {
    for (int c = 0; c < 3; ++c)
        if (std::abs(got[c] - want[c]) > tolerance) return false;
    return true;
}

std::string label_fault(const std::string& shown, const std::string& text) {
    if (shown == text) return "";
    const std::string ellipsis = "\u2026";
    if (shown.size() < ellipsis.size() || shown.compare(shown.size() - ellipsis.size(), ellipsis.size(), ellipsis))
        return "'" + shown + "' is neither '" + text + "' nor ends in an ellipsis";
    const std::string prefix = shown.substr(0, shown.size() - ellipsis.size());
    if (text.rfind(prefix, 0) != 0) return "'" + prefix + "' is not a prefix of '" + text + "'";
    // Cut between characters: what follows the prefix is no UTF-8 continuation byte.
    if (prefix.size() < text.size() && (static_cast<unsigned char>(text[prefix.size()]) & 0xC0) == 0x80)
        return "'" + shown + "' cuts a character of '" + text + "'";
    return "";
}

WindowShot shoot_window(std::vector<std::string> args, const std::filesystem::path& dir, const std::string& name,
                        const std::filesystem::path& window) {
    const std::filesystem::path png = dir / (name + ".png"), layout = dir / (name + ".json");
    args.insert(args.end(), {"--screenshot", png.string(), "--layout", layout.string()});
    WindowShot shot{run_window(args, dir, {}, window), load_png(png), read_layout(layout)};
    // A window that failed says why on stderr (a sanitizer's report, say): keep it in the test's output.
    if (shot.run.status != 0)
        std::cerr << name << ": the window exited with " << shot.run.status << ":\n" << shot.run.err;
    return shot;
}

int check_heatmap_cells(const Image& image, const json& cells, const json& cli, bool causal, const std::string& key) {
    EXPECT_GT(image.width, 0) << "no screenshot";
    if (image.width == 0) return 0;
    int masked = 0;
    for (const json& cell : cells) {
        const int layer = cell["layer"], h = cell["head"], i = cell["query"], j = cell["key"];
        const int x = static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2);
        const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2);
        const std::array<int, 3> got = image.at(x, y);
        const bool visible = !causal || j <= i;
        const json& map = cli[key][layer][0][h];
        EXPECT_LT(i, static_cast<int>(map.size()));
        EXPECT_LT(j, static_cast<int>(map[0].size()));
        if (!visible) {
            ++masked;
            // Two greys in diagonal stripes, never a colormap colour.
            EXPECT_TRUE(got[0] == got[1] && got[1] == got[2] &&
                        (std::abs(got[0] - 41) <= 1 || std::abs(got[0] - 77) <= 1))
                << "masked cell " << i << "," << j << " is " << got[0] << "," << got[1] << "," << got[2];
            continue;
        }
        const double weight = map[i][j];
        const std::array<double, 3> want = viridis(weight);
        for (int c = 0; c < 3; ++c)
            EXPECT_NEAR(got[c], want[c], 2.0) << "head " << h << " cell " << i << "," << j << " weight " << weight;
    }
    return masked;
}

void check_overview_cells(const Image& image, const json& layout, const std::vector<double>& entropy, int heads) {
    const auto [smallest, largest] = std::minmax_element(entropy.begin(), entropy.end());
    EXPECT_GT(*largest - *smallest, 0.01);  // heads the colours tell apart
    const json cells = entries(layout, "overview");
    EXPECT_EQ(cells.size(), entropy.size());
    for (const json& cell : cells) {
        EXPECT_EQ(cell["summary"], "entropy");
        EXPECT_NEAR(cell["smallest"].get<double>(), *smallest, 1e-4 * *largest);
        EXPECT_NEAR(cell["largest"].get<double>(), *largest, 1e-4 * *largest);
        const int l = cell["layer"], h = cell["head"];
        const double want = (entropy[static_cast<size_t>(l * heads + h)] - *smallest) / (*largest - *smallest);
        const std::array<int, 3> got = centre(image, cell);
        EXPECT_TRUE(near(got, viridis(want)))
            << "L" << l << " H" << h << ": " << want << ", drawn " << got[0] << "," << got[1] << "," << got[2];
    }
}

std::map<std::string, WindowShot> shoot_views(std::vector<std::string> args, const std::string& asked,
                                              const std::vector<std::string>& shown, const std::filesystem::path& dir,
                                              const std::string& name, size_t* written) {
    const std::filesystem::path png = dir / (name + ".png"), layout = dir / (name + ".json");
    args.insert(args.end(), {"--screenshot-views", asked, "--screenshot", png.string(), "--layout", layout.string()});
    const ProcessRun run = run_window(args, dir);
    if (run.status != 0) std::cerr << name << ": the window exited with " << run.status << ":\n" << run.err;
    std::map<std::string, WindowShot> shots;
    for (const std::string& view : shown) {
        const std::string file = name + "-" + view;
        shots[view] = {run, load_png(dir / (file + ".png")), read_layout(dir / (file + ".json"))};
    }
    if (written) {
        *written = 0;
        for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            const std::string file = entry.path().filename().string();
            *written += file.rfind(name + "-", 0) == 0 && entry.path().extension() == ".png";
        }
    }
    return shots;
}

}  // namespace headscope::test
