// Test support: today's llama-architecture families (Llama, Qwen 2, Qwen 3)
// written as llama.cpp's converter writes them to GGUF: its key and tensor
// names, each head's rows of Q and K reordered for llama (its
// LlamaModel.permute), matrices in one ggml type (random valid blocks of the
// fan-in's spread, or the drawn floats for F32), norms in F32, and a small
// byte-level tokenizer. The checkpoint returned holds what the file holds,
// in Hugging Face's names and row order, as the tests' own block formulas
// (ggml_blocks_reference.h) read it: family_reference runs on it.
#pragma once
#include <filesystem>
#include <functional>
#include <random>

#include "family_writer.h"
#include "ggml_blocks_reference.h"
#include "gguf_writer.h"
#include "headscope/base/dtype.h"

namespace headscope::test {

// GPT-2's printable stand-in for each byte (its bytes_to_unicode), as UTF-8:
// the byte-level vocabularies' tokens.
std::string byte_token(int byte);

// A block of `type` (Q8_0, Q4_0, Q4_K or Q6_K) of random codes whose scales
// give values of about `spread`.
Block block_of_spread(GgmlType type, double spread, std::mt19937& rng);

// A FamilySpec for GGUF files: `family` (llama, qwen2 or qwen3) with C = 256,
// F = 512 and heads of 32 (whole blocks of 256 for every type), 2 layers,
// and the tokenizer's 259 ids (the 256 bytes, one merge, bos and eos).
FamilySpec gguf_family_spec(Family family);

// Writes `spec` into `file` with its matrices of `matrices` (F32 or a
// quantized type), changed by `edit` first if given (a hostile file);
// returns the checkpoint the file holds.
FamilyCheckpoint write_gguf_family(const std::filesystem::path& file, const FamilySpec& spec, DType matrices,
                                   const std::function<void(GgufSpec&)>& edit = {});

}  // namespace headscope::test
