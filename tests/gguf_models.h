// Test support: today's decoder families (Llama, Qwen 2, Qwen 3, GPT-2,
// GPT-NeoX) written as llama.cpp's converter writes them to GGUF: its key
// and tensor names, each head's rows of Q and K reordered for llama (its
// LlamaModel.permute), GPT-NeoX's query_key_value rows gathered into
// [Q | K | V], GPT-2's Conv1D weights transposed to (out, in), matrices in
// one ggml type (random valid blocks of the fan-in's spread, or the drawn
// floats for F32), norms, biases and learned positions in F32, and a small
// byte-level tokenizer. The checkpoint returned holds what the file holds,
// in Hugging Face's names and layout, as the tests' own block formulas
// (ggml_blocks_reference.h) read it: family_reference runs on it.
#pragma once
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include "family_writer.h"
#include "gguf_writer.h"
#include "headscope/base/dtype.h"

namespace headscope::test {

// A FamilySpec for GGUF files: `family` with C = 256, F = 512 (GPT-2's 4C)
// and heads of 32 (whole blocks of 256 for every type), 2 layers, and the
// tokenizer's 259 ids (the 256 bytes, one merge, bos and eos).
FamilySpec gguf_family_spec(Family family);

// Writes `spec` into `file` with its matrices of `matrices` (F32 or a
// quantized type), changed by `edit` first if given (a hostile file);
// returns the checkpoint the file holds.
FamilyCheckpoint write_gguf_family(const std::filesystem::path& file, const FamilySpec& spec, DType matrices,
                                   const std::function<void(GgufSpec&)>& edit = {});

// The parts each architecture's writer shares.

// How the converter stores one of Hugging Face's tensors.
struct StoredAs {
    std::string name;  // llama.cpp's
    std::function<int64_t(int64_t)>
        row;                  // the Hugging Face row of each stored row (a vector's entries alike); null: its own
    bool transposed = false;  // stored (out, in) from Hugging Face's (in, out) (GPT-2's Conv1D)
    // A matrix in the file's type; else F32, as llama.cpp's quantizer leaves
    // learned positions, token types and T5's position bias.
    bool quantized = true;
};

struct Written {
    GgufTensorSpec spec;
    std::vector<float> values;  // as the file holds them, in Hugging Face's layout
};

// Tensor `t` as the file stores it, a matrix in type `matrices` (its blocks
// drawn by `rng`), and its values as read back.
Written tensor_as_stored(const NamedTensor& t, const StoredAs& as, DType matrices, std::mt19937& rng);

// general.architecture and general.file_type, llama.cpp's for files of `matrices`.
void write_gguf_header(GgufSpec& gguf, const std::string& arch, DType matrices);

// The byte-level tokenizer (a "gpt2" model, pre-tokenizer `pre`): 259 ids,
// the 256 bytes, one merge, then `bos` and `eos` at 257 and 258.
void write_byte_tokenizer(GgufSpec& gguf, const std::string& pre, int bos, int eos);

}  // namespace headscope::test
