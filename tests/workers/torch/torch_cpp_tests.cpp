// tests/workers/torch/torch_cpp_tests.cpp: the bridge's C++ tests as one program,
// `torch_cpp_tests NAME` running the test NAME.cpp (each file still compiles alone, main and
// all). Every C++ file that includes libtorch's headers spends most of its compile parsing them
// (about 27 s of CPU at -O2, twice that in the sanitizer build): one program parses them once
// where five did, and links libtorch once.
// Every header the files include comes first, at file scope; each file then goes into a
// namespace of its own (its includes, already seen, add nothing there), its main renamed. The
// harness (tests/test.h: counters, CHECK) is the exception: it is read again in each namespace,
// so that each test counts its own checks.
#include "workers/torch/activation.hpp"
#include "workers/torch/algorithm.hpp"
#include "workers/torch/core.hpp"
#include "workers/torch/fast_tanh.h"
#include "workers/torch/flat_kernels.h"
#include "workers/torch/optimizer.hpp"
#include "workers/torch/target_net.hpp"
#include "workers/torch/transformer.hpp"

#include "runtime/config/config.h"
#include "workers/torch/bridge.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <time.h>
#include <vector>

#define main test_main
#undef GB_TESTS_TEST_H
namespace core_seq {
#include "tests/workers/torch/test_core_seq.cpp"
}
#undef GB_TESTS_TEST_H
namespace fast_tanh {
#include "tests/workers/torch/test_fast_tanh.cpp"
}
#undef GB_TESTS_TEST_H
namespace flat_adam {
#include "tests/workers/torch/test_flat_adam.cpp"
}
#undef GB_TESTS_TEST_H
namespace target_net {
#include "tests/workers/torch/test_target_net.cpp"
}
#undef GB_TESTS_TEST_H
namespace transformer_core {
#include "tests/workers/torch/test_transformer_core.cpp"
}
#undef main

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)();
    } tests[] = {{"test_core_seq", core_seq::test_main},
                 {"test_fast_tanh", fast_tanh::test_main},
                 {"test_flat_adam", flat_adam::test_main},
                 {"test_target_net", target_net::test_main},
                 {"test_transformer_core", transformer_core::test_main}};
    for (const auto &t : tests)
        if (argc == 2 && std::strcmp(argv[1], t.name) == 0)
            return t.run();
    std::fprintf(stderr, "usage: %s TEST (one of:", argv[0]);
    for (const auto &t : tests)
        std::fprintf(stderr, " %s", t.name);
    std::fprintf(stderr, ")\n");
    return 2;
}
