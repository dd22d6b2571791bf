// Python bindings of the core (nanobind). Only conversion lives here: bytes travel with their
// length, masks are caller-owned numpy int32 buffers, and every call that can take long
// (compile, mask fills) releases the GIL. CoreError becomes logitgate.errors types.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>

#include "../core/automaton.h"
#include "../core/error.h"
#include "../core/interrupt.h"
#include "../core/logits_mask.h"
#include "../core/matcher.h"
#include "../core/thread_pool.h"
#include "../core/vocabulary.h"
#include "budget_bindings.h"
#include "ir_program.h"

namespace nb = nanobind;
using namespace logitgate;

namespace {

using MaskArray = nb::ndarray<int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// `obj` as an array of the requested kind, without a copy. When nanobind cannot take it (wrong
// dtype or shape for a mask, read-only, foreign byte order, a tensor that requires grad, not
// an array at all), logitgate.masks._explain_rejected names the problem in a typed error.
template <typename Array>
Array TakeArray(nb::handle obj, const char* role) {
  Array a;
  if (nb::try_cast(obj, a, /*convert=*/false)) return a;
  nb::module_::import_("logitgate.masks").attr("_explain_rejected")(obj, role);
  throw CoreError::Usage(std::string(role) + " buffer not accepted", "buffer");  // if it found nothing
}

std::shared_ptr<Vocabulary> MakeVocabulary(const std::vector<std::optional<nb::bytes>>& tokens,
                                                 const std::vector<int32_t>& special_ids,
                                                 const std::vector<int32_t>& eos_ids, int32_t width) {
  std::vector<std::string> bytes;
  std::vector<bool> has;
  bytes.reserve(tokens.size());
  for (const auto& t : tokens) {
    if (t.has_value()) {
      bytes.emplace_back(t->c_str(), t->size());
      has.push_back(true);
    } else {
      bytes.emplace_back();
      has.push_back(false);
    }
  }
  nb::gil_scoped_release release;
  return std::make_shared<Vocabulary>(std::move(bytes), std::move(has), special_ids, eos_ids, width);
}

// The core's limits by name (the Limits fields it reads, as a dict): a field renamed, added or
// dropped on one side is an error naming it, never a value read into another field.
CoreLimits MakeLimits(const std::map<std::string, int64_t>& named) {
  CoreLimits l;
  const std::pair<const char*, int64_t*> fields[] = {
      {"max_nesting", &l.max_nesting},
      {"max_repeat", &l.max_repeat},
      {"max_automaton_states", &l.max_automaton_states},
      {"max_stack_depth", &l.max_stack_depth},
      {"max_parse_heads", &l.max_parse_heads},
      {"max_configurations", &l.max_configurations},
      {"mask_cache_entries", &l.mask_cache_entries},
  };
  for (const auto& [name, field] : fields) {
    auto it = named.find(name);
    if (it == named.end()) throw CoreError::Usage(std::string("limits: missing field ") + name);
    *field = it->second;
  }
  for (const auto& [name, value] : named) {
    bool known = std::any_of(std::begin(fields), std::end(fields), [&](const auto& f) { return name == f.first; });
    if (!known) throw CoreError::Usage("limits: unknown field " + name);
  }
  return l;
}

// A writable int32 [rows, words] mask, taken for one call. A numpy array (any exporter of a
// writable, C-contiguous, two-dimensional buffer of native int32s) is read through the buffer
// protocol: nanobind's ndarray caster takes numpy arrays through DLPack, a capsule per call,
// which costs about what copying a memoized mask does. Anything else (a torch tensor) goes
// through the caster, whose refusals name the problem. The view is held until the call ends,
// so the array cannot be resized under a fill that released the GIL; destroy it with the GIL
// held.
class MaskBuffer {
 public:
  explicit MaskBuffer(nb::handle obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
    } else if (view_.ndim == 2 && view_.itemsize == sizeof(int32_t) && IsNativeInt32(view_.format)) {
      held_ = true;
      data_ = static_cast<int32_t*>(view_.buf);
      rows_ = static_cast<size_t>(view_.shape[0]);
      words_ = static_cast<size_t>(view_.shape[1]);
      return;
    } else {
      PyBuffer_Release(&view_);
    }
    array_ = TakeArray<MaskArray>(obj, "mask");
    data_ = array_.data();
    rows_ = array_.shape(0);
    words_ = array_.shape(1);
  }
  MaskBuffer(const MaskBuffer&) = delete;
  MaskBuffer& operator=(const MaskBuffer&) = delete;
  ~MaskBuffer() {
    if (held_) PyBuffer_Release(&view_);
  }

  size_t rows() const { return rows_; }

  // Row `row`, checked against the rows and against the words `vocab` needs.
  uint32_t* Row(int64_t row, const Vocabulary& vocab) const {
    if (row < 0 || static_cast<size_t>(row) >= rows_) {
      throw CoreError::Usage("mask row " + std::to_string(row) + " out of range for " + std::to_string(rows_) + " rows",
                             "mask-row");
    }
    if (words_ < static_cast<size_t>(vocab.mask_words())) {
      throw CoreError::Usage("mask has " + std::to_string(words_) + " words per row, the vocabulary needs " +
                                 std::to_string(vocab.mask_words()),
                             "mask-shape");
    }
    return reinterpret_cast<uint32_t*>(data_) + static_cast<size_t>(row) * words_;
  }

 private:
  // The struct-module codes of a native-order int32 ("i", "@i", "=i"; "<i" on a little-endian
  // machine; "l" where a long has 32 bits), as MaskArray's int32_t accepts them.
  static bool IsNativeInt32(const char* format) {
    if (format == nullptr) return false;
    const bool little = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    if (*format == '@' || *format == '=' || (*format == '<' && little)) ++format;
    return (format[0] == 'i' || (format[0] == 'l' && sizeof(long) == sizeof(int32_t))) && format[1] == '\0';
  }

  Py_buffer view_{};
  bool held_ = false;
  MaskArray array_;
  int32_t* data_ = nullptr;
  size_t rows_ = 0, words_ = 0;
};

void FillMasks(const std::vector<Matcher*>& matchers, nb::handle bits_obj, int threads) {
  const MaskBuffer bits(bits_obj);
  if (matchers.empty()) return;
  std::vector<Matcher*> sorted(matchers);
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw CoreError::Usage("fill_masks got the same matcher twice", "duplicate-matcher");
  }
  if (bits.rows() < matchers.size()) {
    throw CoreError::Usage(std::to_string(matchers.size()) + " matchers but " + std::to_string(bits.rows()) +
                               " mask rows",
                           "mask-shape");
  }
  std::vector<uint32_t*> rows;
  for (size_t i = 0; i < matchers.size(); ++i) {
    if (matchers[i] == nullptr) throw CoreError::Usage("fill_masks got None at " + std::to_string(i), "matcher-none");
    rows.push_back(bits.Row(static_cast<int64_t>(i), *matchers[i]->grammar().vocab));
  }
  nb::gil_scoped_release release;
  // Every row goes to the pool (copies of memoized masks included: done serially they bound
  // the speedup); FillMask copies when it can.
  const size_t workers = std::min<size_t>(static_cast<size_t>(std::max(1, threads)), matchers.size());
  ThreadPool::Global().ParallelFor(matchers.size(), workers, [&](size_t k) { matchers[k]->FillMask(rows[k]); });
}

// Logits and masks of any device, dtype and shape; ApplyMask checks them itself, to name
// what is wrong.
using AnyArray = nb::ndarray<>;
using AnyReadOnlyArray = nb::ndarray<nb::ro>;

template <typename A>
std::string ShapeOf(const A& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

LogitsType LogitsTypeOf(const AnyArray& logits) {
  const nb::dlpack::dtype t = logits.dtype();
  if (t == nb::dtype<float>()) return LogitsType::kFloat32;
  if (t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) && t.bits == 16 && t.lanes == 1) {
    return LogitsType::kFloat16;
  }
  if (t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat) && t.bits == 16 && t.lanes == 1) {
    return LogitsType::kBFloat16;
  }
  throw CoreError::Usage("logits must be float32, float16 or bfloat16 (dtype code " + std::to_string(t.code) + ", " +
                             std::to_string(t.bits) + " bits)",
                         "logits-dtype");
}

// Sets the logits the mask forbids to -inf in place (logits_mask.h) and returns how many
// columns the masks allow, summed over the rows masked. `logits` is [width] with a mask of one
// row, or [batch, width] with a mask of `batch` rows; `indices` picks the rows to mask (the
// same row of both), default all. Logits off the CPU are checked alike but not touched: -1
// tells the caller to apply the mask on their device.
int64_t ApplyMask(nb::handle logits_obj, nb::handle bits_obj, const std::optional<std::vector<int64_t>>& indices) {
  AnyArray logits = TakeArray<AnyArray>(logits_obj, "logits");
  // Writing through the array's memory would bypass autograd.
  if (nb::getattr(logits_obj, "requires_grad", nb::none()).is(nb::handle(Py_True))) {
    throw CoreError::Usage("logits require grad: mask them under torch.no_grad(), or pass logits.detach()",
                           "logits-grad");
  }
  AnyReadOnlyArray bits = TakeArray<AnyReadOnlyArray>(bits_obj, "mask");
  if (logits.ndim() != 1 && logits.ndim() != 2) {
    throw CoreError::Usage("logits must be [width] or [batch, width], got shape " + ShapeOf(logits), "logits-shape");
  }
  if (bits.dtype() != nb::dtype<int32_t>()) {
    throw CoreError::Usage("mask must be int32 (lg.allocate_mask makes one)", "mask-dtype");
  }
  if (bits.ndim() != 1 && bits.ndim() != 2) {
    throw CoreError::Usage("mask must be [words] or [batch, words], got shape " + ShapeOf(bits), "mask-shape");
  }
  const size_t rows = logits.ndim() == 2 ? logits.shape(0) : 1;
  const size_t mask_rows = bits.ndim() == 2 ? bits.shape(0) : 1;
  if (mask_rows != rows) {
    throw CoreError::Usage("logits of shape " + ShapeOf(logits) + " need a mask of " + std::to_string(rows) +
                               (rows == 1 ? " row" : " rows") + ", got shape " + ShapeOf(bits),
                           "mask-shape");
  }
  if (indices) {
    for (int64_t r : *indices) {
      if (r < 0 || static_cast<size_t>(r) >= rows) {
        throw CoreError::Usage("row index " + std::to_string(r) + " out of range for " + std::to_string(rows) +
                                   (rows == 1 ? " row" : " rows"),
                               "mask-row");
      }
    }
  }
  const int64_t width = static_cast<int64_t>(logits.shape(logits.ndim() - 1));
  const int64_t words = static_cast<int64_t>(bits.shape(bits.ndim() - 1));
  if (width > 1 && logits.stride(logits.ndim() - 1) != 1) {
    throw CoreError::Usage("logits rows must be contiguous (stride 1 along the last axis); pass a contiguous copy",
                           "logits-layout");
  }
  if (rows > 1 && logits.stride(0) == 0) {
    throw CoreError::Usage("logits rows overlap (stride 0 along the batch axis)", "logits-layout");
  }
  if (words > 1 && bits.stride(bits.ndim() - 1) != 1) {
    throw CoreError::Usage("mask rows must be contiguous (stride 1 along the last axis)", "mask-layout");
  }
  const LogitsType type = LogitsTypeOf(logits);
  if (logits.device_type() != nb::device::cpu::value) return -1;
  if (bits.device_type() != nb::device::cpu::value) {
    throw CoreError::Usage("the mask of CPU logits must be on the CPU", "mask-device");
  }
  const int64_t logits_row_bytes = (logits.ndim() == 2 ? logits.stride(0) : 0) * static_cast<int64_t>(logits.itemsize());
  const int64_t bits_row_words = bits.ndim() == 2 ? bits.stride(0) : 0;
  auto* logits_base = static_cast<uint8_t*>(static_cast<void*>(logits.data()));
  const auto* bits_base = reinterpret_cast<const uint32_t*>(bits.data());
  int64_t allowed = 0;
  nb::gil_scoped_release release;
  auto apply_row = [&](int64_t r) {
    allowed += ApplyMaskRow(logits_base + r * logits_row_bytes, type, width, bits_base + r * bits_row_words, words);
  };
  if (indices) {
    for (int64_t r : *indices) apply_row(r);
  } else {
    for (size_t r = 0; r < rows; ++r) apply_row(static_cast<int64_t>(r));
  }
  return allowed;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "logitgate's C++ core: vocabularies, compiled grammars, matchers.";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const CoreError& e) {
      nb::object errors = nb::module_::import_("logitgate.errors");
      nb::object exc;
      switch (e.kind) {
        case ErrorKind::kGrammar:
          exc = errors.attr("GrammarError")(e.what(), nb::arg("code") = e.code,
                                             nb::arg("rule") = e.rule.empty() ? nb::object(nb::none()) : nb::object(nb::str(e.rule.c_str())));
          break;
        case ErrorKind::kLimit:
          exc = errors.attr("LimitExceeded")(e.limit, e.value, e.what());
          break;
        case ErrorKind::kUsage:
          exc = errors.attr("UsageError")(e.what(), nb::arg("code") = e.code);
          break;
        case ErrorKind::kInterrupted:
          exc = e.code == "compile-timeout" ? errors.attr("CompileTimeout")(e.seconds) : errors.attr("CompileCancelled")();
          break;
        case ErrorKind::kCacheFile:
          exc = errors.attr("CacheFileError")(e.what(), nb::arg("code") = e.code);
          break;
      }
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });

  nb::class_<Vocabulary>(m, "Vocabulary")
      .def_prop_ro("width", &Vocabulary::width)
      .def_prop_ro("mask_words", &Vocabulary::mask_words)
      .def_prop_ro("eos_ids", &Vocabulary::eos_ids)
      .def_prop_ro("trie_size", &Vocabulary::trie_size)
      .def_prop_ro("shared_cache_bytes", &Vocabulary::shared_cache_bytes,
                   "Bytes of the masks computed on first use and shared by every grammar of this vocabulary "
                   "(alphabet masks, loop splits; bounded in count).")
      .def("is_text", &Vocabulary::is_text);
  m.def("make_vocabulary", &MakeVocabulary, nb::arg("tokens"), nb::arg("special_ids"), nb::arg("eos_ids"),
        nb::arg("width"), "Builds a vocabulary and its token trie (GIL released while building).");

  nb::class_<CompiledGrammar>(m, "CompiledGrammar")
      .def_prop_ro("num_states", [](const CompiledGrammar& g) { return g.automaton->num_states(); })
      .def_prop_ro("num_byte_classes", [](const CompiledGrammar& g) { return g.automaton->num_byte_classes(); })
      .def_prop_ro("num_configurations", [](const CompiledGrammar& g) { return g.parser->num_configurations(); })
      .def_prop_ro("num_transitions", [](const CompiledGrammar& g) { return g.parser->num_transitions(); })
      .def_prop_ro(
          "class_trie_nodes", [](const CompiledGrammar& g) { return g.class_trie ? g.class_trie->size() : 0; },
          "Nodes of the class trie the grammar's mask walks take (tokens by their string of the automaton's "
          "coarse byte classes), 0 when it has none.")
      .def_prop_ro(
          "character_chains", [](const CompiledGrammar& g) { return g.character_chains.size(); },
          "Classes reading only some characters of a lead byte whose chains the grammar's mask walks "
          "decide from the vocabulary's character split (tokens by their count of the class's "
          "characters), 0 for most grammars.")
      .def_prop_ro(
          "memory_bytes",
          [](const CompiledGrammar& g) { return g.automaton->memory_bytes() + g.parser->memory_bytes(); },
          "Bytes the grammar holds: its automaton, and the parser state matchers built (configurations, "
          "transitions, memoized masks), which grows as they are used. The vocabulary is not counted.")
      .def(
          "save_image",
          [](const CompiledGrammar& g) {
            std::string image;
            {
              nb::gil_scoped_release release;
              image = g.automaton->SaveImage();
            }
            return nb::bytes(image.data(), image.size());
          },
          "The automaton as bytes, for load_grammar (the on-disk cache); GIL released while writing.");
  nb::class_<CancelFlag>(m, "CancelFlag", "A flag any thread may set once; compiles holding it stop.")
      .def(nb::init<>())
      .def("cancel", &CancelFlag::Cancel, "Set the flag (thread-safe, idempotent).")
      .def_prop_ro("cancelled", &CancelFlag::cancelled);
  nb::class_<Interrupt>(m, "Interrupt", "One compile's cancel flag and deadline (counted from construction).")
      .def(
          "__init__",
          [](Interrupt* self, std::shared_ptr<CancelFlag> cancel, double timeout_s) {
            new (self) Interrupt(std::move(cancel), timeout_s);
          },
          nb::arg("cancel").none(), nb::arg("timeout_s"))
      .def("check", &Interrupt::Check,
           "Raise CompileCancelled or CompileTimeout when the flag is set or the deadline passed.")
      .def_prop_ro("timeout_s", &Interrupt::timeout_s);
  m.def("serialize_ir", &SerializeIr, nb::arg("types"), nb::arg("nodes"), nb::arg("names"), nb::arg("root"),
        nb::arg("max_nesting"), nb::arg("max_repeat"), nb::arg("interrupt").none() = nb::none(),
        "The program of an IR grammar (native int32s as bytes; see grammar/program.py).");
  m.def(
      "compile",
      [](std::shared_ptr<Vocabulary> vocab, nb::bytes program_bytes, std::vector<std::string> names,
         std::map<std::string, int64_t> limits, std::shared_ptr<Interrupt> interrupt) {
        CoreLimits l = MakeLimits(limits);
        if (program_bytes.size() % sizeof(int32_t) != 0) throw CoreError::Usage("a program is whole int32s");
        std::vector<int32_t> program(program_bytes.size() / sizeof(int32_t));
        std::memcpy(program.data(), program_bytes.c_str(), program_bytes.size());
        nb::gil_scoped_release release;
        InterruptScope scope(interrupt.get());
        CheckInterrupt();
        auto automaton = std::make_shared<const Automaton>(program, std::move(names), l);
        CheckInterrupt();
        auto g = AssembleGrammar(std::move(vocab), std::move(automaton), l);
        CheckInterrupt();
        return g;
      },
      nb::arg("vocab"), nb::arg("program"), nb::arg("rule_names"), nb::arg("limits"),
      nb::arg("interrupt").none() = nb::none(),
      "Compiles a grammar program into an automaton (GIL released). `interrupt`: polled by the long "
      "loops, which stop with CompileCancelled or CompileTimeout.");
  m.def("pending_discards", &PendingDiscards,
        "Interrupted compiles whose memory a background thread is still freeing (tests wait for 0).");
  m.attr("image_version") = Automaton::kImageVersion;
  m.def(
      "load_grammar",
      [](std::shared_ptr<Vocabulary> vocab, nb::bytes image, std::map<std::string, int64_t> limits) {
        CoreLimits l = MakeLimits(limits);
        // `image` (immutable bytes) stays referenced by this call while the GIL is released.
        const auto* data = reinterpret_cast<const uint8_t*>(image.c_str());
        const size_t size = image.size();
        nb::gil_scoped_release release;
        return AssembleGrammar(std::move(vocab), Automaton::LoadImage(data, size, l), l);
      },
      nb::arg("vocab"), nb::arg("image"), nb::arg("limits"),
      "A compiled grammar from an automaton image (CompiledGrammar.save_image) saved under the same limits, "
      "without compiling (GIL released). A truncated, foreign or inconsistent image raises CacheFileError.");

  nb::class_<Matcher>(m, "Matcher",
                      "Per-request grammar state. Not thread-safe: use one matcher per thread (forks are "
                      "independent).")
      .def("__init__", [](Matcher* self, std::shared_ptr<CompiledGrammar> g) { new (self) Matcher(std::move(g)); }, nb::arg("grammar"))
      .def(
          "fill_mask",
          [](Matcher& self, nb::handle bits_obj, int64_t row) {
            const MaskBuffer bits(bits_obj);
            uint32_t* words = bits.Row(row, *self.grammar().vocab);
            if (self.TryFillMaskFast(words)) return;  // a copy: not worth releasing the GIL
            nb::gil_scoped_release release;
            self.FillMask(words);
          },
          nb::arg("bits"), nb::arg("row") = 0,
          "Write the allowed-token bitmask into row `row` of `bits` (int32 [batch, words]); GIL released.")
      .def("accept", &Matcher::Accept, nb::arg("token_id"),
           "Accept one token. Returns False (state unchanged) when the grammar does not allow it.")
      .def(
          "accept_bytes",
          [](Matcher& self, nb::bytes data) { return self.AcceptBytes(std::string(data.c_str(), data.size())); },
          nb::arg("data"), "Accept raw bytes as one step. Returns False (state unchanged) if not allowed.")
      .def("is_complete", &Matcher::IsComplete, "True when the output so far is a full sentence (EOS allowed).")
      .def("is_terminated", &Matcher::IsTerminated, "True once EOS was accepted or nothing may follow.")
      .def("rollback", &Matcher::Rollback, nb::arg("n"), "Undo the last n accepted steps.")
      .def("reset", &Matcher::Reset, "Return to the initial state (keeps memoized work).")
      .def(
          "forced_bytes",
          [](Matcher& self, int64_t max_bytes) {
            std::string s = self.ForcedBytes(max_bytes);
            return nb::bytes(s.data(), s.size());
          },
          nb::arg("max_bytes") = 4096, "Bytes the grammar forces next (empty when there is a choice).")
      .def("fork", &Matcher::Fork, "An independent copy of this matcher, state and memoized work included.")
      .def_prop_ro("num_accepted", &Matcher::num_accepted)
      .def_prop_ro("last_walk_nodes", &Matcher::last_walk_nodes,
                   "Trie nodes the last mask walk visited (0 when the mask was a copy); for profiling.")
      .def("__repr__", [](const Matcher& self) {
        return "Matcher(accepted=" + std::to_string(self.num_accepted()) +
               ", complete=" + (self.IsComplete() ? "True" : "False") +
               ", terminated=" + (self.IsTerminated() ? "True" : "False") + ")";
      });

  m.def("apply_mask", &ApplyMask, nb::arg("logits"), nb::arg("bits"), nb::arg("indices") = nb::none(),
        "Set the logits the mask forbids to -inf in place (float32/float16/bfloat16, GIL released); "
        "returns how many columns the mask allows, or -1 for logits off the CPU (checked, not touched).");
  m.def("fill_masks", &FillMasks, nb::arg("matchers"), nb::arg("bits"), nb::arg("threads"),
        "Fill row i of `bits` for matchers[i], on `threads` threads with the GIL released.");
  BindBudget(m);
  m.def("_set_split_walk_budget", &Matcher::SetSplitWalkBudget, nb::arg("nodes"),
        "Test hook: trie nodes a mask walk visits before it computes a loop split (process-wide); "
        "returns the previous value.");
  m.def("_set_region_walks", &Matcher::SetRegionWalks, nb::arg("enabled"),
        "Test hook: whether mask walks may decide a closed region's tokens from its split (process-wide); "
        "returns the previous value.");
  m.def("_set_stand_ins", &Matcher::SetStandIns, nb::arg("enabled"),
        "Test hook: whether masks may be taken from a configuration's stand-in (process-wide); "
        "returns the previous value.");
  m.def("_set_class_trie_min_states", &SetClassTrieMinStates, nb::arg("states"),
        "Test hook: automaton states a grammar needs for a class trie (0: every grammar with coarse classes "
        "gets one, of any size); process-wide, read at compile time; returns the previous value.");
}
