// Errors the core raises. The bindings translate CoreError into the typed Python errors of
// logitgate.errors (GrammarError, LimitExceeded or UsageError), keeping `code` as the stable slug.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace logitgate {

enum class ErrorKind {
  kGrammar,  // the grammar cannot be compiled (left recursion, empty language, bad program)
  kLimit,    // a Limits field was exceeded; `limit` names it
  kUsage,    // API misuse (bad row, rollback too far, a mask buffer of the wrong kind): UsageError
  kInterrupted,  // a compile was cancelled or ran past its timeout (interrupt.h); `code` says which
  kCacheFile,    // a compiled-grammar image that cannot be loaded (truncated, foreign, inconsistent)
};

struct CoreError : std::runtime_error {
  ErrorKind kind;
  std::string code;   // stable slug, e.g. "left-recursion"
  std::string limit;  // for kLimit: the Limits field name
  int64_t value = 0;  // for kLimit: the limit's setting
  std::string rule;   // for kGrammar: the rule concerned, if any
  double seconds = 0;  // for kInterrupted by a timeout: the timeout

  CoreError(ErrorKind k, std::string code_, const std::string& message)
      : std::runtime_error(message), kind(k), code(std::move(code_)) {}

  static CoreError Grammar(std::string code, const std::string& message, std::string rule = {}) {
    CoreError e(ErrorKind::kGrammar, std::move(code), message);
    e.rule = std::move(rule);
    return e;
  }
  static CoreError Limit(std::string limit, int64_t value, const std::string& message) {
    CoreError e(ErrorKind::kLimit, "limit", message);
    e.limit = std::move(limit);
    e.value = value;
    return e;
  }
  static CoreError Interrupted(std::string code, const std::string& message, double seconds) {
    CoreError e(ErrorKind::kInterrupted, std::move(code), message);
    e.seconds = seconds;
    return e;
  }
  static CoreError CacheFile(std::string code, const std::string& message) {
    return CoreError(ErrorKind::kCacheFile, std::move(code), message);
  }
  static CoreError Usage(const std::string& message, std::string code = "usage") {
    return CoreError(ErrorKind::kUsage, std::move(code), message);
  }
};

// Mirrors logitgate.Limits (python/logitgate/limits.py); see docs/limits.md.
struct CoreLimits {
  int64_t max_nesting = 200;
  int64_t max_repeat = 100000;
  int64_t max_automaton_states = 2000000;
  int64_t max_stack_depth = 2000;
  int64_t max_parse_heads = 20000;
  int64_t max_configurations = 200000;
  int64_t mask_cache_entries = 4096;
};

}  // namespace logitgate
