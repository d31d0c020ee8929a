// One attention map: each cell's weight through the colormap; masked cells
// (weight < 0) hatched in two greys, so a mask never reads as a weight of 0.
// Prepended at build time: colormaps.glsl; when compiled: the hatch's
// HATCH_DARK, HATCH_LIGHT and HATCH_STRIPE (colormap.h's masked_hatch) and
// the diverging colours DIVERGING_NEGATIVE, DIVERGING_ZERO, DIVERGING_POSITIVE.
uniform sampler2D weights;  // R32F, one texel per cell, row 0 = query 0
uniform int colormap_id;
in vec2 uv;
out vec4 color;

void main() {
    // Texture row 0 is query 0; ImGui::Image shows a texture's row 0 on top.
    float w = texture(weights, uv).r;
    if (w < 0.0) {
        float stripe = mod(floor((gl_FragCoord.x + gl_FragCoord.y) / HATCH_STRIPE), 2.0);
        color = vec4(mix(HATCH_DARK, HATCH_LIGHT, stripe), 1.0);
    } else {
        color = vec4(colormap(colormap_id, w), 1.0);
    }
}
