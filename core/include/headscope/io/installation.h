// Where a built or installed Headscope finds its data, and what it says it is
// (--version). Nothing absolute from the build machine is compiled in: the
// data is found relative to the running program.
#pragma once
#include <filesystem>
#include <string>

namespace headscope {

// The folder holding Headscope's data: the built-in model (builtin/), the
// examples menu (examples.json) and the window's font (fonts/). The first of
//   $HEADSCOPE_DATA, when set (Error unless it holds builtin/);
//   <program's folder>/../share/headscope (installed: bin/ beside share/;
//     the build tree's tests/);
//   <program's folder>/share/headscope (the build tree, which links it to the
//     source's assets/)
// that holds builtin/. Error, naming the folders tried, when none does.
std::filesystem::path data_dir();

// "<program> 0.1 (CUDA backend: built in)" or "(CUDA backend: not built in)".
std::string version_line(const std::string& program);

}  // namespace headscope
