// Reads the binary files bench/native/export.py and tests/native/export_threads.py write
// (bench/native/layout.py): little-endian int32/int64 values and length-prefixed byte strings,
// every read bounds-checked (a truncated or corrupt file throws std::runtime_error).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace logitgate_native {

class Reader {
 public:
  explicit Reader(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    data_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  int32_t I32() { return Take<int32_t>(); }
  int64_t I64() { return Take<int64_t>(); }
  std::string Bytes(int32_t n) {
    if (n < 0 || pos_ + static_cast<size_t>(n) > data_.size()) throw std::runtime_error("truncated input");
    std::string s(data_.data() + pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  std::string Str() { return Bytes(I32()); }
  std::vector<int32_t> I32s() {
    const int32_t n = I32();
    if (n < 0) throw std::runtime_error("negative length");
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = I32();
    return v;
  }

 private:
  template <typename T>
  T Take() {
    if (pos_ + sizeof(T) > data_.size()) throw std::runtime_error("truncated input");
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::vector<char> data_;
  size_t pos_ = 0;
};

}  // namespace logitgate_native
