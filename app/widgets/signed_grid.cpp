// The grid of signed values: see signed_grid.h.
#include "widgets/signed_grid.h"

#include <algorithm>
#include <cmath>

namespace headscope {

ImU32 diverging_colour(float v) {
    const float t = std::clamp(std::abs(v), 0.f, 1.f);
    const Rgb end = v < 0 ? diverging_negative : diverging_positive;
    const auto channel = [&](uint8_t zero, uint8_t far) { return (zero + (far - zero) * t) / 255.f; };
    return ImGui::GetColorU32(ImVec4(channel(diverging_zero.r, end.r), channel(diverging_zero.g, end.g),
                                     channel(diverging_zero.b, end.b), 1));
}

// Appended, since GCC 12 warns, wrongly, on "L" + std::to_string(i).
std::string indexed(char prefix, int i) {
    std::string name(1, prefix);
    return name += std::to_string(i);
}

std::pair<int, int> signed_grid(Ui& ui, const char* name, const std::vector<float>& values, int rows, int cols,
                                const std::vector<std::string>& col_labels, float cell, float scale,
                                const std::vector<uint8_t>& marked) {
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float label_w = ImGui::CalcTextSize("L00 ").x, line = ImGui::GetTextLineHeight();
    const ImVec2 start = ImGui::GetCursorScreenPos();
    const ImVec2 origin(start.x + label_w, start.y + line + 2);
    const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    float labels_end = start.x;  // where the last label drawn ends: labels never overlap
    for (int c = 0; c < cols; ++c) {
        const std::string& label = col_labels[c];
        const float w = ImGui::CalcTextSize(label.c_str()).x;
        const float x = origin.x + c * cell + std::max(0.f, (cell - w) / 2);
        if (x < labels_end) continue;
        draw->AddText(ImVec2(x, start.y), dim, label.c_str());
        labels_end = x + w + 4;
    }
    const int label_every = std::max(1, static_cast<int>(std::ceil(line / cell)));
    std::pair<int, int> hovered{-1, -1};
    for (int r = 0; r < rows; ++r) {
        if (r % label_every == 0)
            draw->AddText(ImVec2(start.x, origin.y + r * cell + (cell - line) / 2), dim, indexed('L', r).c_str());
        for (int c = 0; c < cols; ++c) {
            const ImVec2 min(origin.x + c * cell, origin.y + r * cell), max(min.x + cell - 1, min.y + cell - 1);
            const float v = values[static_cast<size_t>(r) * cols + c];
            if (std::isnan(v)) {
                draw->AddRect(min, max, dim);
                draw->AddLine(min, max, text);
                draw->AddLine(ImVec2(min.x, max.y), ImVec2(max.x, min.y), text);
            } else {
                draw->AddRectFilled(min, max, diverging_colour(scale > 0 ? v / scale : 0));
            }
            if (!marked.empty() && marked[static_cast<size_t>(r) * cols + c]) {
                const float side = std::floor(cell / 3);
                draw->AddTriangleFilled(min, ImVec2(min.x + side, min.y), ImVec2(min.x, min.y + side), text);
            }
            if (ImGui::IsMouseHoveringRect(min, ImVec2(max.x + 1, max.y + 1))) hovered = {r, c};
        }
    }
    ImGui::Dummy(ImVec2(label_w + cols * cell, line + 2 + rows * cell));
    nlohmann::ordered_json fields{
        {"view", name}, {"row", "layer"}, {"col", "column"}, {"values", values}, {"scale", scale}};
    if (!marked.empty()) fields["marked"] = std::vector<bool>(marked.begin(), marked.end());
    ui.layout.grid(fields, {origin, ImVec2(cell, cell), ImVec2(cell - 1, cell - 1), rows, cols});
    return hovered;
}

float largest_magnitude(const std::vector<float>& values) {
    float largest = 0;
    for (float v : values)
        if (std::isfinite(v)) largest = std::max(largest, std::abs(v));
    return largest;
}

}  // namespace headscope
