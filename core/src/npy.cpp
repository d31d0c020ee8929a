// NumPy .npy writer: magic, version 1.0, a Python-dict header padded so the
// data starts on a 64-byte boundary, then little-endian float32 in C order.
#include "headscope/npy.h"

#include <cstdio>
#include <memory>
#include <string>

#include "headscope/error.h"
#include "headscope/shape.h"

namespace headscope {

void write_npy(const std::filesystem::path& path, std::span<const float> data, const std::vector<int64_t>& shape) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_string(shape) + ", }";
    const size_t preamble = 10;  // magic (6) + version (2) + header length (2)
    header.append(64 - (preamble + header.size() + 1) % 64, ' ');
    header += '\n';

    std::unique_ptr<FILE, decltype(&fclose)> file(fopen(path.c_str(), "wb"), &fclose);
    if (!file) throw Error(path.string() + ": cannot open for writing");
    const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    const uint16_t header_len = static_cast<uint16_t>(header.size());
    const unsigned char len_le[2] = {static_cast<unsigned char>(header_len & 0xff),
                                     static_cast<unsigned char>(header_len >> 8)};
    bool ok = fwrite(magic, 1, 8, file.get()) == 8 && fwrite(len_le, 1, 2, file.get()) == 2 &&
              fwrite(header.data(), 1, header.size(), file.get()) == header.size() &&
              fwrite(data.data(), sizeof(float), data.size(), file.get()) == data.size();
    if (fclose(file.release()) != 0) ok = false;
    if (!ok) throw Error(path.string() + ": write failed");
}

}  // namespace headscope
