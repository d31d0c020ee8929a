// Heatmap textures: see heatmap_renderer.h.
#include "widgets/heatmap_renderer.h"

#include <string>
#include <utility>

#include "headscope/base/error.h"
#include "shader_sources.h"

namespace headscope {

namespace {

GLuint compile(GLenum kind, const std::string& source, const char* name) {
    const GLuint shader = glCreateShader(kind);
    const char* text = source.c_str();
    glShaderSource(shader, 1, &text, nullptr);
    glCompileShader(shader);
    GLint ok = 0;
    glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[2048] = {};
        glGetShaderInfoLog(shader, sizeof log, nullptr, log);
        glDeleteShader(shader);
        throw Error(std::string(name) + " does not compile: " + log);
    }
    return shader;
}

// masked_hatch and the diverging colours (colormap.h) as the fragment shader's constants.
std::string colour_constants_glsl() {
    const auto colour = [](const char* name, Rgb c) {
        return "const vec3 " + std::string(name) + " = vec3(" + std::to_string(c.r) + ", " + std::to_string(c.g) +
               ", " + std::to_string(c.b) + ") / 255.0;\n";
    };
    return colour("HATCH_DARK", masked_hatch.dark) + colour("HATCH_LIGHT", masked_hatch.light) +
           "const float HATCH_STRIPE = " + std::to_string(masked_hatch.stripe) + ".0;\n" +
           colour("DIVERGING_NEGATIVE", diverging_negative) + colour("DIVERGING_ZERO", diverging_zero) +
           colour("DIVERGING_POSITIVE", diverging_positive);
}

// Keeps the caller's GL state: ImGui's renderer sets its own each frame, but
// the framebuffer and viewport must come back as they were.
class SavedTarget {
public:
    SavedTarget() {
        glGetIntegerv(GL_FRAMEBUFFER_BINDING, &framebuffer_);
        glGetIntegerv(GL_VIEWPORT, viewport_);
    }
    ~SavedTarget() {
        glBindFramebuffer(GL_FRAMEBUFFER, static_cast<GLuint>(framebuffer_));
        glViewport(viewport_[0], viewport_[1], viewport_[2], viewport_[3]);
    }

private:
    GLint framebuffer_ = 0, viewport_[4] = {};
};

}  // namespace

HeatmapTexture::~HeatmapTexture() {
    glDeleteTextures(1, &color_);
    glDeleteTextures(1, &weights_);
    glDeleteFramebuffers(1, &framebuffer_);
}

HeatmapTexture::HeatmapTexture(HeatmapTexture&& other) noexcept
    : color_(std::exchange(other.color_, 0)),
      framebuffer_(std::exchange(other.framebuffer_, 0)),
      weights_(std::exchange(other.weights_, 0)),
      width_(other.width_),
      height_(other.height_) {}

HeatmapTexture& HeatmapTexture::operator=(HeatmapTexture&& other) noexcept {
    std::swap(color_, other.color_);
    std::swap(framebuffer_, other.framebuffer_);
    std::swap(weights_, other.weights_);
    std::swap(width_, other.width_);
    std::swap(height_, other.height_);
    return *this;
}

HeatmapRenderer::HeatmapRenderer() {
    const GLuint vertex = compile(GL_VERTEX_SHADER, shaders::heatmap_vert, "shaders/heatmap.vert");
    const GLuint fragment = compile(
        GL_FRAGMENT_SHADER,
        std::string("#version 330 core\n") + colour_constants_glsl() + shaders::colormaps_glsl + shaders::heatmap_frag,
        "shaders/heatmap.frag");
    program_ = glCreateProgram();
    glAttachShader(program_, vertex);
    glAttachShader(program_, fragment);
    glLinkProgram(program_);
    glDeleteShader(vertex);
    glDeleteShader(fragment);
    GLint ok = 0;
    glGetProgramiv(program_, GL_LINK_STATUS, &ok);
    if (!ok) {
        char log[2048] = {};
        glGetProgramInfoLog(program_, sizeof log, nullptr, log);
        throw Error(std::string("heatmap shaders do not link: ") + log);
    }
    weights_location_ = glGetUniformLocation(program_, "weights");
    colormap_location_ = glGetUniformLocation(program_, "colormap_id");
    region_location_ = glGetUniformLocation(program_, "region");
    glGenVertexArrays(1, &vertex_array_);  // core profile draws need one bound, even empty
}

HeatmapRenderer::~HeatmapRenderer() {
    glDeleteVertexArrays(1, &vertex_array_);
    glDeleteProgram(program_);
}

void HeatmapRenderer::upload(const HeatmapImage& image, HeatmapTexture& target) {
    if (!target.weights_) glGenTextures(1, &target.weights_);
    glBindTexture(GL_TEXTURE_2D, target.weights_);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, image.cols, image.rows, 0, GL_RED, GL_FLOAT, image.cells.data());
    // Nearest: a cell is one flat colour, and masked markers never blend into weights.
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
}

void HeatmapRenderer::draw(Colormap colormap, int width, int height, HeatmapTexture& target,
                           const TextureRegion& region) {
    const SavedTarget saved;
    if (!target.framebuffer_) {
        glGenFramebuffers(1, &target.framebuffer_);
        glGenTextures(1, &target.color_);
    }
    if (target.width_ != width || target.height_ != height) {
        glBindTexture(GL_TEXTURE_2D, target.color_);
        glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
        glBindFramebuffer(GL_FRAMEBUFFER, target.framebuffer_);
        glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, target.color_, 0);
        target.width_ = width;
        target.height_ = height;
    }
    glBindFramebuffer(GL_FRAMEBUFFER, target.framebuffer_);
    glViewport(0, 0, width, height);
    glDisable(GL_SCISSOR_TEST);
    draw_quad(colormap, target.weights_, region);
}

void HeatmapRenderer::draw_quad(Colormap colormap, GLuint weights, const TextureRegion& region) {
    glDisable(GL_BLEND);
    glUseProgram(program_);
    glActiveTexture(GL_TEXTURE0);
    glBindTexture(GL_TEXTURE_2D, weights);
    glUniform1i(weights_location_, 0);
    glUniform1i(colormap_location_, static_cast<int>(colormap));
    glUniform4f(region_location_, region.u0, region.v0, region.u1, region.v1);
    glBindVertexArray(vertex_array_);
    glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
}

void HeatmapRenderer::draw_on_screen(Colormap colormap, const HeatmapTexture& target, ImVec2 min, ImVec2 max,
                                     const TextureRegion& region) {
    if (screen_draws_frame_ != ImGui::GetFrameCount()) {  // the last frame's draws have run
        screen_draws_.clear();
        screen_draws_frame_ = ImGui::GetFrameCount();
    }
    screen_draws_.push_back({this, colormap, target.weights_, min, max, region});
    ImDrawList* list = ImGui::GetWindowDrawList();
    list->AddCallback(run_screen_draw, &screen_draws_.back());
    list->AddCallback(ImDrawCallback_ResetRenderState, nullptr);  // ImGui's renderer sets its state again
}

// As ImGui's OpenGL renderer places its own draws (imgui_impl_opengl3):
// framebuffer pixels, truncated as it truncates them, rows from the bottom.
void HeatmapRenderer::run_screen_draw(const ImDrawList*, const ImDrawCmd* command) {
    const ScreenDraw& d = *static_cast<const ScreenDraw*>(command->UserCallbackData);
    const ImDrawData* data = ImGui::GetDrawData();
    const ImVec2 origin = data->DisplayPos, scale = data->FramebufferScale;
    const auto framebuffer_height = static_cast<GLint>(data->DisplaySize.y * scale.y);
    const auto x = [&](float screen_x) { return static_cast<GLint>((screen_x - origin.x) * scale.x); };
    const auto y = [&](float screen_y) {
        return framebuffer_height - static_cast<GLint>((screen_y - origin.y) * scale.y);
    };
    const ImVec4 clip = command->ClipRect;
    if (clip.z <= clip.x || clip.w <= clip.y) return;
    glEnable(GL_SCISSOR_TEST);
    glScissor(x(clip.x), y(clip.w), x(clip.z) - x(clip.x), y(clip.y) - y(clip.w));
    glViewport(x(d.min.x), y(d.max.y), x(d.max.x) - x(d.min.x), y(d.min.y) - y(d.max.y));
    // GL's rows run upwards and the map's first query is its top row: v from v1 at the bottom to v0.
    const TextureRegion flipped{d.region.u0, d.region.v1, d.region.u1, d.region.v0};
    d.renderer->draw_quad(d.colormap, d.weights, flipped);
}

std::vector<Rgb> HeatmapRenderer::cell_colours(Colormap colormap, const HeatmapImage& image) {
    static_assert(sizeof(Rgb) == 3);
    HeatmapTexture cells;
    upload(image, cells);
    draw(colormap, image.cols, image.rows, cells);
    std::vector<Rgb> colours(static_cast<size_t>(image.rows) * image.cols);
    const SavedTarget saved;
    glBindFramebuffer(GL_FRAMEBUFFER, cells.framebuffer_);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    // The shader draws texture row 0 (query 0) at the framebuffer's row 0, which GL reads first.
    glReadPixels(0, 0, image.cols, image.rows, GL_RGB, GL_UNSIGNED_BYTE, colours.data());
    return colours;
}

void HeatmapRenderer::render_legend(Colormap colormap, int width, int height, HeatmapTexture& target) {
    HeatmapImage ramp;
    ramp.rows = 1;
    ramp.cols = width;
    for (int x = 0; x < width; ++x) ramp.cells.push_back((x + 0.5f) / static_cast<float>(width));
    upload(ramp, target);
    draw(colormap, width, height, target);
}

}  // namespace headscope
