// Serialization of the Python grammar IR into the core's program (see ir_program.cc).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>

namespace nb = nanobind;

namespace logitgate {

class Interrupt;

// The program of a grammar (automaton.h's layout, native int32s as bytes): `types` are the IR
// classes Literal, CharClass, ByteClass, Seq, Alt, Repeat, Ref, StringExcept (in that order),
// `nodes[i]` the body of rule `names[i]`, `root` the root's index. Raises GrammarError for an
// undefined rule, LimitExceeded past max_nesting / max_repeat, TypeError for a non-IR node.
// With an `interrupt` (a compile's, interrupt.h), the walk lets other threads run now and then
// (so one can cancel) and stops when the interrupt fires.
nb::bytes SerializeIr(nb::tuple types, nb::list nodes, nb::list names, int32_t root, int64_t max_nesting,
                      int64_t max_repeat, const Interrupt* interrupt);

}  // namespace logitgate
