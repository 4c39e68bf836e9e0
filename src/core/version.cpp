namespace gs {
const char* version() { return GEMMSCOPE_VERSION; }
}  // namespace gs
