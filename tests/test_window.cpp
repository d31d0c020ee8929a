// The window as a user sees it: headscope renders under Xvfb in screenshot
// mode, and every heatmap cell it reports drawing is checked pixel by pixel
// against headscope-cli's weight for that cell through a colormap written
// here, or against the masked hatch.
#include <gtest/gtest.h>
#include <stb/stb_image.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "model_writer.h"

using namespace headscope;
using nlohmann::json;

namespace {

// Runs a program with these arguments (no shell); returns its exit status.
int run_program(const std::vector<std::string>& args, const std::filesystem::path& out_file) {
    const pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out_file.c_str(), "w", stdout)) _exit(127);
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// matplotlib's viridis at 9 even stops, interpolated linearly, in 0..255.
std::array<double, 3> viridis(double t) {
    static const int stops[9][3] = {{68, 1, 84},    {71, 45, 123},  {59, 82, 139},  {44, 114, 142}, {33, 145, 140},
                                    {40, 174, 128}, {94, 201, 98},  {173, 220, 48}, {253, 231, 37}};
    t = std::clamp(t, 0.0, 1.0) * 8;
    const int i = std::min(static_cast<int>(t), 7);
    const double f = t - i;
    return {stops[i][0] + f * (stops[i + 1][0] - stops[i][0]), stops[i][1] + f * (stops[i + 1][1] - stops[i][1]),
            stops[i][2] + f * (stops[i + 1][2] - stops[i][2])};
}

struct Image {
    int width = 0, height = 0;
    std::vector<unsigned char> rgba;
    std::array<int, 3> at(int x, int y) const {
        const unsigned char* p = rgba.data() + (static_cast<size_t>(y) * width + x) * 4;
        return {p[0], p[1], p[2]};
    }
};

Image load_png(const std::filesystem::path& path) {
    Image image;
    int channels = 0;
    unsigned char* data = stbi_load(path.c_str(), &image.width, &image.height, &channels, 4);
    if (!data) return image;
    image.rgba.assign(data, data + static_cast<size_t>(image.width) * image.height * 4);
    stbi_image_free(data);
    return image;
}

class WindowTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path / "model", {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 32});
    }
    static void TearDownTestSuite() { delete dir_; }

    struct Shot {
        Image image;
        json layout, cli;
    };

    // The window's screenshot and layout, and the CLI's attention, for the same settings.
    Shot shoot(const std::string& name, const std::vector<std::string>& settings) {
        const auto png = dir_->path / (name + ".png"), layout = dir_->path / (name + ".json");
        const std::string model = (dir_->path / "model").string();
        std::vector<std::string> window = {"xvfb-run", "-a", "-s", "-screen 0 1280x800x24", HEADSCOPE_WINDOW,
                                           "--model", model, "--text", text_, "--screenshot", png.string(),
                                           "--layout", layout.string()};
        window.insert(window.end(), settings.begin(), settings.end());
        EXPECT_EQ(run_program(window, dir_->path / "window.out"), 0);
        std::vector<std::string> cli = {HEADSCOPE_CLI, "attention", "--model", model, "--text", text_};
        for (size_t i = 0; i < settings.size(); i += 2)
            if (settings[i] != "--layer") cli.insert(cli.end(), {settings[i], settings[i + 1]});
        EXPECT_EQ(run_program(cli, dir_->path / "cli.json"), 0);
        return {load_png(png), json::parse(read_file(layout)), json::parse(read_file(dir_->path / "cli.json"))};
    }

    // Every drawn cell: the colormap of the CLI's weight, or the hatch where
    // the CLI's row does not see that key. Returns how many were masked.
    int check_cells(const Shot& shot, int layer_slot, bool causal) {
        EXPECT_EQ(shot.image.width, 1280);
        int masked = 0;
        const int T = shot.cli["seq_len"];
        for (const json& cell : shot.layout) {
            const int h = cell["head"], i = cell["query"], j = cell["key"];
            const int x = static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2);
            const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2);
            const std::array<int, 3> got = shot.image.at(x, y);
            const bool visible = !causal || j <= i;
            EXPECT_LT(i, T);
            if (!visible) {
                ++masked;
                // Two greys in diagonal stripes, never a colormap colour.
                EXPECT_TRUE(got[0] == got[1] && got[1] == got[2] && (std::abs(got[0] - 41) <= 1 ||
                                                                      std::abs(got[0] - 77) <= 1))
                    << "masked cell " << i << "," << j << " is " << got[0] << "," << got[1] << "," << got[2];
                continue;
            }
            const double weight = shot.cli["attention"][layer_slot][0][h][i][j];
            const std::array<double, 3> want = viridis(weight);
            for (int c = 0; c < 3; ++c)
                EXPECT_NEAR(got[c], want[c], 2.0) << "head " << h << " cell " << i << "," << j << " weight " << weight;
        }
        return masked;
    }

    static test::TempDir* dir_;
    const std::string text_ = "The cat sat on the mat because it was soft.";
};
test::TempDir* WindowTest::dir_ = nullptr;

TEST_F(WindowTest, HeatmapCellsHaveTheColormapOfTheirWeights) {
    const Shot shot = shoot("causal", {"--layer", "1"});
    const int T = shot.cli["seq_len"];
    EXPECT_EQ(shot.layout.size(), static_cast<size_t>(4 * T * T));
    for (const json& cell : shot.layout) EXPECT_EQ(cell["layer"], 1);
    EXPECT_EQ(check_cells(shot, 1, true), 4 * T * (T - 1) / 2);
}

TEST_F(WindowTest, CausalOffFillsTheUpperTriangle) {
    const Shot shot = shoot("bidirectional", {"--causal", "off"});
    EXPECT_EQ(check_cells(shot, 0, false), 0);
}

TEST_F(WindowTest, TwoHeadsDrawTwoMaps) {
    const Shot shot = shoot("two-heads", {"--heads", "2"});
    std::set<int> heads;
    for (const json& cell : shot.layout) heads.insert(cell["head"].get<int>());
    EXPECT_EQ(heads, (std::set<int>{0, 1}));
    check_cells(shot, 0, true);
}

}  // namespace
