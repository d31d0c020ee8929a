// Colormaps as 9 evenly spaced stops, linearly interpolated: matplotlib's
// viridis and magma (perceptually uniform) and plain grey; and the diff
// view's diverging one, 0.5 its zero, from DIVERGING_ZERO out to
// DIVERGING_NEGATIVE at 0 and DIVERGING_POSITIVE at 1 (prepended constants).
// colormap_id: 0 viridis, 1 magma, 2 grey, 3 diverging.
const vec3 VIRIDIS[9] = vec3[9](
    vec3(0x44, 0x01, 0x54), vec3(0x47, 0x2d, 0x7b), vec3(0x3b, 0x52, 0x8b), vec3(0x2c, 0x72, 0x8e),
    vec3(0x21, 0x91, 0x8c), vec3(0x28, 0xae, 0x80), vec3(0x5e, 0xc9, 0x62), vec3(0xad, 0xdc, 0x30),
    vec3(0xfd, 0xe7, 0x25));
const vec3 MAGMA[9] = vec3[9](
    vec3(0x00, 0x00, 0x04), vec3(0x1c, 0x10, 0x44), vec3(0x4f, 0x12, 0x7b), vec3(0x81, 0x25, 0x81),
    vec3(0xb5, 0x36, 0x7a), vec3(0xe5, 0x59, 0x64), vec3(0xfb, 0x87, 0x61), vec3(0xfe, 0xc2, 0x87),
    vec3(0xfc, 0xfd, 0xbf));

vec3 colormap(int colormap_id, float t) {
    t = clamp(t, 0.0, 1.0);
    if (colormap_id == 2) return vec3(t);
    if (colormap_id == 3) return mix(DIVERGING_ZERO, t < 0.5 ? DIVERGING_NEGATIVE : DIVERGING_POSITIVE, abs(2.0 * t - 1.0));
    float x = t * 8.0;
    int i = min(int(x), 7);
    float f = x - float(i);
    vec3 a = colormap_id == 1 ? MAGMA[i] : VIRIDIS[i];
    vec3 b = colormap_id == 1 ? MAGMA[i + 1] : VIRIDIS[i + 1];
    return mix(a, b, f) / 255.0;
}
