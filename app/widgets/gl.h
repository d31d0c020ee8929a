// OpenGL 3.3 core entry points, from the system's libGL (Mesa, or a vendor's).
#pragma once
#define GL_GLEXT_PROTOTYPES 1
#include <GL/gl.h>
#include <GL/glext.h>
