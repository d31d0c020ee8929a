#include "screenshot.h"

#include <stb/stb_image.h>

#include <algorithm>


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
    static const int stops[9][3] = {{68, 1, 84},    {71, 45, 123},  {59, 82, 139},  {44, 114, 142}, {33, 145, 140},
                                    {40, 174, 128}, {94, 201, 98},  {173, 220, 48}, {253, 231, 37}};
    t = std::clamp(t, 0.0, 1.0) * 8;
    const int i = std::min(static_cast<int>(t), 7);
    const double f = t - i;
    return {stops[i][0] + f * (stops[i + 1][0] - stops[i][0]), stops[i][1] + f * (stops[i + 1][1] - stops[i][1]),
            stops[i][2] + f * (stops[i + 1][2] - stops[i][2])};
}

ProcessRun run_window(const std::vector<std::string>& args, const std::filesystem::path& scratch) {
    std::vector<std::string> command = {"xvfb-run", "-a", "-s", "-screen 0 1280x800x24", HEADSCOPE_WINDOW};
    command.insert(command.end(), args.begin(), args.end());
    return run_program(command, scratch);
}

}  // namespace headscope::test
