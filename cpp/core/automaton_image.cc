// The automaton as a byte image: what Automaton's constructor computed, written so that a
// later process can use it without compiling (the compiler's on-disk cache,
// python/logitgate/disk_cache.py, which wraps images in a checksummed envelope).
//
// Layout (native byte order; a file from a machine of the other order is refused by the
// order mark): magic "LGAU", u32 version, u32 order mark, the seven CoreLimits as i64, i32
// root, the rule names, then per-state and per-rule arrays, each a u64 count and its items,
// then "END!". What is cheap to derive (byte classes, alphabet, stack-need bound) is derived
// on load rather than stored: it cannot disagree with the edges. eps_ is empty after a build
// (ComputeKernels clears it) and stack needs are computed on first use, so neither is stored.
//
// Loading trusts nothing: every count is checked against the bytes left before anything is
// allocated, and every state, rule and token-set index against its range, so a truncated,
// corrupted or hand-made image is a CoreError::CacheFile, never a read out of bounds. It does
// not re-prove what the build guaranteed of a grammar (no left recursion, no dead states):
// the envelope's checksum and key make an image that passes them one this library wrote.
#include <array>
#include <cstring>
#include <type_traits>
#include <string>
#include <vector>

#include "automaton.h"

namespace logitgate {

namespace {

constexpr char kMagic[4] = {'L', 'G', 'A', 'U'};
constexpr char kEnd[4] = {'E', 'N', 'D', '!'};
constexpr uint32_t kOrderMark = 0x01020304;

class Writer {
 public:
  template <typename T>
  void Put(const T& v) {
    static_assert(std::is_trivially_copyable<T>::value, "plain data only");
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void Raw(const char* p, size_t n) { out_.append(p, n); }
  template <typename T, typename A>
  void Array(const std::vector<T, A>& v) {
    Put<uint64_t>(v.size());
    if (!v.empty()) Raw(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

[[noreturn]] void Fail(const std::string& code, const std::string& what) {
  throw CoreError::CacheFile(code, "compiled-grammar image: " + what);
}

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  template <typename T>
  T Get() {
    static_assert(std::is_trivially_copyable<T>::value, "plain data only");
    T v;
    std::memcpy(&v, Take(sizeof(T)), sizeof(T));
    return v;
  }
  // A count of items of `item_bytes` each, checked against the bytes left (so no count can
  // make the loader allocate more than the image holds).
  size_t Count(size_t item_bytes) {
    const uint64_t n = Get<uint64_t>();
    if (item_bytes > 0 && n > left_ / item_bytes) Fail("cache-truncated", "an array is longer than the image");
    if (item_bytes == 0 && n > left_) Fail("cache-truncated", "a list is longer than the image");
    return static_cast<size_t>(n);
  }
  template <typename T>
  std::vector<T> Array() {
    std::vector<T> v(Count(sizeof(T)));
    if (!v.empty()) std::memcpy(v.data(), Take(v.size() * sizeof(T)), v.size() * sizeof(T));
    return v;
  }
  const uint8_t* Take(size_t n) {
    if (n > left_) Fail("cache-truncated", "the image ends early");
    const uint8_t* at = p_;
    p_ += n;
    left_ -= n;
    return at;
  }
  size_t left() const { return left_; }

 private:
  const uint8_t* p_;
  size_t left_;
};

void PutLimits(Writer& w, const CoreLimits& l) {
  for (int64_t v : {l.max_nesting, l.max_repeat, l.max_automaton_states, l.max_stack_depth, l.max_parse_heads,
                    l.max_configurations, l.mask_cache_entries}) {
    w.Put<int64_t>(v);
  }
}

void CheckIndex(int64_t i, int64_t n, const char* what) {
  if (i < 0 || i >= n) Fail("cache-inconsistent", std::string(what) + " index out of range");
}

template <typename T>
void CheckSize(const std::vector<T>& v, size_t n, const char* what) {
  if (v.size() != n) Fail("cache-inconsistent", std::string(what) + " has the wrong length");
}

}  // namespace

std::string Automaton::SaveImage() const {
  Writer w;
  w.Raw(kMagic, 4);
  w.Put<uint32_t>(Automaton::kImageVersion);
  w.Put<uint32_t>(kOrderMark);
  PutLimits(w, limits_);
  w.Put<int32_t>(root_);
  w.Put<uint64_t>(rule_names_.size());
  for (const std::string& name : rule_names_) {
    w.Put<uint64_t>(name.size());
    w.Raw(name.data(), name.size());
  }
  w.Array(rule_start_);
  w.Array(state_rule_);
  // Edge lists: per state its count, then every state's edges in order.
  std::vector<uint32_t> counts;
  counts.reserve(bytes_.size());
  for (const auto& edges : bytes_) counts.push_back(static_cast<uint32_t>(edges.size()));
  w.Array(counts);
  for (const auto& edges : bytes_) {
    for (const ByteEdge& e : edges) {
      w.Put<uint8_t>(e.lo);
      w.Put<uint8_t>(e.hi);
      w.Put<int32_t>(e.target);
    }
  }
  counts.clear();
  for (const auto& calls : calls_) counts.push_back(static_cast<uint32_t>(calls.size()));
  w.Array(counts);
  for (const auto& calls : calls_) {
    for (const CallEdge& c : calls) {
      w.Put<int32_t>(c.rule);
      w.Put<int32_t>(c.ret);
      w.Put<uint8_t>(c.tail ? 1 : 0);
    }
  }
  w.Array(final_);
  w.Array(deterministic_);
  w.Array(universal_);
  w.Array(near_universal_);
  w.Array(capacity_);
  w.Array(single_start_);
  w.Array(near_single_start_);
  w.Array(char_ascii_);
  w.Array(char_utf8_);
  w.Array(char_utf8_near_);
  w.Array(kernel_offset_);
  w.Array(kernel_);
  w.Put<uint64_t>(token_sets_.size());
  for (const TokenSet& t : token_sets_) {
    w.Put<uint8_t>(t.negated ? 1 : 0);
    w.Array(t.ids);
  }
  w.Array(token_read_);
  w.Array(stand_in_claims_);
  w.Raw(kEnd, 4);
  return w.Take();
}

std::shared_ptr<const Automaton> Automaton::LoadImage(const uint8_t* data, size_t size, const CoreLimits& limits) {
  Reader r(data, size);
  if (size < 4 || std::memcmp(r.Take(4), kMagic, 4) != 0) Fail("cache-foreign", "not a logitgate automaton image");
  const auto version = r.Get<uint32_t>();
  if (version != Automaton::kImageVersion) {
    Fail("cache-version", "image version " + std::to_string(version) + ", this library reads version " +
                              std::to_string(Automaton::kImageVersion));
  }
  if (r.Get<uint32_t>() != kOrderMark) Fail("cache-foreign", "image written with another byte order");
  Writer expected;
  PutLimits(expected, limits);
  const std::string want = expected.Take();
  if (std::memcmp(r.Take(want.size()), want.data(), want.size()) != 0) {
    Fail("cache-limits", "image compiled under other limits");
  }

  std::shared_ptr<Automaton> a(new Automaton(limits));
  a->root_ = r.Get<int32_t>();
  const size_t n_rules = r.Count(sizeof(uint64_t));
  if (n_rules == 0) Fail("cache-inconsistent", "no rules");
  a->rule_names_.reserve(n_rules);
  for (size_t i = 0; i < n_rules; ++i) {
    const size_t len = r.Count(1);
    const uint8_t* p = r.Take(len);
    a->rule_names_.emplace_back(reinterpret_cast<const char*>(p), len);
  }
  const auto rules = static_cast<int64_t>(n_rules);
  CheckIndex(a->root_, rules, "root rule");
  a->rule_start_ = r.Array<int32_t>();
  a->state_rule_ = r.Array<int32_t>();
  const std::vector<uint32_t> byte_counts = r.Array<uint32_t>();
  const size_t n = byte_counts.size();
  if (n == 0) Fail("cache-inconsistent", "no states");
  if (static_cast<int64_t>(n) > limits.max_automaton_states) Fail("cache-limits", "more states than the limits allow");
  const auto states = static_cast<int64_t>(n);
  CheckSize(a->rule_start_, n_rules, "rule starts");
  for (int32_t s : a->rule_start_) CheckIndex(s, states, "rule start");
  CheckSize(a->state_rule_, n, "state rules");
  for (int32_t x : a->state_rule_) {
    if (x != -1) CheckIndex(x, rules, "state rule");
  }

  constexpr size_t kByteEdgeBytes = 2 + sizeof(int32_t), kCallEdgeBytes = 2 * sizeof(int32_t) + 1;
  a->bytes_.reserve(n);
  for (size_t s = 0; s < n; ++s) {
    if (byte_counts[s] > r.left() / kByteEdgeBytes) Fail("cache-truncated", "byte edges run past the image");
    a->bytes_.emplace_back(&a->arena_);
    auto& edges = a->bytes_.back();
    edges.reserve(byte_counts[s]);
    for (uint32_t k = 0; k < byte_counts[s]; ++k) {
      ByteEdge e;
      e.lo = r.Get<uint8_t>();
      e.hi = r.Get<uint8_t>();
      e.target = r.Get<int32_t>();
      if (e.lo > e.hi) Fail("cache-inconsistent", "byte edge with an empty range");
      CheckIndex(e.target, states, "byte edge target");
      edges.push_back(e);
    }
  }
  const std::vector<uint32_t> call_counts = r.Array<uint32_t>();
  CheckSize(call_counts, n, "call counts");
  a->calls_.reserve(n);
  for (size_t s = 0; s < n; ++s) {
    if (call_counts[s] > r.left() / kCallEdgeBytes) Fail("cache-truncated", "call edges run past the image");
    a->calls_.emplace_back(&a->arena_);
    auto& calls = a->calls_.back();
    calls.reserve(call_counts[s]);
    for (uint32_t k = 0; k < call_counts[s]; ++k) {
      CallEdge c;
      c.rule = r.Get<int32_t>();
      c.ret = r.Get<int32_t>();
      c.tail = r.Get<uint8_t>() != 0;
      CheckIndex(c.rule, rules, "called rule");
      CheckIndex(c.ret, states, "return state");
      calls.push_back(c);
    }
  }
  a->final_ = r.Array<uint8_t>();
  a->deterministic_ = r.Array<uint8_t>();
  a->universal_ = r.Array<uint8_t>();
  a->near_universal_ = r.Array<uint8_t>();
  a->capacity_ = r.Array<int32_t>();
  a->single_start_ = r.Array<uint8_t>();
  a->near_single_start_ = r.Array<uint8_t>();
  a->char_ascii_ = r.Array<std::array<uint64_t, 2>>();
  a->char_utf8_ = r.Array<uint8_t>();
  a->char_utf8_near_ = r.Array<uint8_t>();
  CheckSize(a->final_, n, "final flags");
  CheckSize(a->deterministic_, n, "determinized flags");
  CheckSize(a->universal_, n, "universal flags");
  CheckSize(a->near_universal_, n, "near-universal flags");
  CheckSize(a->capacity_, n, "capacities");
  CheckSize(a->single_start_, n, "character-start flags");
  CheckSize(a->near_single_start_, n, "near character-start flags");
  CheckSize(a->char_ascii_, n_rules, "character rules");
  CheckSize(a->char_utf8_, n_rules, "character rules");
  CheckSize(a->char_utf8_near_, n_rules, "character rules");

  a->kernel_offset_ = r.Array<int32_t>();
  a->kernel_ = r.Array<int32_t>();
  CheckSize(a->kernel_offset_, n + 1, "kernel offsets");
  if (a->kernel_offset_[0] != 0 || static_cast<size_t>(a->kernel_offset_[n]) != a->kernel_.size()) {
    Fail("cache-inconsistent", "kernel offsets do not span the kernels");
  }
  for (size_t s = 0; s < n; ++s) {
    if (a->kernel_offset_[s] > a->kernel_offset_[s + 1]) Fail("cache-inconsistent", "kernel offsets decrease");
  }
  for (int32_t k : a->kernel_) CheckIndex(k, states, "kernel state");

  const size_t n_sets = r.Count(1 + sizeof(uint64_t));
  a->token_sets_.reserve(n_sets);
  for (size_t i = 0; i < n_sets; ++i) {
    TokenSet t;
    t.negated = r.Get<uint8_t>() != 0;
    t.ids = r.Array<int32_t>();
    for (size_t k = 1; k < t.ids.size(); ++k) {
      if (t.ids[k - 1] >= t.ids[k]) Fail("cache-inconsistent", "token set ids are not sorted and distinct");
    }
    a->token_sets_.push_back(std::move(t));
  }
  a->token_read_ = r.Array<TokenRead>();
  if (!a->token_read_.empty()) CheckSize(a->token_read_, n, "token reads");
  for (const TokenRead& t : a->token_read_) {
    if (t.set == -1) continue;
    CheckIndex(t.set, static_cast<int64_t>(n_sets), "token set");
    CheckIndex(t.target, states, "token read target");
  }
  a->stand_in_claims_ = r.Array<int32_t>();
  if (a->stand_in_claims_.size() % 2 != 0) Fail("cache-inconsistent", "stand-in claims are not pairs");
  for (int32_t x : a->stand_in_claims_) CheckIndex(x, rules, "stand-in claim");
  if (std::memcmp(r.Take(4), kEnd, 4) != 0 || r.left() != 0) Fail("cache-inconsistent", "the image does not end where it should");

  // Derived data, as the build derives it.
  a->ComputeByteClasses();
  a->ComputeKernelKinds();
  a->ComputeStackNeedBound();
  a->IndexCharacterRules();
  a->ComputeStandIns();
  return a;
}

}  // namespace logitgate
