// The one exception type of the engine: bad input at an edge (file, parse,
// option). Its message is one line that names the file, tensor or value:
// whatever input it quotes (a path, a tensor name, a token), control
// characters are written as escapes, so a message never breaks a line.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace headscope {

// `text` with every control character (a newline, a tab, ESC, DEL, ...) as
// \n, \t or \xNN: safe to print as one line.
std::string one_line(std::string_view text);

struct Error : std::runtime_error {
    explicit Error(const std::string& message) : std::runtime_error(one_line(message)) {}
};

}  // namespace headscope
