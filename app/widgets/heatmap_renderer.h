// Draws attention maps with the GLSL colormaps of shaders/: a map's cells go
// up as a float texture, and the colormap shader renders them at exactly the
// size they are shown, so cells are crisp and masked cells hatched. Maps are
// drawn either into a colour texture (shown with ImGui::Image) or straight
// into the window as ImGui renders, which spares llvmpipe a render pass per
// map when a keystroke brings every map of the model anew.
#pragma once
#include <imgui.h>

#include <deque>
#include <vector>

#include "headscope/inspect/heatmap.h"
#include "state/colormap.h"
#include "widgets/gl.h"

namespace headscope {

// The part of a map drawn, in texture coordinates: u along keys, v along
// queries, from the top left. The default is the whole map.
struct TextureRegion {
    float u0 = 0, v0 = 0, u1 = 1, v1 = 1;
    bool operator==(const TextureRegion&) const = default;
};

// One map's uploaded weights and, when drawn into a texture, its colour texture.
class HeatmapTexture {
public:
    HeatmapTexture() = default;
    ~HeatmapTexture();
    HeatmapTexture(HeatmapTexture&& other) noexcept;
    HeatmapTexture& operator=(HeatmapTexture&& other) noexcept;
    HeatmapTexture(const HeatmapTexture&) = delete;
    HeatmapTexture& operator=(const HeatmapTexture&) = delete;

    GLuint color() const { return color_; }
    int width() const { return width_; }

private:
    friend class HeatmapRenderer;
    GLuint color_ = 0, framebuffer_ = 0, weights_ = 0;
    int width_ = 0, height_ = 0;
};

class HeatmapRenderer {
public:
    HeatmapRenderer();  // compiles the shaders; throws Error with the GL log
    ~HeatmapRenderer();
    HeatmapRenderer(const HeatmapRenderer&) = delete;
    HeatmapRenderer& operator=(const HeatmapRenderer&) = delete;

    // Makes `image` the weights `target` draws (one upload per new image).
    void upload(const HeatmapImage& image, HeatmapTexture& target);
    // Draws `region` of target's uploaded weights over the screen rectangle
    // (min, max) of the current ImGui window, clipped as its items are: a
    // callback on its draw list, run when ImGui renders this frame.
    void draw_on_screen(Colormap colormap, const HeatmapTexture& target, ImVec2 min, ImVec2 max,
                        const TextureRegion& region = {});
    // Draws `region` of the uploaded weights into `target` at width x height
    // pixels: zooming and panning only draw again.
    void draw(Colormap colormap, int width, int height, HeatmapTexture& target, const TextureRegion& region = {});
    // The colour the shader gives each cell of `image` ((rows, cols)
    // row-major, as its cells), read back from one pixel per cell: what the
    // window shows for it. A masked cell reads as one of the hatch's greys.
    std::vector<Rgb> cell_colours(Colormap colormap, const HeatmapImage& image);
    // A horizontal 0..1 legend strip of the colormap.
    void render_legend(Colormap colormap, int width, int height, HeatmapTexture& target);

private:
    struct ScreenDraw {  // one queued draw_on_screen
        HeatmapRenderer* renderer;
        Colormap colormap;
        GLuint weights;
        ImVec2 min, max;
        TextureRegion region;
    };
    static void run_screen_draw(const ImDrawList* list, const ImDrawCmd* command);
    void draw_quad(Colormap colormap, GLuint weights, const TextureRegion& region);

    std::deque<ScreenDraw> screen_draws_;  // this frame's: a deque keeps their addresses
    int screen_draws_frame_ = -1;
    GLuint program_ = 0, vertex_array_ = 0;
    GLint weights_location_ = -1, colormap_location_ = -1, region_location_ = -1;
};

}  // namespace headscope
