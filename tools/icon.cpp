// headscope-icon: draws Headscope's icon, a causal attention map of 8 tokens
// in viridis (a previous-token head: each row's brightest cell is the token
// before it), as an SVG and as PNGs of the given sizes. One description of
// the cells feeds both, so the packaged sizes never drift from the SVG.
// Usage: headscope-icon OUT_DIR SIZE...   writes headscope.svg, headscope-SIZE.png
#include <stb/stb_image_write.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Colour {
    unsigned char r, g, b;
};

// A rounded rectangle in the icon's unit square (y down).
struct Shape {
    double x, y, width, height, radius;
    Colour colour;

    bool covers(double px, double py) const {
        if (px < x || px > x + width || py < y || py > y + height) return false;
        // Inside the rectangle; outside a corner's circle only near that corner.
        const double cx = std::clamp(px, x + radius, x + width - radius),
                     cy = std::clamp(py, y + radius, y + height - radius);
        return (px - cx) * (px - cx) + (py - cy) * (py - cy) <= radius * radius;
    }
};

// The window's background, then the lower triangle of an 8 x 8 map: the
// previous token brightest, the token itself next, the first token (where
// heads park spare weight) above the rest. Viridis at 0, 0.25, 0.5 and 1.
std::vector<Shape> icon_shapes() {
    constexpr int T = 8;
    constexpr double margin = 0.12, pitch = (1 - 2 * margin) / T, gap = pitch * 0.12;
    const Colour background{0x1a, 0x1a, 0x1f}, low{0x44, 0x01, 0x54}, first{0x3b, 0x52, 0x8b}, self{0x21, 0x91, 0x8c},
        previous{0xfd, 0xe7, 0x25};
    std::vector<Shape> shapes = {{0, 0, 1, 1, 0.18, background}};
    for (int query = 0; query < T; ++query) {
        for (int key = 0; key <= query; ++key) {
            const Colour colour = key == query - 1 || query == 0 ? previous
                                  : key == query                 ? self
                                  : key == 0                     ? first
                                                                 : low;
            shapes.push_back({margin + key * pitch + gap / 2, margin + query * pitch + gap / 2, pitch - gap,
                              pitch - gap, gap / 2, colour});
        }
    }
    return shapes;
}

void write_svg(const std::filesystem::path& path, const std::vector<Shape>& shapes) {
    std::ofstream out(path);
    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1000 1000\" width=\"256\" height=\"256\">\n"
        << "<title>Headscope</title>\n";
    for (const Shape& s : shapes) {
        char line[200];
        std::snprintf(line, sizeof line,
                      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" rx=\"%.1f\" "
                      "fill=\"#%02x%02x%02x\"/>\n",
                      s.x * 1000, s.y * 1000, s.width * 1000, s.height * 1000, s.radius * 1000, s.colour.r, s.colour.g,
                      s.colour.b);
        out << line;
    }
    out << "</svg>\n";
    if (!out.flush()) throw std::runtime_error(path.string() + ": cannot write");
}

// 4 x 4 samples a pixel: each takes the colour of the last shape covering it
// (transparent outside them all), and the pixel is their average.
void write_png(const std::filesystem::path& path, const std::vector<Shape>& shapes, int size) {
    constexpr int S = 4;
    std::vector<unsigned char> rgba(static_cast<size_t>(size) * size * 4);  // (size, size, 4), row-major
    for (int y = 0; y < size; ++y) {
        for (int x = 0; x < size; ++x) {
            std::array<double, 4> sum{};
            for (int sy = 0; sy < S; ++sy) {
                for (int sx = 0; sx < S; ++sx) {
                    const double px = (x + (sx + 0.5) / S) / size, py = (y + (sy + 0.5) / S) / size;
                    const Shape* top = nullptr;
                    for (const Shape& s : shapes)
                        if (s.covers(px, py)) top = &s;
                    if (!top) continue;
                    sum[0] += top->colour.r, sum[1] += top->colour.g, sum[2] += top->colour.b, sum[3] += 255;
                }
            }
            unsigned char* pixel = &rgba[(static_cast<size_t>(y) * size + x) * 4];
            // Colour weighted by coverage (premultiplied), then un-premultiplied.
            for (int c = 0; c < 3; ++c)
                pixel[c] = sum[3] > 0 ? static_cast<unsigned char>(sum[c] * 255 / sum[3] + 0.5) : 0;
            pixel[3] = static_cast<unsigned char>(sum[3] / (S * S) + 0.5);
        }
    }
    if (!stbi_write_png(path.c_str(), size, size, 4, rgba.data(), size * 4))
        throw std::runtime_error(path.string() + ": cannot write");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: headscope-icon OUT_DIR SIZE...\n");
        return 2;
    }
    try {
        const std::filesystem::path dir = argv[1];
        const std::vector<Shape> shapes = icon_shapes();
        write_svg(dir / "headscope.svg", shapes);
        for (int i = 2; i < argc; ++i) {
            const int size = std::stoi(argv[i]);
            write_png(dir / ("headscope-" + std::to_string(size) + ".png"), shapes, size);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "headscope-icon: error: %s\n", e.what());
        return 2;
    }
    return 0;
}
