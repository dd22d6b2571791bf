// Automaton::LoadImage under AddressSanitizer and UBSan, without Python (the sanitized
// extension build takes half an hour here): every truncation of each image, and each image
// with every byte set to 0x00, 0xFF and its complement, must load or throw CoreError, never
// read out of bounds. The images are written by tests/unit/test_disk_cache.py's cases:
//
//   .venv/bin/python -c "import tests.unit.test_disk_cache as t; t.write_images('build/images')"
//   g++ -std=c++17 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
//       -o build/image_load tests/native/image_load.cc cpp/core/automaton.cc \
//       cpp/core/automaton_image.cc cpp/core/string_except.cc cpp/core/utf8_ranges.cc -lpthread
//   build/image_load build/images/*.img
//
// Exits 1 when an intact image fails to load or to save back byte for byte.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "../../cpp/core/automaton.h"
#include "../../cpp/core/error.h"

using logitgate::Automaton;
using logitgate::CoreError;
using logitgate::CoreLimits;

namespace {

// 1 when `image` loads, 0 when it is refused with a CoreError.
int TryLoad(const std::string& image, const CoreLimits& limits) {
  try {
    Automaton::LoadImage(reinterpret_cast<const uint8_t*>(image.data()), image.size(), limits);
    return 1;
  } catch (const CoreError&) {
    return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const CoreLimits limits;  // the images are saved under the default limits
  int failures = 0;
  for (int f = 1; f < argc; ++f) {
    std::ifstream in(argv[f], std::ios::binary);
    const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto loaded = Automaton::LoadImage(reinterpret_cast<const uint8_t*>(image.data()), image.size(), limits);
    if (loaded->SaveImage() != image) {
      std::fprintf(stderr, "%s: does not save back as it was\n", argv[f]);
      ++failures;
    }
    int truncations_loaded = 0, changes_loaded = 0, changes = 0;
    for (size_t n = 0; n < image.size(); ++n) truncations_loaded += TryLoad(image.substr(0, n), limits);
    for (size_t i = 0; i < image.size(); ++i) {
      const auto original = static_cast<uint8_t>(image[i]);
      for (uint8_t value : {uint8_t{0x00}, uint8_t{0xFF}, static_cast<uint8_t>(~original)}) {
        std::string changed = image;
        changed[i] = static_cast<char>(value);
        changes_loaded += TryLoad(changed, limits);
        ++changes;
      }
    }
    if (truncations_loaded != 0) {
      std::fprintf(stderr, "%s: %d truncations loaded\n", argv[f], truncations_loaded);
      ++failures;
    }
    std::printf("%s: %zu bytes, %zu truncations refused, %d of %d changed images refused\n", argv[f], image.size(),
                image.size(), changes - changes_loaded, changes);
  }
  return failures == 0 ? 0 : 1;
}
