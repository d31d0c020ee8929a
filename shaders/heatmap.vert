#version 330 core
// A full-target quad from the vertex id alone: no vertex buffer. It shows
// the part `region` (u0, v0, u1, v1) of the map: all of it, or a zoomed part.
uniform vec4 region;
out vec2 uv;
void main() {
    vec2 corner = vec2(float(gl_VertexID & 1), float((gl_VertexID >> 1) & 1));
    uv = mix(region.xy, region.zw, corner);
    gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
