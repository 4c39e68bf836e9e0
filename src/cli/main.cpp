// gemmscope: transformer config -> GEMM plan -> measurements on the local GPU -> reports.
// The command line itself is the library in cli/cli.cpp.
#include "cli/cli.hpp"

int main(int argc, char** argv) { return gs::cli::gemmscope_main(argc, argv); }
