// NumPy .npy writer: magic, version 1.0, a Python-dict header padded so the
// data starts on a 64-byte boundary, then little-endian float32 in C order.
#include "headscope/io/npy.h"

#include <ostream>
#include <string>

#include "headscope/base/shape.h"

namespace headscope {

void write_npy(std::ostream& out, std::span<const float> data, const std::vector<int64_t>& shape) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_string(shape) + ", }";
    const size_t preamble = 10;  // magic (6) + version (2) + header length (2)
    header.append(64 - (preamble + header.size() + 1) % 64, ' ');
    header += '\n';

    const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    const uint16_t header_len = static_cast<uint16_t>(header.size());
    const unsigned char len_le[2] = {static_cast<unsigned char>(header_len & 0xff),
                                     static_cast<unsigned char>(header_len >> 8)};
    out.write(reinterpret_cast<const char*>(magic), 8);
    out.write(reinterpret_cast<const char*>(len_le), 2);
    out << header;
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size_bytes()));
}

}  // namespace headscope
