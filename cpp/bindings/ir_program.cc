// The grammar IR (python/logitgate/grammar/ir.py) serialized into the core's program
// (cpp/core/automaton.h), walking the IR's frozen dataclasses directly: the Python loop this
// replaces was a fifth of a JSON Schema compile. The walk uses an explicit stack (IR depth is
// user-driven) and dispatches on each node's exact type; nodes are borrowed from the grammar,
// which the caller keeps alive and nobody mutates (the dataclasses are frozen).
#include "ir_program.h"

#include <nanobind/stl/string.h>

#include <string>
#include <utility>
#include <vector>

#include "../core/automaton.h"
#include "../core/error.h"
#include "../core/interrupt.h"

namespace logitgate {

namespace {

// The IR classes, in IrProgramTypes order.
enum IrType { kLiteral, kCharClass, kByteClass, kSeq, kAlt, kRepeat, kRef, kStringExcept, kTokenSet, kNumIrTypes };

nb::object Name(const char* s) {
  PyObject* p = PyUnicode_InternFromString(s);
  if (p == nullptr) throw nb::python_error();
  return nb::steal(p);
}

// A new reference to attribute `name` of `obj` (interned name strings; a node's fields are slots).
nb::object Attr(PyObject* obj, const nb::object& name) {
  PyObject* v = PyObject_GetAttr(obj, name.ptr());
  if (v == nullptr) throw nb::python_error();
  return nb::steal(v);
}

int64_t Int(PyObject* v) {
  const long long x = PyLong_AsLongLong(v);
  if (x == -1 && PyErr_Occurred()) throw nb::python_error();
  return x;
}

// A user-given int field of a node (a repetition bound, a token id). Python ints are unbounded
// and the IR's constructors do not bound them above, so a value past int64 must not escape as
// OverflowError: it is clamped to the int64 end of its sign (past every limit and range the
// program checks) with `overflow` set, and printed as that bound. `ok` is false when the field
// is not an int at all (a float bound: TypeError from __index__).
struct UserInt {
  int64_t value = 0;
  int overflow = 0;  // +1 / -1: the true value lies beyond INT64_MAX / INT64_MIN
  bool ok = true;

  std::string Text() const {
    if (overflow != 0) return overflow > 0 ? "2^63 or more" : "-2^63 or less";
    return std::to_string(value);
  }
};

UserInt ReadUserInt(PyObject* v) {
  UserInt r;
  const long long x = PyLong_AsLongLongAndOverflow(v, &r.overflow);
  if (x == -1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
    PyErr_Clear();
    r.ok = false;
    return r;
  }
  r.value = r.overflow > 0 ? INT64_MAX : r.overflow < 0 ? INT64_MIN : x;
  return r;
}

int32_t ToInt32(int64_t v) {
  if (v < INT32_MIN || v > INT32_MAX) throw nb::value_error("IR value out of the program's int32 range");
  return static_cast<int32_t>(v);
}

}  // namespace

nb::bytes SerializeIr(nb::tuple types, nb::list nodes, nb::list names, int32_t root, int64_t max_nesting,
                      int64_t max_repeat, const Interrupt* interrupt) {
  if (types.size() != kNumIrTypes) throw nb::value_error("expected the 9 IR node classes");
  PyObject* type_of[kNumIrTypes];
  for (size_t k = 0; k < kNumIrTypes; ++k) type_of[k] = types[k].ptr();
  const size_t n_rules = nodes.size();
  if (names.size() != n_rules || root < 0 || static_cast<size_t>(root) >= n_rules) {
    throw nb::value_error("rule names, bodies and root do not match");
  }
  const nb::object a_value = Name("value"), a_ranges = Name("ranges"), a_negated = Name("negated"),
                   a_items = Name("items"), a_item = Name("item"), a_min = Name("min"), a_max = Name("max"),
                   a_name = Name("name"), a_words = Name("words"), a_tail = Name("tail"),
                   a_ids = Name("ids");
  nb::dict index;
  for (size_t r = 0; r < n_rules; ++r) index[names[r]] = nb::int_(r);

  std::vector<int32_t> out{static_cast<int32_t>(n_rules), root};
  std::vector<std::pair<PyObject*, int64_t>> stack;
  uint32_t visited = 0;
  for (size_t r = 0; r < n_rules; ++r) {
    stack.assign(1, {nodes[r].ptr(), 0});
    auto rule_name = [&] { return nb::cast<std::string>(names[r]); };
    while (!stack.empty()) {
      if (interrupt != nullptr && (++visited & 0x1FFF) == 0) {
        // The nodes stay alive meanwhile: the caller holds the grammar, and it is frozen.
        { nb::gil_scoped_release release; }
        interrupt->Check();
      }
      auto [node, depth] = stack.back();
      stack.pop_back();
      if (depth > max_nesting) {
        throw CoreError::Limit("max_nesting", max_nesting, "rule '" + rule_name() + "' nests too deeply");
      }
      PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(node));
      if (type == type_of[kLiteral]) {
        nb::object value = Attr(node, a_value);
        char* data;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(value.ptr(), &data, &n) != 0) throw nb::python_error();
        out.push_back(kOpLiteral);
        out.push_back(ToInt32(n));
        for (Py_ssize_t i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(data[i]));
      } else if (type == type_of[kSeq] || type == type_of[kAlt]) {
        nb::object items = Attr(node, a_items);
        if (!PyTuple_Check(items.ptr())) throw nb::type_error("Seq/Alt items must be a tuple");
        const Py_ssize_t n = PyTuple_GET_SIZE(items.ptr());
        out.push_back(type == type_of[kSeq] ? kOpSeq : kOpAlt);
        out.push_back(ToInt32(n));
        for (Py_ssize_t i = n; i-- > 0;) stack.push_back({PyTuple_GET_ITEM(items.ptr(), i), depth + 1});
      } else if (type == type_of[kRef]) {
        nb::object name = Attr(node, a_name);
        PyObject* target = PyDict_GetItemWithError(index.ptr(), name.ptr());
        if (target == nullptr) {
          if (PyErr_Occurred()) throw nb::python_error();
          throw CoreError::Grammar("undefined-rule", "undefined rule '" + nb::cast<std::string>(name) + "'", rule_name());
        }
        out.push_back(kOpRef);
        out.push_back(ToInt32(Int(target)));
      } else if (type == type_of[kCharClass] || type == type_of[kByteClass]) {
        nb::object ranges = Attr(node, a_ranges), negated = Attr(node, a_negated);
        if (!PyTuple_Check(ranges.ptr())) throw nb::type_error("class ranges must be a tuple");
        const Py_ssize_t n = PyTuple_GET_SIZE(ranges.ptr());
        out.push_back(type == type_of[kCharClass] ? kOpCharClass : kOpByteClass);
        out.push_back(PyObject_IsTrue(negated.ptr()) == 1 ? 1 : 0);
        out.push_back(ToInt32(n));
        for (Py_ssize_t i = 0; i < n; ++i) {
          PyObject* pair = PyTuple_GET_ITEM(ranges.ptr(), i);
          if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) throw nb::type_error("a class range is a pair");
          // The constructors keep ranges within code points / bytes; the core rechecks both.
          for (int k = 0; k < 2; ++k) {
            const UserInt end = ReadUserInt(PyTuple_GET_ITEM(pair, k));
            if (!end.ok || end.value < INT32_MIN || end.value > INT32_MAX) {
              throw CoreError::Grammar("bad-class", "class range bound " + (end.ok ? end.Text() : "?") +
                                                        " is not a code point or byte", rule_name());
            }
            out.push_back(static_cast<int32_t>(end.value));
          }
        }
      } else if (type == type_of[kRepeat]) {
        nb::object lo = Attr(node, a_min), hi = Attr(node, a_max);
        const UserInt min = ReadUserInt(lo.ptr());
        const UserInt max = hi.is_none() ? UserInt{-1} : ReadUserInt(hi.ptr());
        if (!min.ok || !max.ok) throw CoreError::Grammar("bad-repeat", "repetition bounds must be ints", rule_name());
        const std::string bounds = "{" + min.Text() + "," + (hi.is_none() ? "" : max.Text()) + "}";
        // Repeat's constructor checks signs and order; a node made around it (its fields set
        // directly, a pickle) gets the same typed answer here, before the core reads -1 as "none".
        if (min.value < 0 || (!hi.is_none() && max.value < min.value)) {
          throw CoreError::Grammar("bad-repeat", "bad repetition bounds " + bounds, rule_name());
        }
        if (min.value > max_repeat || max.value > max_repeat) {
          throw CoreError::Limit("max_repeat", max_repeat, "repetition " + bounds + " in rule '" + rule_name() + "'");
        }
        if (min.value > INT32_MAX || max.value > INT32_MAX) {  // (a max_repeat set past int32)
          throw CoreError::Limit("max_repeat", max_repeat, "repetition " + bounds + " in rule '" + rule_name() +
                                                               "': past int32, the program's counts");
        }
        out.push_back(kOpRepeat);
        out.push_back(static_cast<int32_t>(min.value));  // both within [-1, INT32_MAX]
        out.push_back(static_cast<int32_t>(max.value));
        nb::object item = Attr(node, a_item);
        stack.push_back({item.ptr(), depth + 1});  // the node keeps it alive
      } else if (type == type_of[kStringExcept]) {
        nb::object words = Attr(node, a_words);
        if (!PyTuple_Check(words.ptr())) throw nb::type_error("StringExcept words must be a tuple");
        const Py_ssize_t n = PyTuple_GET_SIZE(words.ptr());
        out.push_back(kOpStringExcept);
        out.push_back(ToInt32(n));
        for (Py_ssize_t i = 0; i < n; ++i) {
          PyObject* w = PyTuple_GET_ITEM(words.ptr(), i);
          if (!PyUnicode_Check(w)) throw nb::type_error("StringExcept words must be str");
          const Py_ssize_t len = PyUnicode_GET_LENGTH(w);
          out.push_back(ToInt32(len));
          for (Py_ssize_t k = 0; k < len; ++k) out.push_back(static_cast<int32_t>(PyUnicode_READ_CHAR(w, k)));
        }
        nb::object tail = Attr(node, a_tail);
        stack.push_back({tail.ptr(), depth + 1});
      } else if (type == type_of[kTokenSet]) {
        nb::object ids = Attr(node, a_ids), negated = Attr(node, a_negated);
        if (!PyTuple_Check(ids.ptr())) throw nb::type_error("TokenSet ids must be a tuple");
        const Py_ssize_t n = PyTuple_GET_SIZE(ids.ptr());
        out.push_back(kOpTokenSet);
        out.push_back(PyObject_IsTrue(negated.ptr()) == 1 ? 1 : 0);
        out.push_back(ToInt32(n));
        for (Py_ssize_t i = 0; i < n; ++i) {
          // An id past int32 is past every vocabulary: the core's own answer for an id it lacks.
          const UserInt id = ReadUserInt(PyTuple_GET_ITEM(ids.ptr(), i));
          if (!id.ok) throw CoreError::Grammar("bad-token-set", "token ids must be integers", rule_name());
          if (id.value < 0 || id.value > INT32_MAX) {
            throw CoreError::Grammar("unknown-token", "token id " + id.Text() + " is not in the vocabulary",
                                     rule_name());
          }
          out.push_back(static_cast<int32_t>(id.value));
        }
      } else {
        nb::object r = nb::steal(PyObject_Repr(node));
        throw nb::type_error(("not an IR node: " + (r.is_valid() ? nb::cast<std::string>(r) : std::string("?"))).c_str());
      }
    }
  }
  return nb::bytes(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(int32_t));
}

}  // namespace logitgate
