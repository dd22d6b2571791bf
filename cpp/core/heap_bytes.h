// HeapBytes: the heap memory a standard container holds, for the memory_bytes() reports of
// compiled grammars (which bound the compiler's cache). Counts capacity, not size: what is
// allocated. Hash maps are estimated from their node and bucket counts.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace logitgate {

template <typename T, typename A>
int64_t HeapBytes(const std::vector<T, A>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}

inline int64_t HeapBytes(const std::vector<std::string>& v) {
  int64_t n = static_cast<int64_t>(v.capacity() * sizeof(std::string));
  for (const std::string& s : v) n += s.capacity() > 15 ? static_cast<int64_t>(s.capacity()) + 1 : 0;
  return n;
}

template <typename K, typename V, typename H, typename E, typename A>
int64_t HeapBytes(const std::unordered_map<K, V, H, E, A>& m) {
  // A node holds the pair and a next pointer (and, for most hashes, the cached hash).
  const size_t node = sizeof(std::pair<const K, V>) + 2 * sizeof(void*);
  return static_cast<int64_t>(m.size() * node + m.bucket_count() * sizeof(void*));
}

}  // namespace logitgate
