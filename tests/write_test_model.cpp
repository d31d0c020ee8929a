// write-test-model DIR: writes a small GPT-2-layout model with random weights
// and GPT-2's real vocabulary into DIR (2 layers, 4 heads, C=64, 256 positions).
#include <cstdio>

#include "model_writer.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: write-test-model DIR\n");
        return 2;
    }
    headscope::test::TestModelSpec spec;
    spec.n_embd = 64;
    spec.n_positions = 256;
    headscope::test::write_test_model(argv[1], spec);
    return 0;
}
