// The safetensors writer (float32 only): what the trainer saves the built-in
// model with. The layout is the one safetensors.h describes.
#include <nlohmann/json.hpp>
#include <ostream>

#include "headscope/io/files.h"
#include "headscope/io/safetensors.h"

namespace headscope {

void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsEntry>& tensors) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    uint64_t offset = 0;
    for (const SafetensorsEntry& t : tensors) {
        const uint64_t bytes = t.data.size() * sizeof(float);
        header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    const uint64_t length = text.size();

    unsigned char length_le[8];
    for (int i = 0; i < 8; ++i) length_le[i] = static_cast<unsigned char>(length >> (8 * i));
    write_file_atomically(path, "the tensors", [&](std::ostream& out) {
        out.write(reinterpret_cast<const char*>(length_le), 8);
        out << text;
        for (const SafetensorsEntry& t : tensors)
            out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size_bytes()));
    });
}

}  // namespace headscope
